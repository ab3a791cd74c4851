"""Loading still images of any common format into ``(H, W, 3) uint8 RGB`` arrays.

Pillow does the decoding because it handles what users actually have: PNG/JPEG/BMP/TIFF/WebP,
greyscale, palette, RGBA, 16-bit, and EXIF orientation (phone photos are stored sideways). Its
decompression-bomb guard is made strict so a tiny file claiming to be gigapixels fails fast
instead of exhausting memory.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, UsageError
from .files import not_a_file_hint, special_kind

# 120 megapixels: bigger than any camera frame a user would compare (a 108 MP phone photo
# passes), small enough to decode in under 1 GB (about 7 bytes a pixel at the peak, 3 kept).
# Pillow warns at its own limit and fails at twice it; we fail at ours. SPOTDIFF_MAX_PIXELS (a
# number of pixels) raises or lowers it for images that are really that big.
MAX_PIXELS = 120_000_000
MAX_PIXELS_VARIABLE = "SPOTDIFF_MAX_PIXELS"


def max_pixels() -> int:
    """The pixel budget of one image: ``SPOTDIFF_MAX_PIXELS`` when set, else :data:`MAX_PIXELS`."""
    raw = os.environ.get(MAX_PIXELS_VARIABLE, "").strip().replace("_", "")
    if not raw:
        return MAX_PIXELS
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        value = 0
    if value < 1:
        raise UsageError(
            f"{MAX_PIXELS_VARIABLE}={os.environ[MAX_PIXELS_VARIABLE]!r} is not a number of "
            f"pixels; e.g. {MAX_PIXELS_VARIABLE}=200000000 (200 MP), or unset it"
        )
    return value


def _over_budget(path: Path, width: int, height: int, limit: int) -> InputError:
    return InputError(
        f"{path}: {width}x{height} ({width * height / 1e6:.1f} MP) is over the {limit / 1e6:g} MP "
        f"safety limit (possible decompression bomb); downscale it first, or raise the limit "
        f"with {MAX_PIXELS_VARIABLE}={width * height} (decoding takes about 7 bytes a pixel)"
    )


@contextlib.contextmanager
def open_checked(path: Path) -> Iterator[Any]:
    """``PIL.Image.open(path)`` under this module's pixel budget, for reading the header (size,
    EXIF) or decoding. Pillow's warnings stay off the terminal (its DecompressionBombWarning
    and EXIF complaints print a source line to stderr): a bomb is an InputError naming the
    file and the limit, any other warning is dropped (the file is read all the same, or fails
    with an error of its own). Raises what ``Image.open`` raises otherwise."""
    from PIL import Image

    limit = max_pixels()
    Image.MAX_IMAGE_PIXELS = limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as img:
                width, height = img.size
                if width * height > limit:
                    raise _over_budget(path, width, height, limit)
                yield img
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise InputError(
                f"{path}: image is over the {limit / 1e6:g} MP safety limit (possible "
                f"decompression bomb); downscale it first, or raise the limit with "
                f"{MAX_PIXELS_VARIABLE}"
            ) from exc


def load_image(path: str | Path) -> np.ndarray:
    """Read an image file as ``(H, W, 3) uint8 RGB``, upright per its EXIF orientation.

    Greyscale is replicated to three channels; transparency is composited over white (what a
    viewer shows); 16-bit images keep their top 8 bits.
    Raises InputError (one line, naming the file) for missing, unreadable or unsafe files.
    """
    from PIL import UnidentifiedImageError

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file; check the path")
    if path.is_dir():
        raise InputError(
            f"{path} is a folder, not an image; give an image file (or use `spotdiff video` for folders)"
        )
    odd = special_kind(path)
    if odd is not None:
        raise InputError(f"{path} {not_a_file_hint(odd)}")
    try:
        with open_checked(path) as img:
            _upright(img)
            return _to_rgb8(img)
    except InputError:
        raise
    except UnidentifiedImageError as exc:
        raise InputError(
            f"{path}: not an image file Pillow can read (PNG, JPEG, BMP, TIFF, WebP); check the file"
        ) from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(
            f"{path}: cannot read image ({exc}); the file may be truncated or corrupt"
        ) from exc


# EXIF orientations that turn or mirror the image (1 is upright).
_TURNED = frozenset(range(2, 9))


def _upright(img) -> None:  # img: PIL.Image.Image
    """Turn ``img`` upright per its EXIF orientation, in place (``ImageOps.exif_transpose``
    otherwise returns a copy even of an upright image). ImageOps (and the palette modules it
    brings, ~15 ms of a caption's start) is imported only for an image that needs turning."""
    img.load()
    if img.getexif().get(0x0112, 1) in _TURNED:  # 0x0112: Orientation
        from PIL import ImageOps

        ImageOps.exif_transpose(img, in_place=True)


def _to_rgb8(img) -> np.ndarray:  # img: PIL.Image.Image
    """Any Pillow mode -> (H, W, 3) uint8 RGB, the image itself released once read (a 120 MP
    photo peaked at 2.2 GB through four full copies; this way about 7 bytes a pixel)."""
    from PIL import Image

    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(img, dtype=np.int64)
        top = 65535 if arr.max() > 255 else 255
        grey = np.clip(arr * 255 // top, 0, 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    if img.mode == "F":
        arr = np.asarray(img, dtype=np.float32)
        lo, hi = float(arr.min()), float(arr.max())
        grey = ((arr - lo) / (hi - lo or 1.0) * 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        img.close()
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        background.alpha_composite(rgba)
        rgba.close()
        return _detach(background.convert("RGB"))
    if img.mode != "RGB":
        rgb = img.convert("RGB")
        img.close()
        return _detach(rgb)
    img.load()
    return _detach(img)


def _detach(img) -> np.ndarray:  # img: PIL.Image.Image in mode RGB, loaded
    """The pixels of an RGB image as a writable array, then the image closed (its memory
    freed). Copied a strip at a time: ``tobytes`` (and ``np.asarray``, which calls it) joins
    a list of chunks into one bytes object, two more full copies at once."""
    width, height = img.size
    out = np.empty((height, width, 3), np.uint8)
    rows = max(1, (4 << 20) // max(1, 3 * width))  # ~4 MB a strip
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        strip = img.crop((0, top, width, bottom))
        out[top:bottom] = np.frombuffer(strip.tobytes(), np.uint8).reshape(bottom - top, width, 3)
        strip.close()
    img.close()
    return out


def save_image(path: str | Path, pixels: np.ndarray) -> None:
    """Write ``(H, W, 3) uint8 RGB`` (or ``(H, W)`` grey) atomically (temp file + rename)."""
    import os

    import cv2

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    bgr = pixels if pixels.ndim == 2 else cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)
    if not cv2.imwrite(str(tmp), bgr):
        raise InputError(f"cannot write image {path}; check the folder is writable")
    os.replace(tmp, path)
