"""Words for what the analysis measured: where (image regions), how big, what colour.

Shared by the grounded captioner and the report writers; plain functions (a frame's colour cast
is kept for the frame's next asker, ``analysis.memo``).
"""

from __future__ import annotations

import cv2
import numpy as np

from ..analysis.memo import memoised
from ..analysis.order_stats import median
from ..types import BBox

# 3x3 grid of places a person would name, indexed [row][column]: (name, "where" phrase).
_REGIONS = (
    (
        ("upper left", "in the upper left"),
        ("top centre", "near the top centre"),
        ("upper right", "in the upper right"),
    ),
    (("left", "on the left"), ("centre", "in the centre"), ("right", "on the right")),
    (
        ("lower left", "in the lower left"),
        ("bottom centre", "near the bottom centre"),
        ("lower right", "in the lower right"),
    ),
)


def _cell(bbox: BBox, width: int, height: int) -> tuple[str, str]:
    x, y, w, h = bbox
    cx, cy = (x + w / 2) / max(1, width), (y + h / 2) / max(1, height)
    return _REGIONS[min(2, int(cy * 3))][min(2, int(cx * 3))]


def region_phrase(bbox: BBox, width: int, height: int) -> str:
    """Where a box is, as a phrase: "in the lower left", "near the top centre", ... (the box
    centre on a 3x3 grid of the frame)."""
    return _cell(bbox, width, height)[1]


def region_name(bbox: BBox, width: int, height: int) -> str:
    """The same place as a bare name, for "moved to the <name>": "lower left", "centre"."""
    return _cell(bbox, width, height)[0]


def size_word(bbox: BBox, width: int, height: int) -> str:
    """ "small", "" or "large" from the box's share of the frame."""
    share = bbox[2] * bbox[3] / max(1, width * height)
    if share < 0.004:
        return "small"
    if share > 0.10:
        return "large"
    return ""


# Hue upper limits in OpenCV's 0-180 hue scale, and their names.
_HUE_LIMITS = np.array([5, 20, 33, 85, 128, 150, 170, 181])
_HUE_NAMES = np.array(["red", "orange", "yellow", "green", "blue", "purple", "pink", "red"])
# Every colour word a pixel can get, in alphabetical order: pixels are named by their index
# here, so a region's commonest word is a bincount's argmax (ties to the first word, as
# np.unique's sorted names gave), not a sort of strings.
_COLOUR_WORDS = np.array(sorted({*_HUE_NAMES, "black", "white", "grey", "brown"}))
_HUE_CODES = np.searchsorted(_COLOUR_WORDS, _HUE_NAMES)
_ORANGE, _BROWN, _GREY, _WHITE, _BLACK = (
    int(np.searchsorted(_COLOUR_WORDS, w)) for w in ("orange", "brown", "grey", "white", "black")
)


# A scene's colour cast, read off the pixels that are nearly grey (asphalt, walls, concrete):
# pixels of Lab chroma below _NEUTRAL_CHROMA and lightness within _NEUTRAL_LIGHTNESS (sky and
# black shadows left out). The motorway clip's asphalt reads b* = -11 all day, so every car on
# it, white, black or red, was named "blue" (or "pink"); the car park and the bundled examples
# read within 1 of grey. A cast is corrected only when such pixels cover _NEUTRAL_SHARE of the
# frame (else the "grey" ones are more likely a coloured scene's pale parts: the room clip's
# 0.19) and it is at least _MIN_CAST away from grey; at most _MAX_CAST (a coloured floor is
# not a cast).
_NEUTRAL_CHROMA = 20.0
_NEUTRAL_LIGHTNESS = (15.0, 85.0)
_NEUTRAL_SHARE = 0.3
_MIN_CAST = 4.0
_MAX_CAST = 15.0


def scene_cast(frame: np.ndarray) -> tuple[float, float]:
    """The colour cast of a whole frame ((H, W, 3) uint8 RGB) as an offset on Lab's (a*, b*)
    plane, to take off an object's pixels before naming their colour; (0, 0) when the frame
    has no clear cast. Read on every 8th pixel of every 8th row (a frame's cast is smooth).
    A video sample is read once (``analysis.memo``): the captions of the pair before and after
    it and the tracker's look all ask."""
    return memoised(frame, "colour cast", _scene_cast)


def _scene_cast(frame: np.ndarray) -> tuple[float, float]:
    sample = np.ascontiguousarray(frame[::8, ::8])
    lab = cv2.cvtColor(sample, cv2.COLOR_RGB2LAB).reshape(-1, 3).astype(np.float32)
    lightness = lab[:, 0] * (100.0 / 255.0)
    a, b = lab[:, 1] - 128.0, lab[:, 2] - 128.0
    low, high = _NEUTRAL_LIGHTNESS
    neutral = (np.hypot(a, b) < _NEUTRAL_CHROMA) & (lightness > low) & (lightness < high)
    if neutral.mean() < _NEUTRAL_SHARE:
        return 0.0, 0.0
    cast_a, cast_b = float(median(a[neutral])), float(median(b[neutral]))
    if not _MIN_CAST <= float(np.hypot(cast_a, cast_b)) <= _MAX_CAST:
        return 0.0, 0.0
    return cast_a, cast_b


def _uncast(pixels: np.ndarray, cast: tuple[float, float]) -> np.ndarray:
    """(N, 3) uint8 RGB with the scene's cast taken off (on Lab's a*, b*), as uint8 RGB."""
    lab = cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2LAB).astype(np.float32)
    lab[..., 1] -= cast[0]
    lab[..., 2] -= cast[1]
    lab = np.clip(np.rint(lab), 0, 255).astype(np.uint8)
    return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB).reshape(-1, 3)


def _colour_codes(pixels: np.ndarray) -> np.ndarray:
    """(N, 3) uint8 RGB -> (N,) indices into ``_COLOUR_WORDS`` (see ``pixel_colour_names``)."""
    hsv = (
        cv2.cvtColor(pixels.reshape(-1, 1, 3).astype(np.uint8), cv2.COLOR_RGB2HSV)
        .reshape(-1, 3)
        .astype(np.int32)
    )
    hue, sat, val = hsv[:, 0], hsv[:, 1], hsv[:, 2]
    codes = _HUE_CODES[np.searchsorted(_HUE_LIMITS, hue, side="right").clip(0, len(_HUE_NAMES) - 1)]
    codes = np.where((codes == _ORANGE) & (val < 150), _BROWN, codes)
    grey = (sat < 50) | ((sat < 80) & (val < 110))
    codes = np.where(grey, np.where(val > 185, _WHITE, _GREY), codes)
    return np.where(val < 50, _BLACK, codes)


def pixel_colour_names(pixels: np.ndarray) -> np.ndarray:
    """Name the colour of every pixel: (N, 3) uint8 RGB -> (N,) str among black, white, grey,
    brown and the hue names."""
    return _COLOUR_WORDS[_colour_codes(pixels)]


def colour_name(
    pixels: np.ndarray, min_share: float = 0.45, cast: tuple[float, float] = (0.0, 0.0)
) -> str:
    """The colour word for a region's pixels (N, 3) uint8 RGB: the most common pixel colour
    name, or "" when no single colour covers ``min_share`` of the pixels (a striped or
    multi-coloured thing has no honest one-word colour). cast: the frame's colour cast
    (``scene_cast``), taken off first."""
    pixels = pixels.reshape(-1, 3)
    if pixels.shape[0] == 0:
        return ""
    pixels = np.ascontiguousarray(pixels[:: max(1, pixels.shape[0] // 4000)], dtype=np.uint8)
    if cast != (0.0, 0.0):
        pixels = _uncast(pixels, cast)
    counts = np.bincount(_colour_codes(pixels), minlength=len(_COLOUR_WORDS))
    best = int(np.argmax(counts))
    return str(_COLOUR_WORDS[best]) if counts[best] >= min_share * counts.sum() else ""


def article(phrase: str) -> str:
    """ "a" or "an" for a noun phrase."""
    return "an" if phrase[:1] in "aeiou" else "a"


def noun_phrase(noun: str, colour: str = "", size: str = "") -> str:
    """ "large white car", "small object", "person" (no article). People get neither size nor
    colour: "a large grey person" describes clothes and distance, not a person."""
    if noun == "person":
        return noun
    words = [w for w in (size, colour, noun) if w]
    return " ".join(words)
