"""What every captioner provides: ``describe`` and what evaluation may ask of it.

A captioner never reads files and never prints: it gets pixels and clusters, returns sentences.
What ``spotdiff eval`` asks beyond ``describe`` (evaluate/protocols.py) is a method or attribute
with a default here, so evaluation calls it on any captioner, the untrained ``grounded`` one too.
Learned models add the training contract: ``captioners/learned.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..types import Analysis, Sentence

if TYPE_CHECKING:  # pragma: no cover
    from torch import Tensor


@dataclass(frozen=True)
class Hint:
    """What an earlier, overlapping pair already recognised at a place: in a frame sequence the
    object that appeared at a spot in one pair is the one that is gone from it in the next, so
    its noun need not be computed twice. bbox is in analysed (working) pixels."""

    bbox: tuple[int, int, int, int]
    noun: str
    source: str = ""
    confidence: float = 0.0


@dataclass(frozen=True)
class DescribeOptions:
    """Per-call options: how many sentences at most, whether recognisers may run, what earlier
    pairs of the same sequence recognised (``hints``), and, for evaluation under the paper's
    multi-sentence protocol (Spot-the-diff §3.3, ``eval --gold-count``), the number of sentences
    to write (``num_sentences``; models that cannot take a count ignore it)."""

    max_sentences: int = 5
    recognise: bool = True
    hints: tuple[Hint, ...] = ()
    num_sentences: int | None = None


class Captioner:
    """Base class. Subclasses set ``name`` via the registry and implement ``describe``."""

    name: ClassVar[str] = ""
    trainable: ClassVar[bool] = False

    # -- what evaluation asks (evaluate/protocols.py), each with its default ----------------
    # Whether describe() writes ``options.num_sentences`` sentences when given (eval
    # --gold-count, the paper's multi-sentence protocol).
    takes_sentence_count: ClassVar[bool] = False
    # Whether a one-sentence description may differ from the first sentence of a longer one
    # (evaluation then decodes the single-sentence protocol's sentence on its own).
    single_sentence_differs: bool = False
    # What retrieval_embeddings' candidates are: "after images" (duda-aux: g(B) vs g(A)) or
    # "pairs" (clip4idc: v(A, B) vs v(A, A)).
    retrieval_candidates: ClassVar[str] = "after images"

    def warm_up(self, options: DescribeOptions) -> None:
        """Start slow one-off set-up (loading a recogniser) in the background so it overlaps
        the pixel analysis; ``describe`` must work whether or not it has finished. Optional."""

    def describe(self, analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
        """Sentences for one analysed pair, most salient first, at most ``options.max_sentences``."""
        raise NotImplementedError

    def loss(self, batch: Any) -> Any:  # pragma: no cover - overridden by trainable models
        raise NotImplementedError(f"model '{self.name}' is not trainable")

    def log_likelihood(self, analysis: Analysis, sentence: str) -> tuple[float, int]:
        """(negative log-likelihood, number of target tokens) of ``sentence`` for an analysed
        pair: evaluation's perplexity. Only models that score sentences implement it."""
        raise NotImplementedError(f"model '{self.name}' has no log_likelihood(analysis, sentence)")

    @property
    def scores_sentences(self) -> bool:
        """Whether this model implements :meth:`log_likelihood` (overrides it)."""
        return type(self).log_likelihood is not Captioner.log_likelihood

    def retrieval_embeddings(
        self, analysis: Analysis, sentences: list[str]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """For an analysed pair and captions of it: (queries (len(sentences), d), the pair's
        candidate (d,), its hard negative (d,)), on the CPU: what ``spotdiff eval`` gathers over
        a split into retrieval R@1 (``captioners/retrieval.py``). Only models with a retrieval
        head implement it."""
        raise NotImplementedError(f"model '{self.name}' has no retrieval head")

    @property
    def retrieves(self) -> bool:
        """Whether this model implements :meth:`retrieval_embeddings` (overrides it)."""
        return type(self).retrieval_embeddings is not Captioner.retrieval_embeddings
