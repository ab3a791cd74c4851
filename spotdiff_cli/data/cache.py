"""Preprocessing cache: what training needs per pair, computed once per dataset.

``prepare_dataset`` writes, under ``<dataset>/cache/``:

    analysis/settings.json          the AnalysisConfig the entries were made with
    analysis/<split>/<id>.npz       labels (H, W) uint16: 0 = background, k = cluster k's pixels
                                    (cluster ids in ``ids``); bboxes (K, 4) int32 (x, y, w, h);
                                    features (K, 4) float32 = g(z) of Spot-the-diff §3.1 (bbox
                                    length, width, area, active pixels); salience (K,);
                                    n_active (K,); alignment (dx, dy); scale; lighting_changed
    analysis/<split>.manifest.json  per pair: size and mtime of both images the entry was made from
    features-<backbone>/settings.json   what the grids depend on: backbone, weights file (path,
                                    size, mtime), input size, resize rule, timm version
    features-<backbone>/<split>.npz     before, after: (N, C, h, w) float16 grids; ids (N,)
    features-<backbone>/<split>.manifest.json   settings hash, preprocessing actually used
                                    (mean/std/input size), per pair the images' size and mtime

A feature cache at another input size, or with multi-level features, is its own folder beside the
default one (:func:`feature_folder`), so the paper-like grids never overwrite the default ones:

    features-<backbone>-448px/      efficientnet_lite0 at 448 px: a 1280 x 14 x 14 grid, the size
                                    of the paper's ResNet grid (§3.2)
    features-<backbone>-s8-16-32/   also before_s8/after_s8, before_s16/..., before_s32/...: the
                                    backbone's maps at strides 8, 16, 32 (lite0 at 224 px: 40 x 28
                                    x 28, 112 x 14 x 14, 320 x 7 x 7), for the families that read
                                    multi-level features

Masks are stored at the analysis' working resolution (``scale`` maps back to image pixels).

Invalidation, in two levels:

* settings: a cache part whose ``settings.json`` differs from the current settings is stale: it
  is deleted and rebuilt (reported in ``PrepareSummary.invalidated``). The feature settings are
  known *before* the backbone is built (weights file stat, names, sizes), so a run with nothing to
  do never loads the network or runs a forward pass.
* images: each entry remembers the size and modification time (ns) of the two images it was made
  from; an entry whose image changed is recomputed (``PrepareSummary.notes`` says how many).
  Size + mtime rather than a content hash: hashing 20,000 PNGs costs more than the check saves.

Within a valid cache only missing or changed entries are computed, so an interrupted ``prepare``
resumes where it stopped, and ``--limit`` runs never throw away grids of other pairs.
torch/timm are imported only when backbone features have to be computed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..captioners.features import PREPROCESSING
from ..config import AnalysisConfig, to_dict
from ..errors import DataError
from .readers import DatasetPair, available_splits, load_dataset

# 2: cluster k is stored as k + 1 in the label image (version 1 lost cluster 0's mask).
CACHE_VERSION = 2


@dataclass
class PrepareSummary:
    root: Path
    splits: dict[str, int]  # pairs per split
    computed: int  # analysis entries computed now
    reused: int  # analysis entries found valid
    invalidated: list[str] = field(default_factory=list)  # cache parts deleted as stale
    feature_files: list[Path] = field(default_factory=list)
    features_computed: int = 0  # pairs whose backbone grids were computed now
    features_reused: int = 0  # pairs whose cached grids were still valid
    notes: list[str] = field(
        default_factory=list
    )  # what was recomputed and why (images changed, ...)


def _settings_match(folder: Path, settings: dict[str, Any]) -> bool:
    path = folder / "settings.json"
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text()) == settings
    except json.JSONDecodeError:
        return False


def _fresh(folder: Path, settings: dict[str, Any], invalidated: list[str]) -> None:
    """Make ``folder`` a cache for ``settings``: delete it if it was made with others."""
    if folder.exists() and not _settings_match(folder, settings):
        shutil.rmtree(folder)
        invalidated.append(folder.name)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")


Fingerprint = list[list[Any]]  # [[relative path, size, mtime_ns], [...]] for before, after


def _fingerprint(pair: DatasetPair, root: Path) -> Fingerprint:
    """What must not change for a cached entry of ``pair`` to stay valid (see module docstring)."""
    out: Fingerprint = []
    for path in (pair.before, pair.after):
        stat = os.stat(path)  # type: ignore[arg-type]
        try:
            name = str(Path(path).resolve().relative_to(root.resolve()))  # type: ignore[arg-type]
        except ValueError:  # images outside the dataset folder (jsonl with absolute paths)
            name = str(path)
        out.append([name, stat.st_size, stat.st_mtime_ns])
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _load_frames(pair: DatasetPair) -> tuple[Any, Any]:
    from ..frames.image import load_image
    from ..types import Frame

    return Frame(load_image(pair.before), str(pair.before)), Frame(
        load_image(pair.after), str(pair.after)
    )  # type: ignore[arg-type]


def analysis_entry(pair: DatasetPair, config: AnalysisConfig) -> dict[str, np.ndarray]:
    """Run the analysis of one pair and pack its clusters as arrays (the npz entry)."""
    from ..analysis import analyse_pair, make_pair

    before, after = _load_frames(pair)
    result = analyse_pair(make_pair(before, after), config)
    h, w = result.mask.active.shape
    # 0 is "no cluster", so cluster k is stored as k + 1 (cluster ids start at 0: storing them
    # as they are made cluster 0 - the most salient - read back as the whole background).
    labels = np.zeros((h, w), np.uint16)
    for cluster in result.clusters:
        # Clusters do not overlap (DBSCAN labels each pixel once); later ids win if they ever do.
        labels[cluster.mask] = cluster.id + 1
    k = len(result.clusters)
    return {
        "labels": labels,
        "ids": np.array([c.id for c in result.clusters], np.int32),
        "bboxes": np.array([c.bbox for c in result.clusters], np.int32).reshape(k, 4),
        "features": np.array([c.features for c in result.clusters], np.float32).reshape(k, 4),
        "salience": np.array([c.salience for c in result.clusters], np.float32),
        "n_active": np.array([c.n_active for c in result.clusters], np.int32),
        "alignment": np.array([result.alignment.dx, result.alignment.dy], np.float32),
        "scale": np.array(result.scale, np.float32),
        "lighting_changed": np.array(result.mask.lighting_changed),
    }


def load_analysis(root: str | Path, split: str, pair_id: str) -> dict[str, np.ndarray]:
    """One cached entry (see module docstring for the arrays)."""
    path = Path(root) / "cache" / "analysis" / split / f"{pair_id}.npz"
    if not path.is_file():
        raise DataError(f"{path}: not in the cache; run `spotdiff data prepare {root}` first")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def cluster_masks(entry: dict[str, np.ndarray], ids: np.ndarray | None = None) -> np.ndarray:
    """(K, H, W) bool masks from a cached label image (cluster k stored as k + 1), in the order
    of ``ids`` (default: all of ``entry['ids']``)."""
    ids = entry["ids"] if ids is None else ids
    return entry["labels"][None] == (ids.astype(np.int64) + 1)[:, None, None]


def feature_folder(backbone: str, input_size: int | None = None, levels: Sequence[int] = ()) -> str:
    """The cache folder of a feature setting: ``features-<backbone>`` for the backbone's own input
    size and its final grid; ``-<size>px`` for another input size, ``-s8-16-32`` for levels."""
    name = f"features-{backbone}"
    if input_size:
        name += f"-{int(input_size)}px"
    if levels:
        name += "-s" + "-".join(str(int(s)) for s in sorted(levels))
    return name


def _prepare_command(
    root: Any, backbone: str, input_size: int | None, levels: Sequence[int]
) -> str:
    flags = f" --input-size {input_size}" if input_size else ""
    flags += "".join(f" --level {s}" for s in sorted(levels))
    return f"spotdiff data prepare {root} --backbone {backbone}{flags}"


def load_features(
    root: str | Path,
    split: str,
    backbone: str = "efficientnet_lite0",
    input_size: int | None = None,
    levels: Sequence[int] = (),
) -> dict[str, np.ndarray]:
    """Cached backbone grids of a split: ``before``/``after`` (N, C, h, w) float16, ``ids`` (N,);
    with ``levels``, also ``before_s<stride>``/``after_s<stride>`` (N, C_s, h_s, w_s) float16."""
    path = Path(root) / "cache" / feature_folder(backbone, input_size, levels) / f"{split}.npz"
    if not path.is_file():
        raise DataError(
            f"{path}: not in the cache; run `{_prepare_command(root, backbone, input_size, levels)}`"
        )
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _feature_settings(
    backbone: str, weights: str | None, input_size: int | None, levels: Sequence[int] = ()
) -> dict[str, Any]:
    """Everything the grids depend on, computed without building the network (cheap), so an
    up-to-date cache is recognised without a forward pass. (``levels`` appears only when asked
    for, so the default cache's settings, and so existing caches, stay as they were.)"""
    from importlib.metadata import PackageNotFoundError, version

    from ..captioners.backbones import lite0_package_weights
    from ..weights import resolve_weights

    if weights is None and backbone == "efficientnet_lite0":
        path = lite0_package_weights()
    else:
        path = resolve_weights(str(weights) if weights is not None else backbone, kind="backbone")
    stat = Path(path).stat()
    try:
        timm_version = version("timm")  # its pretrained configs give mean/std/input size
    except PackageNotFoundError:  # pragma: no cover - timm is a dependency
        timm_version = None
    return {
        "backbone": backbone,
        "weights": str(path),
        "weights_size": stat.st_size,
        "weights_mtime_ns": stat.st_mtime_ns,
        "input_size": input_size,
        "resize": PREPROCESSING,
        "timm": timm_version,
        "dtype": "float16",
        "version": CACHE_VERSION,
        **({"levels": sorted(int(v) for v in levels)} if levels else {}),
    }


def _settings_hash(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


class _Extractor:
    """The backbone, built on first use only: a run that finds everything cached never pays for
    torch/timm imports, the weights load or a forward pass."""

    def __init__(
        self,
        folder: Path,
        backbone: str,
        weights: str | None,
        device: str,
        batch_size: int,
        input_size: int | None,
        settings: dict[str, Any],
        levels: Sequence[int] = (),
    ) -> None:
        self.folder, self.backbone, self.weights, self.device = folder, backbone, weights, device
        self.batch_size, self.input_size = batch_size, input_size
        self.levels = tuple(sorted(int(v) for v in levels))
        self.settings_hash = _settings_hash(settings)
        self._model: Any = None
        self.preprocess: dict[str, Any] = {}

    def _build(self) -> None:
        from ..captioners.backbones import create_backbone
        from ..device import resolve_device

        model, info = create_backbone(self.backbone, weights=self.weights)
        self.dev = resolve_device(self.device)
        self._model, self.info = model.to(self.dev), info
        self.size = (self.input_size, self.input_size) if self.input_size else info.input_size
        self.preprocess = {
            "input_size": list(self.size),
            "mean": list(info.mean),
            "std": list(info.std),
            "weights": info.weights,
        }

    def __call__(
        self, pairs: list[DatasetPair], stage: str, progress: Callable[[str, int, int], None] | None
    ) -> dict[str, np.ndarray]:
        """The arrays of ``pairs``: ``before``/``after`` grids (N, C, h, w) float16 and, with
        levels, ``before_s<stride>``/``after_s<stride>`` the same way."""
        import torch

        from ..captioners.features import backbone_features
        from ..frames.image import load_image

        if self._model is None:
            self._build()
        paths = [p for pair in pairs for p in (pair.before, pair.after)]
        parts: dict[str, list[np.ndarray]] = {}
        for start in range(0, len(paths), self.batch_size):
            images = [load_image(p) for p in paths[start : start + self.batch_size]]  # type: ignore[arg-type]
            maps = backbone_features(
                images, (self._model, self.info), self.dev, self.size, self.levels
            )
            for name, grid in maps.items():
                parts.setdefault(name, []).append(grid.to("cpu", torch.float16).numpy())
            if progress:
                progress(stage, min(start + self.batch_size, len(paths)), len(paths))
        out: dict[str, np.ndarray] = {}
        for name, chunks in parts.items():
            both = np.concatenate(chunks)  # images alternate: before, after, before, ...
            suffix = "" if name == "grid" else f"_{name}"
            out[f"before{suffix}"], out[f"after{suffix}"] = both[0::2], both[1::2]
        return out

    def release(self) -> None:
        self._model = None


def _load_cached_split(
    folder: Path, split: str, settings_hash: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(manifest, arrays) of a split's cached grids, or empty ones when absent, made with other
    settings, or inconsistent (an interrupted write between the npz and its manifest)."""
    manifest = _read_json(folder / f"{split}.manifest.json")
    path = folder / f"{split}.npz"
    if (
        not isinstance(manifest, dict)
        or manifest.get("settings_hash") != settings_hash
        or not path.is_file()
    ):
        return {}, {}
    try:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError):
        return {}, {}
    if [str(i) for i in arrays.get("ids", [])] != list(manifest.get("pairs", {})):
        return {}, {}
    return manifest, arrays


def _update_features(
    extractor: _Extractor,
    split: str,
    all_pairs: list[DatasetPair],
    wanted: list[DatasetPair],
    root: Path,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[Path, int, int, list[str]]:
    """Bring ``<split>.npz`` up to date for ``wanted``; returns (file, computed, reused, notes).

    Cached grids of other pairs of the split (an earlier run without --limit) are kept while
    their images are unchanged; the file is rewritten only when something was computed."""
    folder = extractor.folder
    path = folder / f"{split}.npz"
    manifest, arrays = _load_cached_split(folder, split, extractor.settings_hash)
    cached: dict[str, Fingerprint] = manifest.get("pairs", {})
    row = {pair_id: i for i, pair_id in enumerate(cached)}
    wanted_ids = {p.id for p in wanted}
    fingerprints = {
        p.id: _fingerprint(p, root) for p in all_pairs if p.id in wanted_ids or p.id in cached
    }
    valid = {i for i, fp in cached.items() if fingerprints.get(i) == fp}
    todo = [p for p in wanted if p.id not in valid]
    changed = sum(p.id in cached for p in todo)
    notes = (
        [f"features {split}: {changed} pair(s) recomputed because their images changed"]
        if changed
        else []
    )
    if not todo and len(valid) == len(cached):
        return path, 0, len(wanted), notes
    new: dict[str, dict[str, np.ndarray]] = {}
    if todo:
        computed = extractor(todo, f"features {split}", progress)
        new = {p.id: {n: a[k] for n, a in computed.items()} for k, p in enumerate(todo)}
    # Keep the dataset's order, so ids line up with the reader's pairs for any later consumer.
    order = [p.id for p in all_pairs if p.id in new or p.id in valid]
    if not order:  # nothing wanted and nothing cached still valid: no file is the honest state
        path.unlink(missing_ok=True)
        (folder / f"{split}.manifest.json").unlink(missing_ok=True)
        return path, 0, 0, notes

    def grid(pair_id: str, name: str) -> np.ndarray:
        return new[pair_id][name] if pair_id in new else arrays[name][row[pair_id]]

    names = list(next(iter(new.values()))) if new else [k for k in arrays if k != "ids"]
    out = {name: np.stack([grid(i, name) for i in order]) for name in names}
    out["ids"] = np.array(order)
    tmp = folder / f"{split}.tmp.npz"
    np.savez(tmp, **out)
    tmp.replace(path)
    preprocess = extractor.preprocess or manifest.get("preprocess", {})
    _write_json(
        folder / f"{split}.manifest.json",
        {
            "settings_hash": extractor.settings_hash,
            "preprocess": preprocess,
            "pairs": {i: fingerprints[i] for i in order},
        },
    )
    return path, len(todo), len(wanted) - len(todo), notes


def prepare_dataset(
    root: str | Path,
    splits: list[str] | tuple[str, ...] | None = None,
    analysis: AnalysisConfig | None = None,
    backbone: str | None = None,
    weights: str | None = None,
    device: str = "auto",
    batch_size: int = 32,
    format: str = "auto",
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    input_size: int | None = None,
    levels: Sequence[int] = (),
) -> PrepareSummary:
    """Fill ``<root>/cache`` with the cluster analysis of every pair and, when ``backbone`` is
    given (e.g. "efficientnet_lite0"), backbone grid features of every image.

    limit: only the first N pairs of each split (a quick check). progress(stage, done, total).
    input_size: square side images are resized to before the backbone (default: the backbone's
    own, 224 for efficientnet_lite0 and resnet101); 448 gives lite0 a 14 x 14 grid. levels:
    strides (8, 16, 32) whose feature maps are cached too. Either makes its own cache folder
    (:func:`feature_folder`). Cached entries are reused unless their settings or images changed
    (module docstring).
    """
    root = Path(root)
    config = (analysis or AnalysisConfig()).validate()
    chosen = list(splits) if splits else available_splits(root, format)
    if not chosen:
        raise DataError(f"{root}: no train/val/test annotations found to prepare")
    cache = root / "cache"
    invalidated: list[str] = []
    analysis_dir = cache / "analysis"
    _fresh(analysis_dir, {"analysis": to_dict(config), "version": CACHE_VERSION}, invalidated)
    computed = reused = features_computed = features_reused = 0
    counts: dict[str, int] = {}
    feature_files: list[Path] = []
    notes: list[str] = []
    extractor: _Extractor | None = None
    if backbone:
        from ..extras import require_training_extra

        # Before any work, and before the weights package or torch is looked for: the grids
        # are for learned models, which need the extra anyway.
        require_training_extra(f"--backbone {backbone}")
        feature_settings = _feature_settings(backbone, weights, input_size, levels)
        folder = cache / feature_folder(backbone, input_size, levels)
        _fresh(folder, feature_settings, invalidated)
        extractor = _Extractor(
            folder, backbone, weights, device, batch_size, input_size, feature_settings, levels
        )
    for split in chosen:
        data = load_dataset(root, split, format, require_images=True)
        pairs = list(data.pairs[:limit] if limit else data.pairs)
        counts[split] = len(pairs)
        out = analysis_dir / split
        out.mkdir(parents=True, exist_ok=True)
        manifest_path = analysis_dir / f"{split}.manifest.json"
        manifest: dict[str, Fingerprint] = _read_json(manifest_path) or {}
        changed = 0
        for index, pair in enumerate(pairs):
            target = out / f"{pair.id}.npz"
            fingerprint = _fingerprint(pair, root)
            # Entries from before manifests existed (no record) are trusted, as they were then.
            stale = pair.id in manifest and manifest[pair.id] != fingerprint
            changed += stale and target.is_file()
            if target.is_file() and not stale:
                reused += 1
            else:
                # Write to a temporary name first: an interrupted run never leaves half an entry.
                tmp = out / f"{pair.id}.tmp.npz"
                np.savez_compressed(tmp, **analysis_entry(pair, config))
                tmp.replace(target)
                computed += 1
            manifest[pair.id] = fingerprint
            if progress:
                progress(f"analysis {split}", index + 1, len(pairs))
        _write_json(manifest_path, manifest)
        if changed:
            notes.append(
                f"analysis {split}: {changed} pair(s) recomputed because their images changed"
            )
        if extractor is not None:
            path, done, kept, why = _update_features(
                extractor, split, list(data.pairs), pairs, root, progress
            )
            features_computed += done
            features_reused += kept
            notes.extend(why)
            feature_files.append(path)
    if extractor is not None:
        extractor.release()
    return PrepareSummary(
        root,
        counts,
        computed,
        reused,
        invalidated,
        feature_files,
        features_computed,
        features_reused,
        notes,
    )
