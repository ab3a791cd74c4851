"""Colour words under a colour cast: a frame whose greys read blue names its cars by their paint,
not by the cast (the motorway clip's asphalt is b* = -11 and every car on it read "blue")."""

from __future__ import annotations

import cv2
import numpy as np

from spotdiff_cli.captioners.words import colour_name, scene_cast


def _lab_patch(lightness: float, a: float, b: float, shape=(40, 60)) -> np.ndarray:
    """(H, W, 3) uint8 RGB of one Lab colour (L in 0-100, a and b in -128..127)."""
    lab = np.empty((*shape, 3), np.uint8)
    lab[..., 0] = round(lightness * 255 / 100)
    lab[..., 1] = round(a + 128)
    lab[..., 2] = round(b + 128)
    return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)


def _road_with_cars(cast_b: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A grey road under a cast of ``cast_b`` on b*, with a white, a black and a red car."""
    frame = _lab_patch(60, 0, cast_b, shape=(360, 640))
    rng = np.random.default_rng(0)
    frame = np.clip(frame + rng.normal(0, 3, frame.shape), 0, 255).astype(np.uint8)
    cars = {
        "white": _lab_patch(78, 0, cast_b - 4),
        "black": _lab_patch(14, 0, cast_b - 4),
        "red": _lab_patch(45, 55, 35 + cast_b),
    }
    for i, patch in enumerate(cars.values()):
        frame[100 : 100 + 40, 80 + 150 * i : 140 + 150 * i] = patch
    return frame, cars


def test_a_cast_is_taken_off_before_naming():
    frame, cars = _road_with_cars(cast_b=-12)
    cast = scene_cast(frame)
    assert abs(cast[0]) <= 1 and -13 <= cast[1] <= -11
    # Without the cast taken off, the white car reads blue; with it, each car its paint.
    assert colour_name(cars["white"]) == "blue"
    named = {paint: colour_name(patch, cast=cast) for paint, patch in cars.items()}
    assert named == {"white": "white", "black": "black", "red": "red"}


def test_no_cast_changes_nothing():
    frame, cars = _road_with_cars(cast_b=0)
    assert scene_cast(frame) == (0.0, 0.0)
    # A frame of mostly colourful pixels has no greys to read a cast from.
    grass = _lab_patch(50, -40, 40, shape=(360, 640))
    assert scene_cast(grass) == (0.0, 0.0)
    # A strongly coloured "grey" (a coloured floor, not a cast) is left alone too.
    assert scene_cast(_lab_patch(60, 0, -18, shape=(360, 640))) == (0.0, 0.0)


def test_a_regions_colour_is_its_commonest_pixel_word_ties_to_the_first_word():
    # colour_name counts pixel words by index; it must name what counting the words does:
    # the commonest, ties to the alphabetically first, "" under min_share.
    from spotdiff_cli.captioners.words import pixel_colour_names

    rng = np.random.default_rng(2)
    for trial in range(400):
        pixels = rng.integers(0, 256, (int(rng.integers(1, 200)), 3)).astype(np.uint8)
        if trial % 2:
            pixels[: len(pixels) // 2] = pixels[0]
        words, counts = np.unique(pixel_colour_names(pixels), return_counts=True)
        best = int(np.argmax(counts))
        for share in (0.0, 0.3, 0.45):
            expected = str(words[best]) if counts[best] >= share * counts.sum() else ""
            assert colour_name(pixels, share) == expected
    tie = np.array([[250, 250, 250], [10, 10, 10]], np.uint8)  # one white, one black pixel
    assert colour_name(tie, 0.5) == "black"
