"""DBSCAN clusters of active pixels (Spot-the-diff §3.1) and their prior features g(z).

sklearn's DBSCAN on every active pixel of a 720p mask builds a neighbour list per pixel: with
the paper's eps scaled to 720p that is thousands of neighbours for each of tens of thousands of
pixels (seconds and gigabytes). On a pixel grid the same clustering falls out of image
operations, in milliseconds:

1. core pixels: active pixels with at least ``min_samples`` active pixels within ``eps``
   (inclusive, the pixel itself counted, as sklearn). Counting is a convolution of the mask with
   a disk of radius eps - exact.
2. core pixels within eps of each other are density-connected: grow every core pixel by a disk
   of radius eps/2 (a distance transform) and take connected components - two disks touch
   exactly when their centres are at most eps apart (up to pixel rounding).
3. border pixels (active, not core, within eps of a core pixel) join the cluster of their
   nearest core pixel; the rest are noise. (sklearn gives a border pixel the cluster of
   whichever core reached it first; nearest is the deterministic choice.)

``benchmarks/analysis.py`` checks the result against sklearn (adjusted Rand index) and times both.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from ..types import ChangeMask, Cluster


def _disk(radius: float) -> np.ndarray:
    r = int(np.floor(radius))
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    return ((xx * xx + yy * yy) <= radius * radius).astype(np.float32)


# Below this radius the disk is small enough for OpenCV's direct filter.
_DFT_FROM_EPS = 6.0


def _neighbour_counts(act8: np.ndarray, eps: float) -> np.ndarray:
    """How many of the pixels ``act8`` (H, W) uint8 0/1 holds lie within ``eps`` of each pixel
    (itself included), as (H, W) float32 within 0.03 of the integer (so a threshold at half a
    count is exact).

    A large disk is convolved through one DFT of the padded mask, multiplied by the disk's
    spectrum (made once per size) and transformed back: 2.5 ms for a 280x620 crop at the 640 px
    default's eps of 32 px, where ``cv2.filter2D`` (its DFT in tiles, the disk's spectrum made at
    every call) took 6 ms, a third of a warm 720p pair's clustering. The largest error is 0.001
    of a count there and 0.03 at eps 193 (a 4K frame analysed at full size)."""
    if eps < _DFT_FROM_EPS:
        return cv2.filter2D(
            act8.astype(np.float32), cv2.CV_32F, _disk(eps), borderType=cv2.BORDER_CONSTANT
        )
    h, w = act8.shape
    radius = int(np.floor(eps))
    # Zero padding of at least the disk's radius on each side: the circular convolution is
    # then the linear one, and a pixel's count includes no wrapped-around pixel.
    rows = cv2.getOptimalDFTSize(h + 2 * radius)
    cols = cv2.getOptimalDFTSize(w + 2 * radius)
    padded = np.zeros((rows, cols), np.float32)
    padded[:h, :w] = act8
    spectrum = cv2.dft(padded, nonzeroRows=h)
    product = cv2.mulSpectrums(spectrum, _disk_spectrum(rows, cols, eps), 0)
    full = cv2.idft(product, flags=cv2.DFT_SCALE | cv2.DFT_REAL_OUTPUT, nonzeroRows=h + 2 * radius)
    # The disk's centre sat at (radius, radius) of its padded copy: shift the result back.
    return full[radius : radius + h, radius : radius + w]


@functools.lru_cache(maxsize=8)  # ~1 MB each at the 640 px default
def _disk_spectrum(rows: int, cols: int, eps: float) -> np.ndarray:
    """The DFT (OpenCV's packed real format) of the radius-``eps`` disk in a rows x cols frame,
    its top-left corner at the origin."""
    disk = _disk(eps)
    padded = np.zeros((rows, cols), np.float32)
    padded[: disk.shape[0], : disk.shape[1]] = disk
    return cv2.dft(padded, nonzeroRows=disk.shape[0])


def grid_dbscan(active: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """DBSCAN over the coordinates of the True pixels of ``active``.

    active: (H, W) bool. Returns labels (H, W) int32: 0 for inactive pixels and noise, 1..K for
    clusters (numbered in raster order of their first core pixel).
    """
    h, w = active.shape
    labels = np.zeros((h, w), dtype=np.int32)
    rows, cols = np.flatnonzero(active.any(axis=1)), np.flatnonzero(active.any(axis=0))
    if rows.size == 0:
        return labels
    # Everything below happens within eps of an active pixel: work on their bounding box plus
    # that margin (exact, and a person in a corner of a 640 px frame costs a corner's worth).
    margin = int(np.ceil(eps)) + 2
    y0, y1 = max(0, rows[0] - margin), min(h, rows[-1] + 1 + margin)
    x0, x1 = max(0, cols[0] - margin), min(w, cols[-1] + 1 + margin)
    labels[y0:y1, x0:x1] = _grid_dbscan(active[y0:y1, x0:x1], eps, min_samples)
    return labels


def _grid_dbscan(active: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """``grid_dbscan`` on a crop holding every active pixel (see there)."""
    h, w = active.shape
    labels = np.zeros((h, w), dtype=np.int32)
    act8 = active.astype(np.uint8)
    # 1. Neighbour counts within eps (a disk convolution).
    core = active & (_neighbour_counts(act8, eps) >= min_samples - 0.5)
    if not core.any():
        return labels
    not_core = np.where(core, 0, 255).astype(np.uint8)
    # 2. Connect cores closer than eps: components of the eps/2 neighbourhood of the core set.
    dist_to_core = cv2.distanceTransform(not_core, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    grown = (dist_to_core <= eps / 2.0).astype(np.uint8)
    _, components = cv2.connectedComponents(grown, connectivity=8)
    # Renumber so labels are 1..K in raster order over core pixels.
    core_components = components[core]
    _, first = np.unique(core_components, return_index=True)
    order = core_components[np.sort(first)]
    remap = np.zeros(components.max() + 1, dtype=np.int32)
    remap[order] = np.arange(1, order.size + 1, dtype=np.int32)
    labels[core] = remap[core_components]
    # 3. Border pixels take the label of their nearest core pixel, if it is within eps.
    border = active & ~core & (dist_to_core <= eps)
    if border.any():
        _, nearest = cv2.distanceTransformWithLabels(
            not_core, cv2.DIST_L2, cv2.DIST_MASK_5, labelType=cv2.DIST_LABEL_PIXEL
        )
        label_of_core_pixel = np.zeros(int(nearest.max()) + 1, dtype=np.int32)
        label_of_core_pixel[nearest[core]] = labels[core]
        labels[border] = label_of_core_pixel[nearest[border]]
    return labels


def sklearn_dbscan(active: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """Reference: sklearn's DBSCAN on the active pixel coordinates, same label convention as
    ``grid_dbscan`` (0 = inactive/noise). Slow and memory-hungry at high resolution; for tests
    and benchmarks."""
    from sklearn.cluster import DBSCAN

    ys, xs = np.nonzero(active)
    labels = np.zeros(active.shape, dtype=np.int32)
    if ys.size == 0:
        return labels
    found = DBSCAN(eps=eps, min_samples=min_samples).fit_predict(
        np.column_stack([ys, xs]).astype(np.float32)
    )
    labels[ys, xs] = found + 1  # noise (-1) -> 0
    return labels


def clusters_from_labels(
    labels: np.ndarray, mask: ChangeMask, min_pixels: int = 1
) -> list[Cluster]:
    """One ``Cluster`` per label with its mask, box and the paper's prior features
    g(z) = (box length, box width, box area, active pixel count); clusters smaller than
    ``min_pixels`` are dropped. Sorted by salience (largest change energy first), ids 0..K-1
    in that order.

    Salience = sum over the cluster of the distance above delta, relative to the frame: big,
    strongly different regions first; faint large smudges after compact strong changes.
    """
    h, w = labels.shape
    n = int(labels.max())
    if n == 0:
        return []
    # Sums and boxes over the labelled pixels' bounding box only (DBSCAN's window: a person
    # in a corner is a corner's worth of pixels); the same pixels in the same order, so the
    # same sums to the bit.
    rows, cols = np.flatnonzero(labels.any(axis=1)), np.flatnonzero(labels.any(axis=0))
    top, left = int(rows[0]), int(cols[0])
    window = (slice(top, int(rows[-1]) + 1), slice(left, int(cols[-1]) + 1))
    flat = labels[window].ravel()
    excess = np.maximum(mask.distance[window] - mask.delta, 0).ravel()
    counts = np.bincount(flat, minlength=n + 1)
    energy = np.bincount(flat, weights=excess, minlength=n + 1)
    ys, xs = np.divmod(np.flatnonzero(flat), labels[window].shape[1])
    ys += top
    xs += left
    lab = flat[flat > 0]
    x0 = np.full(n + 1, w, dtype=np.int64)
    y0 = np.full(n + 1, h, dtype=np.int64)
    x1 = np.full(n + 1, -1, dtype=np.int64)
    y1 = np.full(n + 1, -1, dtype=np.int64)
    np.minimum.at(x0, lab, xs)
    np.minimum.at(y0, lab, ys)
    np.maximum.at(x1, lab, xs)
    np.maximum.at(y1, lab, ys)
    found = []
    for k in range(1, n + 1):
        if counts[k] < min_pixels:
            continue
        bw, bh = int(x1[k] - x0[k] + 1), int(y1[k] - y0[k] + 1)
        features = (float(bh), float(bw), float(bw * bh), float(counts[k]))
        salience = float(energy[k]) / (h * w)
        found.append((salience, k, (int(x0[k]), int(y0[k]), bw, bh), int(counts[k]), features))
    found.sort(key=lambda item: -item[0])
    return [
        Cluster(
            id=i, mask=labels == k, bbox=bbox, n_active=count, features=features, salience=salience
        )
        for i, (salience, k, bbox, count, features) in enumerate(found)
    ]
