"""Projecting cluster masks C_k from image resolution onto a backbone's feature grid.

Spot-the-diff §3.2: "we project binary mask C_z from the input image dimensionality (224*224) to
the dimensionality of the visual features (14*14). To achieve this, we use pyramid reduce
downsampling on a smoothed version of cluster mask C_z. The resulting projection roughly
corresponds to the subset of visual features with the cluster region in their receptive field.
This projection is multiplied to attention weights."

So: Gaussian smoothing (sigma = half the grid stride, which spreads a cluster over the cells whose
receptive field it touches), then repeated 2x pyramid reductions (``cv2.pyrDown``: Gaussian 5x5 +
decimation, the same operation as scikit-image's ``pyramid_reduce`` the authors' code used), then
one area resize to the exact grid (224 -> 7 is not a power of two). Each non-empty mask is scaled
so its peak cell is 1: attention weights are renormalised after the multiplication anyway, and a
small cluster would otherwise project to values near 0 that an epsilon in the model could swamp.
"""

from __future__ import annotations

import cv2
import numpy as np


def project_masks(masks: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """Cluster masks at image resolution -> soft masks on the feature grid.

    Args:
        masks: (K, H, W) bool (or 0/1) cluster masks; K may be 0.
        grid: (h, w) of the backbone's feature grid, e.g. (7, 7) for efficientnet_lite0 at 224 px.

    Returns:
        (K, h, w) float32 in [0, 1]; an empty mask stays all-zero, a non-empty one peaks at 1.
    """
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f"masks must be (K, H, W), got shape {masks.shape}")
    gh, gw = int(grid[0]), int(grid[1])
    k, height, width = masks.shape
    out = np.zeros((k, gh, gw), np.float32)
    if k == 0:
        return out
    # Stride of the grid in image pixels; sigma = stride / 2 reaches about one cell either side.
    sigma = 0.5 * max(height / gh, width / gw)
    for i in range(k):
        m = masks[i].astype(np.float32)
        if not m.any():
            continue
        if sigma > 0.5:
            m = cv2.GaussianBlur(m, (0, 0), sigma)
        # Pyramid reduce while the image is at least twice the grid on both sides.
        while m.shape[0] >= 2 * gh and m.shape[1] >= 2 * gw and min(m.shape) >= 2:
            m = cv2.pyrDown(m)
        if m.shape != (gh, gw):
            interp = cv2.INTER_AREA if m.shape[0] >= gh and m.shape[1] >= gw else cv2.INTER_LINEAR
            m = cv2.resize(m, (gw, gh), interpolation=interp)
        peak = float(m.max())
        if peak > 0:
            out[i] = np.clip(m / peak, 0.0, 1.0)
    return out
