"""Camera motion beyond a shift: feature matching and a RANSAC homography on the dominant plane.

The paper's shift search (align.py) models a fixed camera that drifts a few pixels. A camera
that pans, tilts, rolls or zooms (a pan-tilt-zoom camera, a phone held by hand, CLEVR-Change's
moved viewpoints) maps the scene's dominant plane - the ground, a wall - by a homography. It is
estimated from ORB features matched with Lowe's ratio test and fitted with OpenCV's USAC
(MAGSAC++), which keeps the largest set of matches one plane explains; what stands off that plane
moves a little differently (parallax), and viewpoint.py decides, object by object, whether that
explains what is left.

Only ``analyse_pair``'s moved-camera path calls this module, and only when the shift-aligned
pair left something unexplained, so a fixed camera pays nothing on quiet pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from ..types import Alignment, CameraMotion

# ORB's 31 px patches over its 8-level pyramid need an image at least this big (smaller ones
# make OpenCV fail); below it there is no camera motion to estimate.
MIN_SIDE = 64
# Features are found on a grey image of at most this long side: enough corners on a few CLEVR
# objects at 320 px, and at 640 px video frames it halves the cost without losing accuracy that
# the per-object parallax check does not absorb anyway.
_DETECT_SIDE = 480
# ORB keeps the strongest corners by Harris score; a low FAST threshold lets low-contrast scenes
# (a few objects on a plain floor) still give enough of them.
_FEATURES = 1500
_FAST_THRESHOLD = 10
# Lowe's ratio test: a match is kept when its best descriptor distance is clearly below the
# second best (repetitive texture - windows, tiles - gives ambiguous matches otherwise).
_RATIO = 0.8
# Reprojection error (px at the detection scale) within which a match agrees with the plane.
_REPROJECTION = 2.0
# The frame's image under the homography keeps this share of its area (a zoom of 0.5-2).
_MIN_AREA, _MAX_AREA = 0.25, 4.0
# Fewer inliers than this, or a smaller share of the kept matches, is no estimate.
_MIN_INLIERS = 12
_MIN_INLIER_SHARE = 0.25


# The glance that spares a fixed camera the homography: grey ORB features on a thumbnail of at
# most _GLANCE_SIDE px, _GLANCE_FEATURES of them; the camera stayed when at least _STAYED_SHARE
# of at least _GLANCE_MIN_MATCHES matches move by the found shift within _GLANCE_TOLERANCE
# thumbnail px (a fixed camera's static background: 80-100 %; CLEVR-style moved cameras: a few
# per cent, up to half when the move is nearly a pan).
_GLANCE_SIDE = 320
_GLANCE_FEATURES = 500
_GLANCE_MIN_MATCHES = 12
_GLANCE_TOLERANCE = 2.0
_STAYED_SHARE = 0.6


def camera_stayed(before: np.ndarray, after: np.ndarray, alignment: Alignment) -> bool:
    """A quick look whether the camera stayed where the shift search put it.

    before, after: (H, W, 3) uint8 RGB; alignment: the shift search's (image px). True when most
    feature matches between thumbnails move by that shift: then the view did not turn, roll or
    zoom, and what differs is the scene (a few milliseconds, where the full estimate costs tens).
    False when they do not, or when there are too few to tell.
    """
    grey_b, factor = _resized(cv2.cvtColor(before, cv2.COLOR_RGB2GRAY), _GLANCE_SIDE)
    grey_a, _ = _resized(cv2.cvtColor(after, cv2.COLOR_RGB2GRAY), _GLANCE_SIDE)
    orb = cv2.ORB_create(_GLANCE_FEATURES, fastThreshold=_FAST_THRESHOLD)
    pts_b, pts_a = _matched_points(orb, grey_b, grey_a)
    if len(pts_b) < _GLANCE_MIN_MATCHES:
        return False
    moved = pts_b + np.array([alignment.dx, alignment.dy], dtype=np.float32) / factor
    agree = np.linalg.norm(pts_a - moved, axis=1) < _GLANCE_TOLERANCE
    return float(agree.mean()) >= _STAYED_SHARE


def _resized(image: np.ndarray, side: int) -> tuple[np.ndarray, float]:
    """``image`` shrunk so its long side is at most ``side``, and the factor new px -> old px."""
    h, w = image.shape[:2]
    factor = max(h, w) / side
    if factor <= 1:
        return image, 1.0
    size = (max(1, round(w / factor)), max(1, round(h / factor)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA), factor


def _detection_channels(image: np.ndarray) -> tuple[list[np.ndarray], float]:
    """(H, W, 3) uint8 RGB -> [grey, chroma] uint8 images with long side <= _DETECT_SIDE, and the
    factor detection px -> image px.

    grey carries texture; chroma (the length of Lab's (a, b), i.e. how colourful a pixel is,
    stretched) carries the outlines of coloured things. A light that swings moves shadows and
    shading, which make grey corners that are not in the scene, but it hardly changes chroma:
    with the key light of a CLEVR scene turned 20-50 degrees, grey features alone left 9-16
    inliers (and wrong homographies), chroma features 30-60.
    """
    image, factor = _resized(image, _DETECT_SIDE)
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    lab = cv2.cvtColor(image, cv2.COLOR_RGB2LAB)
    a = lab[:, :, 1].astype(np.int16) - 128
    b = lab[:, :, 2].astype(np.int16) - 128
    # |a| + |b| approximates the chroma length well enough for corners; x3 spreads the small
    # range (a grey floor 0-5, CLEVR's colours 30-80) over the 8 bits FAST thresholds work in.
    chroma = np.clip((np.abs(a) + np.abs(b)) * 3, 0, 255).astype(np.uint8)
    return [grey, chroma], factor


def _matched_points(
    orb: cv2.ORB, channel_b: np.ndarray, channel_a: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ORB features of one channel of both images, matched with Lowe's ratio test.
    Returns (N, 2) float32 point arrays in before and in after (detection px)."""
    empty = np.zeros((0, 2), np.float32)
    if min(channel_b.shape[:2]) < MIN_SIDE:
        return empty, empty
    kp_b, desc_b = orb.detectAndCompute(channel_b, None)
    kp_a, desc_a = orb.detectAndCompute(channel_a, None)
    if desc_b is None or desc_a is None or len(kp_a) < 2:
        return empty, empty
    pairs = cv2.BFMatcher(cv2.NORM_HAMMING).knnMatch(desc_b, desc_a, k=2)
    good = [m[0] for m in pairs if len(m) == 2 and m[0].distance < _RATIO * m[1].distance]
    if not good:
        return empty, empty
    return (
        np.float32([kp_b[m.queryIdx].pt for m in good]),
        np.float32([kp_a[m.trainIdx].pt for m in good]),
    )


@dataclass(frozen=True)
class HomographyFit:
    """One fit of the dominant plane's homography.

    matrix: (3, 3) float64, after(matrix @ (x, y, 1)) ~ before(x, y), image px.
    inliers / matches: matches that agree with it / all kept by the ratio test.
    points_before, points_after: (N, 2) float64 matched points (image px), N = matches.
    """

    matrix: np.ndarray
    inliers: int
    matches: int
    points_before: np.ndarray
    points_after: np.ndarray

    def shift_support(self, dx: float, dy: float, tolerance: float) -> int:
        """How many matches a pure shift (dx, dy) explains within ``tolerance`` px: what the
        fixed-camera model has to say against the homography's inliers."""
        moved = self.points_before + np.array([dx, dy])
        return int((np.linalg.norm(self.points_after - moved, axis=1) < tolerance).sum())


def estimate_homography(before: np.ndarray, after: np.ndarray) -> HomographyFit | None:
    """The homography of the dominant plane from ``before`` to ``after``.

    before, after: (H, W, 3) uint8 RGB of equal size.
    Returns the fit (image pixels), or None when too few features agree (a blank wall, a scene cut) or the fit
    is not a camera's motion (folded, mirrored, zoomed beyond reason).
    """
    channels_b, factor = _detection_channels(before)
    channels_a, _ = _detection_channels(after)
    orb = cv2.ORB_create(_FEATURES, fastThreshold=_FAST_THRESHOLD)
    # Matches of both channels go into one fit: each channel's points are the same scene's.
    matched = [_matched_points(orb, b, a) for b, a in zip(channels_b, channels_a)]
    pts_b = np.concatenate([m[0] for m in matched])
    pts_a = np.concatenate([m[1] for m in matched])
    if len(pts_b) < _MIN_INLIERS:
        return None
    homography, inlier_mask = cv2.findHomography(pts_b, pts_a, cv2.USAC_MAGSAC, _REPROJECTION)
    if homography is None or inlier_mask is None:
        return None
    inliers = int(inlier_mask.sum())
    if inliers < _MIN_INLIERS or inliers < _MIN_INLIER_SHARE * len(pts_b):
        return None
    if factor != 1.0:
        # Conjugate by the scaling: image px -> detection px -> H -> image px.
        s = np.diag([factor, factor, 1.0])
        homography = s @ homography @ np.linalg.inv(s)
    homography = homography / homography[2, 2]
    h, w = before.shape[:2]
    if not plausible(homography, h, w):
        return None
    return HomographyFit(
        homography,
        inliers,
        len(pts_b),
        pts_b.astype(np.float64) * factor,
        pts_a.astype(np.float64) * factor,
    )


def plausible(homography: np.ndarray, height: int, width: int) -> bool:
    """A camera that turned, rolled or zoomed keeps the frame a convex, unmirrored quadrilateral
    of similar size; a fit to a handful of wrong matches often does not."""
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float64)
    quad = project(homography, corners)
    edges = np.roll(quad, -1, axis=0) - quad
    turns = (
        edges[:, 0] * np.roll(edges, -1, axis=0)[:, 1]
        - edges[:, 1] * np.roll(edges, -1, axis=0)[:, 0]
    )
    if not (np.all(turns > 0) or np.all(turns < 0)):
        return False  # folded or self-crossing
    area = 0.5 * float(
        np.sum(quad[:, 0] * np.roll(quad[:, 1], -1) - np.roll(quad[:, 0], -1) * quad[:, 1])
    )
    # Clockwise on screen (y down) like the frame itself, and within a zoom of 0.5-2.
    return area > 0 and _MIN_AREA < area / (width * height) < _MAX_AREA


def _grid(height: int, width: int, n: int = 5) -> np.ndarray:
    """(n*n, 2) float64 points spread over the frame (the corners included)."""
    xs, ys = np.linspace(0, width - 1, n), np.linspace(0, height - 1, n)
    return np.array([(x, y) for y in ys for x in xs], dtype=np.float64)


def project(homography: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a (3, 3) homography to (N, 2) points."""
    moved = cv2.perspectiveTransform(points.reshape(-1, 1, 2).astype(np.float64), homography)
    return moved.reshape(-1, 2)


def departure_from_shift(
    homography: np.ndarray, alignment: Alignment, height: int, width: int
) -> float:
    """The largest distance (px) over the frame between where the homography and where the
    shift search put a before pixel in the after image: how much the view moved beyond a
    shift. A fixed camera's homography is its drift, so this stays below a pixel or two."""
    points = _grid(height, width)
    by_shift = points + np.array([alignment.dx, alignment.dy])
    return float(np.linalg.norm(project(homography, points) - by_shift, axis=1).max())


def describe_motion(homography: np.ndarray, height: int, width: int, inliers: int, matches: int):
    """Summarise a homography as the motion of the view at the frame's centre.

    The local linear map (the Jacobian of the homography at the centre) gives the rotation and
    the zoom; the centre's displacement gives the shift. Returns a ``CameraMotion``.
    """
    centre = np.array([[(width - 1) / 2, (height - 1) / 2]])
    moved = project(homography, centre)[0]
    # Finite differences over a pixel: exact enough, and free of the homography's algebra.
    step = 1.0
    jx = project(homography, centre + [[step, 0]])[0] - moved
    jy = project(homography, centre + [[0, step]])[0] - moved
    jacobian = np.column_stack((jx, jy)) / step
    zoom = math.sqrt(abs(float(np.linalg.det(jacobian))))
    # Image y points down, so a positive angle of the first column turns clockwise on screen.
    rotation = math.degrees(math.atan2(jacobian[1, 0], jacobian[0, 0]))
    dx, dy = moved - centre[0]
    return CameraMotion(
        homography=tuple(tuple(float(v) for v in row) for row in homography),  # type: ignore[arg-type]
        dx=round(float(dx), 2),
        dy=round(float(dy), 2),
        rotation=round(rotation, 2),
        zoom=round(zoom, 4),
        inliers=inliers,
        matches=matches,
    )


def warp_to_before(after: np.ndarray, homography: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resample ``after`` onto the before frame's grid: warped(x, y) = after(H @ (x, y, 1)).

    after: (H, W, 3) uint8. Returns the warped image (H, W, 3) uint8 and ``valid`` (H, W) bool,
    False where the before frame sees what the after frame does not (the border the camera's
    move uncovered), shrunk by two pixels so interpolation at the edge is not compared.
    """
    h, w = after.shape[:2]
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    warped = cv2.warpPerspective(
        after, homography, (w, h), flags=flags, borderMode=cv2.BORDER_REPLICATE
    )
    inside = cv2.warpPerspective(
        np.full((h, w), 255, np.uint8), homography, (w, h), flags=flags, borderValue=0
    )
    valid = cv2.erode(inside, np.ones((5, 5), np.uint8)) == 255
    return warped, valid
