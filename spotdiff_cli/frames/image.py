"""Loading still images of any common format into ``(H, W, 3) uint8 RGB`` arrays.

Pillow does the decoding because it handles what users actually have: PNG/JPEG/BMP/TIFF/WebP,
greyscale, palette, RGBA, 16-bit, and EXIF orientation (phone photos are stored sideways). Its
decompression-bomb guard is made strict so a tiny file claiming to be gigapixels fails fast
instead of exhausting memory.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError
from .files import not_a_file_hint, special_kind

# 120 megapixels: bigger than any camera frame a user would compare, small enough to decode in
# a few hundred MB. Pillow warns at this size and fails at twice it; we fail at it.
MAX_PIXELS = 120_000_000


def load_image(path: str | Path) -> np.ndarray:
    """Read an image file as ``(H, W, 3) uint8 RGB``, upright per its EXIF orientation.

    Greyscale is replicated to three channels; transparency is composited over white (what a
    viewer shows); 16-bit images keep their top 8 bits.
    Raises InputError (one line, naming the file) for missing, unreadable or unsafe files.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

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
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                width, height = img.size
                if width * height > MAX_PIXELS:
                    raise InputError(
                        f"{path}: {width}x{height} is over the {MAX_PIXELS / 1e6:g} MP safety limit "
                        "(possible decompression bomb); downscale it first"
                    )
                img = ImageOps.exif_transpose(img)
                return _to_rgb8(img)
    except InputError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise InputError(
            f"{path}: image is over the {MAX_PIXELS / 1e6:g} MP safety limit (possible decompression bomb); downscale it first"
        ) from exc
    except UnidentifiedImageError as exc:
        raise InputError(
            f"{path}: not an image file Pillow can read (PNG, JPEG, BMP, TIFF, WebP); check the file"
        ) from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(
            f"{path}: cannot read image ({exc}); the file may be truncated or corrupt"
        ) from exc


def _to_rgb8(img) -> np.ndarray:  # img: PIL.Image.Image
    """Any Pillow mode -> (H, W, 3) uint8 RGB."""
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
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return np.asarray(Image.alpha_composite(background, rgba).convert("RGB")).copy()
    return np.asarray(img.convert("RGB")).copy()


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
