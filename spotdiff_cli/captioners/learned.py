"""What a learned model is: the one base class every learned family shares, written down once.

:class:`LearnedCaptioner` is what ``train/`` and ``evaluate/`` may ask of a model, as
Lightning's ``LightningModule`` is for its trainer: each hook is a method (or attribute) with a
default here, a model overrides what it needs, and the callers call methods, never probe for
them. A model is built by its family as ``cls(config, vocab)`` (``captioners/configured.py``),
reads a :class:`~spotdiff_cli.captioners.batch.Batch` and decodes through :func:`run_decoder`
(the shared greedy / beam search of ``captioners/decoding.py``) into :class:`Generated` items.

What the training loop calls, in the order it calls them:

====================================  ========================================================
``image_side(model_config)``          (class) the image side a model reading pixels itself
                                      needs, else None: the loop then loads cached grids
``trained_by_gradient``               False: the loop calls ``fit(train_batches)`` once
                                      instead of steps (nn, nn-multi)
``set_training_stage(name, ...)``     a recipe stage begins, with its objectives and options
``begin_epoch(epoch)``                before each epoch (0-based over the whole run)
``loss(batch)``                       ``{"loss", "nll", "n_tokens"}`` and optionally
                                      ``"losses"`` (named, for a recipe's ``objectives``)
``generate(batch, max_sentences)``    sentences per pair, at validation
``validation_metrics`` /              the extra numbers a validation record gets (and a
``validation_scores(batches)``        recipe's ``val_metric`` may pick)
``finetuned_backbone``                the backbone trained with the model, or None
====================================  ========================================================

What evaluation asks (``takes_sentence_count``, ``single_sentence_differs``,
``log_likelihood``, ``retrieval_embeddings``...) every captioner answers, the untrained
``grounded`` one too: those hooks live on :class:`~spotdiff_cli.captioners.base.Captioner`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..errors import ModelError, UsageError
from ..types import Analysis, Sentence
from . import decoding
from .base import Captioner, DescribeOptions
from .batch import Batch
from .features import gate_by_clusters
from .vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, Vocabulary

# Special ids, fixed by the contract (captioners/vocab.py): <pad>=0, <bos>=1, <eos>=2, <unk>=3, <sep>=4.
PAD, BOS, EOS, SEP = PAD_ID, BOS_ID, EOS_ID, SEP_ID

Backbone = tuple[Any, Any]
"""``(module, BackboneInfo)`` as ``backbones.create_backbone`` returns it."""


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


def keep_frozen_in_eval(module: nn.Module) -> list[str]:
    """Put every frozen part of ``module`` in eval mode; returns their names (outermost only).

    A part is frozen when it has parameters and none of them needs a gradient (``freeze``
    patterns, train/init.py: ``freeze_parameters``). Turning gradients off alone keeps its dropout
    on and its batch-norm statistics moving, so a frozen encoder would give different features
    at every pass and the parts after it would learn from that noise. In eval mode it gives the
    same output for the same input. A part with some trainable parameters stays in training
    mode, and so do its parameter-free children (a dropout between a frozen embedding and a
    trained layer belongs to the trained part).
    """
    frozen: list[str] = []

    def visit(name: str, part: nn.Module) -> tuple[bool, bool]:
        """(has parameters, all of them frozen) of ``part``; sets eval where both hold."""
        own = list(part.parameters(recurse=False))
        has, all_frozen = bool(own), all(not p.requires_grad for p in own)
        children = [(f"{name}.{n}" if name else n, c) for n, c in part.named_children()]
        states = [visit(n, c) for n, c in children]
        has = has or any(h for h, _ in states)
        all_frozen = all_frozen and all(f for h, f in states if h)
        if has and all_frozen:
            return True, True
        for (child_name, child), (child_has, child_frozen) in zip(children, states):
            if child_has and child_frozen:
                child.eval()
                frozen.append(child_name)
        return has, False

    has, all_frozen = visit("", module)
    if has and all_frozen:
        module.eval()
        frozen.append("")
    return frozen


class LearnedCaptioner(Captioner, nn.Module):
    """Base of every learned model: config and vocabulary, device moves, ``generate`` and
    ``describe``, and the training hooks with their defaults (module docstring).

    Subclasses implement ``loss(batch)`` (or, not trained by gradient, ``fit``) and
    ``_generate(batch, max_sentences, beam, max_len, num_sentences)``.

    Models that choose among candidates without a learned score (nn: a sentence of the
    neighbour's annotation; ddla-uniform: the cluster of a single sentence) list their rules in
    ``selections``: the first, ``paper``, is the paper's random choice (seeded per pair from
    ``selection_seed`` and the pair id, so the same pair always gets the same choice, whatever
    batch it is in); the second is the deterministic rule this project used before,
    ``legacy_selection``, which a checkpoint saved before the ``selection`` key existed keeps.
    """

    name: ClassVar[str] = ""
    trainable: ClassVar[bool] = True
    selections: ClassVar[tuple[str, ...]] = ()
    legacy_selection: ClassVar[str] = ""

    # -- what the training loop asks (train/), each with its default ------------------------
    # False: the loop calls fit(train_batches) once instead of gradient steps (nn, nn-multi).
    trained_by_gradient: ClassVar[bool] = True
    # The numbers validation_scores adds to a validation record (a recipe's val_metric may
    # pick one); none by default.
    validation_metrics: ClassVar[tuple[str, ...]] = ()
    # (module, BackboneInfo) of a backbone trained with the model (finetune_backbone: true; set
    # by the loop and by load_checkpoint), used instead of the shared pretrained one. A plain
    # attribute, not a submodule: state_dict keys stay the model's.
    finetuned_backbone: Backbone | None = None

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        nn.Module.__init__(self)
        self.config = dict(config)
        self.vocab = vocab
        self.vocab_size = len(vocab)
        self._analysis_cache: tuple[Analysis, Batch] | None = None
        if self.selections and self.selection not in self.selections:
            raise ModelError(
                f"'{self.name}' setting 'selection' is {self.selection!r}; expected one of "
                f"{', '.join(self.selections)}"
            )

    @classmethod
    def image_side(cls, model_config: dict[str, Any]) -> int | None:
        """The square side of the images this model reads itself with ``model_config`` (a local
        CLIP's input size with ``vision: PATH``), or None for a model that reads backbone grids:
        what ``spotdiff train`` asks before it loads the data."""
        return None

    def loss(self, batch: Batch) -> dict[str, Any]:
        """``loss`` (scalar tensor to minimise), ``nll`` (summed negative log-likelihood of the
        gold tokens), ``n_tokens`` (int), and optionally ``losses`` ({name: scalar}, what a
        recipe's ``objectives`` weigh)."""
        raise NotImplementedError(f"model '{self.name}' does not define loss(batch)")

    def fit(self, train_batches: Iterable[Batch]) -> None:
        """Fit once on every training batch, for a model not trained by gradient steps
        (``trained_by_gradient = False``)."""
        raise NotImplementedError(f"model '{self.name}' is trained by gradient steps, not fit()")

    def set_training_stage(
        self, name: str, objectives: dict[str, float], options: dict[str, Any]
    ) -> None:
        """A recipe stage begins: its name, objective weights and ``model_options``. By default a
        model takes no stage options."""
        if options:
            raise UsageError(
                f"stage '{name}' sets model_options, but model '{self.name}' takes none "
                f"(its set_training_stage(name, objectives, options) reads no options)"
            )

    def begin_epoch(self, epoch: int) -> None:
        """Before each training epoch (0-based over the whole run): curricula that switch at an
        epoch (DUDA+AUX). Nothing by default."""

    def validation_scores(self, batches: list[Batch]) -> dict[str, float]:
        """The numbers :attr:`validation_metrics` names, over the validation batches (in eval
        mode, without gradients). None by default."""
        return {}

    # -- frozen parts -----------------------------------------------------------------------
    def train(self, mode: bool = True) -> LearnedCaptioner:
        """``nn.Module.train``, except that a frozen part stays in eval mode (:func:`keep_frozen_in_eval`).

        Every switch back to training goes through here: the loop's ``model.train()`` before an
        epoch, validation's and ``generate``'s restore of the previous mode, and DDP's, whose
        ``train()`` reaches this model through ``LossForward``. So what is frozen (a recipe
        stage's ``freeze``, re-applied on ``--resume`` by entering the stage) never sees
        dropout or moves its norm statistics, whoever asked for training mode."""
        nn.Module.train(self, mode)
        if mode:
            keep_frozen_in_eval(self)
        return self

    # -- candidate choice -------------------------------------------------------------------
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
        moved = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}
        if self.config.get("change_gate"):
            return gate_by_clusters(moved, self.config["change_gate"])  # type: ignore[arg-type]
        return moved  # type: ignore[return-value]

    # -- decoding -------------------------------------------------------------------------
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

    # -- inference on an analysed pair ----------------------------------------------------
    def analysis_batch(self, analysis: Analysis) -> Batch:
        """The one-pair batch of an analysed pair (``captioners/features.py: batch_from_analysis``:
        features from the model's backbone, clusters most salient first). The last one is kept,
        so describing and scoring the same pair computes its features once."""
        cached = self._analysis_cache
        if cached is not None and cached[0] is analysis:
            return cached[1]
        from .features import batch_from_analysis, get_backbone

        # A fine-tuned backbone (checkpoint.py: load_checkpoint) wins over the shared pretrained one.
        backbone = self.finetuned_backbone or get_backbone(
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
        count = options.num_sentences
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


class GradientCaptioner(LearnedCaptioner):
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
                out = self.loss(batch)  # type: ignore[arg-type]
        finally:
            self.train(was_training)
        return float(out["nll"]), int(out["n_tokens"])


__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "SEP",
    "Backbone",
    "Batch",
    "Generated",
    "GradientCaptioner",
    "keep_frozen_in_eval",
    "LearnedCaptioner",
    "run_decoder",
]
