"""Folders of images, glob patterns and explicit file lists as frame sources.

A still-image sequence is a "video" whose frames are files. Order:

- ``sort="name"`` (default for folders and globs): natural order, so ``img2.png`` comes before
  ``img10.png`` (what a camera's numbering means, unlike plain string order).
- ``sort="time"``: by capture time, EXIF ``DateTimeOriginal`` (+ ``SubSecTimeOriginal``) when the
  file has it, else the file's modification time; ties broken by natural name order.
- ``sort="none"`` (default for explicit lists): the order given.

Timestamps: with ``fps`` given, frame ``i`` is at ``i / fps`` (an exported frame sequence).
Otherwise they are capture times (EXIF, else mtime) in seconds after the earliest file's, so
``--every 30s`` on a time-lapse folder means 30 s of real time. EXIF times carry no time zone and
are read as local time, which is also what mtime is compared in; mixing cameras with different
clocks is the user's call.

Images are decoded only when yielded (``load_image``), so sampling a folder loads only the
sampled files; capture times need only headers and are read once, on first use.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from ..errors import InputError, UsageError
from ..types import Frame
from .base import TIME_EPS, FrameSource, SourceInfo, next_target, shrunk_size
from .timecode import TimeSpec

__all__ = ["ImageSequenceSource", "open_folder", "open_glob", "open_files", "natural_key", "capture_time", "IMAGE_SUFFIXES"]

SortOrder = Literal["name", "time", "none"]

# What Pillow reads reliably; anything else in a folder (sidecar .txt/.json, videos) is ignored.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm"})

_DIGITS = re.compile(r"(\d+)")
_EXIF_IFD = 0x8769
_DATETIME_ORIGINAL = 36867
_SUBSEC_ORIGINAL = 37521


def natural_key(path: str | os.PathLike) -> tuple:
    """Sort key for "human" order: digit runs compare as numbers, text case-insensitively.
    The full name is the last element so ``a01`` and ``a1`` still sort deterministically."""
    name = Path(path).name
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in _DIGITS.split(name) if p)
    return parts + ((2, 0, name),)


def capture_time(path: str | os.PathLike) -> float:
    """Capture time as a POSIX timestamp: EXIF DateTimeOriginal if present, else the file mtime."""
    try:
        from PIL import Image

        with Image.open(path) as img:
            exif = img.getexif().get_ifd(_EXIF_IFD)
            raw = exif.get(_DATETIME_ORIGINAL)
            if raw:
                when = datetime.strptime(str(raw).strip("\x00 "), "%Y:%m:%d %H:%M:%S").timestamp()
                subsec = str(exif.get(_SUBSEC_ORIGINAL, "") or "").strip("\x00 ")
                if subsec.isdigit():
                    when += int(subsec) / 10 ** len(subsec)
                return when
    except (OSError, ValueError, SyntaxError):
        pass  # no or malformed EXIF, or not readable by Pillow here: the mtime is the next best
    try:
        return os.stat(path).st_mtime
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror}); check the file exists and is readable") from exc


class ImageSequenceSource(FrameSource):
    """Frames from a list of image files (a folder, a glob, or a list). See the module docstring."""

    def __init__(self, paths: Sequence[str | os.PathLike], name: str, kind: str, sort: SortOrder = "name", fps: float | None = None) -> None:
        super().__init__()
        if sort not in ("name", "time", "none"):
            raise UsageError(f"unknown sort order {sort!r}; use name or time")
        if fps is not None and not fps > 0:
            raise UsageError(f"fps must be > 0, got {fps!r}; e.g. --fps 2")
        files = [Path(p) for p in paths]
        if not files:
            raise InputError(f"{name}: no images found (looked for {', '.join(sorted(IMAGE_SUFFIXES))}); check the path or pattern")
        for f in files:
            if not f.is_file():
                raise InputError(f"{f}: no such file; check the path")
        self._times: list[float] | None = None
        if sort == "name":
            files.sort(key=natural_key)
        elif sort == "time":
            keyed = sorted(zip(files, self._capture_times(files)), key=lambda ft: (ft[1], natural_key(ft[0])))
            files = [f for f, _ in keyed]
            self._times = [t for _, t in keyed]
        self.paths = files
        self.fps = fps
        width, height = _first_size(files)
        duration = len(files) / fps if fps else None
        self.info = SourceInfo(
            name=name, kind=kind, width=width, height=height, duration=duration,
            fps=fps, frame_count=len(files), backend="pillow", variable_frame_rate=None if fps is None else False,
        )

    @staticmethod
    def _capture_times(files: Sequence[Path]) -> list[float]:
        return [capture_time(f) for f in files]

    def timestamps(self) -> list[float]:
        """Seconds of each file, in source order (computed once; see the module docstring)."""
        if self.fps is not None:
            return [i / self.fps for i in range(len(self.paths))]
        if self._times is None:
            self._times = self._capture_times(self.paths)
        origin = min(self._times)
        return [t - origin for t in self._times]

    def _position(self, spec: TimeSpec, what: str) -> float:
        # A frame position in a sequence is a file index: map it to that file's timestamp.
        if spec.frames is not None:
            times = self.timestamps()
            if spec.frames >= len(times):
                return times[-1] + 1.0
            return times[spec.frames]
        return super()._position(spec, what)

    def _frame(self, i: int, ts: float) -> Frame | None:
        """File ``i`` as a Frame, or None (recorded in ``stats.skipped``) when it cannot be read:
        one corrupt snapshot must not cost the events of the whole folder."""
        from .image import load_image

        self.stats.decoded += 1
        try:
            pixels = load_image(self.paths[i])
        except InputError as exc:
            self.stats.skipped.append(f"{exc} (skipped)")
            return None
        self.stats.converted += 1
        if self.max_side and max(pixels.shape[:2]) > self.max_side:
            import cv2

            size = shrunk_size(pixels.shape[1], pixels.shape[0], self.max_side)
            pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
        return Frame(pixels=pixels, source=str(self.paths[i]), timestamp=ts, index=i)

    def _sample_seconds(self, every: float | None, start: float, end: float | None) -> Iterator[Frame]:
        times = self.timestamps()
        target = start
        for i, ts in enumerate(times):
            if ts < target - TIME_EPS:
                continue  # skipped files are never opened
            if end is not None and ts >= end - TIME_EPS:
                # Name order need not be time order: keep looking only if times can go back.
                if self.fps is not None:
                    return
                continue
            frame = self._frame(i, ts)
            if frame is None:
                continue  # the next readable file serves the same target
            yield frame
            if every is not None:
                target = next_target(ts, start, every)

    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        times = self.timestamps()
        first = next((i for i, ts in enumerate(times) if ts >= start - TIME_EPS), None)
        if first is None:
            return
        for i in range(first, len(times), every):
            if end is not None and times[i] >= end - TIME_EPS:
                return
            frame = self._frame(i, times[i])
            if frame is not None:
                yield frame


def _first_size(files: Sequence[Path]) -> tuple[int, int]:
    """The size of the first readable image (a corrupt first file is skipped when read)."""
    for path in files[:-1]:
        try:
            return _image_size(path)
        except InputError:
            continue
    return _image_size(files[-1])


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            # Respect EXIF rotation so the size matches what load_image returns.
            orientation = img.getexif().get(0x0112, 1)
            w, h = img.size
            return (h, w) if orientation in (5, 6, 7, 8) else (w, h)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"{path}: not an image Pillow can read ({exc}); remove it or fix the file") from exc


def _images_in(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if Path(p).suffix.lower() in IMAGE_SUFFIXES and not Path(p).name.startswith(".") and Path(p).is_file()]


def open_folder(folder: str | os.PathLike, sort: SortOrder = "name", fps: float | None = None) -> ImageSequenceSource:
    """Every image directly inside ``folder`` (not sub-folders; use a ``**`` glob for those)."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: no such folder; check the path")
    files = _images_in([str(p) for p in root.iterdir()])
    return ImageSequenceSource(files, name=root.name or str(root), kind="folder", sort=sort, fps=fps)


def open_glob(pattern: str | os.PathLike, sort: SortOrder = "name", fps: float | None = None) -> ImageSequenceSource:
    """Images matching a glob pattern (``**`` recurses); non-image matches are ignored."""
    text = os.fspath(pattern)
    files = _images_in(_glob.glob(text, recursive=True))
    return ImageSequenceSource(files, name=text, kind="glob", sort=sort, fps=fps)


def open_files(paths: Sequence[str | os.PathLike], sort: SortOrder = "none", fps: float | None = None) -> ImageSequenceSource:
    """An explicit list of image files, in the order given unless ``sort`` says otherwise."""
    files = [Path(p) for p in paths]
    name = f"{len(files)} files" if len(files) != 1 else str(files[0]) if files else "no files"
    return ImageSequenceSource(files, name=name, kind="files", sort=sort, fps=fps)
