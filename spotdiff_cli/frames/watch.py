"""A folder a camera uploads images to, followed as files arrive (``spotdiff video --watch DIR``).

The folder is polled (every ``poll`` seconds; no file-system notification library, and polling
also works on network shares where inotify sees nothing). A file is taken once its size and
modification time are the same at two polls in a row (an upload still being written changes
between polls) and, for PNG and JPEG, its end marker is there (an upload that stalled for
longer than a poll), so a half-written image is not read. Files already there when the watch
starts are frames too, so watching a folder that is then left alone gives what the plain
folder run gives.

Times come from the same places as for a folder (``frames.folder``): ``fps`` (the n-th file
taken is at n/fps s, files of one poll in natural name order), ``time_pattern`` (the time in
the file name) or the capture time (EXIF, else mtime); seconds are counted from the first file
taken. Each poll's new files are processed in time order; a file that arrives with a time
before a frame already processed cannot be put back into the past and is skipped with a
warning (in ``stats.skipped``, as unreadable files are).

The stream ends after ``idle`` seconds in which no file appeared or changed (None: never, until
the run is interrupted); :meth:`WatchedFolderSource.interrupt` ends it at once from another
thread, which is how Ctrl-C stops a reader thread waiting for the next upload.

A resumed watch (``--resume``) is given ``origin``, the absolute time of second 0 that the run
it continues kept in its report (``info.origin``): the files it took come again with the same
times (and the pipeline's checkpoint passes over them), even once early uploads are deleted.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, UsageError
from ..types import Frame
from .base import TIME_EPS, FrameSource, SourceInfo
from .folder import (
    IMAGE_SUFFIXES,
    _image_size,
    capture_time,
    compile_time_pattern,
    natural_key,
    nearest_index,
    read_frame,
    sample_times,
)
from .timecode import check_seconds

DEFAULT_POLL = 1.0  # s: cameras upload every few seconds at most; a listing per second is cheap


_TAIL = 1024  # bytes read from a file's end to find its end marker


def looks_complete(path: Path) -> bool:
    """False for a PNG or JPEG whose end marker is missing: an upload that stalled for longer
    than a poll looks stable but is still half there. PNG ends with its IEND chunk, JPEG with
    the EOI marker (some cameras pad after it, hence the last KiB). Other formats: True."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".jpg", ".jpeg"):
        return True
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _TAIL))
            tail = f.read()
    except OSError:
        return False  # removed or locked meanwhile: look again at the next poll
    if suffix == ".png":
        return b"IEND" in tail[-12:]
    return b"\xff\xd9" in tail


@dataclass(frozen=True)
class WatchInfo(SourceInfo):
    """:class:`SourceInfo` plus ``origin``: the absolute time (epoch s) of second 0 - the
    first file's capture or file-name time (None with ``fps``) - which ``--resume`` hands
    back, so a resumed watch times its files as the run it continues did."""

    origin: float | None = None


class WatchedFolderSource(FrameSource):
    """Images in ``folder`` as they arrive; see the module docstring. ``str()`` is the folder
    as given, which is the source's name in the timeline."""

    def __init__(
        self,
        folder: str | os.PathLike,
        poll: float = DEFAULT_POLL,
        idle: float | None = None,
        fps: float | None = None,
        time_pattern: str | None = None,
        origin: float | None = None,
    ) -> None:
        super().__init__()
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise InputError(f"{self.folder}: no such folder to watch; check the path")
        poll = check_seconds(poll, "--watch-poll", "e.g. --watch-poll 1")
        if idle is not None:
            idle = check_seconds(idle, "--watch-idle", "leave it out to watch until Ctrl-C")
        if fps is not None and not 0 < fps < math.inf:
            raise UsageError(f"fps must be > 0, got {fps!r}; e.g. --fps 2")
        if fps is not None and time_pattern:
            raise UsageError("--fps and --time-pattern both give frame times; give one of them")
        self.poll, self.idle, self.fps = float(poll), idle, fps
        self.pattern = compile_time_pattern(time_pattern) if time_pattern else None
        self._name = os.fspath(folder)
        self._stop = threading.Event()
        self._seen: dict[str, tuple[int, int]] = {}  # name -> (size, mtime_ns) at the last poll
        self._taken: set[str] = set()  # names handed on (or skipped): never looked at again
        self._ready: deque[tuple[Path, float]] = deque()  # taken, in time order, not yet yielded
        # The first file's absolute time: second 0 (given: a resumed watch keeps its axis).
        self._origin: float | None = origin
        self._last = -float("inf")  # the latest time handed on, seconds from the origin
        self._last_activity = time.monotonic()
        self._times: list[float] = []  # each file handed on, in order (for frame_number)
        self._info: SourceInfo | None = None

    def __str__(self) -> str:
        return self._name

    @property  # type: ignore[override]
    def info(self) -> SourceInfo:
        """Known once the first image has arrived (its size): waits for it."""
        if self._info is None:
            if not self._wait_for_files():
                raise InputError(
                    f"{self._name}: no image arrived"
                    + (f" in {self.idle:g} s (--watch-idle)" if self.idle is not None else "")
                )
            width, height = _image_size(self._ready[0][0])
            self._info = WatchInfo(
                name=self.folder.name or self._name,
                kind="watch",
                width=width,
                height=height,
                duration=None,  # open-ended: never "truncated", never a progress total
                fps=self.fps,
                frame_count=None,
                backend="pillow",
                variable_frame_rate=None if self.fps is None else False,
                origin=self._origin,
            )
        return self._info

    def interrupt(self) -> None:
        """Stop waiting for uploads (any thread): the frame iterator ends at its next check."""
        self._stop.set()

    def close(self) -> None:
        self.interrupt()

    # -- following the folder -------------------------------------------------------------
    def _wait_for_files(self) -> bool:
        """Poll until at least one file is ready; False when idle or interrupted first."""
        while not self._ready:
            self._scan()
            if self._ready:
                return True
            if self.idle is not None and time.monotonic() - self._last_activity >= self.idle:
                return False
            if self._stop.wait(self.poll):
                return False
        return True

    def _scan(self) -> None:
        """One poll: note new or changed files, take those unchanged since the last poll."""
        now: dict[str, tuple[int, int]] = {}
        try:
            entries = list(os.scandir(self.folder))
        except OSError as exc:
            raise InputError(f"{self._name}: cannot list the watched folder ({exc})") from exc
        for entry in entries:
            name = entry.name
            if name in self._taken or name.startswith("."):
                continue  # dot files: an uploader's temporary names (rsync's .name.XXXXXX)
            if Path(name).suffix.lower() not in IMAGE_SUFFIXES:
                continue
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue  # removed or renamed between listing and stat: next poll sees it
            now[name] = (st.st_size, st.st_mtime_ns)
        stable = [
            n
            for n, sig in now.items()
            if sig[0] > 0 and self._seen.get(n) == sig and looks_complete(self.folder / n)
        ]
        if any(self._seen.get(n) != sig for n, sig in now.items()):
            self._last_activity = time.monotonic()
        self._seen = {n: sig for n, sig in now.items() if n not in stable}
        self._take(sorted(stable, key=natural_key))

    def _take(self, names: list[str]) -> None:
        """Queue newly complete files in time order, skipping those that cannot be placed."""
        self._taken.update(names)
        timed: list[tuple[float, Path]] = []
        for name in names:
            path = self.folder / name
            if self.fps is not None:
                timed.append((0.0, path))  # numbered below, in name order
                continue
            if self.pattern is not None:
                seconds = self.pattern.seconds(name)
                if seconds is None:
                    self.stats.skipped.append(
                        f"{path}: name does not match --time-pattern "
                        f"{self.pattern.pattern!r} (skipped)"
                    )
                    continue
            else:
                seconds = capture_time(path)
            timed.append((seconds, path))
        if self.fps is not None:
            start = len(self._times) + len(self._ready)
            ordered = [((start + i) / self.fps, p) for i, (_, p) in enumerate(timed)]
        else:
            timed.sort(key=lambda tp: (tp[0], natural_key(tp[1])))
            if timed and self._origin is None:
                self._origin = timed[0][0]
            ordered = [(t - (self._origin or 0.0), p) for t, p in timed]
        for ts, path in ordered:
            if ts < self._last - TIME_EPS:
                self.stats.skipped.append(
                    f"{path}: arrived after later frames (its time is "
                    f"{ts:.3f} s, frames up to {self._last:.3f} s are done) (skipped)"
                )
                continue
            self._last = ts
            self._ready.append((path, ts))

    def _arrivals(self) -> Iterator[tuple[Path, float]]:
        """(file, seconds) as files arrive, in time order, until idle or interrupted."""
        while True:
            if not self._ready and not self._wait_for_files():
                return
            path, ts = self._ready.popleft()
            self._times.append(ts)  # every file in order, read or not: its frame number
            yield path, ts

    # -- FrameSource ----------------------------------------------------------------------
    def _load(self, path: Path, ts: float) -> Frame | None:
        return read_frame(path, len(self._times) - 1, ts, self.stats, self.max_side)

    def _sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        # Late files are dropped on arrival, so times only grow: the first past --end ends it.
        return sample_times(
            ((ts, path) for path, ts in self._arrivals()),
            self._load,
            every,
            start,
            end,
            ordered=True,
        )

    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        count = 0
        for path, ts in self._arrivals():
            if ts < start - TIME_EPS:
                continue
            if end is not None and ts >= end - TIME_EPS:
                return
            count += 1
            if (count - 1) % every:
                continue
            frame = self._load(path, ts)
            if frame is not None:
                yield frame

    def frame_number(self, seconds: float) -> int | None:
        """The file's place in arrival order at (or nearest) ``seconds``, as for a folder."""
        if self.fps is not None:
            return super().frame_number(seconds)
        return nearest_index(self._times, seconds)


def watch_folder(
    folder: str | os.PathLike,
    poll: float = DEFAULT_POLL,
    idle: float | None = None,
    fps: float | None = None,
    time_pattern: str | None = None,
    origin: float | None = None,
) -> WatchedFolderSource:
    """A :class:`WatchedFolderSource`; pass it to ``describe_video`` as a source."""
    return WatchedFolderSource(
        folder, poll=poll, idle=idle, fps=fps, time_pattern=time_pattern, origin=origin
    )
