"""Camera-shift alignment (Spot-the-diff §3.1: "iterating over a small range of vertical and
horizontal shifts to find the shift with minimum corresponding L2-distance").

Both methods work on exposure-normalised grey images (zero mean, unit variance), so an
auto-exposure jump does not pull the estimate. The exhaustive search evaluates every integer
shift in [-max_shift, max_shift]^2 on a sub-sampled pixel grid (the minimum of a smooth L2
surface does not need every pixel) and refines the minimum to sub-pixel precision with a
parabola through its neighbours. Phase correlation (OpenCV) is the fast path for large ranges.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..types import Alignment
from .memo import memoised
from .order_stats import median

# About this many pixels are compared per candidate shift: enough for a stable minimum at any
# resolution, few enough that 169 candidates cost a few milliseconds.
_SAMPLES_PER_SHIFT = 40_000
# The coarse level only has to land within a pixel of the minimum that the fine level then
# refines: a quarter of the samples (every other pixel of the half-size image) found the same
# final shift on all 275 pairs of the room, car-park and motorway clips (every 5th frame, 640
# px, the default range of 6), and the search took 5.3-5.7 ms a pair instead of 6.9-7.9.
_COARSE_SAMPLES = 10_000
# Squared differences (in robust-sigma units) above this count as "changed content" at any shift.
_TRUNCATE = 4.0
# Shifts smaller than this (pixels) are treated as no shift: resampling would only blur.
_MIN_SHIFT = 0.25


def _normalised_grey(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> (H, W) float32 band-pass detail (fine blur minus coarse blur), scaled
    by its robust spread. Removing the coarse layer makes it blind to exposure and to the broad
    brightness of big objects; what is left - edges, texture, road markings - is what pins a
    shift down."""
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    detail = cv2.GaussianBlur(grey, (0, 0), 1.0) - _coarse(grey)
    spread = 1.4826 * float(median(np.abs(detail[::4, ::4]))) or float(detail.std()) or 1.0
    return detail / spread


def _coarse(grey: np.ndarray) -> np.ndarray:
    """(H, W) float32 -> its coarse layer: about a Gaussian blur of sigma 8, taken at a quarter
    of the size (an area average of 4x4 cells, a blur of sigma 1.9 there, back up linearly)."""
    h, w = grey.shape
    if min(h, w) < 64:
        return cv2.GaussianBlur(grey, (0, 0), 8.0)
    small = cv2.resize(grey, ((w + 3) // 4, (h + 3) // 4), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), 1.9)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def _parabola_offset(left: float, centre: float, right: float) -> float:
    """Sub-pixel offset of the minimum of a parabola through three equally spaced samples."""
    denom = left - 2.0 * centre + right
    if denom <= 1e-12:
        return 0.0
    return float(np.clip(0.5 * (left - right) / denom, -0.5, 0.5))


def _scores(
    a: np.ndarray,
    b: np.ndarray,
    centre: tuple[int, int],
    radius: int,
    margin: int,
    samples: int = _SAMPLES_PER_SHIFT,
) -> np.ndarray:
    """Truncated mean squared difference of ``a`` shifted by every (dx, dy) within ``radius`` of
    ``centre`` against ``b``, on a sub-sampled grid that stays ``margin`` px inside both images.
    Returns (2r+1, 2r+1) scores indexed [dy, dx]."""
    h, w = b.shape
    cx, cy = centre
    stride = max(1, int(np.sqrt((h - 2 * margin) * (w - 2 * margin) / samples)))
    ref = b[margin : h - margin : stride, margin : w - margin : stride]
    scores = np.empty((2 * radius + 1, 2 * radius + 1), dtype=np.float64)
    work = np.empty_like(ref)
    for iy, dy in enumerate(range(cy - radius, cy + radius + 1)):
        for ix, dx in enumerate(range(cx - radius, cx + radius + 1)):
            moved = a[
                margin + dy : h - margin + dy : stride, margin + dx : w - margin + dx : stride
            ]
            # Truncated L2: a moving object costs the same at every shift instead of dragging
            # the minimum towards where it overlaps itself. In place: one array per shift, not
            # three (the same values as np.minimum((moved - ref) ** 2, _TRUNCATE)).
            d = np.subtract(moved, ref, out=work)
            np.multiply(d, d, out=d)
            np.minimum(d, _TRUNCATE, out=d)
            scores[iy, ix] = float(np.mean(d))
    return scores


def _grey(image: np.ndarray) -> np.ndarray:
    return memoised(image, "band-pass grey", _normalised_grey)


def search_shift(before: np.ndarray, after: np.ndarray, max_shift: int) -> Alignment:
    """Exhaustive search over shifts minimising the (truncated) mean squared difference.

    before, after: (H, W, 3) uint8 RGB of equal size.
    Returns the shift (dx, dy) with after(x + dx, y + dy) ~ before(x, y).

    Coarse to fine: every shift of the range is tried at half resolution (the paper's
    exhaustive search, a quarter of the pixels and a quarter of the shifts), then the best is
    refined over +-1 px at full resolution and to sub-pixel precision with a parabola. The
    band-pass detail survives halving, so the coarse minimum is the fine one's neighbourhood.
    """
    b = _grey(before)
    a = _grey(after)
    h, w = b.shape
    m = int(max_shift)
    if m <= 0 or h <= 2 * m + 8 or w <= 2 * m + 8:
        return Alignment(0.0, 0.0, float(np.mean(np.minimum((a - b) ** 2, _TRUNCATE))), "search")
    centre = (0, 0)
    if m >= 3 and min(h, w) >= 64:
        half_m = (m + 1) // 2
        a2 = cv2.resize(a, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
        b2 = cv2.resize(b, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
        coarse = _scores(a2, b2, (0, 0), half_m, half_m + 1, _COARSE_SAMPLES)
        iy, ix = np.unravel_index(int(np.argmin(coarse)), coarse.shape)
        centre = (
            int(np.clip(2 * (ix - half_m), -m + 1, m - 1)),
            int(np.clip(2 * (iy - half_m), -m + 1, m - 1)),
        )
        fine = _scores(a, b, centre, 1, m + 1)
        radius = 1
    else:
        fine = _scores(a, b, (0, 0), m, m + 1)
        radius = m
    iy, ix = np.unravel_index(int(np.argmin(fine)), fine.shape)
    dx, dy = float(centre[0] + ix - radius), float(centre[1] + iy - radius)
    # Sub-pixel refinement, only where the minimum has neighbours on both sides.
    last = 2 * radius
    if 0 < ix < last:
        dx += _parabola_offset(fine[iy, ix - 1], fine[iy, ix], fine[iy, ix + 1])
    if 0 < iy < last:
        dy += _parabola_offset(fine[iy - 1, ix], fine[iy, ix], fine[iy + 1, ix])
    return Alignment(*_snap(dx, dy), float(fine[iy, ix]), "search")


def phase_shift(before: np.ndarray, after: np.ndarray, max_shift: int) -> Alignment:
    """Phase correlation (cv2.phaseCorrelate); shifts beyond ``max_shift`` are not trusted and
    reported as no shift, since a fixed camera does not jump that far."""
    b = _grey(before)
    a = _grey(after)
    window = cv2.createHanningWindow((b.shape[1], b.shape[0]), cv2.CV_32F)
    (dx, dy), _response = cv2.phaseCorrelate(b, a, window)
    if abs(dx) > max_shift or abs(dy) > max_shift:
        dx, dy = 0.0, 0.0
    dx, dy = _snap(dx, dy)
    shifted, valid = apply_shift(after, Alignment(dx, dy, 0.0, "phase"))
    score = float(np.mean(((_normalised_grey(shifted) - b) ** 2)[valid]))
    return Alignment(dx, dy, score, "phase")


def _snap(dx: float, dy: float) -> tuple[float, float]:
    dx = 0.0 if abs(dx) < _MIN_SHIFT else round(dx, 2)
    dy = 0.0 if abs(dy) < _MIN_SHIFT else round(dy, 2)
    return dx, dy


def estimate_alignment(
    before: np.ndarray, after: np.ndarray, method: str, max_shift: int
) -> Alignment:
    """Dispatch on ``method``: "search" (paper), "phase" (fast path) or "none"."""
    if method == "none" or max_shift == 0:
        return Alignment(0.0, 0.0, 0.0, "none")
    if method == "phase":
        return phase_shift(before, after, max_shift)
    return search_shift(before, after, max_shift)


def apply_shift(image: np.ndarray, alignment: Alignment) -> tuple[np.ndarray, np.ndarray]:
    """Move ``image`` (the after frame) onto the before frame's grid.

    Returns the shifted image (H, W, 3) uint8 and ``valid`` (H, W) bool: False on the border
    strip that the shift uncovered, where no comparison is possible.
    """
    h, w = image.shape[:2]
    valid = np.ones((h, w), dtype=bool)
    if alignment.is_identity:
        return image, valid
    dx, dy = alignment.dx, alignment.dy
    matrix = np.float32([[1, 0, -dx], [0, 1, -dy]])
    shifted = cv2.warpAffine(
        image, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    # Border strips are ceil(|shift|) wide.
    cx, cy = int(np.ceil(abs(dx))), int(np.ceil(abs(dy)))
    if cx:
        if dx > 0:
            valid[:, w - cx :] = False
        else:
            valid[:, :cx] = False
    if cy:
        if dy > 0:
            valid[h - cy :, :] = False
        else:
            valid[:cy, :] = False
    return shifted, valid
