"""What every captioner provides.

A captioner never reads files and never prints: it gets pixels and clusters, returns sentences.
Trainable captioners also provide ``loss(batch)`` for the shared training loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..types import Analysis, Sentence


@dataclass(frozen=True)
class DescribeOptions:
    """Per-call options: how many sentences at most, and whether recognisers may run."""

    max_sentences: int = 5
    recognise: bool = True


class Captioner:
    """Base class. Subclasses set ``name`` via the registry and implement ``describe``."""

    name: ClassVar[str] = ""
    trainable: ClassVar[bool] = False

    def describe(self, analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
        """Sentences for one analysed pair, most salient first, at most ``options.max_sentences``."""
        raise NotImplementedError

    def loss(self, batch: Any) -> Any:  # pragma: no cover - overridden by trainable models
        raise NotImplementedError(f"model '{self.name}' is not trainable")
