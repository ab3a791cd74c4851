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
stream    ``rtsp://``, ``http(s)://``... URLs, webcams    :mod:`.stream`
          (``/dev/videoN``, ``webcam:N``)
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

import glob as _glob
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from ..types import Frame
from .base import DecodeStats, FrameSource, SourceInfo
from .timecode import TimeSpec

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

SourceSpec = str | os.PathLike | Sequence[str | os.PathLike]
"""What a user can point ``spotdiff video`` at: a path, a glob pattern, or a list of files."""

# -- registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourcePlugin:
    """One kind of frame source: ``detect(spec)`` says whether it handles a spec, ``open(spec,
    **options)`` builds it. Options a plug-in does not take are dropped, so callers can pass the
    CLI's full set (``backend``, ``sort``, ``fps``, ``time_pattern``) to any source."""

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
    return (
        isinstance(spec, (str, os.PathLike))
        and _glob.has_magic(os.fspath(spec))
        and not Path(spec).exists()
    )


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


def _is_stream(spec: Any) -> bool:
    from .stream import is_stream  # a few regexes, no decoder

    return is_stream(spec)


def _open_stream(spec: Any, **options: Any) -> FrameSource:
    from .stream import open_stream

    return open_stream(spec, **options)


def _open_video(spec: Any, **options: Any) -> FrameSource:
    from .video import VideoSource

    return VideoSource(spec, **options)


# Options an image sequence takes: its order, and where its frame times come from.
_SEQUENCE_OPTIONS = frozenset({"sort", "fps", "time_pattern"})

# Streams first: a URL's query ("?a=1") would otherwise look like a glob pattern.
register_source(
    SourcePlugin(
        "stream",
        _is_stream,
        _open_stream,
        frozenset({"timeout", "reconnect"}),
        "a live stream: rtsp://, http(s):// URL, /dev/video0 or webcam:0",
    )
)
register_source(
    SourcePlugin("files", _is_list, _open_files, _SEQUENCE_OPTIONS, "a list of image files")
)
register_source(
    SourcePlugin(
        "glob", _is_glob, _open_glob, _SEQUENCE_OPTIONS, "a glob pattern, e.g. 'cam/*.jpg'"
    )
)
register_source(
    SourcePlugin("folder", _is_dir, _open_folder, _SEQUENCE_OPTIONS, "a folder of images")
)
register_source(
    SourcePlugin(
        "video",
        _is_file,
        _open_video,
        frozenset({"backend", "seek_threshold"}),
        "a video file (mp4, mkv, avi, mov, gif...)",
    )
)


def open_source(
    spec: SourceSpec | FrameSource, *, kind: str | None = None, **options: Any
) -> FrameSource:
    """Open ``spec`` with the plug-in ``kind`` names, else the first whose ``detect`` accepts it.

    ``options`` (e.g. ``backend="opencv"``, ``sort="time"``, ``fps=2``,
    ``time_pattern="%Y%m%d_%H%M%S"``) go to the plug-ins that take them; ``None`` values mean
    "not given" and are dropped so plug-in defaults apply. A FrameSource passes through unchanged.
    """
    if isinstance(spec, FrameSource):
        return spec
    if kind is not None:
        if kind not in SOURCES:
            import difflib

            close = difflib.get_close_matches(kind, SOURCES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(
                f"unknown source kind {kind!r}{hint} (available: {', '.join(SOURCES)})"
            )
        plugin = SOURCES[kind]
    else:
        plugin = next((p for p in SOURCES.values() if p.detect(spec)), None)
        if plugin is None:
            raise InputError(
                f"cannot read {spec!r} as frames; give a video file, a folder of images, a glob or a list of files"
            )
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
