"""The pixel-difference mask (Spot-the-diff §3.1): a pixel is active when the RGB L2 distance
between the two (aligned) images exceeds delta.

Before differencing, a global photometric change (auto-exposure, white balance, a cloud) is
removed by fitting, per channel, a robust gain from the after image to the before image. A
trimmed fit is used rather than histogram matching because a large new object (a white car in a
dark lot) shifts a histogram but is only an outlier to a gain fitted on the whole frame.

A local change of light (sun on one tree, a shadow) survives the global fit; ``is_relit`` tells
such a cluster from an object by its structure: the same edges, brighter or darker.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..config import AnalysisConfig
from ..types import ChangeMask
from .memo import memoised
from .order_stats import median

_FIT_SAMPLES = 20_000


def fit_lighting(
    before: np.ndarray, after: np.ndarray, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel gains with ``before ~ gain * after`` (offsets kept for the interface, 0).

    before, after: (H, W, 3) uint8; valid: (H, W) bool. Returns gains (3,), offsets (3,) float32.

    Exposure and white balance act multiplicatively on light, and a power-law (gamma) encoding
    keeps them multiplicative, so a gain is the physical model. It also stays identifiable on a
    near-uniform scene (empty asphalt), where an affine fit's slope is lost in noise. Start from
    the ratio of medians, then refit by least squares on pixels within 2.5 robust sigmas, twice,
    so changed objects and clipped highlights do not pull it.
    """
    return _gains(*_fit_samples(before, after, valid))


def _fit_samples(
    before: np.ndarray, after: np.ndarray, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The valid pixels of a regular grid, (N, 3) uint8 each: the fit needs thousands of
    pixels, not millions."""
    stride = max(1, int(np.sqrt(valid.size / _FIT_SAMPLES)))
    sel = valid[::stride, ::stride]
    grid_b, grid_a = before[::stride, ::stride], after[::stride, ::stride]
    if sel.all():  # the common case: a plain copy, in the same (row-major) order
        return grid_b.reshape(-1, 3), grid_a.reshape(-1, 3)
    return grid_b[sel], grid_a[sel]


def _gains(samples_b: np.ndarray, samples_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fit_lighting`` on its samples, (N, 3) uint8 each."""
    gains = np.ones(3, dtype=np.float32)
    offsets = np.zeros(3, dtype=np.float32)
    for c in range(3):
        levels_a, levels_b = samples_a[:, c], samples_b[:, c]
        # Clipped pixels carry no exposure information.
        usable = (levels_a > 3) & (levels_a < 252) & (levels_b > 3) & (levels_b < 252)
        levels_a, levels_b = levels_a[usable], levels_b[usable]
        if levels_a.size < 16:
            continue
        gain = level_median(levels_b) / max(1.0, level_median(levels_a))
        x, y = levels_a.astype(np.float32), levels_b.astype(np.float32)
        for _ in range(2):
            residual = y - gain * x
            sigma = 1.4826 * float(median(np.abs(residual))) + 1.0
            keep = np.abs(residual) < 2.5 * sigma
            if keep.sum() < 16:
                break
            gain = float(np.dot(x[keep], y[keep]) / max(1e-6, np.dot(x[keep], x[keep])))
        # Beyond these, the "lighting" explanation is less plausible than a changed scene.
        if 0.3 < gain < 3.3:
            gains[c] = gain
    return gains, offsets


def level_median(levels: np.ndarray) -> float:
    """``np.median`` of (N,) uint8 levels, exactly, read off their histogram: linear time,
    where the median's partition of 20,000 values cost a third of the light fit."""
    return _histogram_median(np.bincount(levels, minlength=256), levels.size)


def _histogram_median(counts: np.ndarray, n: int) -> float:
    """The median of ``n`` levels whose (256,) histogram is ``counts``, as ``np.median`` of
    the levels themselves (the mean of the two middle ones when ``n`` is even)."""
    below = np.cumsum(counts)
    upper = int(np.searchsorted(below, n // 2 + 1))  # the (n // 2)-th smallest, from 0
    if n % 2:
        return float(upper)
    return (int(np.searchsorted(below, n // 2)) + upper) / 2


def masked_medians(image: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """Each channel's ``level_median`` over the ``mask`` pixels of ``image``: (H, W, C) uint8
    and (H, W) bool -> (C,) float32, or None when the mask is empty. The same values as
    ``level_median(image[mask][:, c])``, from OpenCV's masked histograms: without the (N, C)
    copy of the pixels and a strided copy per channel, which cost 1.2 ms of each caption's
    cluster reading on a person-sized region."""
    n = int(np.count_nonzero(mask))
    if n == 0:
        return None
    as_bytes = _mask_bytes(mask)
    return np.array(
        [
            _histogram_median(cv2.calcHist([image], [c], as_bytes, [256], [0, 256]).ravel(), n)
            for c in range(image.shape[2])
        ],
        np.float32,
    )


def _mask_bytes(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool -> the (H, W) uint8 0/1 mask OpenCV's masked functions read: a view of the
    same memory (a bool is one byte), copied only when the mask is not contiguous."""
    return np.ascontiguousarray(mask).view(np.uint8)


def apply_lighting(image: np.ndarray, gains: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Apply per-channel affine maps to an (H, W, 3) uint8 image (via a LUT per channel)."""
    levels = np.arange(256, dtype=np.float32)
    channels = [
        cv2.LUT(
            image[:, :, c], np.clip(gains[c] * levels + offsets[c], 0, 255).round().astype(np.uint8)
        )
        for c in range(3)
    ]
    return np.dstack(channels)


def _blurred(image: np.ndarray, blur_sigma: float) -> np.ndarray:
    """(H, W, 3) uint8 -> blurred float32. Blurring the uint8 image uses OpenCV's fixed-point
    SIMD path (several times faster than float); the half-level rounding is far below delta."""
    if blur_sigma > 0:
        image = cv2.GaussianBlur(image, (0, 0), blur_sigma)
    return image.astype(np.float32)


def blurred_once(image: np.ndarray, blur_sigma: float) -> np.ndarray:
    """``_blurred``, computed once per read-only frame (``analysis.memo``): a frame of a
    sequence is the after image of one pair and the before image of the next."""
    return memoised(image, f"blur {blur_sigma}", lambda frame: _blurred(frame, blur_sigma))


def pixel_distance(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(H, W, 3) float32 twice -> (H, W) float32 Euclidean distance over the channels.
    Channel by channel in place: the sums of an einsum or ``np.linalg.norm(axis=2)``, bit for
    bit, in a third of the time."""
    d = a - b
    np.multiply(d, d, out=d)
    total = d[..., 0] + d[..., 1]
    total += d[..., 2]
    return np.sqrt(total, out=total)


def compute_change_mask(
    before: np.ndarray, after: np.ndarray, valid: np.ndarray, config: AnalysisConfig
) -> tuple[ChangeMask, np.ndarray]:
    """The change mask for an aligned pair.

    before, after: (H, W, 3) uint8 RGB, already aligned; valid: (H, W) bool comparable area.
    Returns the mask and the photometrically corrected after image (H, W, 3) uint8, which the
    captioner should use when it compares colours.
    """
    n_valid = max(1, int(valid.sum()))
    blurred_before = blurred_once(before, config.blur_sigma)
    blurred_after = blurred_once(after, config.blur_sigma)
    raw_distance = pixel_distance(blurred_before, blurred_after)
    raw_fraction = float(((raw_distance > config.delta) & valid).sum()) / n_valid
    corrected = after
    lighting_changed = False
    correction = 0.0
    distance = raw_distance
    if config.normalise_lighting:
        samples_b, samples_a = _fit_samples(before, after, valid)
        gains, offsets = _gains(samples_b, samples_a)
        correction = _mean_correction(samples_a, gains, offsets)
        if correction > 0.5:
            corrected = apply_lighting(after, gains, offsets)
            # Blur is linear, so correcting the blurred image equals blurring the corrected one.
            distance = pixel_distance(blurred_before, _relit(blurred_after, gains, offsets))
        lighting_changed = correction > config.lighting_levels
    if not valid.all():
        distance = np.where(valid, distance, 0).astype(np.float32)
    active = distance > config.delta
    mask = ChangeMask(
        active=active,
        distance=distance,
        delta=config.delta,
        raw_changed_fraction=raw_fraction,
        changed_fraction=float(active.sum()) / n_valid,
        lighting_changed=lighting_changed,
        lighting_correction=correction,
    )
    return mask, corrected


def _relit(image: np.ndarray, gains: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``image * gains + offsets`` for an (H, W, 3) float32 image, the same values: OpenCV's
    per-channel scaling (float32 products, exact in double and rounded once) and no addition
    of the offsets when they are zero, as the light fit leaves them. NumPy's broadcast over a
    last axis of three took 2.3 ms to scale a 640x360 view and 3.8 ms to add the zeros."""
    scaled = cv2.multiply(image, (float(gains[0]), float(gains[1]), float(gains[2]), 0.0))
    if np.any(offsets):
        scaled += offsets
    return scaled


def _mean_correction(samples_after: np.ndarray, gains: np.ndarray, offsets: np.ndarray) -> float:
    """Mean absolute change in grey levels the correction makes over the fit's samples of the
    after image ((N, 3) uint8), clipped to the 0-255 range as the image would be."""
    if samples_after.size == 0:
        return 0.0
    pixels = samples_after.astype(np.float32)
    return float(np.abs(np.clip(pixels * gains + offsets, 0, 255) - pixels).mean())


def is_relit(
    before: np.ndarray, after: np.ndarray, region: np.ndarray, min_correlation: float
) -> bool:
    """True when a changed region keeps its structure and colours and only its light changed.

    before, after: (H, W, 3) uint8 crops; region: (H, W) bool. When the same surfaces are lit
    differently, every colour channel of the two images correlates strongly over the region
    (>= ``min_correlation``). An object that appeared, left or moved breaks the correlation,
    and a repaint breaks it in some channel (red -> blue anti-correlates in R and B). Channels
    with almost no variance carry no evidence and are skipped; a flat region is never relit.

    A shaded 3-D object repainted in a related colour (a red ball turned brown) keeps its
    shading in every channel, so the correlations pass; its colour's direction in RGB does not
    (18 degrees apart), while light of a new strength leaves it (within a few degrees).
    """
    if np.count_nonzero(region) < 16:
        return False
    median_b, median_a = masked_medians(before, region), masked_medians(after, region)
    assert median_b is not None and median_a is not None  # the region has pixels
    if _colour_angle(median_b, median_a) > _RELIT_ANGLE:
        return False
    # Each channel's spread and the two images' correlation, from OpenCV's masked sums in
    # double precision (the products of two 8-bit levels fit 16 bits exactly): the (N, 3)
    # copies, strided columns and np.corrcoef they replace cost 8 ms on a person-sized region.
    mask = _mask_bytes(region)
    mean_b, std_b = (v.ravel() for v in cv2.meanStdDev(before, mask=mask))
    mean_a, std_a = (v.ravel() for v in cv2.meanStdDev(after, mask=mask))
    mean_ba = np.array(cv2.mean(cv2.multiply(before, after, dtype=cv2.CV_16U), mask=mask)[:3])
    correlation = (mean_ba - mean_b * mean_a) / np.maximum(std_b * std_a, 1e-12)
    judged = 0
    for c in range(3):
        if std_b[c] < 6 or std_a[c] < 6:
            continue
        judged += 1
        if float(correlation[c]) < min_correlation:
            return False
    return judged > 0


# Median colours further apart than this (degrees between RGB vectors) are different paint,
# not different light: white light of any strength keeps the direction; CLEVR's nearest colour
# pair (red and brown) is 18 degrees apart.
_RELIT_ANGLE = 10.0


def _colour_angle(b: np.ndarray, a: np.ndarray) -> float:
    """Degrees between two RGB colours (0 when either is black: no direction to compare)."""
    nb, na = float(np.linalg.norm(b)), float(np.linalg.norm(a))
    if nb < 1e-3 or na < 1e-3:
        return 0.0
    return float(np.degrees(np.arccos(np.clip(float(b @ a) / (nb * na), -1.0, 1.0))))
