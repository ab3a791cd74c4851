"""Shared fixtures: synthetic scenes with exact truth, and real footage from ../shared/media
(tests that need it skip cleanly when it is absent)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

# Nothing may download in tests; a cache dir of our own keeps the user's cache untouched.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The suite's two workers (pyproject.toml) share two cores: torch's OpenMP pool (a thread per
# core in each worker, spinning while it waits) and OpenBLAS's then fight the other worker for
# them. One thread each: two torch tests side by side took 18 s instead of 41. Set before torch
# or numpy's BLAS start their pools (the console scripts the tests run inherit it).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MEDIA = SHARED / "media"


def loaded_in_child(code: str, *modules: str) -> list[bool]:
    """Run ``code`` in a fresh interpreter (the checkout as its working folder) and say, for
    each of ``modules``, whether that interpreter had imported it by the end: what a cold
    process pays for, which this one, with the suite's imports, cannot tell."""
    probe = f"\nimport sys\nprint(*[name in sys.modules for name in {list(modules)!r}])"
    out = subprocess.run(
        [sys.executable, "-c", code + probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return [word == "True" for word in out.stdout.strip().splitlines()[-1].split()]


def media(name: str) -> Path:
    """Path of a file in ../shared/media, or skip the test when it is not there."""
    path = MEDIA / name
    if not path.is_file():
        pytest.skip(f"needs ../shared/media/{name}")
    return path


def video_frame(name: str, index: int) -> np.ndarray:
    """Frame ``index`` of a clip in ../shared/media as (H, W, 3) uint8 RGB."""
    cap = cv2.VideoCapture(str(media(name)))
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, frame = cap.read()
    cap.release()
    assert ok, f"could not read frame {index} of {name}"
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


def textured_background(height: int = 240, width: int = 320, seed: int = 0) -> np.ndarray:
    """A grey, asphalt-like textured scene (H, W, 3) uint8 RGB, smooth enough to be realistic."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(110, 18, (height, width, 1)).astype(np.float32)
    noise = cv2.GaussianBlur(noise, (0, 0), 1.2)[:, :, None]
    tint = np.array([1.0, 1.0, 1.04], dtype=np.float32)
    return np.clip(noise * tint, 0, 255).astype(np.uint8)


def draw_box(
    image: np.ndarray, x: int, y: int, w: int, h: int, colour: tuple[int, int, int]
) -> np.ndarray:
    """A copy of ``image`` with a filled rectangle (a stand-in object) at (x, y, w, h)."""
    out = image.copy()
    cv2.rectangle(out, (x, y), (x + w - 1, y + h - 1), colour, -1)
    return out


@pytest.fixture
def scene() -> np.ndarray:
    return textured_background()


@pytest.fixture
def write_png(tmp_path: Path):
    """Write an RGB array to a PNG in tmp_path and return its path."""

    def _write(name: str, image: np.ndarray) -> Path:
        path = tmp_path / name
        cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        return path

    return _write
