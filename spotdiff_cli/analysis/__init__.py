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
from .viewpoint import AlignedView, follow_camera, follows_camera

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


def _drop_relit(
    before: np.ndarray, after: np.ndarray, clusters: list, config: AnalysisConfig
) -> tuple[list, int]:
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


def analyse_pair(
    pair: Pair,
    config: AnalysisConfig | None = None,
    watch: np.ndarray | None = None,
    still_background: float | None = None,
) -> Analysis:
    """Run the whole analysis on a pair of equal-size frames (use ``make_pair`` first).

    watch: optional (H, W) bool at the original size, True where changes count (``--roi`` /
        ``--mask``); changes elsewhere (trees, clocks, burned-in timestamps) are ignored, and
        only the watched area (plus a margin) is aligned, differenced and clustered.
    still_background: a camera move counts only when more than this share of the view changed
        (``viewpoint.follow_camera``); None: no such rule (a still pair).
    Returns an ``Analysis`` in working-resolution coordinates (multiply by ``scale`` for the
    original image), clusters sorted by salience.
    """
    config = (config or AnalysisConfig()).validate()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    before, scale = resize_for_analysis(pair.before.pixels, config.work_size)
    after, _ = resize_for_analysis(pair.after.pixels, config.work_size)
    h, w = before.shape[:2]
    watched = None
    if watch is not None:
        if watch.shape != pair.before.pixels.shape[:2]:
            raise UsageError(
                f"region mask is {watch.shape[1]}x{watch.shape[0]} but the frames are {pair.before.width}x{pair.before.height}"
            )
        watched = (
            watch
            if watch.shape == (h, w)
            else cv2.resize(watch.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0
        )
    eps, min_samples = config.scaled_dbscan(h, w)
    ys, xs = analysis_window(watched, eps, config.max_shift)
    t1 = time.perf_counter()
    timings["resize"] = t1 - t0

    # Everything below runs on the window only; results are placed back into full-frame arrays
    # so clusters, boxes, masks and salience read exactly as a whole-frame analysis gives them.
    window_after = after[ys, xs]
    alignment = estimate_alignment(before[ys, xs], window_after, config.align, config.max_shift)
    aligned_window, valid_window = apply_shift(window_after, alignment)
    if watched is not None:
        valid_window = valid_window & watched[ys, xs]
    t2 = time.perf_counter()
    timings["align"] = t2 - t1

    mask_window, corrected_window = compute_change_mask(
        before[ys, xs], aligned_window, valid_window, config
    )
    t3 = time.perf_counter()
    timings["mask"] = t3 - t2

    scene_changed = mask_window.changed_fraction > config.scene_fraction
    labels_window = np.zeros(mask_window.active.shape, np.int32)
    if not scene_changed:
        labels_window = grid_dbscan(mask_window.active, eps, min_samples)
    after_aligned, corrected, valid = (
        _placed(after, aligned_window, ys, xs),
        _placed(after, corrected_window, ys, xs),
        _placed(np.zeros((h, w), bool), valid_window, ys, xs),
    )
    mask = dataclasses.replace(
        mask_window,
        active=_placed(np.zeros((h, w), bool), mask_window.active, ys, xs),
        distance=_placed(np.zeros((h, w), np.float32), mask_window.distance, ys, xs),
    )
    clusters: list = []
    if not scene_changed:
        labels = _placed(np.zeros((h, w), np.int32), labels_window, ys, xs)
        min_pixels = max(min_samples, int(config.min_cluster_fraction * h * w))
        clusters = clusters_from_labels(labels, mask, min_pixels=min_pixels)
        clusters, relit_pixels = _drop_relit(before, corrected, clusters, config)
        # A sizeable relit area is itself worth saying, even when the global gain did not move.
        if relit_pixels > 0.02 * h * w and not mask.lighting_changed:
            mask = dataclasses.replace(mask, lighting_changed=True)
    t4 = time.perf_counter()
    timings["cluster"] = t4 - t3

    camera = None
    if follows_camera(config) and watched is None and (clusters or scene_changed):
        # Something is left that a shift does not explain: did the camera itself move? (Quiet
        # pairs of a fixed camera never get here, so they pay nothing for the question.)
        shifted = AlignedView(alignment, after_aligned, corrected, valid, mask, clusters)
        followed = follow_camera(before, after, shifted, config, _drop_relit, still_background)
        if followed is not None:
            camera, alignment = followed.motion, followed.alignment
            after_aligned, corrected, valid = followed.after, followed.corrected, followed.valid
            mask, clusters = followed.mask, followed.clusters
            scene_changed = scene_changed and camera is None
        timings["camera"] = time.perf_counter() - t4

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
        original=pair,
        config=config,
        camera=camera,
    )


# The window keeps this share of the frame or more: then the whole frame is analysed (cropping
# saves little and the shift search keeps all the texture it can use).
_WHOLE_FRAME_SHARE = 0.6


def window_margin(eps: float, max_shift: int) -> int:
    """Working pixels the analysis window adds around the watched box (:func:`analysis_window`)."""
    return int(np.ceil(max(eps + 2, 4 * max_shift, 32)))


def analysis_window(watched: np.ndarray | None, eps: float, max_shift: int) -> tuple[slice, slice]:
    """The part of the (working-size) frame the analysis needs: the watched pixels' bounding
    box grown by a margin, or the whole frame.

    The margin keeps the window exact: DBSCAN's neighbour counts use zero padding, so active
    pixels more than eps from the window's edge cluster exactly as in the whole frame; the blur
    needs 3 sigma; and the shift search gets texture around a small ROI (at least 32 px and four
    times the largest shift). A car entering a 210x127 box of a 720p motorway frame is analysed
    on about a tenth of the pixels.
    """
    if watched is None:
        return slice(None), slice(None)
    h, w = watched.shape
    rows, cols = np.flatnonzero(watched.any(axis=1)), np.flatnonzero(watched.any(axis=0))
    if rows.size == 0:
        return slice(None), slice(None)
    margin = window_margin(eps, max_shift)
    y0, y1 = max(0, rows[0] - margin), min(h, rows[-1] + 1 + margin)
    x0, x1 = max(0, cols[0] - margin), min(w, cols[-1] + 1 + margin)
    if (y1 - y0) * (x1 - x0) >= _WHOLE_FRAME_SHARE * h * w:
        return slice(None), slice(None)
    return slice(int(y0), int(y1)), slice(int(x0), int(x1))


def _placed(full: np.ndarray, window: np.ndarray, ys: slice, xs: slice) -> np.ndarray:
    """``window`` written into (a copy of) ``full`` at ``ys, xs``; ``window`` itself when the
    window is the whole frame, and ``full`` itself when ``window`` is its own view there (an
    ROI pair's after frame that no shift or light correction changed): no copy, and the frame
    stays the one the detector's cache knows."""
    if window.shape == full.shape:
        return window
    view = full[ys, xs]
    if window.__array_interface__ == view.__array_interface__:
        return full
    out = full.copy()
    out[ys, xs] = window
    return out
