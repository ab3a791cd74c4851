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
from ..analysis.diff import compute_change_mask
from ..config import AnalysisConfig, VideoConfig

THUMB_SIZE = 320


def thumbnail(pixels: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> the same shrunk to a 320 px long side."""
    return resize_for_analysis(pixels, THUMB_SIZE)[0]


def changed_share(before_thumb: np.ndarray, after_thumb: np.ndarray, watch_thumb: np.ndarray | None, analysis: AnalysisConfig) -> float:
    """Share of (watched) thumbnail pixels that changed after lighting correction."""
    valid = np.ones(before_thumb.shape[:2], dtype=bool) if watch_thumb is None else watch_thumb
    if not valid.any():
        return 0.0
    mask, _ = compute_change_mask(before_thumb, after_thumb, valid, analysis)
    return mask.changed_fraction


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
