"""Coupled Sample Training's single-image descriptions (``papers/onediff-2024.txt`` §4.2).

The paper: "CST ingeniously crafts dual-image samples from existing image-text pairs [...] by
dynamically merging two distinct image-text samples into a pseudo dual-image sample, where the
model receives concatenated images as inputs and concatenated captions as outputs." Its
image-text pairs are LLaVA-558K's single-image captions. We have no such captions, but our two
generated benchmarks know what is in each image, so a single-image description can be written
from the scene annotation, in the benchmark's own words (every word is in the change captions'
vocabulary, so no target word is ``<unk>``):

- the rendered CLEVR set (``gold.json``, every view's objects with their visible share): "there
  is a small purple rubber cube", one sentence per object at least half visible, the largest
  ``max_objects`` (3) in the frame first. Pair ``<n>`` is (default view, semantic view), pair
  ``<n>_nc`` is (default view, non-semantic view);
- the 2-D synthetic benchmark (``annotations/<split>_gold.json``): it records only the objects
  that change, so a description names those that are in the image ("there is a blue car"): the
  before image holds what disappears, moves or changes colour (old colour), the after image what
  appears, moves or changes colour (new colour). Distractor pairs record no object and get none.

The model (``model.py``) couples two such images of *different* scenes from a batch into a pseudo
pair whose target is the first image's sentences, then the second's. What is chosen here:
descriptions from annotations rather than from a captioner; images of the training split only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import DataError
from ..local_files import resolve_root

Descriptions = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
"""pair id -> (sentences about its before image, sentences about its after image)."""


def clevr_sentence(obj: dict[str, Any]) -> str:
    return f"there is a {obj['size']} {obj['color']} {obj['material']} {obj['shape']}"


def _clevr_view(view: dict[str, Any], max_objects: int) -> tuple[str, ...]:
    objects = [o for o in view.get("objects", []) if float(o.get("visible", 1.0)) >= 0.5]
    objects.sort(key=lambda o: -(o["bbox"][2] * o["bbox"][3]) if o.get("bbox") else 0)
    return tuple(clevr_sentence(o) for o in objects[:max_objects])


def clevr_descriptions(root: Path, max_objects: int = 3) -> Descriptions:
    """Descriptions of every pair of the rendered CLEVR set from its ``gold.json`` views."""
    records = json.loads((root / "gold.json").read_text(encoding="utf-8"))
    out: Descriptions = {}
    for name, record in records.items():
        views = record.get("views") or {}
        if not {"default", "semantic", "nonsemantic"} <= set(views):
            continue
        n = str(int(record.get("index", name)))
        before = _clevr_view(views["default"], max_objects)
        out[n] = (before, _clevr_view(views["semantic"], max_objects))
        out[f"{n}_nc"] = (before, _clevr_view(views["nonsemantic"], max_objects))
    return out


def synth_descriptions(root: Path, split: str) -> Descriptions:
    """Descriptions of the synthetic benchmark's pairs from the changes its gold file records
    (``annotations/<split>_gold.json``: ``[{img_id, changes: [{type, kind, colour, new_colour}]}]``,
    read here directly: the captioners sit below the data layer)."""
    records = json.loads((root / "annotations" / f"{split}_gold.json").read_text(encoding="utf-8"))
    out: Descriptions = {}
    for record in records:
        before: list[str] = []
        after: list[str] = []
        for change in record.get("changes") or []:
            kind, colour, what = change.get("kind"), change.get("colour"), change.get("type")
            if not kind or not colour:
                continue
            if what in ("disappear", "move", "colour"):
                before.append(f"there is a {colour} {kind}")
            if what in ("appear", "move"):
                after.append(f"there is a {colour} {kind}")
            if what == "colour" and change.get("new_colour"):
                after.append(f"there is a {change['new_colour']} {kind}")
        out[str(record["img_id"])] = (tuple(before), tuple(after))
    return out


def scene_descriptions(
    root: str | Path, split: str = "train", max_objects: int = 3
) -> Descriptions:
    """Single-image descriptions of every pair of ``split`` of the benchmark at ``root``."""
    root = resolve_root(str(root))
    if (root / "gold.json").is_file():
        return clevr_descriptions(root, max_objects)
    if (root / "annotations" / f"{split}_gold.json").is_file():
        return synth_descriptions(root, split)
    raise DataError(
        f"{root}: Coupled Sample Training needs what each image shows, and this dataset has no "
        "scene annotations (gold.json of the rendered set, or annotations/<split>_gold.json of the "
        "synthetic benchmark); train onediff without a cst stage on it"
    )


def scene_of(pair_id: str) -> str:
    """The scene a pair shows (CLEVR's ``<n>`` and ``<n>_nc`` share their before image)."""
    return pair_id[:-3] if pair_id.endswith("_nc") else pair_id
