"""A transformer caption decoder behind the same interface as the Spot-the-diff LSTM decoder.

``TransformerDecoder`` is a drop-in for ``spot_the_diff.common.AttentionDecoder``: the models call
``start(feats, pooled, mask)``, ``score(tokens, state)`` (teacher forcing) and
``decode_step(tokens, state)`` (the step function of ``captioners/decoding.py``), so greedy and beam
search, the repetition guard and checkpoints work unchanged. Pick it with ``decoder: transformer``
in a model's config; later families (idc-pcl, clip4idc, onediff) build their captioners on it.

Design (the usual pre-norm decoder of "Attention is all you need"; the values the papers leave open
are the recipe's, see ``training/README.md``):

- memory: the grid cells (N, L, F) projected to ``d_model`` plus a learned embedding of each
  cell's position (the LSTM decoder's attention has no notion of *where* a cell is; words such as
  "bottom left" need it), and one extra token for the pooled pair feature, which plays the part of
  the LSTM's image-initialised state (§3.2: "independent of the setting of z").
- a restriction mask over the cells (DDLA's C_z, CAPT-MASKED's union) enters every cross-attention
  as the additive bias log(m), i.e. softmax(e + log m): the attention weights multiplied by the
  mask and renormalised, exactly what the LSTM decoder does. The pooled token is never masked, so
  no row is left with nothing to attend to.
- words: embeddings scaled by sqrt(d_model) plus sinusoidal positions (no length limit: a
  capt-multi description may run to 130 tokens), causal self-attention.
- decoding recomputes the whole prefix at every step (no key/value cache): sentences are at most a
  few dozen tokens, and a stateless step makes beam reordering trivial (the state is only the
  memory, reordered along its first dimension like any other).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .vocab import PAD_ID

TransformerState = tuple[Tensor, ...]
"""(memory (N, 1 + L, D), bias (N, 1 + L) additive cross-attention bias: log of the cell mask),
and optionally words (N, D): added to every word's input (``start(words=...)``)."""


def sinusoidal_positions(length: int, dim: int, device: torch.device | str = "cpu") -> Tensor:
    """(length, dim) fixed sine/cosine position codes (Vaswani et al. 2017, §3.5)."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    rate = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )
    codes = torch.zeros(length, dim, device=device)
    codes[:, 0::2] = torch.sin(position * rate)
    codes[:, 1::2] = torch.cos(position * rate[: dim // 2])
    return codes


class TransformerDecoder(nn.Module):
    """Causal transformer over words with cross-attention to the pair's grid cells.

    Args:
        vocab_size: output classes (the vocabulary, specials included).
        feature_size: F of the encoder's per-cell features.
        d_model: width of the decoder (the recipes' ``hidden_size``).
        cells: L = h * w grid cells (for the learned cell-position embedding).
        layers, heads: decoder depth and attention heads (``d_model`` must divide by ``heads``).
        dropout: on embeddings, attention and feed-forward layers.
    """

    def __init__(
        self,
        vocab_size: int,
        feature_size: int,
        d_model: int,
        cells: int,
        layers: int = 2,
        heads: int = 4,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} must be a multiple of the {heads} attention heads")
        self.d_model, self.heads = d_model, heads
        self.words_size = d_model  # of the optional per-row input ``start(words=...)``
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD_ID)
        self.memory_proj = nn.Linear(feature_size, d_model)
        self.pooled_proj = nn.Linear(feature_size, d_model)
        self.cell_position = nn.Parameter(torch.zeros(cells, d_model))
        nn.init.normal_(self.cell_position, std=0.02)
        layer = nn.TransformerDecoderLayer(
            d_model,
            heads,
            dim_feedforward=4 * d_model,
            dropout=dropout,
            batch_first=True,
            norm_first=True,
        )
        self.layers = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(d_model))
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, vocab_size)

    def start(
        self, feats: Tensor, pooled: Tensor, mask: Tensor | None, words: Tensor | None = None
    ) -> TransformerState:
        """The state for decoding rows of pairs.

        feats: (N, L, F) grid features of each row's pair; pooled: (N, F); mask: (N, L) in [0, 1]
        with a positive entry per row (``spot_the_diff.common.safe_masks``), or None.
        words: (N, d_model) or None: a vector added to every word's input, as an LSTM decoder
        reads an input at every step (a model's answer the words must follow, e.g. clip4idc's
        arrival vs departure): a memory token the cross-attention may ignore did not steer them.
        """
        if feats.shape[1] != self.cell_position.shape[0]:
            raise ValueError(
                f"the decoder was built for {self.cell_position.shape[0]} grid cells, got "
                f"{feats.shape[1]}"
            )
        cells = self.memory_proj(feats) + self.cell_position
        memory = torch.cat([self.pooled_proj(pooled)[:, None], cells], dim=1)
        bias = feats.new_zeros(feats.shape[:2])
        if mask is not None:
            bias = torch.log(mask.clamp_min(1e-30)).masked_fill(mask <= 0, float("-inf"))
        bias = torch.cat([bias.new_zeros(bias.shape[0], 1), bias], dim=1)
        return (memory, bias) if words is None else (memory, bias, words)

    def forward(self, tokens: Tensor, state: TransformerState) -> Tensor:
        """tokens: (N, t) from ``<bos>`` -> logits (N, t, V) of the token after each position."""
        memory, bias = state[0], state[1]
        n, t = tokens.shape
        x = self.embed(tokens)
        if len(state) > 2:
            # at the words' own scale: added after the sqrt(d) scaling, an answer of unit size
            # was a thirtieth of each word's input, and the decoder learned to ignore it (clip4idc
            # said "no longer" for the six held-out real pairs while its head had all six right)
            x = x + state[2][:, None]
        x = x * math.sqrt(self.d_model) + sinusoidal_positions(t, self.d_model, tokens.device)
        x = self.drop(x)
        causal = torch.triu(torch.full((t, t), float("-inf"), device=tokens.device), diagonal=1)
        # (N * heads, t, S): each row's cell bias, the same for every head and every position.
        cross = bias[:, None, None, :].expand(n, self.heads, t, bias.shape[1])
        cross = cross.reshape(n * self.heads, t, bias.shape[1]).to(memory.dtype)
        # No padding mask: padding only ever follows a sentence's <eos>, and the causal mask
        # already keeps every real position from seeing what comes after it.
        hidden = self.layers(x, memory, tgt_mask=causal, memory_mask=cross, tgt_is_causal=True)
        return self.out(self.drop(hidden))

    def score(self, tokens: Tensor, state: TransformerState) -> tuple[Tensor, Tensor]:
        """Teacher forcing. tokens: (N, T) ``<bos> ... <eos> <pad>...`` ->
        (log p of each target token (N, T-1) with 0 at padding, target mask (N, T-1) bool)."""
        targets = tokens[:, 1:]
        target_mask = targets != PAD_ID
        if targets.shape[1] == 0:
            return tokens.new_zeros((tokens.shape[0], 0), dtype=torch.float), target_mask
        log_probs = torch.log_softmax(self.forward(tokens[:, :-1], state).float(), dim=-1)
        token_logp = log_probs.gather(2, targets[..., None]).squeeze(-1)
        return token_logp * target_mask, target_mask

    def decode_step(
        self, tokens: Tensor, state: TransformerState
    ) -> tuple[Tensor, TransformerState]:
        """The step function of ``captioners/decoding.py``: tokens (N, t) -> log p (N, V)."""
        logits = self.forward(tokens, state)[:, -1]
        return torch.log_softmax(logits.float(), dim=-1), state
