"""Pieces shared by the Spot-the-diff family: the pair encoder, the soft-attention LSTM decoder,
the base class (device handling, ``generate``/``describe`` plumbing) and the bridge to the shared
decoding in ``captioners/decoding.py``.

Notation follows Spot-the-diff (Jhamtani & Berg-Kirkpatrick, 2018; ``papers/spot-the-diff-ddla-2018.txt``):
``F1, F2`` are the grid features of the two images (§3.2 "Visual encoder"), ``C_k`` the cluster
masks projected to the grid, ``g(z)`` the four prior features of a cluster.

Batches follow ``docs/training-interfaces.md``: ``before``/``after`` (B, C, h, w), ``cluster_masks``
(B, K, h, w), ``cluster_valid`` (B, K), ``cluster_feats`` (B, K, 4), ``tokens`` (B, S, T),
``sentence_valid`` (B, S), ``multi_tokens`` (B, T2).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ...errors import ModelError
from ...types import Analysis, Sentence
from .. import decoding
from ..base import Captioner, DescribeOptions
from ..vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, Vocabulary

# Special ids, fixed by the contract (captioners/vocab.py): <pad>=0, <bos>=1, <eos>=2, <unk>=3, <sep>=4.
PAD, BOS, EOS, SEP = PAD_ID, BOS_ID, EOS_ID, SEP_ID

Batch = dict[str, Any]
DecoderState = tuple[Tensor, ...]
"""(h, c, feats, feats_att, mask): every tensor has the decoded rows N as its first dimension, so
a beam search can reorder or repeat the state with ``index_select`` on dim 0."""


@dataclass(frozen=True)
class Generated:
    """One decoded sentence before it becomes a ``types.Sentence``: its text, the batch cluster
    indices it was conditioned on (DDLA) and a confidence (the prior P(z=k|X) for DDLA)."""

    text: str
    clusters: tuple[int, ...] = ()
    confidence: float = 1.0


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

    def start(self, feats: Tensor, pooled: Tensor, mask: Tensor | None) -> DecoderState:
        """The state before the first word.

        feats: (N, L, F) grid features of each row's pair; pooled: (N, F); mask: (N, L) in [0, 1]
        with a positive entry in every row (see :func:`safe_masks`), or None for no restriction.
        """
        if mask is None:
            mask = feats.new_ones(feats.shape[:2])
        h = torch.tanh(self.init_h(pooled))
        c = torch.tanh(self.init_c(pooled))
        return (h, c, feats, self.att_feat(feats), mask)

    def step(self, words: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """One word. words: (N,) int64 -> log_probs (N, V), next state."""
        h, c, feats, feats_att, mask = state
        scores = self.att_score(torch.tanh(feats_att + self.att_hidden(h)[:, None, :])).squeeze(
            -1
        )  # (N, L)
        scores = scores + torch.log(mask.clamp_min(1e-30))
        scores = scores.masked_fill(mask <= 0, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        context = torch.bmm(alpha.unsqueeze(1), feats).squeeze(1)  # (N, F)
        x = torch.cat([self.drop(self.embed(words)), context], dim=-1)
        h, c = self.lstm(x, (h, c))
        logits = self.out(self.drop(torch.cat([h, context], dim=-1)))
        return torch.log_softmax(logits, dim=-1), (h, c, feats, feats_att, mask)

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


def run_decoder(
    step: Callable[[Tensor, Any], tuple[Tensor, Any]],
    state: Any,
    n_rows: int,
    beam: int,
    max_len: int,
    device: torch.device,
    repetition_guard: int = 0,
) -> list[list[int]]:
    """Decode ``n_rows`` sequences with the shared greedy / beam search (``captioners/decoding.py``;
    §3.3 decodes greedily, ``beam > 1`` is an option). ``step(tokens_so_far (N, t), state) ->
    (log_probs (N, V), state)``; ``repetition_guard`` as in ``decoding.decode``. Returns word ids
    per row, without ``<bos>``/``<eos>``."""
    if n_rows == 0:
        return []
    hyps = decoding.decode(
        step,
        state,
        n_rows,
        beam=beam,
        max_len=max_len,
        device=device,
        repetition_guard=repetition_guard,
    )
    return [h.tokens for h in hyps]


class SpotTheDiffCaptioner(Captioner, nn.Module):
    """Base of the family: config and vocabulary, device moves, ``generate`` and ``describe``.

    Subclasses implement ``_generate(batch, max_sentences, beam, max_len, num_sentences)``.

    Models that choose among candidates without a learned score (nn: a sentence of the
    neighbour's annotation; ddla-uniform: the cluster of a single sentence) list their rules in
    ``selections``: the first, ``paper``, is the paper's random choice (seeded per pair from
    ``selection_seed`` and the pair id, so the same pair always gets the same choice, whatever
    batch it is in); the second is the deterministic rule this project used before,
    ``legacy_selection``, which a checkpoint saved before the ``selection`` key existed keeps.
    """

    name: ClassVar[str] = ""
    trainable: ClassVar[bool] = True
    config_keys: ClassVar[tuple[str, ...]] = ()
    selections: ClassVar[tuple[str, ...]] = ()
    legacy_selection: ClassVar[str] = ""
    # Whether ``num_sentences`` (eval --gold-count, the paper's multi-sentence protocol) is used.
    takes_sentence_count: ClassVar[bool] = False
    # Whether a one-sentence description may differ from the first sentence of a longer one
    # (evaluation then decodes the single-sentence protocol's sentence on its own).
    single_sentence_differs: bool = False

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        nn.Module.__init__(self)
        missing = [k for k in self.config_keys if k not in config]
        if missing:
            raise ModelError(
                f"config for '{self.name}' lacks {', '.join(missing)} (build it with default_config)"
            )
        self.config = dict(config)
        self.vocab = vocab
        self.vocab_size = len(vocab)
        if self.selections and self.selection not in self.selections:
            raise ModelError(
                f"'{self.name}' setting 'selection' is {self.selection!r}; expected one of "
                f"{', '.join(self.selections)}"
            )

    @property
    def selection(self) -> str:
        """The candidate-choice rule (class docstring); the legacy rule when the config predates it."""
        return str(self.config.get("selection", self.legacy_selection))

    def selection_rng(self, batch: Batch, row: int) -> random.Random:
        """The random source of pair ``row``'s choice: seeded by ``selection_seed`` and the pair's
        id (its row number when the batch has no ids), so it does not depend on batching."""
        ids = batch.get("pair_ids") or []
        key = ids[row] if row < len(ids) else f"row{row}"
        return random.Random(f"{int(self.config.get('selection_seed', 0))}:{key}")

    @property
    def repetition_guard(self) -> int:
        """n-gram size of decoding's repetition guard (0 = off: checkpoints made before it)."""
        return int(self.config.get("repetition_guard", 0))

    # -- plumbing -------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        for tensor in self.parameters():
            return tensor.device
        return torch.device("cpu")

    def _prepare(self, batch: Batch) -> Batch:
        """The batch with its tensors on this model's device; checks the feature shape."""
        expected = (self.config["channels"], *self.config["grid"])
        got = tuple(batch["before"].shape[1:])
        if got != tuple(expected):
            raise ModelError(
                f"'{self.name}' was built for features (C, h, w) = {tuple(expected)} but the batch has {got}: "
                "use the backbone the model was trained with"
            )
        device = self.device
        return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}

    # -- the contract ---------------------------------------------------------------------
    def generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int = 1,
        max_len: int = 25,
        num_sentences: Sequence[int] | None = None,
    ) -> list[list[str]]:
        """Sentences per pair. ``num_sentences`` (per pair, optional, beyond the contract) asks
        the multi-sentence models for exactly that many (the paper's protocol conditions DDLA on
        the gold count, §3.3); ``max_sentences`` always caps the output."""
        items = self.generate_items(
            batch, max_sentences, beam=beam, max_len=max_len, num_sentences=num_sentences
        )
        return [[g.text for g in pair] for pair in items]

    def generate_items(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int = 1,
        max_len: int = 25,
        num_sentences: Sequence[int] | None = None,
    ) -> list[list[Generated]]:
        """Like :meth:`generate`, with the clusters and confidence of each sentence. Runs in eval
        mode without gradients and restores the previous mode."""
        if max_sentences < 1:
            raise ModelError(f"max_sentences must be at least 1, got {max_sentences}")
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                return self._generate(
                    self._prepare(batch), max_sentences, beam, max_len, num_sentences
                )
        finally:
            self.train(was_training)

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        raise NotImplementedError

    def analysis_batch(self, analysis: Analysis) -> Batch:
        """The one-pair batch of an analysed pair (``captioners/features.py: batch_from_analysis``:
        features from the model's backbone, clusters most salient first). The last one is kept,
        so describing and scoring the same pair computes its features once."""
        cached = getattr(self, "_analysis_cache", None)
        if cached is not None and cached[0] is analysis:
            return cached[1]
        from ..features import batch_from_analysis, get_backbone

        # A fine-tuned backbone (checkpoint.py: load_checkpoint) wins over the shared pretrained one.
        backbone = getattr(self, "finetuned_backbone", None) or get_backbone(
            self.config.get("backbone", "efficientnet_lite0"), str(self.device)
        )
        size = int(self.config.get("input_size", 0))  # 0 / absent: the backbone's own
        batch = batch_from_analysis(
            analysis,
            backbone,
            self.vocab,
            device=str(self.device),
            input_size=(size, size) if size else None,
        )
        self._analysis_cache = (analysis, batch)
        return batch

    def describe(self, analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
        """Inference on one analysed pair: :meth:`analysis_batch`, then :meth:`generate`; a
        sentence's ``cluster_ids`` are the analysis ids of the clusters it was conditioned on.
        ``options.num_sentences`` (eval --gold-count) reaches the models that take a count."""
        batch = self.analysis_batch(analysis)
        ids_of = batch.get("cluster_ids", [[c.id for c in analysis.clusters]])[0]
        count = getattr(options, "num_sentences", None)
        items = self.generate_items(
            batch,
            max(1, options.max_sentences),
            num_sentences=None if count is None else [int(count)],
        )[0]
        return [
            Sentence(
                text=item.text,
                cluster_ids=tuple(int(ids_of[k]) for k in item.clusters if 0 <= k < len(ids_of)),
                confidence=item.confidence,
                kind="generated",
            )
            for item in items
        ]


class GradientCaptioner(SpotTheDiffCaptioner):
    """A model trained by gradient steps on ``loss``: also scores a given sentence."""

    def log_likelihood(self, analysis: Analysis, sentence: str) -> tuple[float, int]:
        """(negative log-likelihood, number of target tokens) of ``sentence`` for an analysed pair,
        what ``loss`` measures on a one-sentence batch (evaluate/protocols.py: perplexity)."""
        batch = dict(self.analysis_batch(analysis))
        ids = self.vocab.encode(sentence)
        device = batch["before"].device
        batch["tokens"] = torch.tensor([[ids]], dtype=torch.long, device=device)
        batch["sentence_valid"] = torch.ones((1, 1), dtype=torch.bool, device=device)
        batch["multi_tokens"] = torch.tensor(
            [self.vocab.encode_many([sentence])], dtype=torch.long, device=device
        )
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                out = self.loss(batch)
        finally:
            self.train(was_training)
        return float(out["nll"]), int(out["n_tokens"])
