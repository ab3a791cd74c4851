"""``capt``, ``capt-masked``, ``capt-multi``: the soft-attention baselines of Spot-the-diff §4.

- ``capt``: "soft attention over the input pair of images", no cluster information; trained to
  generate a single sentence (every gold sentence of a pair is a separate target).
- ``capt-masked``: the same, with the attention weights multiplied by "the union of all the
  cluster masks" (renormalised; pairs without clusters attend everywhere).
- ``capt-multi``: the target is the whole description, "the sentences concatenated in any
  arbitrary order" — here the annotation order, joined by ``<sep>`` (``multi_tokens``); it is not
  given the number of sentences (footnote 2), so it decides where to stop by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..learned import PAD, Batch, Generated, GradientCaptioner, run_decoder
from ..vocab import Vocabulary
from .common import DecoderState, build_decoder, build_direction, build_encoder, safe_masks


class AttentionCaptioner(GradientCaptioner):
    """``capt``: LSTM with soft attention over the before/after/difference grid (§4 CAPT).

    Config: ``channels``, ``grid`` ([h, w]), ``feature_size``, ``embed_size``, ``hidden_size``,
    ``attention_size``, ``dropout``, ``backbone``; optional (older checkpoints lack them):
    ``pair_difference`` (the F2 − F1 channel; false = the paper's [F1, F2]), ``decoder`` (lstm |
    transformer, with ``decoder_layers``, ``decoder_heads``), ``repetition_guard``, ``input_size``,
    ``direction_weight`` and ``direction_to_speaker`` (``common.DirectionHead``).
    """

    name: ClassVar[str] = "capt"
    masked: ClassVar[bool] = False
    multi: ClassVar[bool] = False

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        self.encoder = build_encoder(self.config)
        self.decoder = build_decoder(self.config, self.vocab_size)
        self.direction = build_direction(self.config, self.decoder)

    def _attention_mask(self, batch: Batch) -> Tensor | None:
        """(B, L) union of the valid cluster masks for ``capt-masked``, None otherwise."""
        if not self.masked:
            return None
        masks = batch["cluster_masks"].flatten(2) * batch["cluster_valid"][..., None].to(
            batch["cluster_masks"].dtype
        )
        return safe_masks(masks.amax(dim=1))  # soft union: the max over clusters, per cell

    def _start(
        self, batch: Batch, rows: Tensor, encoded: tuple[Tensor, Tensor] | None = None
    ) -> DecoderState:
        """Decoder state for the pairs ``rows`` (N,) of the batch; ``encoded``: the encoder's
        (feats, pooled) of the batch when already computed. With ``direction_to_speaker`` the
        direction head's answer is an input of every word."""
        feats, pooled = encoded or self.encoder(batch["before"], batch["after"])
        mask = self._attention_mask(batch)
        words = None if self.direction is None else self.direction.words(pooled)
        return self.decoder.start(
            feats[rows],
            pooled[rows],
            None if mask is None else mask[rows],
            None if words is None else words[rows],
        )

    def _targets(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(pair index (N,), tokens (N, T)) of every training target in the batch."""
        if self.multi:
            tokens = batch["multi_tokens"]
            keep = (tokens[:, 1:] != PAD).any(dim=1)
            rows = torch.nonzero(keep).squeeze(1)
            return rows, tokens[rows]
        valid = batch["sentence_valid"]
        pair, sent = torch.nonzero(valid, as_tuple=True)
        return pair, batch["tokens"][pair, sent]

    def loss(self, batch: Batch) -> dict[str, Any]:
        """Teacher-forced NLL of the gold sentences (or descriptions); ``loss`` is per token."""
        batch = self._prepare(batch)
        rows, tokens = self._targets(batch)
        encoded = self.encoder(batch["before"], batch["after"])
        token_logp, target_mask = self.decoder.score(tokens, self._start(batch, rows, encoded))
        nll = -token_logp.sum()
        n_tokens = int(target_mask.sum())
        caption = nll / max(1, n_tokens)
        losses = {"caption": caption}
        loss = caption
        if self.direction is not None:
            losses["direction"] = self.direction.loss(encoded[1], batch["direction"])
            loss = loss + float(self.config["direction_weight"]) * losses["direction"]
        # "losses": the named objectives a recipe's `objectives` may weight (train/recipes.py).
        return {"loss": loss, "nll": nll.detach(), "n_tokens": n_tokens, "losses": losses}

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        n = batch["before"].shape[0]
        state = self._start(batch, torch.arange(n, device=batch["before"].device))
        # A whole description is several sentences long: give it room for max_sentences of them.
        limit = max_len * max_sentences + max_sentences - 1 if self.multi else max_len
        ids = run_decoder(
            self.decoder.decode_step, state, n, beam, limit, self.device, self.repetition_guard
        )
        if self.multi:
            return [
                [Generated(s) for s in self.vocab.decode_sentences(row)[:max_sentences]]
                for row in ids
            ]
        return [[Generated(self.vocab.decode(row))] for row in ids]


class MaskedAttentionCaptioner(AttentionCaptioner):
    """``capt-masked``: attention × the union of the cluster masks (§4 CAPT-MASKED)."""

    name: ClassVar[str] = "capt-masked"
    masked: ClassVar[bool] = True


class MultiAttentionCaptioner(AttentionCaptioner):
    """``capt-multi``: the whole description as one target (§4 CAPT-MULTI)."""

    name: ClassVar[str] = "capt-multi"
    multi: ClassVar[bool] = True
