"""What a learned model is: the base class every learned family shares (moved here unchanged
from ``spot_the_diff/common.py``, where the other families had to import it from), the batch
type, the decoded item and the bridge to the shared decoding in ``captioners/decoding.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..errors import ModelError
from ..types import Analysis, Sentence
from . import decoding
from .base import Captioner, DescribeOptions
from .vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, Vocabulary

# Special ids, fixed by the contract (captioners/vocab.py): <pad>=0, <bos>=1, <eos>=2, <unk>=3, <sep>=4.
PAD, BOS, EOS, SEP = PAD_ID, BOS_ID, EOS_ID, SEP_ID

Batch = dict[str, Any]


@dataclass(frozen=True)
class Generated:
    """One decoded sentence before it becomes a ``types.Sentence``: its text, the batch cluster
    indices it was conditioned on (DDLA) and a confidence (the prior P(z=k|X) for DDLA)."""

    text: str
    clusters: tuple[int, ...] = ()
    confidence: float = 1.0


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
        from .features import batch_from_analysis, get_backbone

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
