"""Dataset readers: every image-difference-captioning dataset behind one interface.

A dataset is a folder; a reader turns one split of it into a tuple of ``DatasetPair`` (paths of
the two images, the reference sentences grouped by annotator, and, where the dataset has them,
change types, a distractor tag and gold boxes). Formats:

* ``spot-the-diff`` - ``annotations/<split>.json``: a list of ``{img_id, sentences}``; images
  ``images/<id>.png`` (before) and ``images/<id>_2.png`` (after). The same ``img_id`` can occur
  several times in a split: separate annotators, merged into one pair here (as CLIP4IDC does).
  The synthetic benchmark (``synth.py``) writes this layout plus ``annotations/<split>_gold.json``.
* ``clevr-change`` - ``images/``, ``sc_images/`` (semantic change), ``nsc_images/`` (distractor:
  viewpoint/lighting only, truth "no change"), ``change_captions.json``,
  ``no_change_captions.json``, ``splits.json`` and, if present, ``type_mapping.json``.
* ``image-editing-request`` - ``<split>.json`` (``valid`` for ``val``): a list of
  ``{img0, img1, sents}``; images in ``images/`` or next to the JSON.
* ``jsonl`` - ``<split>.jsonl``: one ``{before, after, sentences}`` per line, paths relative to
  the file: the format for a user's own data. Optional keys: ``id``, ``annotations`` (one
  sentence list per annotator, instead of ``sentences``), ``change_types``, ``distractor``,
  ``gold`` and ``image_size``, what ``spotdiff data mix`` writes.

Errors are ``DataError`` naming the file, the entry and the fix. With ``require_images=False`` a
reader needs only the annotations (what ``spotdiff eval --predictions`` uses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError

SPLITS = ("train", "val", "test")
FORMATS = ("spot-the-diff", "clevr-change", "image-editing-request", "jsonl")


@dataclass(frozen=True)
class DatasetPair:
    """One image pair of a dataset with its references.

    annotations: one tuple of sentences per annotator (Spot-the-diff repeats ``img_id`` per
        annotator; CLEVR-Change captions are each one annotation of one sentence).
    change_types: the kinds of change in the pair where the dataset says so ("appear",
        "disappear", "move", "colour", "color", "material", "add", "drop", ...); ``("distractor",)``
        for a pair whose truth is "no change".
    distractor: None for a real change; otherwise what differs instead ("lighting", "shift",
        "noise", "viewpoint").
    gold: per-change records where the dataset has them: the synthetic benchmark's (type, kind,
        colour, new_colour, boxes, sentence index) or the rendered CLEVR set's ``gold.json`` (type,
        object attributes, what changed, boxes). Boxes are (x, y, w, h) pixels.
    image_size: (width, height) of the images when the dataset's settings say so (synthetic and
        rendered sets), so gold boxes can be placed in the frame without opening an image.
    """

    id: str
    before: Path | None
    after: Path | None
    annotations: tuple[tuple[str, ...], ...]
    change_types: tuple[str, ...] = ()
    distractor: str | None = None
    gold: tuple[dict[str, Any], ...] = ()
    image_size: tuple[int, int] | None = None

    @property
    def sentences(self) -> tuple[str, ...]:
        """Every reference sentence of every annotator, in file order (empty ones kept: the
        authors' reference file keeps them too, and the regression anchor depends on it)."""
        return tuple(s for annotation in self.annotations for s in annotation)

    @property
    def descriptions(self) -> tuple[str, ...]:
        """One whole description per annotator (sentences joined): multi-sentence references."""
        return tuple(
            " ".join(s for s in annotation if s.strip()) for annotation in self.annotations
        )


@dataclass(frozen=True)
class Dataset:
    """One split of one dataset."""

    root: Path
    format: str
    split: str
    pairs: tuple[DatasetPair, ...]
    source: Path  # the annotation file the split was read from
    n_annotations: int = 0  # items in the annotation file (before merging annotators)

    def __len__(self) -> int:
        return len(self.pairs)

    def by_id(self) -> dict[str, DatasetPair]:
        return {p.id: p for p in self.pairs}


# ----------------------------------------------------------------------------------------------
# helpers


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DataError(f"{path}: annotation file not found; check the dataset folder and --split")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); fix or re-download the file"
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text; is this really the annotation file?") from exc


def _sentences(value: Any, path: Path, entry: str, key: str) -> tuple[str, ...]:
    """A list of strings (or one string) as a tuple, lower-cased and stripped."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise DataError(
            f"{path}: entry {entry}: '{key}' must be a list of strings, got {type(value).__name__}"
        )
    return tuple(s.strip().lower() for s in value)


def _check_images(pairs: Iterable[DatasetPair], source: Path) -> None:
    for pair in pairs:
        for role, image in (("before", pair.before), ("after", pair.after)):
            if image is None or not image.is_file():
                raise DataError(
                    f"{source}: entry {pair.id}: {role} image {image} not found; copy the images into "
                    f"place or pass require_images=False (annotation-only evaluation)"
                )


def _non_empty(pairs: list[DatasetPair], source: Path, split: str) -> tuple[DatasetPair, ...]:
    if not pairs:
        raise DataError(
            f"{source}: split '{split}' has no pairs; check --split or regenerate the dataset"
        )
    return tuple(pairs)


def _split_names(split: str) -> tuple[str, ...]:
    """The file names a split may go by ('val' is 'valid' in Image-Editing-Request)."""
    aliases = {
        "val": ("val", "valid", "validation"),
        "valid": ("valid", "val"),
        "test": ("test",),
        "train": ("train",),
    }
    return aliases.get(split, (split,))


def annotations_dir(root: Path) -> Path:
    """``root/annotations`` for a dataset folder, or ``root`` itself when it *is* that folder
    (so ``--dataset ../shared/data/spot-the-diff/annotations`` works)."""
    return root / "annotations" if (root / "annotations").is_dir() else root


# ----------------------------------------------------------------------------------------------
# Spot-the-diff (and the synthetic benchmark)


def read_spot_the_diff(root: Path, split: str, require_images: bool = True) -> Dataset:
    ann_dir = annotations_dir(root)
    source = ann_dir / f"{split}.json"
    items = _read_json(source)
    if not isinstance(items, list):
        raise DataError(
            f"{source}: expected a JSON list of {{img_id, sentences}}, got {type(items).__name__}"
        )
    merged: dict[str, list[tuple[str, ...]]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "img_id" not in item or "sentences" not in item:
            raise DataError(
                f"{source}: entry {index} must be an object with 'img_id' and 'sentences'; got {str(item)[:80]}"
            )
        img_id = str(item["img_id"])
        merged.setdefault(img_id, []).append(
            _sentences(item["sentences"], source, f"{index} (img_id {img_id})", "sentences")
        )
    gold = _read_gold(ann_dir / f"{split}_gold.json")
    image_dir = _spot_image_dir(root, ann_dir)
    size = _synth_size(root, ann_dir)
    pairs = []
    for img_id, by_annotator in merged.items():
        record = gold.get(img_id, {})
        changes = tuple(record.get("changes", ()))
        distractor = record.get("distractor")
        types = ("distractor",) if record and not changes else tuple(c["type"] for c in changes)
        pairs.append(
            DatasetPair(
                id=img_id,
                before=image_dir / f"{img_id}.png" if image_dir else None,
                after=image_dir / f"{img_id}_2.png" if image_dir else None,
                annotations=tuple(by_annotator),
                change_types=types,
                distractor=distractor,
                gold=changes,
                image_size=size if record else None,
            )
        )
    result = _non_empty(pairs, source, split)
    if require_images:
        if image_dir is None:
            raise DataError(
                f"{root}: no images/ folder next to annotations/; add the images or evaluate predictions only"
            )
        _check_images(result, source)
    return Dataset(root, "spot-the-diff", split, result, source, n_annotations=len(items))


def _spot_image_dir(root: Path, ann_dir: Path) -> Path | None:
    for candidate in (root / "images", ann_dir.parent / "images", root / "resized_images"):
        if candidate.is_dir():
            return candidate
    return None


def _synth_size(root: Path, ann_dir: Path) -> tuple[int, int] | None:
    """The synthetic benchmark's square image side, from its ``synth.json``."""
    for folder in dict.fromkeys((root, ann_dir.parent)):
        path = folder / "synth.json"
        if path.is_file():
            size = _read_json(path).get("size")
            return (int(size), int(size)) if isinstance(size, (int, float)) else None
    return None


def _read_gold(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    records = _read_json(path)
    if not isinstance(records, list):
        raise DataError(f"{path}: expected a JSON list of per-pair gold records")
    out = {}
    for index, record in enumerate(records):
        if not isinstance(record, dict) or "img_id" not in record:
            raise DataError(
                f"{path}: entry {index} has no 'img_id'; regenerate with `spotdiff data synth`"
            )
        out[str(record["img_id"])] = record
    return out


# ----------------------------------------------------------------------------------------------
# CLEVR-Change


_NUMBER = re.compile(r"(\d+)(?=\.\w+$|$)")


def _number_of(name: str) -> int | None:
    match = _NUMBER.search(Path(name).name)
    return int(match.group(1)) if match else None


def _by_number(files: Iterable[Path]) -> dict[int, Path]:
    out = {}
    for path in files:
        number = _number_of(path.name)
        if number is not None:
            out[number] = path
    return out


def _captions_by_number(path: Path) -> dict[int, tuple[str, ...]]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected an object mapping image file names to caption lists")
    out = {}
    for key, value in data.items():
        number = _number_of(str(key))
        if number is None:
            raise DataError(
                f"{path}: entry '{key}' has no image number in its name (expected e.g. CLEVR_default_000123.png)"
            )
        out[number] = _sentences(value, path, str(key), "captions")
    return out


def _clevr_gold(root: Path) -> tuple[dict[int, dict[str, Any]], tuple[int, int] | None]:
    """The rendered set's ``gold.json`` by scene number, and the image size from ``clevr.json``
    (both ours, ``data/clevr_render.py``; the real release has neither: empty and None)."""
    gold: dict[int, dict[str, Any]] = {}
    if (root / "gold.json").is_file():
        records = _read_json(root / "gold.json")
        if not isinstance(records, dict):
            raise DataError(f"{root / 'gold.json'}: expected an object of per-scene records")
        for name, record in records.items():
            number = _number_of(str(name))
            if number is not None and isinstance(record, dict):
                gold[number] = record
    size = None
    if (root / "clevr.json").is_file():
        settings = _read_json(root / "clevr.json")
        if isinstance(settings, dict) and {"width", "height"} <= set(settings):
            size = (int(settings["width"]), int(settings["height"]))
    return gold, size


def _clevr_change(record: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """A ``gold.json`` scene as the one change record of its change pair (the per-view object
    lists and cameras stay in the file)."""
    keys = ("type", "object", "new", "bbox_before", "bbox_after")
    return (
        ({k: record[k] for k in keys if k in record},)
        if isinstance(record.get("type"), str)
        else ()
    )


def read_clevr_change(root: Path, split: str, require_images: bool = True) -> Dataset:
    """Each index in ``splits.json`` gives two pairs: ``<n>`` (default vs semantic change, with
    its change captions) and ``<n>_nc`` (default vs non-semantic distractor, "no change").

    The rendered set's ``gold.json`` (when present) adds each change pair's gold change and
    each distractor's kind ("viewpoint", "lighting" or "viewpoint+lighting"); without it every
    distractor is "viewpoint", as in the real release (its distractors move the camera)."""
    splits_path = root / "splits.json"
    splits = _read_json(splits_path)
    if not isinstance(splits, dict) or split not in splits:
        names = ", ".join(splits) if isinstance(splits, dict) else "none"
        raise DataError(f"{splits_path}: no split '{split}' (splits in the file: {names})")
    change = _captions_by_number(root / "change_captions.json")
    no_change = _captions_by_number(root / "no_change_captions.json")
    types: dict[int, str] = {}
    if (root / "type_mapping.json").is_file():
        mapping = _read_json(root / "type_mapping.json")
        for key, value in mapping.items() if isinstance(mapping, dict) else []:
            if isinstance(value, list):  # the release's form: {"color": ["000123.png", ...]}
                for name in value:
                    number = _number_of(str(name))
                    if number is not None:
                        types[number] = str(key)
                continue
            number = _number_of(str(key))
            if number is not None:
                types[number] = str(value)
    default = _by_number((root / "images").glob("*.png"))
    semantic = _by_number((root / "sc_images").glob("*.png"))
    nonsemantic = _by_number((root / "nsc_images").glob("*.png"))
    gold, size = _clevr_gold(root)
    pairs = []
    for raw in splits[split]:
        try:
            n = int(raw)
        except (TypeError, ValueError):
            raise DataError(
                f"{splits_path}: split '{split}' entry {raw!r} is not an image number"
            ) from None
        if n not in change:
            raise DataError(
                f"{root / 'change_captions.json'}: no captions for image {n} listed in split '{split}'"
            )
        pairs.append(
            DatasetPair(
                id=str(n),
                before=default.get(n),
                after=semantic.get(n),
                annotations=tuple((c,) for c in change[n]),
                change_types=(types[n],)
                if n in types
                else tuple(c["type"] for c in _clevr_change(gold.get(n, {}))),
                gold=_clevr_change(gold.get(n, {})),
                image_size=size,
            )
        )
        if n in no_change:
            pairs.append(
                DatasetPair(
                    id=f"{n}_nc",
                    before=default.get(n),
                    after=nonsemantic.get(n),
                    annotations=tuple((c,) for c in no_change[n]),
                    change_types=("distractor",),
                    distractor=str(gold.get(n, {}).get("distractor") or "viewpoint"),
                    image_size=size,
                )
            )
    result = _non_empty(pairs, splits_path, split)
    if require_images:
        _check_images(result, splits_path)
    return Dataset(
        root,
        "clevr-change",
        split,
        result,
        splits_path,
        n_annotations=sum(len(p.annotations) for p in result),
    )


# ----------------------------------------------------------------------------------------------
# Image-Editing-Request


def _first_existing(candidates: Iterable[Path]) -> Path | None:
    for path in candidates:
        if path.is_file():
            return path
    return None


def read_image_editing_request(root: Path, split: str, require_images: bool = True) -> Dataset:
    ann_dir = annotations_dir(root)
    source = _first_existing(
        d / f"{name}.json" for name in _split_names(split) for d in (root, ann_dir)
    )
    if source is None:
        raise DataError(
            f"{root}: no {split}.json (or valid.json) with {{img0, img1, sents}} entries found"
        )
    items = _read_json(source)
    if not isinstance(items, list):
        raise DataError(
            f"{source}: expected a JSON list of {{img0, img1, sents}}, got {type(items).__name__}"
        )
    image_dirs = [
        d for d in (root / "images", source.parent / "images", source.parent, root) if d.is_dir()
    ]
    pairs = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not {"img0", "img1", "sents"} <= set(item):
            raise DataError(
                f"{source}: entry {index} must have 'img0', 'img1' and 'sents'; got {str(item)[:80]}"
            )

        def locate(name: str) -> Path:
            found = _first_existing(d / name for d in image_dirs)
            return found if found is not None else image_dirs[0] / name

        pair_id = str(item.get("uid", item.get("id", index)))
        sents = _sentences(item["sents"], source, str(index), "sents")
        pairs.append(
            DatasetPair(
                id=pair_id,
                before=locate(str(item["img0"])),
                after=locate(str(item["img1"])),
                # IER's sents are independent requests by different annotators for the same edit.
                annotations=tuple((s,) for s in sents),
            )
        )
    result = _non_empty(pairs, source, split)
    if require_images:
        _check_images(result, source)
    return Dataset(root, "image-editing-request", split, result, source, n_annotations=len(items))


# ----------------------------------------------------------------------------------------------
# generic JSONL


def read_jsonl(root: Path, split: str, require_images: bool = True) -> Dataset:
    source = (
        root
        if root.is_file()
        else _first_existing(
            d / f"{name}.jsonl"
            for name in _split_names(split)
            for d in (root, annotations_dir(root))
        )
    )
    if source is None:
        raise DataError(
            f"{root}: no {split}.jsonl found; write one {{before, after, sentences}} object per line"
        )
    pairs = []
    for line_no, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{source}: line {line_no}: malformed JSON ({exc.msg}); one object per line"
            ) from exc
        if (
            not isinstance(item, dict)
            or not {"before", "after"} <= set(item)
            or not ({"sentences", "annotations"} & set(item))
        ):
            raise DataError(
                f"{source}: line {line_no} must have 'before', 'after' and 'sentences' "
                "(or 'annotations', one list of sentences per annotator)"
            )
        entry = f"line {line_no}"
        if "annotations" in item:
            if not isinstance(item["annotations"], list) or not item["annotations"]:
                raise DataError(
                    f"{source}: {entry}: 'annotations' must be a non-empty list of sentence lists"
                )
            annotations = tuple(
                _sentences(a, source, entry, "annotations") for a in item["annotations"]
            )
        else:
            annotations = (_sentences(item["sentences"], source, entry, "sentences"),)
        size = item.get("image_size")
        pairs.append(
            DatasetPair(
                id=str(item.get("id", line_no)),
                before=(source.parent / str(item["before"])),
                after=(source.parent / str(item["after"])),
                annotations=annotations,
                change_types=tuple(item.get("change_types", ())),
                distractor=item.get("distractor"),
                gold=tuple(item.get("gold", ())),
                image_size=(int(size[0]), int(size[1])) if size else None,
            )
        )
    result = _non_empty(pairs, source, split)
    if require_images:
        _check_images(result, source)
    return Dataset(root, "jsonl", split, result, source, n_annotations=len(result))


READERS: dict[str, Callable[[Path, str, bool], Dataset]] = {
    "spot-the-diff": read_spot_the_diff,
    "clevr-change": read_clevr_change,
    "image-editing-request": read_image_editing_request,
    "jsonl": read_jsonl,
}


def detect_format(root: Path, split: str = "test") -> str:
    """Guess a dataset's format from the files it has."""
    if root.is_file():
        if root.suffix == ".jsonl":
            return "jsonl"
        raise DataError(
            f"{root}: give the dataset folder, not a file (a .jsonl file is the only single-file dataset)"
        )
    if not root.is_dir():
        raise DataError(f"{root}: dataset folder not found")
    if (root / "splits.json").is_file() and (root / "change_captions.json").is_file():
        return "clevr-change"
    ann = annotations_dir(root)
    if any(ann.glob("*.jsonl")) or any(root.glob("*.jsonl")):
        return "jsonl"
    for name in _split_names(split) + SPLITS + ("valid",):
        for candidate in (ann / f"{name}.json", root / f"{name}.json"):
            if candidate.is_file():
                head = candidate.read_text(encoding="utf-8", errors="replace")[:2000]
                if '"img0"' in head:
                    return "image-editing-request"
                if '"img_id"' in head:
                    return "spot-the-diff"
    raise DataError(
        f"{root}: cannot tell the dataset format (looked for annotations/<split>.json, splits.json + "
        f"change_captions.json, <split>.json with img0/img1, <split>.jsonl); pass --format one of {', '.join(FORMATS)}"
    )


def load_dataset(
    root: str | Path, split: str = "test", format: str = "auto", require_images: bool = True
) -> Dataset:
    """Read one split of a dataset folder (format detected unless given)."""
    root = Path(root)
    fmt = detect_format(root, split) if format == "auto" else format
    if fmt not in READERS:
        raise DataError(f"unknown dataset format '{format}'; use one of auto, {', '.join(FORMATS)}")
    return READERS[fmt](root, split, require_images)


def available_splits(root: str | Path, format: str = "auto") -> list[str]:
    """The standard splits a dataset folder has annotation files for (by file presence only:
    a malformed file still fails loudly when it is read)."""
    root = Path(root)
    fmt = detect_format(root) if format == "auto" else format
    ann = annotations_dir(root)
    out = []
    for split in SPLITS:
        if fmt == "clevr-change":
            splits = _read_json(root / "splits.json")
            found = isinstance(splits, dict) and split in splits
        elif fmt == "jsonl":
            found = root.is_file() or any(
                (d / f"{n}.jsonl").is_file() for n in _split_names(split) for d in (root, ann)
            )
        elif fmt == "image-editing-request":
            found = any(
                (d / f"{n}.json").is_file() for n in _split_names(split) for d in (root, ann)
            )
        else:
            found = (ann / f"{split}.json").is_file()
        if found:
            out.append(split)
    return out
