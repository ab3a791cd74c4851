"""The frame-source contract every plug-in implements: :class:`FrameSource`, what it says about
itself (:class:`SourceInfo`) and what sampling cost (:class:`DecodeStats`), and the sampling-grid
rule (:func:`next_target`). The registry that opens sources lives in :mod:`.sources`; the
plug-ins (:mod:`.folder`, :mod:`.video`) import only this module, so nothing imports in a circle.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import UsageError
from ..types import Frame
from .timecode import TimeSpec, parse_every, parse_time

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
    max_side: int | None = None  # set by sample(); plug-ins shrink frames to it
    # (x, y, w, h) in the source's pixels: the part a caller reads in every frame (a watched
    # region and the margin its analysis needs). A source may then deliver frames that are
    # current only there, the rest refreshed about once a second (``frames.video``: ffmpeg then
    # converts and pipes the focus alone). None: every frame whole.
    focus: tuple[int, int, int, int] | None = None

    def output_size(self) -> tuple[int, int]:
        """(width, height) of the frames ``sample`` yields for a source of ``info``'s size."""
        return shrunk_size(self.info.width, self.info.height, self.max_side)

    def __init__(self) -> None:
        self.stats = DecodeStats()

    # -- what each plug-in implements -------------------------------------------------------
    @abc.abstractmethod
    def _sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        """Frames at ``start + k*every`` (every None: all frames) with timestamps in [start, end)."""

    @abc.abstractmethod
    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        """Every ``every``-th frame from the first at or after ``start``, before ``end``."""

    def frame_number(self, seconds: float) -> int | None:
        """The number (from 0) of the frame shown at ``seconds``: ``round(seconds * fps)`` with
        the average frame rate, as DVR-Scan and PySceneDetect count (exact for constant frame
        rate; an estimate for variable frame rate, whose *times* stay exact). None without a
        frame rate. Sources with a better mapping (folders: the file's index) override this."""
        if not self.info.fps or seconds < 0:
            return None
        return int(round(seconds * self.info.fps + 1e-6))

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
        max_side: int | None = None,
    ) -> Iterator[Frame]:
        """Frames every ``every`` (``"30s"``, ``"25f"``, ``None`` = all) from ``start`` (inclusive)
        to ``end`` (exclusive). Raises UsageError for bad time syntax or an empty range.

        max_side: deliver frames shrunk so their long side is at most this (area interpolation;
        never enlarged). A decoder that can scale does it before converting to RGB, so a 720p
        stream analysed at 640 px moves a quarter of the bytes (see ``frames.video``).
        """
        self.max_side = max_side if max_side and max_side > 0 else None
        start_s = (
            self._position(parse_time(start, what="--start"), "--start")
            if start is not None
            else 0.0
        )
        end_s = self._position(parse_time(end, what="--end"), "--end") if end is not None else None
        if end_s is not None and end_s <= start_s:
            raise UsageError(
                f"--end ({end}) must be after --start ({start or 0}); e.g. --start 10s --end 1m"
            )
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


def shrunk_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """The size whose long side is ``max_side`` (same rounding as ``analysis.resize_for_analysis``,
    so a shrunk frame is not resized again); the size itself when already small enough."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max(width, height) / max_side
    return max(1, round(width / scale)), max(1, round(height / scale))


def next_target(timestamp: float, start: float, every: float) -> float:
    """The first sampling target strictly after the sample taken at ``timestamp``.

    Targets are ``start + k*every``; a frame late for its target (a gap in the video) consumes
    every target up to its own time, so one frame is never yielded twice.
    """
    k = int((timestamp + TIME_EPS - start) // every) + 1
    return start + k * every
