"""One dataset made of several: ``spotdiff data mix OUT A B ...`` writes ``OUT/<split>.jsonl``
(the ``jsonl`` format of ``readers.py``) listing every pair of every source's split, with image
paths relative to ``OUT`` (the images stay where they are) and ids prefixed by the source's name,
so one model can be trained on, say, the rendered 3-D benchmark and real-footage composites at
once (the shipped weights, issue 24).

What a reader knows of a pair travels with it: every annotator's sentences, the change types
(``balance_changes`` and the evaluation's truth read them), the distractor tag, the gold records
and the image size. ``spotdiff data prepare OUT`` then caches analysis and features for the mix as
for any dataset.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_text
from ..errors import DataError, UsageError
from .readers import SPLITS, DatasetPair, available_splits, load_dataset


@dataclass(frozen=True)
class MixSummary:
    out: Path
    counts: dict[str, dict[str, int]]  # split -> source name -> pairs


def source_name(root: Path) -> str:
    """A short id prefix for a source folder: its name, with anything but letters, digits, '-'
    and '_' replaced (ids name cache files)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", root.resolve().name) or "source"


def pair_record(pair: DatasetPair, prefix: str, out: Path) -> dict[str, Any]:
    """One jsonl line for ``pair``: paths relative to ``out``, the id as ``<prefix>-<id>``."""
    if pair.before is None or pair.after is None:
        raise DataError(f"pair {pair.id} of {prefix} has no images; mix needs the image files")
    record: dict[str, Any] = {
        "id": f"{prefix}-{pair.id}",
        "before": os.path.relpath(pair.before.resolve(), out.resolve()),
        "after": os.path.relpath(pair.after.resolve(), out.resolve()),
        "annotations": [list(a) for a in pair.annotations],
    }
    if pair.change_types:
        record["change_types"] = list(pair.change_types)
    if pair.distractor is not None:
        record["distractor"] = pair.distractor
    if pair.gold:
        record["gold"] = list(pair.gold)
    if pair.image_size is not None:
        record["image_size"] = list(pair.image_size)
    return record


def mix_datasets(
    out: str | Path,
    sources: Sequence[str | Path],
    splits: Sequence[str] | None = None,
    overwrite: bool = False,
) -> MixSummary:
    """Write ``out/<split>.jsonl`` for each split (default: every split any source has) from the
    pairs of ``sources`` in order. Refuses to replace an existing split file unless ``overwrite``;
    each file is written atomically."""
    out = Path(out)
    roots = [Path(s) for s in sources]
    if len(roots) < 2:
        raise UsageError("mix needs at least two dataset folders")
    names = [source_name(r) for r in roots]
    if len(set(names)) != len(names):
        raise UsageError(
            f"two sources share the folder name {next(n for n in names if names.count(n) > 1)!r}: "
            "ids would collide; rename or link one of them"
        )
    found = [s for s in SPLITS if any(s in available_splits(r) for r in roots)]
    unknown = [s for s in splits or () if s not in found]
    if unknown:
        raise UsageError(
            f"no source has a '{unknown[0]}' split; choose from {', '.join(found) or 'none found'}"
        )
    wanted = list(splits) if splits else found
    if not wanted:
        raise DataError(f"none of {', '.join(map(str, roots))} has a train, val or test split")
    if not overwrite:
        existing = [out / f"{s}.jsonl" for s in wanted if (out / f"{s}.jsonl").exists()]
        if existing:
            raise UsageError(f"{existing[0]} exists; pass --overwrite to replace it")
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    for split in wanted:
        lines, counts[split] = [], {}
        for root, name in zip(roots, names):
            if split not in available_splits(root):
                continue
            data = load_dataset(root, split)
            lines += [json.dumps(pair_record(p, name, out)) for p in data.pairs]
            counts[split][name] = len(data.pairs)
        atomic_write_text(out / f"{split}.jsonl", "\n".join(lines) + "\n")
    return MixSummary(out, counts)
