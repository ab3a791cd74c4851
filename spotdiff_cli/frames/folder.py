"""Folders of images, glob patterns and explicit file lists as frame sources.

A still-image sequence is a "video" whose frames are files. Order:

- ``sort="name"`` (default for folders and globs): natural order, so ``img2.png`` comes before
  ``img10.png`` (what a camera's numbering means, unlike plain string order).
- ``sort="time"``: by capture time, EXIF ``DateTimeOriginal`` (+ ``SubSecTimeOriginal``) when the
  file has it, else the file's modification time; ties broken by natural name order.
- ``sort="none"`` (default for explicit lists): the order given.

Timestamps, in seconds after the earliest file's, from the first of:

- ``fps``: frame ``i`` is at ``i / fps`` (an exported frame sequence);
- ``time_pattern``: a strptime-style pattern found in each file *name* (``%Y%m%d_%H%M%S`` reads
  ``cam1_20240501_120000.jpg``; see :func:`compile_time_pattern`). Files are then in the order
  of those times, and a file whose name does not match is skipped with a warning;
- capture times: EXIF ``DateTimeOriginal``, else the file's modification time.

So ``--every 30s`` on a time-lapse folder means 30 s of real time. EXIF times carry no time zone
and are read as local time, which is also what mtime is compared in; mixing cameras with
different clocks is the user's call. When the times cannot space the samples (files copied
without their dates all share one mtime, so ``--every 1s`` would take only the first), sampling
by time fails with a message naming ``--fps`` and ``--time-pattern`` rather than report "no
change" from a single sample.

Images are decoded only when yielded (``load_image``), so sampling a folder loads only the
sampled files; capture times need only headers and are read once, on first use.
"""

from __future__ import annotations

import bisect
import calendar
import glob as _glob
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import InputError, UsageError
from ..types import Frame
from .base import TIME_EPS, DecodeStats, FrameSource, SourceInfo, next_target, shrunk_size
from .files import not_a_file_hint, special_kind
from .timecode import TimeSpec

__all__ = [
    "ImageSequenceSource",
    "open_folder",
    "open_glob",
    "open_files",
    "natural_key",
    "capture_time",
    "compile_time_pattern",
    "TimePattern",
    "IMAGE_SUFFIXES",
]

SortOrder = Literal["name", "time", "none"]
T = TypeVar("T")

# What Pillow reads reliably; anything else in a folder (sidecar .txt/.json, videos) is ignored.
IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm"}
)

_DIGITS = re.compile(r"(\d+)")
_EXIF_IFD = 0x8769
_DATETIME_ORIGINAL = 36867
_SUBSEC_ORIGINAL = 37521


def natural_key(path: str | os.PathLike) -> tuple:
    """Sort key for "human" order: digit runs compare as numbers, text case-insensitively.
    The full name is the last element so ``a01`` and ``a1`` still sort deterministically."""
    name = Path(path).name
    parts = tuple(
        (0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in _DIGITS.split(name) if p
    )
    return parts + ((2, 0, name),)


def capture_time(path: str | os.PathLike) -> float:
    """Capture time as a POSIX timestamp: EXIF DateTimeOriginal if present, else the file mtime."""
    try:
        from .image import open_checked

        with open_checked(Path(path)) as img:
            exif = img.getexif().get_ifd(_EXIF_IFD)
            raw = exif.get(_DATETIME_ORIGINAL)
            if raw:
                when = datetime.strptime(str(raw).strip("\x00 "), "%Y:%m:%d %H:%M:%S").timestamp()
                subsec = str(exif.get(_SUBSEC_ORIGINAL, "") or "").strip("\x00 ")
                if subsec.isdigit():
                    when += int(subsec) / 10 ** len(subsec)
                return when
    except (OSError, ValueError, SyntaxError, InputError):
        pass  # no or malformed EXIF, or not readable by Pillow here: the mtime is the next best
    try:
        return os.stat(path).st_mtime
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read ({exc.strerror}); check the file exists and is readable"
        ) from exc


# strptime codes a file name can hold, as the regex that finds them. Numbers are fixed-width
# (what cameras write): strptime alone would read "20240501" as %Y%m%d only by luck of
# greediness, and could not find the date inside "cam1_20240501_120000.jpg" at all.
_PATTERN_CODES = {
    "Y": r"\d{4}",
    "y": r"\d{2}",
    "m": r"\d{2}",
    "d": r"\d{2}",
    "H": r"\d{2}",
    "I": r"\d{2}",
    "M": r"\d{2}",
    "S": r"\d{2}",
    "f": r"\d{1,6}",
    "j": r"\d{3}",
    "p": r"(?:AM|PM|am|pm)",
    "b": r"[A-Za-z]{3}",
    "B": r"[A-Za-z]+",
    "z": r"(?:Z|[+-]\d{2}:?\d{2})",
    "%": "%",
}
_EPOCH_CODE = "s"  # seconds since 1970 (not a strptime code; Python's strptime has no %s)


@dataclass(frozen=True)
class TimePattern:
    """A compiled ``--time-pattern``: finds a time in a file name (see :func:`compile_time_pattern`)."""

    pattern: str
    regex: re.Pattern[str]
    epoch: bool  # the pattern is %s: Unix seconds, no strptime

    def seconds(self, name: str) -> float | None:
        """POSIX seconds of the time in ``name`` (the first place the whole pattern matches), or
        None when the name holds no such time. Times without a zone are read as UTC: only the
        differences between files matter, and UTC has no daylight-saving jumps."""
        for match in self.regex.finditer(name):
            text = match.group(0)
            if self.epoch:
                return float(match.group("epoch"))
            try:
                when = datetime.strptime(text, self.pattern)
            except ValueError:
                continue  # digits of the right shape but no real date (month 13): look further on
            if when.tzinfo is not None:
                return when.timestamp()
            return calendar.timegm(when.timetuple()) + when.microsecond / 1e6
        return None


def compile_time_pattern(pattern: str) -> TimePattern:
    """Compile a ``--time-pattern``: strptime codes (``%Y %y %m %d %H %I %M %S %f %j %p %b %B
    %z %%``) and literal text, searched anywhere in the file name; or ``%s`` (Unix seconds, with
    optional decimals) with literal text around it. Raises UsageError naming a code it does not
    know, or a pattern with no date or time code in it."""
    parts: list[str] = []
    codes: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char != "%":
            parts.append(re.escape(char))
            i += 1
            continue
        code = pattern[i + 1 : i + 2]
        if code == _EPOCH_CODE:
            parts.append(r"(?P<epoch>\d+(?:\.\d+)?)")
        elif code in _PATTERN_CODES:
            parts.append(_PATTERN_CODES[code])
        else:
            known = " ".join(f"%{c}" for c in [*_PATTERN_CODES, _EPOCH_CODE] if c != "%")
            raise UsageError(
                f"--time-pattern {pattern!r}: unknown code %{code or ''}; use {known}, "
                "e.g. '%Y%m%d_%H%M%S' for cam_20240501_120000.jpg"
            )
        codes.append(code)
        i += 2
    dated = [c for c in codes if c != "%"]
    if not dated:
        raise UsageError(
            f"--time-pattern {pattern!r} has no date or time code; e.g. '%Y%m%d_%H%M%S' for cam_20240501_120000.jpg"
        )
    epoch = _EPOCH_CODE in dated
    if epoch and len(dated) > 1:
        raise UsageError(
            f"--time-pattern {pattern!r}: %s (Unix seconds) cannot be combined with other codes"
        )
    return TimePattern(pattern, re.compile("".join(parts)), epoch)


class ImageSequenceSource(FrameSource):
    """Frames from a list of image files (a folder, a glob, or a list). See the module docstring."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike],
        name: str,
        kind: str,
        sort: SortOrder = "name",
        fps: float | None = None,
        time_pattern: str | None = None,
    ) -> None:
        super().__init__()
        if sort not in ("name", "time", "none"):
            raise UsageError(f"unknown sort order {sort!r}; use name or time")
        if fps is not None and not 0 < fps < math.inf:
            raise UsageError(f"fps must be above 0 and finite, got {fps!r}; e.g. --fps 2")
        if fps is not None and time_pattern:
            raise UsageError("--fps and --time-pattern both give frame times; give one of them")
        files = [Path(p) for p in paths]
        if not files:
            raise InputError(
                f"{name}: no images found (looked for {', '.join(sorted(IMAGE_SUFFIXES))}); check the path or pattern"
            )
        for f in files:
            if not f.is_file():
                odd = special_kind(f)
                if odd is not None:
                    raise InputError(f"{f} {not_a_file_hint(odd)}")
                if f.is_dir():
                    raise InputError(f"{f} is a folder, not an image; give image files")
                raise InputError(f"{f}: no such file; check the path")
        self._times: list[float] | None = None
        # Where the times come from, for the message when they cannot space the samples.
        self._times_from = "EXIF dates or file modification times"
        self._by_time: list[tuple[float, int]] | None = None  # (timestamp, index), for frame_number
        if time_pattern and fps is None:
            files, self._times = self._named_times(files, compile_time_pattern(time_pattern), name)
            self._times_from = f"--time-pattern {time_pattern!r}"
        elif sort == "name":
            files.sort(key=natural_key)
        elif sort == "time":
            keyed = sorted(
                zip(files, self._capture_times(files)), key=lambda ft: (ft[1], natural_key(ft[0]))
            )
            files = [f for f, _ in keyed]
            self._times = [t for _, t in keyed]
        self.paths = files
        self.fps = fps
        width, height = _first_size(files)
        duration = len(files) / fps if fps else None
        self.info = SourceInfo(
            name=name,
            kind=kind,
            width=width,
            height=height,
            duration=duration,
            fps=fps,
            frame_count=len(files),
            backend="pillow",
            variable_frame_rate=None if fps is None else False,
        )

    @staticmethod
    def _capture_times(files: Sequence[Path]) -> list[float]:
        return [capture_time(f) for f in files]

    def _named_times(
        self, files: list[Path], pattern: TimePattern, name: str
    ) -> tuple[list[Path], list[float]]:
        """The files whose names hold a time, in time order (ties: natural name order), and
        those times. Names without one are skipped and said once; none at all is an error."""
        found = [(pattern.seconds(f.name), f) for f in files]
        timed = [(t, f) for t, f in found if t is not None]
        missing = [f.name for t, f in found if t is None]
        if not timed:
            raise InputError(
                f"{name}: no file name matches --time-pattern {pattern.pattern!r} (e.g. "
                f"{sorted(missing, key=natural_key)[0]!r}); fix the pattern or give --fps N"
            )
        if missing:
            shown = ", ".join(sorted(missing, key=natural_key)[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            self.stats.skipped.append(
                f"{name}: {len(missing)} file name(s) do not match --time-pattern "
                f"{pattern.pattern!r} ({shown}{more}) (skipped)"
            )
        timed.sort(key=lambda tf: (tf[0], natural_key(tf[1])))
        return [f for _, f in timed], [t for t, _ in timed]

    def timestamps(self) -> list[float]:
        """Seconds of each file, in source order (computed once; see the module docstring)."""
        if self.fps is not None:
            return [i / self.fps for i in range(len(self.paths))]
        if self._times is None:
            self._times = self._capture_times(self.paths)
        origin = min(self._times)
        return [t - origin for t in self._times]

    def frame_number(self, seconds: float) -> int | None:
        """The index of the file at ``seconds`` (the nearest one when no file is exactly there,
        e.g. a padded event start): a folder's frame number is its file's place in the order."""
        if self.fps is not None:
            return super().frame_number(seconds)
        if self._by_time is None:
            self._by_time = sorted((t, i) for i, t in enumerate(self.timestamps()))
        best = nearest_index([t for t, _ in self._by_time], seconds)
        return None if best is None else self._by_time[best][1]

    def _check_times(self, every: float) -> None:
        """Sampling by time needs times that space the files: say so, naming the fixes, when
        they cannot (all files share one mtime after a copy), rather than take one sample."""
        if self.fps is not None or len(self.paths) < 2:
            return
        times = self.timestamps()
        span = max(times) - min(times)
        if span < every - TIME_EPS:
            raise InputError(
                f"{self.info.name}: the times of its {len(self.paths)} images (from "
                f"{self._times_from}) span only {round(span, 3):g} s, less than "
                f"--every {every:g}s, so only one would be sampled; give --fps N "
                "(image i at i/N s), --time-pattern '%Y%m%d_%H%M%S' (times in the file names) "
                "or --every 1f (every image)"
            )

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
        return read_frame(self.paths[i], i, ts, self.stats, self.max_side)

    def _sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        # Checked here, when sample() is called, not on the first next(): the caller learns
        # before any image is read, and the pipeline reports one line for the source.
        if every is not None:
            self._check_times(every)
        return self._timed_frames(every, start, end)

    def _timed_frames(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        times = self.timestamps()
        # Name order need not be time order: past --end, keep looking unless times only grow.
        yield from sample_times(
            ((ts, i) for i, ts in enumerate(times)),
            self._frame,
            every,
            start,
            end,
            ordered=self.fps is not None,
        )

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


def sample_times(
    timed: Iterable[tuple[float, T]],
    read: Callable[[T, float], Frame | None],
    every: float | None,
    start: float,
    end: float | None,
    ordered: bool,
) -> Iterator[Frame]:
    """Frames at ``start + k*every`` (every None: all) from (time, item) pairs, read with
    ``read(item, time)`` only when taken. ordered: times never go back, so the first past
    ``end`` ends it; otherwise later items are still looked at."""
    target = start
    for ts, item in timed:
        if ts < target - TIME_EPS:
            continue  # skipped files are never opened
        if end is not None and ts >= end - TIME_EPS:
            if ordered:
                return
            continue
        frame = read(item, ts)
        if frame is None:
            continue  # the next readable file serves the same target
        yield frame
        if every is not None:
            target = next_target(ts, start, every)


def read_frame(
    path: Path, index: int, ts: float, stats: DecodeStats, max_side: int | None
) -> Frame | None:
    """One image file as a Frame (shrunk to ``max_side``), or None when it cannot be read,
    recorded in ``stats.skipped``: one corrupt snapshot must not cost the events of the rest."""
    from .image import load_image

    stats.decoded += 1
    try:
        pixels = load_image(path)
    except InputError as exc:
        stats.skipped.append(f"{exc} (skipped)")
        return None
    stats.converted += 1
    if max_side and max(pixels.shape[:2]) > max_side:
        import cv2

        size = shrunk_size(pixels.shape[1], pixels.shape[0], max_side)
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    return Frame(pixels=pixels, source=str(path), timestamp=ts, index=index)


def nearest_index(times: Sequence[float], seconds: float) -> int | None:
    """The place in ``times`` (ascending) nearest ``seconds``, the earlier on a tie."""
    at = bisect.bisect_left(times, seconds - TIME_EPS)
    candidates = [k for k in (at - 1, at) if 0 <= k < len(times)]
    if not candidates:
        return None
    return min(candidates, key=lambda k: (abs(times[k] - seconds), k))


def _first_size(files: Sequence[Path]) -> tuple[int, int]:
    """The size of the first readable image (a corrupt first file is skipped when read)."""
    for path in files[:-1]:
        try:
            return _image_size(path)
        except InputError:
            continue
    return _image_size(files[-1])


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import UnidentifiedImageError

    from .image import open_checked

    try:
        with open_checked(path) as img:
            # Respect EXIF rotation so the size matches what load_image returns.
            orientation = img.getexif().get(0x0112, 1)
            w, h = img.size
            return (h, w) if orientation in (5, 6, 7, 8) else (w, h)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(
            f"{path}: not an image Pillow can read ({exc}); remove it or fix the file"
        ) from exc


def _images_in(paths: Sequence[str]) -> list[str]:
    return [
        p
        for p in paths
        if Path(p).suffix.lower() in IMAGE_SUFFIXES
        and not Path(p).name.startswith(".")
        and Path(p).is_file()
    ]


def open_folder(
    folder: str | os.PathLike,
    sort: SortOrder = "name",
    fps: float | None = None,
    time_pattern: str | None = None,
) -> ImageSequenceSource:
    """Every image directly inside ``folder`` (not sub-folders; use a ``**`` glob for those)."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: no such folder; check the path")
    files = _images_in([str(p) for p in root.iterdir()])
    return ImageSequenceSource(
        files,
        name=root.name or str(root),
        kind="folder",
        sort=sort,
        fps=fps,
        time_pattern=time_pattern,
    )


def open_glob(
    pattern: str | os.PathLike,
    sort: SortOrder = "name",
    fps: float | None = None,
    time_pattern: str | None = None,
) -> ImageSequenceSource:
    """Images matching a glob pattern (``**`` recurses); non-image matches are ignored."""
    text = os.fspath(pattern)
    files = _images_in(_glob.glob(text, recursive=True))
    return ImageSequenceSource(
        files, name=text, kind="glob", sort=sort, fps=fps, time_pattern=time_pattern
    )


def open_files(
    paths: Sequence[str | os.PathLike],
    sort: SortOrder = "none",
    fps: float | None = None,
    time_pattern: str | None = None,
) -> ImageSequenceSource:
    """An explicit list of image files, in the order given unless ``sort`` says otherwise."""
    files = [Path(p) for p in paths]
    name = f"{len(files)} files" if len(files) != 1 else str(files[0]) if files else "no files"
    return ImageSequenceSource(
        files, name=name, kind="files", sort=sort, fps=fps, time_pattern=time_pattern
    )
