"""The Visual Delta Module of OneDiff (``papers/onediff-2024.txt`` §4.1, §5.1).

"A fixed number of learnable embeddings as so called delta tokens [...] input to the Transformer
consisting of self-attention layers and cross-attention layers alternately, with image hidden
states extracted from the encoder layers at equal intervals. These embeddings function as queries
for image features in cross-attention layers, thus updated separately and simultaneously with
pairs of image information." §5.1: six layers (from BERT-base), 32 delta tokens initialised from
N(0, 0.02), image features from layers 8, 16 and 24 of the 24-layer CLIP encoder.

Our reading, where the text leaves room (the layout of a Q-Former, which §2.2 cites for learnable
queries):

- every layer is pre-norm self-attention over the delta tokens and a feed-forward block; layers
  0, 2, 4 (every other one: "alternately") add a cross-attention block between them. The j-th
  cross-attention layer reads level j (low to high: "from lower to higher layers"); with fewer or
  more cross-attention layers than levels they are spread evenly from the lowest to the highest.
- "updated separately and simultaneously with pairs of image information": in a cross-attention
  block the delta tokens query the before image's tokens and the after image's tokens with the
  same weights (the siamese branch), giving c_bef and c_aft, and the update is
  ``W [c_bef; c_aft; c_aft - c_bef]``: both images at once, their difference explicit.
- each level is LayerNorm + Linear to the module's width, plus fixed 2-D sine/cosine positions
  (our encoders' levels have different grids; fixed codes need no per-size table).

Shapes: levels are lists of (B, N_l, C_l) token tensors, one per level, for each image.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


def positions_2d(h: int, w: int, dim: int, device: torch.device | str = "cpu") -> Tensor:
    """(h * w, dim) fixed 2-D sine/cosine codes: half the channels code the row, half the column."""
    quarter = max(1, dim // 4)
    rate = torch.exp(torch.arange(quarter, device=device) * (-math.log(10000.0) / quarter))
    ys = torch.arange(h, device=device, dtype=torch.float32)[:, None] * rate
    xs = torch.arange(w, device=device, dtype=torch.float32)[:, None] * rate
    row = torch.cat([ys.sin(), ys.cos()], dim=-1)  # (h, 2q)
    col = torch.cat([xs.sin(), xs.cos()], dim=-1)  # (w, 2q)
    codes = torch.cat([row[:, None].expand(h, w, -1), col[None].expand(h, w, -1)], dim=-1).reshape(
        h * w, -1
    )
    out = torch.zeros(h * w, dim, device=device)
    out[:, : min(dim, codes.shape[1])] = codes[:, :dim]
    return out


def grid_tokens(grid: Tensor, pool: int = 0) -> tuple[Tensor, tuple[int, int]]:
    """(B, C, h, w) -> tokens (B, h' * w', C) and (h', w'); ``pool`` > 0 average-pools the grid
    to at most ``pool`` cells a side first (a 28 x 28 stride-8 map is 784 tokens per image)."""
    if pool > 0 and (grid.shape[-2] > pool or grid.shape[-1] > pool):
        grid = nn.functional.adaptive_avg_pool2d(
            grid, (min(pool, grid.shape[-2]), min(pool, grid.shape[-1]))
        )
    h, w = grid.shape[-2:]
    return grid.flatten(2).transpose(1, 2), (int(h), int(w))


class PairCrossAttention(nn.Module):
    """Delta tokens query both images with one attention (siamese), then one update from
    [c_bef; c_aft; c_aft - c_bef] (module docstring)."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attend = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.fuse = nn.Linear(3 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, delta: Tensor, before: Tensor, after: Tensor) -> Tensor:
        """delta: (B, Q, D); before, after: (B, N, D) one level's tokens -> updated delta."""
        q = self.norm(delta)
        c_bef = self.attend(q, before, before, need_weights=False)[0]
        c_aft = self.attend(q, after, after, need_weights=False)[0]
        return delta + self.drop(self.fuse(torch.cat([c_bef, c_aft, c_aft - c_bef], dim=-1)))


class DeltaLayer(nn.Module):
    """Self-attention over the delta tokens, an optional pair cross-attention, a feed-forward."""

    def __init__(self, width: int, heads: int, dropout: float, cross: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.self_attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.cross = PairCrossAttention(width, heads, dropout) if cross else None
        self.norm2 = nn.LayerNorm(width)
        self.ffn = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Dropout(dropout), nn.Linear(4 * width, width)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, delta: Tensor, level: tuple[Tensor, Tensor] | None) -> Tensor:
        q = self.norm1(delta)
        delta = delta + self.drop(self.self_attn(q, q, q, need_weights=False)[0])
        if self.cross is not None and level is not None:
            delta = self.cross(delta, *level)
        return delta + self.drop(self.ffn(self.norm2(delta)))


def cross_levels(layers: int, levels: int) -> list[int | None]:
    """Which level each layer's cross-attention reads (None: a self-attention-only layer).
    Cross-attention in layers 0, 2, 4, ...; the j-th of n reads level round(j (L-1) / (n-1)),
    so six layers over three levels read levels 0, 1, 2 in order."""
    cross = list(range(0, layers, 2))
    out: list[int | None] = [None] * layers
    for j, layer in enumerate(cross):
        out[layer] = (levels - 1) if len(cross) == 1 else round(j * (levels - 1) / (len(cross) - 1))
    return out


class VisualDeltaModule(nn.Module):
    """Learnable delta tokens that probe the multi-level features of both images.

    Args:
        level_channels: C_l of each level's tokens, lowest level first.
        width: the module's width D; tokens: Q delta tokens; layers, heads: its transformer.
    """

    def __init__(
        self,
        level_channels: Sequence[int],
        width: int,
        tokens: int,
        layers: int,
        heads: int,
        dropout: float,
    ) -> None:
        super().__init__()
        self.width = width
        # §5.1: "initialized using a Gaussian distribution with a mean of 0 and a standard
        # deviation of 0.02".
        self.delta = nn.Parameter(torch.randn(tokens, width) * 0.02)
        self.level_in = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(int(c)), nn.Linear(int(c), width)) for c in level_channels
        )
        self.reads = cross_levels(layers, len(level_channels))
        self.layers = nn.ModuleList(
            DeltaLayer(width, heads, dropout, cross=read is not None) for read in self.reads
        )
        self.norm = nn.LayerNorm(width)

    def embed_level(self, index: int, tokens: Tensor, hw: tuple[int, int]) -> Tensor:
        """(B, N, C_l) tokens of level ``index`` on an (h, w) grid -> (B, N, D) with positions."""
        return self.level_in[index](tokens) + positions_2d(*hw, self.width, tokens.device)

    def forward(
        self,
        before: Sequence[tuple[Tensor, tuple[int, int]]],
        after: Sequence[tuple[Tensor, tuple[int, int]]],
    ) -> Tensor:
        """before, after: per level (tokens (B, N_l, C_l), (h_l, w_l)) -> delta tokens (B, Q, D)."""
        levels = [
            (self.embed_level(i, b, hw), self.embed_level(i, a, hw))
            for i, ((b, hw), (a, _)) in enumerate(zip(before, after))
        ]
        delta = self.delta[None].expand(levels[0][0].shape[0], -1, -1)
        for layer, read in zip(self.layers, self.reads):
            delta = layer(delta, None if read is None else levels[read])
        return self.norm(delta)
