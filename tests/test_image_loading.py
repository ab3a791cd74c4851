"""Loading the images users actually have."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from spotdiff_cli.errors import InputError
from spotdiff_cli.frames import image as image_module
from spotdiff_cli.frames import load_image


@pytest.fixture
def rgb():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)


@pytest.mark.parametrize("ext", ["png", "bmp", "tiff", "webp"])
def test_lossless_formats_round_trip(tmp_path, rgb, ext):
    path = tmp_path / f"x.{ext}"
    Image.fromarray(rgb).save(path, **({"lossless": True} if ext == "webp" else {}))
    assert np.array_equal(load_image(path), rgb)


def test_jpeg_loads_close(tmp_path, rgb):
    path = tmp_path / "x.jpg"
    Image.fromarray(np.full_like(rgb, 128)).save(path, quality=95)
    out = load_image(path)
    assert out.shape == (30, 40, 3) and out.dtype == np.uint8 and abs(int(out.mean()) - 128) <= 2


def test_grey_rgba_and_16bit_become_rgb8(tmp_path):
    Image.fromarray(np.full((5, 6), 77, np.uint8)).save(tmp_path / "g.png")
    assert load_image(tmp_path / "g.png")[0, 0].tolist() == [77, 77, 77]
    rgba = np.zeros((5, 6, 4), np.uint8)
    rgba[..., 0] = 255  # red, fully transparent -> the white a viewer shows
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    assert load_image(tmp_path / "a.png")[0, 0].tolist() == [255, 255, 255]
    Image.fromarray(np.full((5, 6), 65535, np.uint16)).save(tmp_path / "d.png")
    assert load_image(tmp_path / "d.png")[0, 0].tolist() == [255, 255, 255]


def test_exif_orientation_is_applied(tmp_path):
    img = Image.fromarray(np.zeros((10, 20, 3), np.uint8))
    exif = img.getexif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    img.save(tmp_path / "r.jpg", exif=exif)
    assert load_image(tmp_path / "r.jpg").shape[:2] == (20, 10)


def test_decompression_bomb_is_refused(tmp_path, monkeypatch):
    Image.fromarray(np.zeros((100, 100, 3), np.uint8)).save(tmp_path / "big.png")
    monkeypatch.setattr(image_module, "MAX_PIXELS", 5_000)
    with pytest.raises(InputError, match="safety limit"):
        load_image(tmp_path / "big.png")


def test_missing_folder_and_truncated_files(tmp_path, rgb):
    with pytest.raises(InputError, match="no such file"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(InputError, match="is a folder"):
        load_image(tmp_path)
    Image.fromarray(rgb).save(tmp_path / "t.png")
    data = (tmp_path / "t.png").read_bytes()
    (tmp_path / "t.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or corrupt"):
        load_image(tmp_path / "t.png")
