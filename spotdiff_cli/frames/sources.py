"""Frame sources: the first stage of ``spotdiff video``, and the plug-in registry that opens them.

A :class:`FrameSource` yields :class:`~spotdiff_cli.types.Frame` values in presentation order and
describes itself with :class:`SourceInfo`. :func:`sample` is what the pipeline calls: it parses
``every`` / ``start`` / ``end`` (see :mod:`.timecode`) and asks the source for just those frames,
so a source that can seek never decodes the frames it skips.

Sources are plug-ins collected in :data:`SOURCES` (the PySceneDetect habit): each entry says how to
recognise a spec (``detect``) and how to open it (``open``). :func:`open_source` tries them in
order unless ``kind`` names one. Built-ins:

========  =============================================  ==============================
kind      spec                                            module
========  =============================================  ==============================
files     a list/tuple of image paths (order kept)        :mod:`.folder`
glob      a pattern with ``*``, ``?`` or ``[``            :mod:`.folder`
folder    a directory of images                           :mod:`.folder`
video     any other file (whatever FFmpeg reads)          :mod:`.video`
========  =============================================  ==============================

Semantics shared by every source (so a ``--resume`` can continue where a run stopped):

- ``start`` is inclusive and ``end`` exclusive: a run over ``[0, T)`` followed by a run with
  ``start=T`` sees every sample exactly once.
- Every ``N`` seconds: sample ``k`` is the first frame whose timestamp is ``>= start + k*N``; if
  the source has a gap longer than ``N``, targets inside the gap are skipped rather than yielding
  the same frame twice.
- Every ``Nf``: every ``N``-th frame counting from the first frame at or after ``start``.
"""

from __future__ import annotations

import abc
import glob as _glob
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ..errors import InputError, UsageError
from ..types import Frame
from .timecode import TimeSpec, parse_every, parse_time

__all__ = [
    "DecodeStats",
    "FrameSource",
    "SourceInfo",
    "SourcePlugin",
    "SOURCES",
    "SourceSpec",
    "open_source",
    "register_source",
    "sample",
]

SourceSpec = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
"""What a user can point ``spotdiff video`` at: a path, a glob pattern, or a list of files."""

# Timestamps are floats parsed from text (showinfo) or derived from milliseconds (OpenCV); half a
# millisecond absorbs that rounding without ever merging two real frames (>= 1 ms apart at 1000 fps).
TIME_EPS = 5e-4


@dataclass(frozen=True)
class SourceInfo:
    """What is known about a source before decoding it.

    duration: seconds, or None if unknown. fps: average frame rate (an *estimate* for variable
    frame rate video; never use it to compute timestamps). frame_count: None when the container
    does not say. width/height: of the first frame (folders may mix sizes). backend: which decoder
    reads it ("ffmpeg", "opencv", "pillow").
    """

    name: str
    kind: str
    width: int
    height: int
    duration: float | None = None
    fps: float | None = None
    frame_count: int | None = None
    backend: str | None = None
    variable_frame_rate: bool | None = None


@dataclass
class DecodeStats:
    """Counters a test or benchmark reads to see what sampling cost.

    decoded: frames the backend decoded at our request (OpenCV ``grab``; frames entering
        ffmpeg's filter graph; images loaded from a folder). Frames a codec decodes *internally*
        to reach a seek point (from the previous keyframe) are invisible to us and not counted.
    converted: frames turned into RGB arrays and yielded.
    seeks: container seeks (OpenCV ``set(POS_*)`` or one ffmpeg ``-ss`` run per seek).
    skipped: one message per frame that could not be read and was passed over (a corrupt file
        in a folder, an undecodable video frame): one bad frame never ends a source.
    """

    decoded: int = 0
    converted: int = 0
    seeks: int = 0
    skipped: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.decoded = self.converted = self.seeks = 0
        self.skipped.clear()


class FrameSource(abc.ABC):
    """A sequence of frames with presentation timestamps.

    Iterating yields every frame. Use :meth:`sample` (or the module-level :func:`sample`) to get
    a subset without decoding what is skipped. Sources hold OS resources: use them as context
    managers or call :meth:`close`.
    """

    info: SourceInfo
    stats: DecodeStats

    def __init__(self) -> None:
        self.stats = DecodeStats()

    # -- what each plug-in implements -------------------------------------------------------
    @abc.abstractmethod
    def _sample_seconds(self, every: float | None, start: float, end: float | None) -> Iterator[Frame]:
        """Frames at ``start + k*every`` (every None: all frames) with timestamps in [start, end)."""

    @abc.abstractmethod
    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        """Every ``every``-th frame from the first at or after ``start``, before ``end``."""

    def _position(self, spec: TimeSpec, what: str) -> float:
        """A start/end spec in seconds. Frame counts use the average fps (exact for CFR video);
        sources with a better mapping (folders: index -> timestamp) override this."""
        try:
            return spec.to_seconds(self.info.fps)
        except UsageError as exc:
            raise UsageError(f"{what}: {exc}") from exc

    def close(self) -> None:  # noqa: B027 - optional for plug-ins without resources
        """Release files and processes; the source cannot be read afterwards."""

    # -- shared behaviour -------------------------------------------------------------------
    def __iter__(self) -> Iterator[Frame]:
        return self._sample_seconds(None, 0.0, None)

    def sample(
        self,
        every: str | float | TimeSpec | None,
        start: str | float | TimeSpec | None = None,
        end: str | float | TimeSpec | None = None,
    ) -> Iterator[Frame]:
        """Frames every ``every`` (``"30s"``, ``"25f"``, ``None`` = all) from ``start`` (inclusive)
        to ``end`` (exclusive). Raises UsageError for bad time syntax or an empty range."""
        start_s = self._position(parse_time(start, what="--start"), "--start") if start is not None else 0.0
        end_s = self._position(parse_time(end, what="--end"), "--end") if end is not None else None
        if end_s is not None and end_s <= start_s:
            raise UsageError(f"--end ({end}) must be after --start ({start or 0}); e.g. --start 10s --end 1m")
        if every is None:
            return self._sample_seconds(None, start_s, end_s)
        spec = parse_every(every)
        if spec.frames is not None:
            return self._sample_frames(spec.frames, start_s, end_s)
        return self._sample_seconds(spec.seconds, start_s, end_s)

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.name!r} backend={self.info.backend}>"


def next_target(timestamp: float, start: float, every: float) -> float:
    """The first sampling target strictly after the sample taken at ``timestamp``.

    Targets are ``start + k*every``; a frame late for its target (a gap in the video) consumes
    every target up to its own time, so one frame is never yielded twice.
    """
    k = int((timestamp + TIME_EPS - start) // every) + 1
    return start + k * every


# -- registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourcePlugin:
    """One kind of frame source: ``detect(spec)`` says whether it handles a spec, ``open(spec,
    **options)`` builds it. Options a plug-in does not take are dropped, so callers can pass the
    CLI's full set (``backend``, ``sort``, ``fps``) to any source."""

    name: str
    detect: Callable[[Any], bool]
    open: Callable[..., FrameSource]
    options: frozenset[str] = field(default_factory=frozenset)
    help: str = ""


SOURCES: dict[str, SourcePlugin] = {}
"""Registered source kinds, tried in insertion order by :func:`open_source`."""


def register_source(plugin: SourcePlugin) -> SourcePlugin:
    """Add (or replace) a source kind; third-party code may register its own."""
    SOURCES[plugin.name] = plugin
    return plugin


def _is_list(spec: Any) -> bool:
    return isinstance(spec, (list, tuple))


def _is_glob(spec: Any) -> bool:
    return isinstance(spec, (str, os.PathLike)) and _glob.has_magic(os.fspath(spec)) and not Path(spec).exists()


def _is_dir(spec: Any) -> bool:
    return isinstance(spec, (str, os.PathLike)) and Path(spec).is_dir()


def _is_file(spec: Any) -> bool:
    return isinstance(spec, (str, os.PathLike))


# The built-ins import their modules only when used, so `spotdiff --help` never loads cv2, and
# video.py / folder.py can import this module without a cycle.
def _open_files(spec: Any, **options: Any) -> FrameSource:
    from .folder import open_files

    return open_files(spec, **options)


def _open_glob(spec: Any, **options: Any) -> FrameSource:
    from .folder import open_glob

    return open_glob(spec, **options)


def _open_folder(spec: Any, **options: Any) -> FrameSource:
    from .folder import open_folder

    return open_folder(spec, **options)


def _open_video(spec: Any, **options: Any) -> FrameSource:
    from .video import VideoSource

    return VideoSource(spec, **options)


register_source(SourcePlugin("files", _is_list, _open_files, frozenset({"sort", "fps"}), "a list of image files"))
register_source(SourcePlugin("glob", _is_glob, _open_glob, frozenset({"sort", "fps"}), "a glob pattern, e.g. 'cam/*.jpg'"))
register_source(SourcePlugin("folder", _is_dir, _open_folder, frozenset({"sort", "fps"}), "a folder of images"))
register_source(
    SourcePlugin("video", _is_file, _open_video, frozenset({"backend", "seek_threshold"}), "a video file (mp4, mkv, avi, mov, gif...)")
)


def open_source(spec: SourceSpec | FrameSource, *, kind: str | None = None, **options: Any) -> FrameSource:
    """Open ``spec`` with the plug-in ``kind`` names, else the first whose ``detect`` accepts it.

    ``options`` (e.g. ``backend="opencv"``, ``sort="time"``, ``fps=2``) go to the plug-ins that
    take them; ``None`` values mean "not given" and are dropped so plug-in defaults apply.
    A FrameSource passes through unchanged.
    """
    if isinstance(spec, FrameSource):
        return spec
    if kind is not None:
        if kind not in SOURCES:
            import difflib

            close = difflib.get_close_matches(kind, SOURCES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"unknown source kind {kind!r}{hint} (available: {', '.join(SOURCES)})")
        plugin = SOURCES[kind]
    else:
        plugin = next((p for p in SOURCES.values() if p.detect(spec)), None)
        if plugin is None:
            raise InputError(f"cannot read {spec!r} as frames; give a video file, a folder of images, a glob or a list of files")
    if isinstance(spec, (str, os.PathLike)) and plugin.name == "video" and not Path(spec).exists():
        raise InputError(f"{os.fspath(spec)}: no such file or folder; check the path")
    kwargs = {k: v for k, v in options.items() if v is not None and k in plugin.options}
    return plugin.open(spec, **kwargs)


def sample(
    source: SourceSpec | FrameSource,
    every: str | float | TimeSpec | None,
    start: str | float | TimeSpec | None = None,
    end: str | float | TimeSpec | None = None,
    **options: Any,
) -> Iterator[Frame]:
    """Frames of ``source`` every ``every`` between ``start`` (inclusive) and ``end`` (exclusive).

    ``source`` may be an open FrameSource (left open: read ``source.stats`` afterwards) or
    anything :func:`open_source` takes (opened with ``options`` and closed when the iterator
    finishes or is closed). Time syntax errors raise UsageError before any decoding.
    """
    if isinstance(source, FrameSource):
        return source.sample(every, start, end)
    opened = open_source(source, **options)
    try:
        frames = opened.sample(every, start, end)
    except BaseException:
        opened.close()
        raise

    def _closing() -> Iterator[Frame]:
        try:
            yield from frames
        finally:
            opened.close()

    return _closing()
