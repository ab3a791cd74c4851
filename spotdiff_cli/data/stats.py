"""Dataset statistics in the shape of Table 1 of the Spot-the-diff paper.

Counted per *annotation* (one annotator's description of one pair, i.e. one item of a
Spot-the-diff annotation file) and per *sentence*; words are whitespace tokens of the
lower-cased text (the released text has its punctuation removed already). Empty sentences (53
in the released train split) count as sentences of an annotation - the annotator submitted the
line - but not in the per-sentence word statistics, where a zero-word "sentence" would only drag
the mean down. With that reading the released train split gives Table 1's 1.86 sentences per
annotation (std 0.99 against 1.01) and its 4.97 standard deviation of words per sentence exactly; its mean, 10.67
words, stays below the published 10.96 (the paper counted 13,192 annotations; 12,562 were
released).

Needs only the annotations, so it runs on the real Spot-the-diff captions (no images) and on any
synthetic benchmark alike.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .readers import available_splits, load_dataset

LONG_SENTENCE_WORDS = 20  # Table 1: "% long sentences (> 20 words)"
FREQUENT_COUNT = 5  # Table 1: "frequent word types (>= 5 occurrences)"


@dataclass
class DatasetStats:
    """Table 1 quantities for the chosen splits together (``per_split`` has each alone)."""

    splits: list[str]
    pairs: int
    annotations: int
    sentences: int
    empty_sentences: int
    sentences_per_annotation: float
    sentences_per_annotation_std: float
    words_per_sentence: float
    words_per_sentence_std: float
    vocabulary: int
    frequent_types: int
    frequent_token_share: float
    long_sentence_share: float
    change_types: dict[str, int] = field(default_factory=dict)
    per_split: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) rows in Table 1's order, for tables and Markdown."""
        return [
            ("Image pairs", f"{self.pairs:,}"),
            ("Annotations", f"{self.annotations:,}"),
            ("Sentences (empty ones)", f"{self.sentences:,} ({self.empty_sentences:,})"),
            (
                "Sentences per annotation, mean (std)",
                f"{self.sentences_per_annotation:.2f} ({self.sentences_per_annotation_std:.2f})",
            ),
            ("Vocabulary size", f"{self.vocabulary:,}"),
            (f"Frequent word types (>= {FREQUENT_COUNT} occurrences)", f"{self.frequent_types:,}"),
            ("Word tokens that are frequent types", f"{100 * self.frequent_token_share:.0f}%"),
            (
                "Words per sentence, mean (std)",
                f"{self.words_per_sentence:.2f} ({self.words_per_sentence_std:.2f})",
            ),
            (
                f"Long sentences (> {LONG_SENTENCE_WORDS} words)",
                f"{100 * self.long_sentence_share:.1f}%",
            ),
        ] + [(f"Pairs with change type '{k}'", f"{v:,}") for k, v in self.change_types.items()]

    def to_markdown(self) -> str:
        lines = [f"| statistic ({', '.join(self.splits)}) | value |", "|---|---:|"]
        lines += [f"| {label} | {value} |" for label, value in self.rows()]
        return "\n".join(lines) + "\n"


def _stats(
    annotations: list[tuple[str, ...]], pairs: int, splits: list[str], change_types: Counter
) -> DatasetStats:
    sentences = [s for a in annotations for s in a]
    if not sentences:
        raise DataError(f"no sentences in split(s) {', '.join(splits)}")
    per_annotation = np.array([len(a) for a in annotations], dtype=np.float64)
    words = np.array([len(s.split()) for s in sentences if s.strip()], dtype=np.float64)
    counts = Counter(w for s in sentences for w in s.split())
    frequent = {w for w, c in counts.items() if c >= FREQUENT_COUNT}
    total_tokens = sum(counts.values())
    return DatasetStats(
        splits=splits,
        pairs=pairs,
        annotations=len(annotations),
        sentences=len(sentences),
        empty_sentences=sum(1 for s in sentences if not s.strip()),
        sentences_per_annotation=float(per_annotation.mean()),
        sentences_per_annotation_std=float(per_annotation.std()),
        words_per_sentence=float(words.mean()),
        words_per_sentence_std=float(words.std()),
        vocabulary=len(counts),
        frequent_types=len(frequent),
        frequent_token_share=sum(counts[w] for w in frequent) / total_tokens
        if total_tokens
        else 0.0,
        long_sentence_share=float((words > LONG_SENTENCE_WORDS).mean()),
        change_types=dict(sorted(change_types.items())),
    )


def dataset_stats(
    root: str | Path, splits: list[str] | tuple[str, ...] | None = None, format: str = "auto"
) -> DatasetStats:
    """Table 1 statistics of a dataset folder over ``splits`` (default: every split it has)."""
    root = Path(root)
    chosen = list(splits) if splits else []
    if not chosen:
        chosen = available_splits(root, format)
        if not chosen:
            raise DataError(
                f"{root}: no train/val/test annotations found; is this a dataset folder?"
            )
    everything: list[tuple[str, ...]] = []
    pairs = 0
    types: Counter = Counter()
    per_split: dict[str, dict[str, Any]] = {}
    for split in chosen:
        data = load_dataset(root, split, format, require_images=False)
        annotations = [a for p in data.pairs for a in p.annotations]
        split_types = Counter(t for p in data.pairs for t in dict.fromkeys(p.change_types))
        one = _stats(annotations, len(data.pairs), [split], split_types)
        per_split[split] = {
            k: v for k, v in one.to_dict().items() if k not in ("per_split", "splits")
        }
        everything += annotations
        pairs += len(data.pairs)
        types += split_types
    result = _stats(everything, pairs, chosen, types)
    result.per_split = per_split
    return result
