"""Pieces shared by the Spot-the-diff family: the pair encoder, the soft-attention LSTM decoder
(or the transformer one a config asks for) and the grid-mask helpers. The base class every
learned model shares is ``captioners/learned.py``.

Notation follows Spot-the-diff (Jhamtani & Berg-Kirkpatrick, 2018; ``papers/spot-the-diff-ddla-2018.txt``):
``F1, F2`` are the grid features of the two images (§3.2 "Visual encoder"), ``C_k`` the cluster
masks projected to the grid, ``g(z)`` the four prior features of a cluster.

Batches are ``captioners/batch.py``'s: ``before``/``after`` (B, C, h, w), ``cluster_masks``
(B, K, h, w), ``cluster_valid`` (B, K), ``cluster_feats`` (B, K, 4), ``tokens`` (B, S, T),
``sentence_valid`` (B, S), ``multi_tokens`` (B, T2).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...errors import ModelError
from ..direction import check_direction_settings, direction_cross_entropy
from ..learned import PAD

DecoderState = tuple[Tensor, ...]
"""(h, c, feats, feats_att, mask) and optionally words (N, embed_size), added to every word's
input: every tensor has the decoded rows N as its first dimension, so a beam search can reorder
or repeat the state with ``index_select`` on dim 0."""


class PairEncoder(nn.Module):
    """Per grid cell, the before and after features (and their difference) projected to
    ``feature_size``.

    §3.2 feeds the decoder the grid features of both images (ResNet conv features, 14×14). With
    ``difference`` (the default, and what every checkpoint before this option was trained with)
    the difference F2 − F1 is added per cell, so attention can find changes without learning a
    subtraction first (the same idea as exposing the pixel mask in §3.1). The paper's models have
    no such channel: ``pair_difference: false`` in a model's config gives the paper's [F1, F2]. A
    LayerNorm first, because cached backbone activations are unnormalised and their scale differs
    per backbone.
    """

    def __init__(
        self, channels: int, feature_size: int, dropout: float, difference: bool = True
    ) -> None:
        super().__init__()
        self.difference = difference
        parts = 3 if difference else 2
        self.norm = nn.LayerNorm(parts * channels)
        self.proj = nn.Linear(parts * channels, feature_size)
        self.drop = nn.Dropout(dropout)

    def forward(self, before: Tensor, after: Tensor) -> tuple[Tensor, Tensor]:
        """before, after: (B, C, h, w) -> feats (B, h*w, F), pooled (B, F) (mean over the grid)."""
        b = before.flatten(2).transpose(1, 2)
        a = after.flatten(2).transpose(1, 2)
        parts = [b, a, a - b] if self.difference else [b, a]
        cells = self.norm(torch.cat(parts, dim=-1))
        feats = self.drop(torch.relu(self.proj(cells)))
        return feats, feats.mean(dim=1)


class AttentionDecoder(nn.Module):
    """LSTM decoder with soft attention over grid cells (Xu et al. 2015, as used in §3.2 and by the
    CAPT baselines of §4), optionally restricted by a per-row mask over the cells.

    The hidden state is initialised by a linear map of the pooled image features, "independent of
    the setting of z_i" (§3.2). At each step the attention weights are multiplied by the mask and
    renormalised ("This projection is multiplied to attention weights", §3.2); done in log space
    (softmax(e + log m)), which is the same distribution and cannot underflow.
    """

    def __init__(
        self,
        vocab_size: int,
        feature_size: int,
        embed_size: int,
        hidden_size: int,
        attention_size: int,
        dropout: float,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD)
        self.init_h = nn.Linear(feature_size, hidden_size)
        self.init_c = nn.Linear(feature_size, hidden_size)
        self.att_feat = nn.Linear(feature_size, attention_size)
        self.att_hidden = nn.Linear(hidden_size, attention_size, bias=False)
        self.att_score = nn.Linear(attention_size, 1)
        self.lstm = nn.LSTMCell(embed_size + feature_size, hidden_size)
        # "Deep output": the word distribution sees the attended context as well as h_t.
        self.out = nn.Linear(hidden_size + feature_size, vocab_size)
        self.drop = nn.Dropout(dropout)
        self.words_size = embed_size  # of the optional per-row input ``start(words=...)``

    def start(
        self, feats: Tensor, pooled: Tensor, mask: Tensor | None, words: Tensor | None = None
    ) -> DecoderState:
        """The state before the first word.

        feats: (N, L, F) grid features of each row's pair; pooled: (N, F); mask: (N, L) in [0, 1]
        with a positive entry in every row (see :func:`safe_masks`), or None for no restriction.
        words: (N, embed_size) or None: added to every word's embedding, an input the LSTM reads
        at every step (the direction head's answer, :class:`DirectionHead`).
        """
        if mask is None:
            mask = feats.new_ones(feats.shape[:2])
        h = torch.tanh(self.init_h(pooled))
        c = torch.tanh(self.init_c(pooled))
        state = (h, c, feats, self.att_feat(feats), mask)
        return state if words is None else (*state, words)

    def step(self, words: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """One word. words: (N,) int64 -> log_probs (N, V), next state."""
        h, c, feats, feats_att, mask = state[:5]
        extra = state[5:]
        scores = self.att_score(torch.tanh(feats_att + self.att_hidden(h)[:, None, :])).squeeze(
            -1
        )  # (N, L)
        scores = scores + torch.log(mask.clamp_min(1e-30))
        scores = scores.masked_fill(mask <= 0, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        context = torch.bmm(alpha.unsqueeze(1), feats).squeeze(1)  # (N, F)
        embedded = self.embed(words)
        if extra:
            embedded = embedded + extra[0]
        x = torch.cat([self.drop(embedded), context], dim=-1)
        h, c = self.lstm(x, (h, c))
        logits = self.out(self.drop(torch.cat([h, context], dim=-1)))
        return torch.log_softmax(logits, dim=-1), (h, c, feats, feats_att, mask, *extra)

    def decode_step(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """The step function of ``captioners/decoding.py``: the LSTM reads only the last token."""
        return self.step(tokens[:, -1], state)

    def score(self, tokens: Tensor, state: DecoderState) -> tuple[Tensor, Tensor]:
        """Teacher forcing. tokens: (N, T) ``<bos> ... <eos> <pad>...`` ->
        (log p of each target token (N, T-1) with 0 at padding, target mask (N, T-1) bool)."""
        targets = tokens[:, 1:]
        target_mask = targets != PAD
        out = []
        for t in range(targets.shape[1]):
            log_probs, state = self.step(tokens[:, t], state)
            out.append(log_probs.gather(1, targets[:, t : t + 1]).squeeze(1))
        token_logp = (
            torch.stack(out, dim=1)
            if out
            else tokens.new_zeros((tokens.shape[0], 0), dtype=torch.float)
        )
        return token_logp * target_mask, target_mask


DECODERS = ("lstm", "transformer")


class DirectionHead(nn.Module):
    """Arrival vs departure, read linearly off a pair's pooled features (B, F) and, with
    ``to_speaker``, its answer (P(departure), P(arrival)) handed to the decoder as an input of
    every word (``start(words=...)``), as duda's (``direction_weight`` and
    ``direction_to_speaker``, issue 24): the pooled features keep F1 and F2 apart (each has its
    own columns of the encoder's projection), so which side holds the object can be read.

    Trained by :meth:`loss` on the pairs whose change types say the direction
    (``features.change_direction``: batch ``direction``, -1 where unknown).
    """

    def __init__(self, feature_size: int, words_size: int, to_speaker: bool) -> None:
        super().__init__()
        self.head = nn.Linear(feature_size, 2)
        self.speaker = nn.Linear(2, words_size, bias=False) if to_speaker else None

    def loss(self, pooled: Tensor, direction: Tensor) -> Tensor:
        """Cross-entropy over the rows whose ``direction`` (B,) is known; 0 when none is."""
        return direction_cross_entropy(direction, lambda known: self.head(pooled[known]), pooled)

    def words(self, pooled: Tensor) -> Tensor | None:
        """(B, words_size): the answer as the decoder's per-word input; None without to_speaker."""
        if self.speaker is None:
            return None
        return self.speaker(torch.softmax(self.head(pooled), dim=-1))


def build_direction(config: dict[str, Any], decoder: nn.Module) -> DirectionHead | None:
    """The direction head a config asks for (``direction_weight`` > 0), or None (no parameters:
    checkpoints without it load as saved)."""
    weight = float(config.get("direction_weight", 0.0))
    to_speaker = bool(config.get("direction_to_speaker", False))
    check_direction_settings(weight > 0, to_speaker)
    if weight <= 0:
        return None
    return DirectionHead(int(config["feature_size"]), int(decoder.words_size), to_speaker)


def build_encoder(config: dict[str, Any]) -> PairEncoder:
    """The pair encoder a model's config asks for (``pair_difference``: absent in checkpoints
    made before the option, which all had the difference channel)."""
    return PairEncoder(
        int(config["channels"]),
        int(config["feature_size"]),
        float(config["dropout"]),
        bool(config.get("pair_difference", True)),
    )


def build_decoder(config: dict[str, Any], vocab_size: int) -> nn.Module:
    """The sentence decoder a model's config asks for: ``decoder: lstm`` (the paper's soft-attention
    LSTM; what a config without the key means) or ``transformer`` (``captioners/transformer.py``,
    ``hidden_size`` wide, ``decoder_layers`` deep, ``decoder_heads`` heads). Both have ``start``,
    ``score`` and ``decode_step``."""
    kind = str(config.get("decoder", "lstm"))
    if kind not in DECODERS:
        raise ModelError(f"unknown decoder '{kind}' (available: {', '.join(DECODERS)})")
    if kind == "transformer":
        from ..transformer import TransformerDecoder

        h, w = (int(v) for v in config["grid"])
        return TransformerDecoder(
            vocab_size,
            int(config["feature_size"]),
            int(config["hidden_size"]),
            h * w,
            int(config.get("decoder_layers", 2)),
            int(config.get("decoder_heads", 4)),
            float(config["dropout"]),
        )
    return AttentionDecoder(
        vocab_size,
        int(config["feature_size"]),
        int(config["embed_size"]),
        int(config["hidden_size"]),
        int(config["attention_size"]),
        float(config["dropout"]),
    )


def safe_masks(masks: Tensor) -> Tensor:
    """(..., L) masks in [0, 1] -> the same, with all-zero rows replaced by ones.

    A valid cluster too small to survive the projection to the grid would leave attention nothing
    to attend to; it then sees the whole grid, like CAPT, instead of producing NaNs.
    """
    empty = masks.sum(dim=-1, keepdim=True) <= 0
    return torch.where(empty, torch.ones_like(masks), masks)


def soft_iou(a: Tensor, b: Tensor) -> Tensor:
    """Overlap of soft grid masks: sum(min) / sum(max). a, b: (..., L) -> (...)."""
    inter = torch.minimum(a, b).sum(-1)
    union = torch.maximum(a, b).sum(-1).clamp_min(1e-12)
    return inter / union
