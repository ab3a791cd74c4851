"""What each sample is compared with, and the cheap first look that decides whether a pair is
worth a full analysis (Spot-the-diff §2.1: a lower and an upper threshold on pair difference).

A night of footage is mostly nothing: the first look runs on 320 px thumbnails (a millisecond
or two) and only pairs above the lower threshold get the full analysis and a caption.
"""

from __future__ import annotations

from collections import deque

import cv2
import numpy as np

from ..analysis import resize_for_analysis
from ..analysis.diff import blurred_once, pixel_distance
from ..config import AnalysisConfig, VideoConfig

THUMB_SIZE = 320


def thumbnail(pixels: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> the same shrunk to a 320 px long side, read-only: a sample's
    thumbnail is the after image of one first look and the before image of the next, and
    ``changed_share`` blurs it once for both (``analysis.memo``)."""
    thumb = resize_for_analysis(pixels, THUMB_SIZE)[0]
    if thumb is pixels and pixels.flags.writeable:
        thumb = thumb.copy()  # already small: the caller's array stays as it was
    thumb.flags.writeable = False
    return thumb


def watched_box(watch: np.ndarray) -> tuple[slice, slice]:
    """The bounding box of the watched pixels, as slices: the first look inspects only that
    part of the frame, so a small ``--roi`` is looked at in detail rather than as a few pixels
    of a 320 px thumbnail of the whole frame."""
    ys, xs = np.nonzero(watch)
    if len(ys) == 0:
        return slice(None), slice(None)
    return slice(int(ys.min()), int(ys.max()) + 1), slice(int(xs.min()), int(xs.max()) + 1)


def relative_to_watched(analysis: AnalysisConfig, watch: np.ndarray) -> AnalysisConfig:
    """Make the analysis' size thresholds shares of the *watched* area rather than of the whole
    frame. ``min_cluster_fraction`` and DBSCAN's ``min_samples`` are both "this share of the
    picture"; with ``--roi``/``--mask`` the picture the user asked about is the watched area, so
    a car entering a 210x127 box of a 1280x720 frame need not cover 0.05 % of the whole frame
    (a third of the box's top edge) before it counts. eps (how far apart pixels of one object
    may be) stays in frame pixels: objects are as big as they are."""
    share = float(watch.mean())
    if share >= 1.0:
        return analysis
    import dataclasses

    return dataclasses.replace(
        analysis,
        min_cluster_fraction=analysis.min_cluster_fraction * share,
        min_samples=max(1, int(round(analysis.min_samples * share))),
    )


def changed_share(
    before_thumb: np.ndarray,
    after_thumb: np.ndarray,
    watch_thumb: np.ndarray | None,
    analysis: AnalysisConfig,
) -> float:
    """Share of (watched) thumbnail pixels whose blurred RGB distance exceeds delta.

    Raw, without the lighting correction: the correction only ever explains differences away,
    so a pair below the lower threshold raw is below it corrected too; and a pair where only
    the light changed should reach the full analysis, which corrects it and reports "the
    lighting changed". Skipping the fit here saves ~15 ms on every pair that changed.
    """
    changed = changed_pixels(before_thumb, after_thumb, watch_thumb, analysis)
    if watch_thumb is None:
        return float(changed.sum()) / changed.size
    if not watch_thumb.any():
        return 0.0
    return float(changed.sum()) / int(watch_thumb.sum())


def changed_pixels(
    before_thumb: np.ndarray,
    after_thumb: np.ndarray,
    watch_thumb: np.ndarray | None,
    analysis: AnalysisConfig,
) -> np.ndarray:
    """(h, w) bool over the thumbnail: where the first look sees a change (in the watched
    area)."""
    raw = pixel_distance(
        blurred_once(before_thumb, analysis.blur_sigma),
        blurred_once(after_thumb, analysis.blur_sigma),
    )
    changed = raw > analysis.delta
    return changed if watch_thumb is None else changed & watch_thumb


class Comparator:
    """Yields, for each new sample, the frame to compare it with (or None for the first).

    previous: the last sample. reference: one fixed image. background: the per-pixel median of
    the last N samples, so a change that stays becomes background after N/2 samples and a car
    that parks is reported once, when it arrived.
    """

    def __init__(self, config: VideoConfig, reference: np.ndarray | None = None) -> None:
        self.mode = config.compare
        self.reference = reference
        self.previous: np.ndarray | None = None
        self.history: deque[np.ndarray] = deque(maxlen=config.background_samples)

    def baseline(self) -> np.ndarray | None:
        if self.mode == "reference":
            return self.reference
        if self.mode == "background":
            if not self.history:
                return None
            if len(self.history) == 1:
                return self.history[0]
            return np.median(np.stack(self.history), axis=0).astype(np.uint8)
        return self.previous

    def push(self, pixels: np.ndarray) -> None:
        self.previous = pixels
        if self.mode == "background":
            self.history.append(pixels)


def resize_like(image: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Bring a reference image to the frames' size."""
    if image.shape[:2] == like.shape[:2]:
        return image
    return cv2.resize(image, (like.shape[1], like.shape[0]), interpolation=cv2.INTER_AREA)
