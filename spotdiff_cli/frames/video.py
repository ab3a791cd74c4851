"""Video files as frame sources: FFmpeg (through ffmpeg-python) first, OpenCV as the fallback.

Two backends, chosen with ``backend="auto"|"ffmpeg"|"opencv"``:

- **ffmpeg**: the binary on PATH, else the static one ``imageio-ffmpeg`` ships. Frames come out of
  a ``rawvideo``/``rgb24`` pipe. Timestamps are the *presentation* times ffmpeg's ``showinfo``
  filter prints for each frame (its ``pts`` in the time base it prints once), read from stderr
  in a thread; with ``-copyts`` they stay absolute after a seek, and we subtract the
  container's start time. There is no ffprobe in imageio-ffmpeg, so metadata is parsed from
  what ``ffmpeg -i`` prints.
- **opencv**: ``cv2.VideoCapture`` (its bundled FFmpeg). ``CAP_PROP_POS_MSEC`` after ``grab()`` is
  the frame's PTS. OpenCV seeks by *frame number* computed from the average fps, which lands
  seconds off on variable-frame-rate video, so every seek is checked against the PTS it reaches
  and corrected (:meth:`_OpenCVReader._seek`).

Both never decode what they skip when the gap is large: a sample more than ``seek_threshold``
frames ahead is reached by a container seek (the codec decodes from the previous keyframe only);
shorter gaps are walked (``grab()`` without colour conversion, or one ffmpeg ``select`` pass that
converts only selected frames). The thresholds come from ``benchmarks/decode.py`` on the
720p H.264 DVR-Scan clip (2 cores); see the constants below.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import queue
import re
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import InputError, UsageError
from ..types import Frame
from .base import TIME_EPS, DecodeStats, FrameSource, SourceInfo, next_target
from .files import not_a_file_hint, special_kind
from .keyframes import (
    LONG_SECONDS,
    PREFIX_SECONDS,
    KeyframePlan,
    PacketIndex,
    frame_plan,
    scan_packets,
    time_plan,
    time_select,
)

__all__ = [
    "VideoSource",
    "Backend",
    "FFmpegPipe",
    "find_ffmpeg",
    "available_backends",
    "rgb_pipe_args",
]

Backend = Literal["auto", "ffmpeg", "opencv"]

# Seek when the next sample is more than this many frames ahead, else decode forward. Measured
# with benchmarks/decode.py (--sweep) on the DVR-Scan 720p H.264 clip concatenated 10x, 2 cores:
#   OpenCV: walking costs ~1.5 ms/frame (grab, no colour conversion); a PTS-checked seek costs
#     105-150 ms (the codec decodes from the previous keyframe), so seeking wins from ~80 frames
#     (50f gap: seek 132 vs walk 86 ms/sample; 100f: 117 vs 149).
#   ffmpeg: a process start + probe + accurate seek costs 150-300 ms/sample; one select pass
#     ~1.7 ms/frame, so seeking wins from ~100 frames (100f: 205 vs 206; 250f: 303 vs 419).
# Both depend on the keyframe interval of the file; pass seek_threshold to override.
OPENCV_SEEK_THRESHOLD = 80
FFMPEG_SEEK_THRESHOLD = 100
# ffmpeg's decoding threads: a core is left to spotdiff's own threads, which analyse what it
# decodes. ffmpeg's own choice on two cores (three frame threads) cost the motorway's every-frame
# scans 4-7 % of their time and a tenth more CPU than one thread (benchmarks/video.py, idle;
# docs/video.md); its scale and colour conversion run on a thread of their own either way.
DECODE_THREADS = max(1, (os.cpu_count() or 2) - 1)
# ffmpeg's filter graph (the scaler, the focus cut, showinfo) on one thread where the machine has
# two cores or fewer: its slice threads (ffmpeg's own choice: as many as the cores, plus a
# thread per scaler) cost more CPU in hand-offs than the work they share when spotdiff's own
# threads already hold the other core. The motorway's --roi scan (benchmarks/video.py, 2-core
# machine, interleaved): 3,600 fewer context switches and 0.05 s less CPU a run. Larger
# machines keep ffmpeg's choice.
FILTER_THREADS = 1 if (os.cpu_count() or 2) <= 2 else None
# The pipes ffmpeg writes into (frames, their showinfo lines, a focused run's whole frames)
# are widened to this where the system allows (Linux: F_SETPIPE_SZ, up to
# /proc/sys/fs/pipe-max-size, 1 MiB by default). A 64 KiB pipe holds less than one frame, so
# ffmpeg stopped at every frame until spotdiff's reader took it, and at every burst of
# analysis (docs/video.md, "eighteenth stop").
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Python 3.10+ names it; Linux only)


def widen_pipe(fd: int) -> None:
    """Ask for a PIPE_BYTES buffer on pipe ``fd``; a system that refuses keeps its own size."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, OSError, ValueError):  # not Linux, a smaller pipe-max-size, not a pipe
        pass


_VIDEO_HINT = "check that it is a video FFmpeg can read (mp4, mkv, avi, mov, gif, ...)"

# A source's focus (``FrameSource.focus``: a watched region and its margin) is cut out in ffmpeg,
# before the scaler and the RGB conversion, when it holds at most this share of the delivered
# frame; the rest of the frame is converted and piped once per FOCUS_REFRESH_S of video. On the
# motorway's --roi scan (benchmarks/video.py) the scaler and the pipe's copies of whole 640x360
# frames were most of the run's CPU; the watched box and its margin are a fifth of the frame.
FOCUS_MAX_SHARE = 0.5
FOCUS_REFRESH_S = 1.0
# The focus is widened to the scaler's grid: with a whole factor (1280 -> 640, 1920 -> 640, or
# none) a cut that starts on it is scaled to the same pixels as the whole frame, to the bit (the
# tests compare them). Other factors (768 -> 640) are not: swscale's fixed-point filter positions
# round otherwise in a cut, up to 3 levels on 1 % of its pixels; such sources get whole frames.


def find_ffmpeg() -> str | None:
    """Path of an ffmpeg binary: ``$SPOTDIFF_FFMPEG``, PATH, then imageio-ffmpeg's; None if none."""
    explicit = os.environ.get("SPOTDIFF_FFMPEG")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    on_path = shutil.which("ffmpeg")
    if on_path:
        return on_path
    return _bundled_ffmpeg()


@functools.lru_cache(maxsize=1)
def _bundled_ffmpeg() -> str | None:
    """imageio-ffmpeg's binary, looked up once. Its own lookup runs ``ffmpeg -version`` to
    check that the binary works (~25 ms of every run's start, before decoding can begin); the
    question :func:`_showinfo_options` asks of the binary checks the same, so the file is found
    where imageio-ffmpeg keeps it and asked that instead (imageio-ffmpeg's lookup is the
    fallback for anything unexpected)."""
    try:
        from imageio_ffmpeg import _definitions, _utils

        name = _definitions.FNAME_PER_PLATFORM.get(_definitions.get_platform(), "")
        exe = os.path.join(_utils._get_bin_dir(), name) if name else ""
        if exe and Path(exe).is_file() and _showinfo_help(exe) is not None:
            return exe
    except Exception:  # another imageio-ffmpeg layout: ask it the documented way
        pass
    try:
        import imageio_ffmpeg

        exe = imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # not installed, or no binary for this platform: OpenCV takes over
        return None
    return exe if exe and Path(exe).is_file() else None


def available_backends() -> list[str]:
    """Backends usable on this machine, best first."""
    names = []
    if find_ffmpeg() is not None:
        try:
            import ffmpeg  # noqa: F401  (ffmpeg-python builds the command lines)

            names.append("ffmpeg")
        except ImportError:
            pass
    names.append("opencv")
    return names


@dataclass(frozen=True)
class FocusCut:
    """Where a focused pipe cuts each frame: ``source`` (x, y, w, h) in decoded pixels, ``out``
    the same region in delivered pixels, both on the scaler's grid."""

    source: tuple[int, int, int, int]
    out: tuple[int, int, int, int]


def focus_cut(
    source_size: tuple[int, int], out_size: tuple[int, int], focus: tuple[int, int, int, int]
) -> FocusCut | None:
    """The cut that holds ``focus`` (x, y, w, h, source pixels) for frames decoded at
    ``source_size`` (w, h) and delivered at ``out_size``; None when it would hold more than
    FOCUS_MAX_SHARE of the frame or the scaler's grid is too coarse (whole frames then).

    Per axis the decoded side s must be a whole multiple of the delivered side d; a cut that
    starts on an even delivered pixel (whole 4:2:0 chroma samples) and ends on one (or at the
    frame's edge) is then scaled to the whole frame's pixels, to the bit."""
    lows, sizes = [], []
    for axis in (0, 1):
        s, d = source_size[axis], out_size[axis]
        if s % d or s % 2:
            return None
        step = 2  # delivered pixels per grid step
        start, length = focus[axis], focus[axis + 2]
        lo = max(0, math.floor(start * d / s / step) * step)
        hi = min(d, math.ceil((start + length) * d / s / step) * step)
        if hi <= lo:
            return None
        lows.append(lo)
        sizes.append(hi - lo)
    (x, y), (w, h) = lows, sizes
    if w * h > FOCUS_MAX_SHARE * out_size[0] * out_size[1]:
        return None

    def to_source(v: int, axis: int) -> int:
        return v * source_size[axis] // out_size[axis]  # exact on the grid

    return FocusCut(
        source=(to_source(x, 0), to_source(y, 1), to_source(w, 0), to_source(h, 1)),
        out=(x, y, w, h),
    )


class VideoSource(FrameSource):
    """Frames of one video file, with presentation timestamps.

    ``backend``: "auto" (ffmpeg if a binary is found, else opencv), "ffmpeg" or "opencv".
    ``seek_threshold``: frames ahead beyond which a seek replaces sequential decoding (None: the
    backend's measured default; 0: always seek; a huge value: never seek).
    Raises InputError if the file is missing or not a readable video.
    """

    def __init__(
        self, path: str | os.PathLike, backend: Backend = "auto", seek_threshold: int | None = None
    ) -> None:
        super().__init__()
        self.path = Path(path)
        if not self.path.exists():
            raise InputError(f"{self.path}: no such file; check the path")
        if self.path.is_dir():
            raise InputError(
                f"{self.path} is a folder; open it as a folder source (or give a video file)"
            )
        odd = special_kind(self.path)
        if odd is not None:
            raise InputError(f"{self.path} {not_a_file_hint(odd)}")
        if backend not in ("auto", "ffmpeg", "opencv"):
            raise UsageError(f"unknown video backend {backend!r}; use auto, ffmpeg or opencv")
        if backend == "auto":
            backend = available_backends()[0]  # type: ignore[assignment]
        if backend == "ffmpeg":
            exe = find_ffmpeg()
            if exe is None:
                raise UsageError(
                    "backend 'ffmpeg' needs an ffmpeg binary; install ffmpeg or imageio-ffmpeg, or use --backend opencv"
                )
            self._reader: _FFmpegReader | _OpenCVReader = _FFmpegReader(
                self.path, exe, self.stats, seek_threshold
            )
        else:
            self._reader = _OpenCVReader(self.path, self.stats, seek_threshold)
        self.info = self._reader.info

    def _sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        self._reader.size = self.output_size()
        self._reader.focus = self.focus
        return self._reader.sample_seconds(every, start, end)

    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        self._reader.size = self.output_size()
        self._reader.focus = self.focus
        return self._reader.sample_frames(every, start, end)

    def close(self) -> None:
        self._reader.close()


# -- OpenCV -----------------------------------------------------------------------------------


class _OpenCVReader:
    """cv2.VideoCapture with PTS-checked seeking and grab()-based skipping."""

    def __init__(self, path: Path, stats: DecodeStats, seek_threshold: int | None) -> None:
        import cv2

        self.cv2 = cv2
        self.path = path
        self.stats = stats
        self.seek_threshold = OPENCV_SEEK_THRESHOLD if seek_threshold is None else seek_threshold
        self.cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
        if not self.cap.isOpened():
            raise InputError(f"{path}: cannot open as a video; {_VIDEO_HINT}")
        width = int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps = float(self.cap.get(cv2.CAP_PROP_FPS)) or None
        count = int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT))
        if width <= 0 or height <= 0:
            raise InputError(f"{path}: no video stream found; {_VIDEO_HINT}")
        # OpenCV reports the *average* fps (frames / duration), so count / fps is the duration.
        duration = count / fps if count > 0 and fps else None
        self.info = SourceInfo(
            name=path.name,
            kind="video",
            width=width,
            height=height,
            duration=duration,
            fps=fps,
            frame_count=count if count > 0 else None,
            backend="opencv",
        )
        self.fps = fps or 25.0  # only used to convert gaps to frame counts; never for timestamps
        self.pts: float | None = None  # timestamp of the frame last grabbed (None: none yet)
        self.index = -1  # index of the frame last grabbed
        self.can_seek = True
        self.frame_seek_ok = True  # False once a POS_FRAMES seek proved inexact (VFR)
        self.size: tuple[int, int] | None = None  # (w, h) frames are delivered at; None: as decoded
        self.focus: tuple[int, int, int, int] | None = None  # whole frames here either way

    def _grab(self) -> bool:
        if not self.cap.grab():
            return False
        self.stats.decoded += 1
        self.index += 1
        self.pts = self.cap.get(self.cv2.CAP_PROP_POS_MSEC) / 1000.0
        return True

    def _frame(self) -> Frame | None:
        """The grabbed frame, or None (recorded in ``stats.skipped``) when it cannot be decoded."""
        ok, bgr = self.cap.retrieve()
        if not ok or bgr is None:
            self.stats.skipped.append(
                f"{self.path}: frame {self.index} could not be decoded (skipped); the file may be corrupt"
            )
            return None
        self.stats.converted += 1
        if self.size is not None and (bgr.shape[1], bgr.shape[0]) != self.size:
            bgr = self.cv2.resize(bgr, self.size, interpolation=self.cv2.INTER_AREA)
        rgb = self.cv2.cvtColor(bgr, self.cv2.COLOR_BGR2RGB)
        return Frame(pixels=rgb, source=str(self.path), timestamp=self.pts, index=self.index)

    def _seek(self, target: float) -> bool:
        """Leave the capture on a grabbed frame with PTS <= target, at most ``seek_threshold``
        frames early when possible, using seeks; the caller then grabs forward. False at end.

        OpenCV turns a time into a frame number with the *average* fps, so on VFR video it can
        land seconds away from the target (aim 20 s -> 21.84 s, aim 10 s -> 6.6 s on the
        DVR-Scan clip). Each landing is checked against the real PTS: a late one moves the aim
        back by the error plus a growing margin; an early one far from the target moves it
        forward by most of the error. The best early landing is kept, so at worst we walk from it.
        """
        frame = 1.0 / self.fps
        window = max(self.seek_threshold, 1) * frame  # landing this far early is cheap to walk
        aim = target - frame  # aim one frame early: landing before the target is the cheap side
        margin = 0.5
        best: tuple[float, float] | None = None  # (landed PTS, aim) of the latest early landing
        for _ in range(4):
            if aim <= 0:
                break
            if not self._seek_once(aim):
                if not self.can_seek:
                    return self._rewind_if_needed(target)
                aim -= max(1.0, 0.1 * aim)  # past the end (duration estimate too long): go earlier
                continue
            assert self.pts is not None
            if self.pts <= target + TIME_EPS:
                if best is None or self.pts > best[0]:
                    best = (self.pts, aim)
                if target - self.pts <= window:
                    return True
                aim += (target - self.pts) * 0.8  # undershoot by a fifth rather than overshoot
            else:
                aim -= (self.pts - target) + margin
                margin *= 2
        if best is not None:
            if self.pts != best[0] and not self._seek_once(best[1]):
                return self._rewind_to_start()
            return True  # early but correct: the caller walks the rest
        return self._rewind_to_start()

    def _seek_once(self, aim: float) -> bool:
        """One container seek to ``aim`` seconds and a grab; False if it could not."""
        cv2 = self.cv2
        if not self.cap.set(cv2.CAP_PROP_POS_MSEC, aim * 1000.0):
            self.can_seek = False  # some GIF/raw streams cannot seek: walking takes over
            return False
        self.stats.seeks += 1
        if not self.cap.grab():
            return False
        self.stats.decoded += 1
        self.pts = self.cap.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
        # Our own index estimate (OpenCV's POS_FRAMES after a seek is also derived from the PTS):
        # exact for constant frame rate, approximate for VFR; monotonic either way.
        self.index = int(round(self.pts * self.fps))
        return True

    def _rewind_if_needed(self, target: float) -> bool:
        if self.pts is not None and self.pts <= target + TIME_EPS:
            return True
        return self._rewind_to_start()

    def _rewind_to_start(self) -> bool:
        cv2 = self.cv2
        self.cap.release()
        self.cap = cv2.VideoCapture(str(self.path), cv2.CAP_FFMPEG)
        self.stats.seeks += 1
        self.index, self.pts = -1, None
        return self._grab()

    def _advance_to_time(self, target: float) -> bool:
        """Grab until the current frame's PTS >= target, seeking first if the gap is large."""
        if self.pts is not None and self.pts >= target - TIME_EPS:
            return True
        gap_frames = (target - (self.pts if self.pts is not None else 0.0)) * self.fps
        behind = self.pts is not None and target < self.pts - TIME_EPS
        if self.can_seek and (gap_frames > self.seek_threshold or behind):
            if not self._seek(target):
                return False
            if self.pts is not None and self.pts >= target - TIME_EPS:
                return True
        while self._grab():
            if self.pts is not None and self.pts >= target - TIME_EPS:
                return True
        return False

    def sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        if not self._advance_to_time(start):
            return
        while True:
            if end is not None and self.pts is not None and self.pts >= end - TIME_EPS:
                return
            frame = self._frame()
            if frame is not None:
                yield frame
            assert self.pts is not None
            if every is None:
                ok = self._grab()  # every frame: simply the next one
            else:
                ok = self._advance_to_time(next_target(self.pts, start, every))
            if not ok:
                return

    def sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        if not self._advance_to_time(start):
            return
        while True:
            if end is not None and self.pts is not None and self.pts >= end - TIME_EPS:
                return
            frame = self._frame()
            if frame is not None:
                yield frame
            wanted = self.index + every
            prev_pts, prev_index = self.pts, self.index
            if every > self.seek_threshold and self.can_seek and self.frame_seek_ok:
                # Frame-accurate seek for large strides. OpenCV maps frame numbers to times with
                # the average fps, exact only for constant frame rate: check the landing and, if
                # it is off by more than half a frame, stop frame-seeking and walk instead.
                if self.cap.set(self.cv2.CAP_PROP_POS_FRAMES, wanted):
                    self.stats.seeks += 1
                    self.index = wanted - 1
                    if not self._grab():
                        return
                    if abs(self.pts - (prev_pts + every / self.fps)) <= 0.5 / self.fps:
                        continue
                    self.frame_seek_ok = False
                    if not self._seek(prev_pts) or not self._advance_to_time(prev_pts):
                        return
                    self.index = prev_index
                else:
                    self.can_seek = False
            while self.index < wanted:
                if not self._grab():
                    return

    def close(self) -> None:
        self.cap.release()


# -- FFmpeg -----------------------------------------------------------------------------------

_DURATION = re.compile(
    r"Duration:\s*(?:(\d+):(\d+):(\d+(?:\.\d+)?)|N/A)(?:,\s*start:\s*(-?\d+(?:\.\d+)?))?"
)
_STREAM = re.compile(r"Stream #\d+:\d+.*?: Video: (?P<codec>\w+).*?, (?P<w>\d{2,5})x(?P<h>\d{2,5})")
_FPS = re.compile(r"([\d.]+)(k?) fps")
_TBR = re.compile(r"([\d.]+)(k?) tbr")
_SHOWINFO = re.compile(
    r"\[Parsed_showinfo_(\d+) @ [^\]]*\] n:\s*(\d+) pts:\s*(-?\d+|NOPTS) pts_time:(\S+)"
)
# showinfo's time base, printed once per instance: a frame's time is its pts in it, exactly.
# Older ffmpeg (5.x, 6.x: Debian's, which PATH finds first) prints pts_time with six
# significant digits: past 10,000 s (2.8 hours) rounded to tenths, so frames of a night's
# recording at 25 fps would share their times.
_SHOWINFO_BASE = re.compile(r"\[Parsed_showinfo_(\d+) @ [^\]]*\] config in time_base: (\d+)/(\d+)")


def _rate(match: re.Match[str] | None) -> float | None:
    if not match:
        return None
    return float(match[1]) * (1000.0 if match[2] else 1.0)


@dataclass(frozen=True)
class InputSummary:
    """What ffmpeg's input summary (``ffmpeg -i SOURCE`` on stderr) says about the first video
    stream: size, the average rate ("fps") and the guessed base rate ("tbr"), the duration (None
    for "N/A", a live stream) and the start time."""

    width: int
    height: int
    fps: float | None
    tbr: float | None
    duration: float | None
    start: float


def parse_input_summary(text: str) -> InputSummary | None:
    """:class:`InputSummary` of ffmpeg's stderr header, or None when it names no video stream."""
    stream = _STREAM.search(text)
    if stream is None:
        return None
    line = text[stream.start() :].splitlines()[0]
    duration, start = None, 0.0
    dur = _DURATION.search(text)
    if dur:
        if dur[1] is not None:
            duration = int(dur[1]) * 3600 + int(dur[2]) * 60 + float(dur[3])
        if dur[4] is not None:
            start = float(dur[4])
    return InputSummary(
        int(stream["w"]),
        int(stream["h"]),
        _rate(_FPS.search(line)),
        _rate(_TBR.search(line)),
        duration,
        start,
    )


def _probe_args(exe: str, path: str | os.PathLike) -> list[str]:
    """`ffmpeg -i file` with no output prints the container and stream summary and exits 1."""
    return [exe, "-hide_banner", "-nostdin", "-i", str(path)]


# ``ffmpeg -i`` already running for files a command line named (``probe_ahead``), by (binary,
# resolved path): the first open of each takes its answer.
_AHEAD: dict[tuple[str, str], subprocess.Popen] = {}
_AHEAD_LOCK = threading.Lock()
_AHEAD_KEPT = 8  # answers waiting at most: a process that calls the command often stays clean


def probe_ahead(sources: list[str], limit: int = 2) -> None:
    """Start asking ffmpeg about the first ``limit`` of ``sources`` that are files, for
    :class:`VideoSource` to take the answers when it opens them. The command line knows its
    sources before the pipeline's modules are imported (~80 ms on one core while the other
    waits); asked then, the probe (~17 ms before the first frame) runs beside the imports
    instead of after them. Anything else (a folder, a stream, no ffmpeg) is left to be opened
    as usual, and an answer nobody takes is only a finished process."""
    exe = find_ffmpeg()
    if exe is None:
        return
    files = (s for s in sources if os.path.isfile(s))
    for source in itertools.islice(files, limit):
        key = (exe, os.path.realpath(source))
        with _AHEAD_LOCK:
            if key in _AHEAD:
                continue
            while len(_AHEAD) >= _AHEAD_KEPT:  # runs that never opened theirs: reaped
                _forget(_AHEAD.pop(next(iter(_AHEAD))))
            try:
                _AHEAD[key] = subprocess.Popen(
                    _probe_args(exe, source),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="replace",
                )
            except OSError:  # asked again, and told properly, when the source opens
                return


def _forget(proc: subprocess.Popen) -> None:
    """End and reap a probe nobody will read (no zombie is left in a long-lived process)."""
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
        proc.communicate(timeout=5)


def _asked_ahead(exe: str, path: Path) -> str | None:
    """What ``probe_ahead`` heard for ``path`` (its stderr), or None when it did not ask."""
    with _AHEAD_LOCK:
        proc = _AHEAD.pop((exe, os.path.realpath(path)), None)
    if proc is None:
        return None
    try:
        return proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:  # asked again the usual way, with its own limit
        _forget(proc)
        return None


class _FFmpegReader:
    """ffmpeg subprocesses driven by ffmpeg-python; stateless between samples (each sampling run
    starts its own process, seeking with ``-ss`` so skipped footage is never decoded)."""

    def __init__(
        self, path: Path, exe: str, stats: DecodeStats, seek_threshold: int | None
    ) -> None:
        self.path = path
        self.exe = exe
        self.stats = stats
        self.seek_threshold = FFMPEG_SEEK_THRESHOLD if seek_threshold is None else seek_threshold
        self._procs: list[FFmpegPipe] = []
        self.info, self.start_time = self._probe()
        self.size: tuple[int, int] | None = None  # (w, h) frames are delivered at; None: as decoded
        # FrameSource.focus: cut out in ffmpeg (focus_cut), the rest piped once per second
        self.focus: tuple[int, int, int, int] | None = None
        self.fps = self.info.fps or 25.0
        # Decode only the keyframes where they are all a dense sampling keeps (keyframes.py);
        # False: always decode every frame (the tests compare the two).
        self.keyframes = True
        self._packet_index: PacketIndex | None | bool = False  # False: not scanned yet
        self.keyframe_fallbacks = 0  # plans the decoded frames disagreed with

    def _probe(self) -> tuple[SourceInfo, float]:
        text = _asked_ahead(self.exe, self.path)
        if text is None:
            proc = subprocess.run(
                _probe_args(self.exe, self.path),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=60,
            )
            text = proc.stderr
        summary = parse_input_summary(text)
        if summary is None:
            last = _last_error_line(text)
            raise InputError(f"{self.path}: not a readable video ({last}); {_VIDEO_HINT}")
        fps, tbr, duration, start = summary.fps, summary.tbr, summary.duration, summary.start
        # ffmpeg prints the average rate as "fps" and the guessed base rate as "tbr": when they
        # differ the stream is variable-frame-rate (the DVR-Scan VFR clip: 16.72 fps, 25 tbr).
        vfr = None if fps is None or tbr is None else abs(fps - tbr) > 0.01 * tbr
        fps = fps or tbr
        count = int(round(duration * fps)) if duration and fps and vfr is False else None
        info = SourceInfo(
            name=self.path.name,
            kind="video",
            width=summary.width,
            height=summary.height,
            duration=duration,
            fps=fps,
            frame_count=count,
            backend="ffmpeg",
            variable_frame_rate=vfr,
        )
        return info, start

    # One sampling run = one process; a seek = a new process with -ss.
    def _run(
        self,
        seek: float | None,
        select: str | None,
        limit: float | None,
        max_frames: int | None,
        interval: float | None = None,
        keyframes_only: bool = False,
    ) -> Iterator[tuple[np.ndarray, float, int]]:
        """Yield (rgb, timestamp, n) for frames ffmpeg selects. ``n`` counts decoded frames of this
        run from 0. ``seek``: -ss position (accurate seek, decodes from the previous keyframe).
        ``limit``: stop reading input at this timestamp. ``max_frames``: stop after this many.
        ``interval``: seconds between the frames it delivers (a dense run), for a ``focus``:
        the rest of the frame is then piped every FOCUS_REFRESH_S (:func:`focus_cut`).
        ``keyframes_only``: the decoder skips every other frame (``-skip_frame nokey``; the
        ``n`` it yields then counts keyframes, see :meth:`_planned`)."""
        import ffmpeg

        in_kwargs: dict[str, object] = {"copyts": None}  # keep absolute PTS after -ss
        in_kwargs["threads"] = DECODE_THREADS
        if keyframes_only:
            in_kwargs["skip_frame"] = "nokey"
        if seek is not None and seek > 0:
            in_kwargs["ss"] = f"{seek:.6f}"
            self.stats.seeks += 1
        if limit is not None:
            in_kwargs["t"] = f"{max(limit - (seek or 0.0), 0.001):.6f}"
        stream = ffmpeg.input(str(self.path), **in_kwargs).video
        w, h = self.size or (self.info.width, self.info.height)
        # Shrink in ffmpeg, after select and before the RGB conversion: only the kept frames
        # are scaled, and a 720p stream analysed at 640 px sends a quarter of the bytes
        # through the pipe.
        scale = (w, h) if (w, h) != (self.info.width, self.info.height) else None
        refresh = round(FOCUS_REFRESH_S / interval) if interval else 0
        cut = None
        if self.focus is not None and max_frames is None and refresh >= 2:
            cut = focus_cut((self.info.width, self.info.height), (w, h), self.focus)
        side: _SideFrames | None = None
        if cut is None:
            args = rgb_pipe_args(
                self.exe, stream, select=select, scale=scale, max_frames=max_frames
            )
            pipe = FFmpegPipe(args, self.stats, selects=select is not None)
            self._procs.append(pipe)  # close() from another thread ends it
            frames = pipe.frames(w, h)
        else:
            read_end, write_end = os.pipe()
            widen_pipe(write_end)
            try:
                args = rgb_pipe_args(
                    self.exe, stream, select=select, scale=scale, focus=(cut, refresh, write_end)
                )
                pipe = FFmpegPipe(
                    args, self.stats, selects=select is not None, pass_fds=(write_end,)
                )
                self._procs.append(pipe)
            except BaseException:
                os.close(read_end)
                raise
            finally:
                os.close(write_end)  # ffmpeg holds its own copy; EOF reaches us when it ends
            side = _SideFrames(read_end, w, h)
            frames = _placed_in_whole(pipe.frames(cut.out[2], cut.out[3]), side, cut, refresh)
        produced = 0
        last_pts: float | None = None
        try:
            for rgb, pts, n in frames:
                if pts is None:
                    # Frame without a timestamp (rare, broken streams): one average frame later.
                    pts = (
                        (last_pts + 1.0 / self.fps)
                        if last_pts is not None
                        else (seek or 0.0) + self.start_time
                    )
                last_pts = pts
                produced += 1
                yield rgb, pts - self.start_time, n
        finally:
            pipe.close()
            if side is not None:
                side.close()
            if pipe in self._procs:
                self._procs.remove(pipe)
        if produced == 0 and pipe.returncode not in (0, None, -9) and seek is None:
            raise InputError(
                f"{self.path}: ffmpeg could not decode it ({' '.join(pipe.tail[-1:]) or 'no frames'}); {_VIDEO_HINT}"
            )

    def _keyframe_plan(
        self, plan: PlanFn, seek: float | None, end: float | None
    ) -> KeyframePlan | None:
        """``plan`` over the stream's packets (:func:`keyframes.scan_packets`): a long stream's
        first minute first, from ``seek`` on where the run seeks (``LONG_SECONDS``), so that
        a sampling it rules out does not read the whole file; then the packets the run will
        read (the whole stream's once per source, a seeking run's from its seek point)."""
        exe, path = self.exe, str(self.path)
        from_time = None if seek is None else seek + self.start_time
        span = None if end is None else max(end - (seek or 0.0), 0.001)
        # What the run reads: to ``end``, else to the end of the stream where the probe knew
        # it (a short file is scanned whole at once, with no first-minute scan before it).
        reads = span
        if reads is None and self.info.duration:
            reads = max(self.info.duration - (seek or 0.0), 0.001)
        if self._packet_index is False or seek is not None:
            if reads is None or reads > LONG_SECONDS:
                prefix = scan_packets(exe, path, PREFIX_SECONDS, start=seek)
                if prefix is None or plan(prefix, from_time) is None:
                    return None
        if seek is not None:
            index = scan_packets(exe, path, span, start=seek)
        else:
            if self._packet_index is False:
                self._packet_index = scan_packets(exe, path)
            index = self._packet_index  # type: ignore[assignment]
        return plan(index, from_time) if isinstance(index, PacketIndex) else None

    def _planned(
        self,
        plan: KeyframePlan,
        seek: float | None,
        select: str | None,
        limit: float | None,
        interval: float,
    ) -> Iterator[tuple[np.ndarray, float, int]]:
        """The frames of the ordinary dense pass (``select``, from ``seek`` or the start),
        decoded from the keyframes alone as ``plan`` says; if what comes out is not the plan's
        frames, the rest comes from the ordinary pass, from the first frame not yet
        delivered."""
        delivered = 0
        last: float | None = None
        frames = self._run(seek, plan.select, limit, None, interval, keyframes_only=True)
        with contextlib.closing(frames):
            for rgb, ts, _ in frames:
                if delivered >= len(plan.times) or not _same_time(
                    ts + self.start_time, plan.times[delivered]
                ):
                    break
                yield rgb, ts, plan.indices[delivered]
                delivered, last = delivered + 1, ts
            else:
                if delivered == len(plan.times) or limit is not None:
                    return
        self.keyframe_fallbacks += 1
        for rgb, ts, n in self._run(seek, select, limit, None, interval):
            if last is None or ts > last + TIME_EPS:
                yield rgb, ts, n

    def _dense(
        self,
        seek: float | None,
        select: str | None,
        end: float | None,
        interval: float,
        plan: PlanFn,
    ) -> Iterator[tuple[np.ndarray, float, int]]:
        """One pass over the stream (``_run``), from the keyframes alone where ``plan`` finds
        that every frame ``select`` keeps is one."""
        found = self._keyframe_plan(plan, seek, end) if self.keyframes else None
        if found is not None:
            return self._planned(found, seek, select, end, interval)
        return self._run(seek, select, end, None, interval)

    def _index(self, seek: float | None, n: int, ts: float) -> int:
        # Exact when decoding from the start; after a seek ffmpeg's counter restarts, so the index
        # is estimated from the timestamp (exact for CFR, approximate for VFR).
        return n if not seek else int(round(ts * self.fps))

    def sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        src = str(self.path)
        stride_frames = (every or 0.0) * self.fps
        if every is not None and stride_frames > self.seek_threshold:
            # Sparse: one short ffmpeg run per sample, each starting with an input seek.
            target = start
            while end is None or target < end - TIME_EPS:
                got = next(self._run(seek=target, select=None, limit=end, max_frames=1), None)
                if got is None:
                    return
                rgb, ts, n = got
                if end is not None and ts >= end - TIME_EPS:
                    return
                yield Frame(pixels=rgb, source=src, timestamp=ts, index=self._index(target, n, ts))
                target = next_target(ts, start, every)
            return
        # Dense (or every frame): one pass; select converts only the frames we keep. `t` is the
        # absolute PTS (copyts), so the targets are shifted by the container start time. The
        # expression keeps the next target in variable 0, initialised to the first target.
        select = None
        if every is not None:
            first = start + self.start_time
            select = time_select(first, every)
        seek = start if start > 0 else None
        interval = every if every is not None else 1.0 / self.fps
        frames = (
            self._dense(
                seek, select, end, interval, lambda i, f: time_plan(i, first, every, select, f)
            )
            if every is not None
            else self._run(seek, select, end, None, interval)
        )
        for rgb, ts, n in frames:
            if ts < start - TIME_EPS:
                continue
            if end is not None and ts >= end - TIME_EPS:
                return
            yield Frame(pixels=rgb, source=src, timestamp=ts, index=self._index(seek, n, ts))

    def sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        src = str(self.path)
        seek = start if start > 0 else None
        if every > self.seek_threshold and self.info.variable_frame_rate is False:
            # Large stride on a constant-rate stream: N frames is exactly N/fps seconds, so
            # seek per sample like the sparse time case.
            yield from self.sample_seconds(every / self.fps, start, end)
            return
        select = f"not(mod(n,{every}))" if every > 1 else None
        frames = (
            self._dense(seek, select, end, every / self.fps, lambda i, f: frame_plan(i, every, f))
            if every > 1
            else self._run(seek, select, end, None, every / self.fps)
        )
        for rgb, ts, n in frames:
            if end is not None and ts >= end - TIME_EPS:
                return
            yield Frame(pixels=rgb, source=src, timestamp=ts, index=self._index(seek, n, ts))

    def close(self) -> None:
        for pipe in list(self._procs):
            pipe.close()
        self._procs.clear()


# -- the decode pipe (also what frames.stream reads live streams with) ---------------------------


def rgb_pipe_args(
    exe: str,
    stream: object,
    *,
    select: str | None = None,
    scale: tuple[int | str, int | str] | None = None,
    max_frames: int | None = None,
    focus: tuple[FocusCut, int, int] | None = None,
) -> list[str]:
    """The ffmpeg command line that decodes ``stream`` (an ffmpeg-python input's ``.video``)
    to raw RGB on stdout, for :class:`FFmpegPipe`.

    showinfo before ``select`` sees every decoded frame (the decode count); the one after it
    prints the PTS of each frame that reaches the pipe, in pipe order. Without ``select``
    every decoded frame reaches the pipe and the one after tells both (a line less per frame
    for ffmpeg to print and for :class:`FFmpegPipe` to parse). ``scale``: (w, h) to
    shrink to, after select ("area" averages like OpenCV's INTER_AREA), as numbers or
    ffmpeg expressions of ``iw`` / ``ih``. ``max_frames``: stop
    after this many. Frames leave as rgb24, (h, w, 3) uint8, at their own times (passthrough).

    ``focus``: (cut, refresh, fd): stdout carries only ``cut`` of each frame (cut before the
    scaler, so neither it nor the pipe carries the rest), and file descriptor ``fd`` every
    ``refresh``-th frame whole (:class:`_SideFrames` reads it).
    """
    if select is not None:
        stream = stream.filter("showinfo", **_showinfo_options(exe))  # type: ignore[attr-defined]
        stream = stream.filter("select", select)
    whole = None
    if focus is not None:
        cut, refresh, _ = focus
        branches = stream.split()  # type: ignore[attr-defined]
        stream, whole = branches[0], branches[1].filter("select", f"not(mod(n,{refresh}))")
        x, y, w, h = cut.source
        stream = stream.crop(x, y, w, h)
        if scale is not None:
            stream = stream.filter("scale", cut.out[2], cut.out[3], flags="area")
            whole = whole.filter("scale", scale[0], scale[1], flags="area")
    elif scale is not None:
        stream = stream.filter("scale", scale[0], scale[1], flags="area")
    stream = stream.filter("showinfo", **_showinfo_options(exe))
    out_kwargs: dict[str, object] = {
        "format": "rawvideo",
        "pix_fmt": "rgb24",
        "fps_mode": "passthrough",
        "an": None,
        "sn": None,
        "dn": None,
    }
    if max_frames is not None:
        out_kwargs["frames:v"] = max_frames
    output = stream.output("pipe:", **out_kwargs)
    if focus is not None:
        import ffmpeg

        output = ffmpeg.merge_outputs(output, whole.output(f"pipe:{focus[2]}", **out_kwargs))
    threads = () if FILTER_THREADS is None else ("-filter_complex_threads", str(FILTER_THREADS))
    return output.global_args("-hide_banner", "-nostdin", "-nostats", *threads).compile(cmd=exe)


_DEMUX_ERROR = re.compile(r"Error during demuxing: (.*)")


class FFmpegPipe:
    """One ffmpeg process from :func:`rgb_pipe_args`: raw RGB frames on stdout, each frame's
    PTS read from showinfo's stderr lines in a thread.

    header: set once ffmpeg has printed the output stream (its size is known: ``out_size``)
    or has ended. header_text: what ffmpeg printed before that (the input's summary).
    tail: its last non-showinfo lines (for error messages). demux_error: the last "Error
    during demuxing" reason (how a network input ended). new_session: start ffmpeg in its
    own process group, so a terminal's Ctrl-C reaches spotdiff, which then ends it
    (:meth:`close`), instead of ffmpeg ending first and looking like the end of the input.
    selects: the command has a ``select`` filter, with a showinfo before it that counts the
    decoded frames (``rgb_pipe_args(select=...)``); else its one showinfo counts both.
    """

    def __init__(
        self,
        args: list[str],
        stats: DecodeStats,
        new_session: bool = False,
        selects: bool = False,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.stats = stats
        self.selects = selects
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=new_session,
            pass_fds=pass_fds,
        )
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                widen_pipe(stream.fileno())
        self.header = threading.Event()
        self.header_text = ""
        self.out_size: tuple[int, int] | None = None
        self.tail: list[str] = []
        self.demux_error: str | None = None
        self._times: queue.Queue[tuple[float | None, int]] = queue.Queue()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def _read_stderr(self) -> None:
        # The first showinfo instance has the lower parse index; its lines count decoded
        # frames, the other's give the piped frames' timestamps (with no select, the one
        # instance's lines do both).
        assert self.proc.stderr is not None
        first_idx: int | None = None
        time_bases: dict[int, tuple[int, int]] = {}  # showinfo instance -> its time base
        decoded = -1
        head: list[str] = []
        output = False
        try:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace")
                m = _SHOWINFO.search(line)
                if m is None and "config in time_base" in line:
                    base = _SHOWINFO_BASE.search(line)
                    if base is not None and int(base[3]) > 0:
                        time_bases[int(base[1])] = (int(base[2]), int(base[3]))
                    continue
                if m is None:
                    if "showinfo" in line:
                        continue
                    self.tail.append(line.strip())
                    del self.tail[:-5]
                    error = _DEMUX_ERROR.search(line)
                    if error:
                        self.demux_error = error[1].strip()
                    if not self.header.is_set():
                        head.append(line)
                        output = output or line.startswith("Output #")
                        stream = _STREAM.search(line) if output else None
                        if stream is not None:
                            self.out_size = (int(stream["w"]), int(stream["h"]))
                            self.header_text = "".join(head)
                            self.header.set()
                    continue
                idx = int(m[1])
                first_idx = idx if first_idx is None else min(first_idx, idx)
                if idx == first_idx:
                    decoded += 1
                    self.stats.decoded += 1
                if idx != first_idx or not self.selects:
                    base = time_bases.get(idx)
                    if m[3] == "NOPTS":
                        pts = None
                    elif base is not None:
                        pts = int(m[3]) * base[0] / base[1]
                    else:
                        pts = float(m[4])
                    self._times.put((pts, decoded))
        finally:
            if not self.header.is_set():
                self.header_text = "".join(head)
                self.header.set()
            self._times.put((None, -1))  # end marker

    def frames(self, width: int, height: int) -> Iterator[tuple[np.ndarray, float | None, int]]:
        """(rgb (height, width, 3) uint8, pts s or None, n) per piped frame until ffmpeg ends;
        ``n`` counts the frames ffmpeg decoded in this process, from 0."""
        size = width * height * 3
        assert self.proc.stdout is not None
        while True:
            buf = self.proc.stdout.read(size)
            if len(buf) < size:
                return
            pts, n = self._times.get(timeout=60)
            self.stats.converted += 1
            yield np.frombuffer(buf, np.uint8).reshape(height, width, 3), pts, n

    def kill(self) -> None:
        """End ffmpeg now (any thread): a read blocked in :meth:`frames` returns."""
        if self.proc.poll() is None:
            self.proc.kill()

    def close(self) -> None:
        """Kill ffmpeg if still running and reap it, so no process outlives the reader."""
        self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc.wait()
        self._reader.join(timeout=5)


class _SideFrames:
    """The whole frames a focused pipe sends on its second descriptor (every ``refresh``-th
    delivered frame), read on a thread of their own so ffmpeg never waits on a full pipe while
    the frames on stdout are read. :meth:`get` hands out the k-th."""

    def __init__(self, fd: int, width: int, height: int) -> None:
        self._file = os.fdopen(fd, "rb")  # buffered: read(n) returns n bytes or the end
        self._shape = (height, width, 3)
        self._frames: dict[int, np.ndarray] = {}
        self._count = 0
        self._ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        size = self._shape[0] * self._shape[1] * 3
        try:
            while True:
                buf = self._file.read(size)
                if len(buf) < size:
                    return
                with self._changed:
                    self._frames[self._count] = np.frombuffer(buf, np.uint8).reshape(self._shape)
                    self._count += 1
                    self._changed.notify_all()
        except (OSError, ValueError):  # closed under us (close() while ffmpeg ran)
            return
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def has(self, k: int) -> bool:
        """Whether the k-th whole frame is here, or none will come."""
        with self._changed:
            return self._count > k or self._ended

    def get(self, k: int) -> np.ndarray | None:
        """The k-th whole frame (waiting for it), forgetting the ones before; the latest one
        read when ffmpeg ended before sending it; None when it sent none."""
        with self._changed:
            self._changed.wait_for(lambda: self._count > k or self._ended)
            for old in [i for i in self._frames if i < min(k, self._count - 1)]:
                del self._frames[old]
            if k in self._frames:
                return self._frames[k]
            return self._frames[max(self._frames)] if self._frames else None

    def close(self) -> None:
        """After ffmpeg has ended (its end is the reader's): the thread, then the file."""
        self._thread.join(timeout=5)
        self._file.close()


def _placed_in_whole(
    cuts: Iterator[tuple[np.ndarray, float | None, int]],
    side: _SideFrames,
    cut: FocusCut,
    refresh: int,
) -> Iterator[tuple[np.ndarray, float | None, int]]:
    """Each cut (the focus, current) written into the latest whole frame at or before it:
    whole (h, w, 3) frames, current inside the focus, at most ``refresh`` - 1 frames old
    outside it. Read-only, as the pipe's own frames are.

    ffmpeg sends a whole frame some dozens of cuts after the cut of the same frame (its queues
    between the filters and the two outputs fill with cuts first): waiting for it without
    reading on would stop both, so the cuts are read ahead until it is here."""
    x, y, w, h = cut.out
    ahead: deque[tuple[np.ndarray, float | None, int]] = deque()
    ended = False
    for j in itertools.count():
        item = ahead.popleft() if ahead else next(cuts, None)
        if item is None:
            return
        rgb, pts, n = item
        while not ended and not side.has(j // refresh):
            more = next(cuts, None)
            if more is None:
                ended = True  # the whole frame still comes, or ffmpeg has ended
            else:
                ahead.append(more)
        base = side.get(j // refresh)
        if base is None:
            raise InputError("ffmpeg ended before sending a whole frame; try --backend opencv")
        frame = base.copy()
        frame[y : y + h, x : x + w] = rgb
        frame.flags.writeable = False
        yield frame, pts, n


@functools.lru_cache(maxsize=4)
def _showinfo_help(exe: str) -> str | None:
    """``ffmpeg -h filter=showinfo``'s text; None when the binary does not run.

    The answer of a binary that ran is kept in the user's cache, keyed by the binary's path,
    size and time (:func:`_help_copy`): asking costs a launch of ffmpeg (~10 ms, before any
    frame is decoded) that every later run of the same binary would repeat for the same text."""
    copy = _help_copy(exe)
    if copy is not None:
        try:
            return copy.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # not there yet, or unreadable: asked again
            pass
    try:
        done = subprocess.run(
            [exe, "-hide_banner", "-h", "filter=showinfo"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    if copy is not None:
        from ..atomic import atomic_write_bytes

        with contextlib.suppress(Exception):  # a cache that cannot be written: asked next time
            atomic_write_bytes(copy, done.stdout.encode("utf-8"))
    return done.stdout


def _help_copy(exe: str) -> Path | None:
    """Where :func:`_showinfo_help` keeps the answer of binary ``exe``; None when the binary
    cannot be read or ``SPOTDIFF_FFMPEG_CACHE=0``."""
    if os.environ.get("SPOTDIFF_FFMPEG_CACHE", "").strip() == "0":
        return None
    from ..weights import file_key, user_cache_dir

    key = file_key(exe)
    return None if key is None else user_cache_dir() / "ffmpeg" / f"showinfo-help-{key}.txt"


def _showinfo_options(exe: str) -> dict[str, int]:
    """showinfo's per-frame plane checksums cost a third of the decode time of a 720p stream;
    ffmpeg 5.1+ can skip them (``checksum=0``). Older binaries do not know the option."""
    return {"checksum": 0} if "checksum" in (_showinfo_help(exe) or "") else {}


# A keyframe plan for a packet index, given where the run seeks (absolute s, or None).
PlanFn = Callable[[PacketIndex, float | None], KeyframePlan | None]


def _same_time(got: float, planned: float) -> bool:
    """Whether a frame's time as the pipe read it is ``planned``: exact from its pts, but from
    the printed pts_time (six significant digits in older ffmpeg) where no time base came."""
    return abs(got - planned) <= max(1e-4, 6e-6 * abs(planned))


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("  ")]
    return lines[-1] if lines else "no output"
