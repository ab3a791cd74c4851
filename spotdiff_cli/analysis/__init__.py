"""Pixel and object-level analysis of a pair (Spot-the-diff §3.1): resize -> align -> mask ->
clusters. ``analyse_pair`` is the one entry point; each stage is a plain function in its own
module (align.py, diff.py, cluster.py)."""

from __future__ import annotations

import dataclasses
import time

import cv2
import numpy as np

from ..config import AnalysisConfig
from ..errors import UsageError
from ..types import Analysis, Frame, Pair
from .align import apply_shift, estimate_alignment
from .cluster import clusters_from_labels, grid_dbscan
from .diff import compute_change_mask, is_relit

__all__ = ["analyse_pair", "make_pair", "resize_for_analysis"]


def make_pair(before: Frame, after: Frame) -> Pair:
    """Pair two frames, resizing the after frame to the before frame's size if they differ (and
    saying so in the pair's notes, which the report repeats)."""
    if before.pixels.shape[:2] == after.pixels.shape[:2]:
        return Pair(before, after)
    h, w = before.pixels.shape[:2]
    ah, aw = after.pixels.shape[:2]
    interp = cv2.INTER_AREA if ah * aw > h * w else cv2.INTER_LINEAR
    resized = cv2.resize(after.pixels, (w, h), interpolation=interp)
    note = f"the after image ({aw}x{ah}) was resized to {w}x{h} to match the before image"
    if abs(aw / ah - w / h) > 0.02:
        note += "; their aspect ratios differ, so shapes near the edges may be distorted"
    return Pair(before, Frame(resized, after.source, after.timestamp, after.index), (note,))


def resize_for_analysis(image: np.ndarray, work_size: int) -> tuple[np.ndarray, float]:
    """Shrink so the long side is ``work_size`` (never enlarge). Returns the image and the scale
    factor original/working."""
    h, w = image.shape[:2]
    if work_size <= 0 or max(h, w) <= work_size:
        return image, 1.0
    scale = max(h, w) / work_size
    size = (max(1, round(w / scale)), max(1, round(h / scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA), scale


def _drop_relit(before: np.ndarray, after: np.ndarray, clusters: list, config: AnalysisConfig) -> tuple[list, int]:
    """Remove clusters where only the light changed; renumber the rest 0..K-1 in salience order.
    Returns the kept clusters and the number of pixels dropped."""
    kept, dropped = [], 0
    for cluster in clusters:
        x, y, w, h = cluster.bbox
        pad = 3
        ys, xs = slice(max(0, y - pad), y + h + pad), slice(max(0, x - pad), x + w + pad)
        region = cv2.dilate(cluster.mask[ys, xs].astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
        if is_relit(before[ys, xs], after[ys, xs], region, config.relit_correlation):
            dropped += cluster.n_active
        else:
            kept.append(cluster)
    return [dataclasses.replace(c, id=i) for i, c in enumerate(kept)], dropped


def analyse_pair(pair: Pair, config: AnalysisConfig | None = None, watch: np.ndarray | None = None) -> Analysis:
    """Run the whole analysis on a pair of equal-size frames (use ``make_pair`` first).

    watch: optional (H, W) bool at the original size, True where changes count (``--roi`` /
        ``--mask``); changes elsewhere (trees, clocks, burned-in timestamps) are ignored.
    Returns an ``Analysis`` in working-resolution coordinates (multiply by ``scale`` for the
    original image), clusters sorted by salience.
    """
    config = (config or AnalysisConfig()).validate()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    before, scale = resize_for_analysis(pair.before.pixels, config.work_size)
    after, _ = resize_for_analysis(pair.after.pixels, config.work_size)
    t1 = time.perf_counter()
    timings["resize"] = t1 - t0

    alignment = estimate_alignment(before, after, config.align, config.max_shift)
    after_aligned, valid = apply_shift(after, alignment)
    if watch is not None:
        if watch.shape != pair.before.pixels.shape[:2]:
            raise UsageError(f"region mask is {watch.shape[1]}x{watch.shape[0]} but the frames are {pair.before.width}x{pair.before.height}")
        small = cv2.resize(watch.astype(np.uint8), (before.shape[1], before.shape[0]), interpolation=cv2.INTER_NEAREST)
        valid = valid & (small > 0)
    t2 = time.perf_counter()
    timings["align"] = t2 - t1

    mask, corrected = compute_change_mask(before, after_aligned, valid, config)
    t3 = time.perf_counter()
    timings["mask"] = t3 - t2

    h, w = mask.active.shape
    scene_changed = mask.changed_fraction > config.scene_fraction
    clusters: list = []
    if not scene_changed:
        eps, min_samples = config.scaled_dbscan(h, w)
        labels = grid_dbscan(mask.active, eps, min_samples)
        min_pixels = max(min_samples, int(config.min_cluster_fraction * h * w))
        clusters = clusters_from_labels(labels, mask, min_pixels=min_pixels)
        clusters, relit_pixels = _drop_relit(before, corrected, clusters, config)
        # A sizeable relit area is itself worth saying, even when the global gain did not move.
        if relit_pixels > 0.02 * h * w and not mask.lighting_changed:
            mask = dataclasses.replace(mask, lighting_changed=True)
    timings["cluster"] = time.perf_counter() - t3

    analysed = Pair(
        Frame(before, pair.before.source, pair.before.timestamp, pair.before.index),
        Frame(after_aligned, pair.after.source, pair.after.timestamp, pair.after.index),
        pair.notes,
    )
    return Analysis(
        pair=analysed,
        alignment=alignment,
        mask=mask,
        clusters=tuple(clusters),
        corrected_after=corrected,
        valid=valid,
        scale=scale,
        scene_changed=scene_changed,
        timings=timings,
    )
