"""Pictures for people: both images side by side with numbered boxes, and the change mask."""

from __future__ import annotations

import cv2
import numpy as np

from ..types import Report
from .compose import _cluster_numbers, scale_box

# Distinct, colour-blind-friendly box colours (Okabe-Ito), RGB.
PALETTE = [
    (230, 159, 0),
    (86, 180, 233),
    (0, 158, 115),
    (240, 228, 66),
    (0, 114, 178),
    (213, 94, 0),
    (204, 121, 167),
]
_GAP = 12


def _label(
    img: np.ndarray, text: str, x: int, y: int, colour: tuple[int, int, int], scale: float
) -> None:
    font = cv2.FONT_HERSHEY_SIMPLEX
    thickness = max(1, int(round(scale * 2)))
    (tw, th), base = cv2.getTextSize(text, font, scale, thickness)
    y = max(th + base + 2, y)
    cv2.rectangle(img, (x, y - th - base - 4), (x + tw + 6, y), colour, -1)
    cv2.putText(img, text, (x + 3, y - base - 1), font, scale, (0, 0, 0), thickness, cv2.LINE_AA)


def annotated_image(report: Report) -> np.ndarray:
    """Before | after, original size, each described cluster boxed and numbered like its
    sentence (a move gets its number on both ends). Returns (H, 2W + gap, 3) uint8 RGB."""
    a = report.analysis
    before = report.original.before.pixels if report.original else a.pair.before.pixels
    after = report.original.after.pixels if report.original else a.pair.after.pixels
    h, w = before.shape[:2]
    canvas = np.full((h, 2 * w + _GAP, 3), 255, dtype=np.uint8)
    canvas[:, :w] = before
    canvas[:, w + _GAP :] = after
    numbers = _cluster_numbers(report)
    thickness = max(2, int(round(min(h, w) / 240)))
    font_scale = max(0.5, min(h, w) / 600)
    for cluster in a.clusters:
        number = numbers.get(cluster.id)
        if number is None:
            continue
        colour = PALETTE[(number - 1) % len(PALETTE)]
        x, y, bw, bh = scale_box(cluster.bbox, a.scale)
        # The after box is drawn where the object is in the after image (undo the alignment).
        shift_x, shift_y = (
            int(round(a.alignment.dx * a.scale)),
            int(round(a.alignment.dy * a.scale)),
        )
        for ox, oy in ((0, 0), (w + _GAP + shift_x, shift_y)):
            cv2.rectangle(canvas, (x + ox, y + oy), (x + ox + bw, y + oy + bh), colour, thickness)
            _label(canvas, str(number), x + ox, y + oy, colour, font_scale)
    return canvas


def mask_image(report: Report) -> np.ndarray:
    """The change mask at analysed resolution: grey = active pixels DBSCAN dropped as noise,
    colours = clusters (numbered ones in their sentence colour). (H, W, 3) uint8 RGB."""
    a = report.analysis
    h, w = a.mask.active.shape
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[a.mask.active] = (110, 110, 110)
    numbers = _cluster_numbers(report)
    for cluster in a.clusters:
        number = numbers.get(cluster.id)
        img[cluster.mask] = PALETTE[(number - 1) % len(PALETTE)] if number else (200, 200, 200)
    return img
