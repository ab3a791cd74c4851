"""Pictures for people: both images side by side with numbered boxes, and the change mask."""

from __future__ import annotations

import cv2
import numpy as np

from ..types import Analysis, Report
from .compose import cluster_numbers, scale_box

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
PAIR_GAP = 12  # px of white between the before and after halves of a pair picture


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
    canvas = np.full((h, 2 * w + PAIR_GAP, 3), 255, dtype=np.uint8)
    canvas[:, :w] = before
    canvas[:, w + PAIR_GAP :] = after
    numbers = cluster_numbers(report)
    thickness = max(2, int(round(min(h, w) / 240)))
    font_scale = max(0.5, min(h, w) / 600)
    for cluster in a.clusters:
        number = numbers.get(cluster.id)
        if number is None:
            continue
        colour = PALETTE[(number - 1) % len(PALETTE)]
        # The after box is drawn where the object is in the after image (undo the alignment).
        for box, ox in ((cluster.bbox, 0), (box_in_after(cluster.bbox, a), w + PAIR_GAP)):
            x, y, bw, bh = scale_box(box, a.scale)
            cv2.rectangle(canvas, (x + ox, y), (x + ox + bw, y + bh), colour, thickness)
            _label(canvas, str(number), x + ox, y, colour, font_scale)
    return canvas


def draw_track(
    image: np.ndarray, track: tuple[tuple[float, int, int, int, int], ...], scale: float
) -> None:
    """Draw a tracked object's path on ``image`` in place: the box where it was first seen
    (dashed look: thin), the box where it was last seen (thick), and the line of box centres
    between, with a dot per look. ``scale``: image pixels per track pixel."""
    colour = (255, 200, 0)
    thickness = max(2, int(round(min(image.shape[:2]) / 240)))
    points = [
        (int(round((x + w / 2) * scale)), int(round((y + h / 2) * scale)))
        for _, x, y, w, h in track
    ]
    for (_, x, y, w, h), width in ((track[0], 1), (track[-1], thickness)):
        x0, y0 = int(round(x * scale)), int(round(y * scale))
        x1, y1 = int(round((x + w) * scale)), int(round((y + h) * scale))
        cv2.rectangle(image, (x0, y0), (x1, y1), colour, width)
    if len(points) > 1:
        cv2.polylines(image, [np.array(points, np.int32)], False, colour, thickness)
    for point in points:
        cv2.circle(image, point, thickness + 1, colour, -1)
    cv2.arrowedLine(
        image, points[-2] if len(points) > 1 else points[0], points[-1], colour, thickness
    )


def box_in_after(bbox: tuple[int, int, int, int], analysis: Analysis) -> tuple[int, int, int, int]:
    """Where a box of the (aligned) analysis lies in the after image as given: shifted back by
    the alignment, or - when the camera moved - its corners projected through the homography
    (before -> after) and boxed. Analysed pixels in and out."""
    x, y, w, h = bbox
    if analysis.camera is None:
        dx, dy = analysis.alignment.dx, analysis.alignment.dy
        return int(round(x + dx)), int(round(y + dy)), w, h
    corners = np.array([[[x, y], [x + w, y], [x, y + h], [x + w, y + h]]], dtype=np.float64)
    moved = cv2.perspectiveTransform(corners, np.array(analysis.camera.homography))[0]
    x0, y0 = moved.min(axis=0)
    x1, y1 = moved.max(axis=0)
    return int(round(x0)), int(round(y0)), int(round(x1 - x0)), int(round(y1 - y0))


def mask_image(report: Report) -> np.ndarray:
    """The change mask at analysed resolution: grey = active pixels DBSCAN dropped as noise,
    colours = clusters (numbered ones in their sentence colour). (H, W, 3) uint8 RGB."""
    a = report.analysis
    h, w = a.mask.active.shape
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[a.mask.active] = (110, 110, 110)
    numbers = cluster_numbers(report)
    for cluster in a.clusters:
        number = numbers.get(cluster.id)
        img[cluster.mask] = PALETTE[(number - 1) % len(PALETTE)] if number else (200, 200, 200)
    return img
