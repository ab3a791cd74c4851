"""What every captioner provides.

A captioner never reads files and never prints: it gets pixels and clusters, returns sentences.
Trainable captioners also provide ``loss(batch)`` for the shared training loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..types import Analysis, Sentence


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

    def warm_up(self, options: DescribeOptions) -> None:
        """Start slow one-off set-up (loading a recogniser) in the background so it overlaps
        the pixel analysis; ``describe`` must work whether or not it has finished. Optional."""

    def describe(self, analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
        """Sentences for one analysed pair, most salient first, at most ``options.max_sentences``."""
        raise NotImplementedError

    def loss(self, batch: Any) -> Any:  # pragma: no cover - overridden by trainable models
        raise NotImplementedError(f"model '{self.name}' is not trainable")
