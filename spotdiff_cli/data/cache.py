"""Preprocessing cache: what training needs per pair, computed once per dataset.

``prepare_dataset`` writes, under ``<dataset>/cache/``:

    analysis/settings.json          the AnalysisConfig the entries were made with
    analysis/<split>/<id>.npz       labels (H, W) uint16: 0 = background, k = cluster k's pixels
                                    (cluster ids in ``ids``); bboxes (K, 4) int32 (x, y, w, h);
                                    features (K, 4) float32 = g(z) of Spot-the-diff §3.1 (bbox
                                    length, width, area, active pixels); salience (K,);
                                    n_active (K,); alignment (dx, dy); scale; lighting_changed
    features-<backbone>/settings.json   backbone name, weights file, input size, mean/std
    features-<backbone>/<split>.npz     before, after: (N, C, h, w) float16 grids; ids (N,)

Masks are stored at the analysis' working resolution (``scale`` maps back to image pixels).
A cache whose ``settings.json`` differs from the current settings is stale: it is deleted and
rebuilt (that is the invalidation rule; nothing else is compared). Within a valid cache only
missing entries are computed, so an interrupted ``prepare`` resumes where it stopped.
torch/timm are imported only when backbone features are asked for.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import AnalysisConfig, to_dict
from ..errors import DataError
from .readers import DatasetPair, available_splits, load_dataset

CACHE_VERSION = 1


@dataclass
class PrepareSummary:
    root: Path
    splits: dict[str, int]  # pairs per split
    computed: int  # analysis entries computed now
    reused: int  # analysis entries found valid
    invalidated: list[str] = field(default_factory=list)  # cache parts deleted as stale
    feature_files: list[Path] = field(default_factory=list)


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


def _load_frames(pair: DatasetPair) -> tuple[Any, Any]:
    from ..frames.image import load_image
    from ..types import Frame

    return Frame(load_image(pair.before), str(pair.before)), Frame(load_image(pair.after), str(pair.after))  # type: ignore[arg-type]


def analysis_entry(pair: DatasetPair, config: AnalysisConfig) -> dict[str, np.ndarray]:
    """Run the analysis of one pair and pack its clusters as arrays (the npz entry)."""
    from ..analysis import analyse_pair, make_pair

    before, after = _load_frames(pair)
    result = analyse_pair(make_pair(before, after), config)
    h, w = result.mask.active.shape
    labels = np.zeros((h, w), np.uint16)
    for cluster in result.clusters:
        # Clusters do not overlap (DBSCAN labels each pixel once); later ids win if they ever do.
        labels[cluster.mask] = cluster.id
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


def cluster_masks(entry: dict[str, np.ndarray]) -> np.ndarray:
    """(K, H, W) bool masks from a cached label image, in the order of ``entry['ids']``."""
    return entry["labels"][None] == entry["ids"][:, None, None].astype(np.uint16)


def load_features(root: str | Path, split: str, backbone: str = "efficientnet_lite0") -> dict[str, np.ndarray]:
    """Cached backbone grids of a split: ``before``/``after`` (N, C, h, w) float16, ``ids`` (N,)."""
    path = Path(root) / "cache" / f"features-{backbone}" / f"{split}.npz"
    if not path.is_file():
        raise DataError(f"{path}: not in the cache; run `spotdiff data prepare {root} --backbone {backbone}`")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _backbone_features(
    pairs: list[DatasetPair], backbone: str, weights: str | None, device: str, batch_size: int,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    import cv2
    import torch

    from ..captioners.backbones import create_backbone
    from ..device import resolve_device
    from ..frames.image import load_image

    model, info = create_backbone(backbone, weights=weights)
    dev = resolve_device(device)
    model = model.to(dev)
    mean = torch.tensor(info.mean, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(info.std, device=dev).view(1, 3, 1, 1)
    height, width = info.input_size
    paths = [p for pair in pairs for p in (pair.before, pair.after)]
    grids = []
    with torch.inference_mode():
        for start in range(0, len(paths), batch_size):
            batch = np.stack([
                cv2.resize(load_image(p), (width, height), interpolation=cv2.INTER_AREA)  # type: ignore[arg-type]
                for p in paths[start : start + batch_size]
            ])
            x = torch.from_numpy(batch).to(dev).permute(0, 3, 1, 2).float().div(255)
            grids.append(model((x - mean) / std).to("cpu", torch.float16).numpy())
            if progress:
                progress("features", min(start + batch_size, len(paths)), len(paths))
    grid = np.concatenate(grids)
    settings = {"backbone": backbone, "weights": info.weights, "input_size": list(info.input_size),
                "mean": list(info.mean), "std": list(info.std), "version": CACHE_VERSION}
    return {"before": grid[0::2], "after": grid[1::2], "ids": np.array([p.id for p in pairs])}, settings


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
) -> PrepareSummary:
    """Fill ``<root>/cache`` with the cluster analysis of every pair and, when ``backbone`` is
    given (e.g. "efficientnet_lite0"), backbone grid features of every image.

    limit: only the first N pairs of each split (a quick check). progress(stage, done, total).
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
    computed = reused = 0
    counts: dict[str, int] = {}
    feature_files: list[Path] = []
    for split in chosen:
        data = load_dataset(root, split, format, require_images=True)
        pairs = list(data.pairs[:limit] if limit else data.pairs)
        counts[split] = len(pairs)
        out = analysis_dir / split
        out.mkdir(parents=True, exist_ok=True)
        for index, pair in enumerate(pairs):
            target = out / f"{pair.id}.npz"
            if target.is_file():
                reused += 1
            else:
                # Write to a temporary name first: an interrupted run never leaves half an entry.
                tmp = out / f"{pair.id}.tmp.npz"
                np.savez_compressed(tmp, **analysis_entry(pair, config))
                tmp.replace(target)
                computed += 1
            if progress:
                progress(f"analysis {split}", index + 1, len(pairs))
        if backbone:
            feats_dir = cache / f"features-{backbone}"
            arrays, settings = _backbone_features(pairs, backbone, weights, device, batch_size, progress)
            if split == chosen[0]:
                _fresh(feats_dir, settings, invalidated)
            path = feats_dir / f"{split}.npz"
            np.savez(path, **arrays)
            feature_files.append(path)
    return PrepareSummary(root, counts, computed, reused, invalidated, feature_files)
