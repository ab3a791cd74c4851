"""Live streams as frame sources: network cameras (``rtsp://``, ``http(s)://`` and the other
URLs FFmpeg reads) and webcams (``/dev/video0`` or ``webcam:0``), read through ffmpeg.

A live stream cannot seek and has no end known in advance, so it is read once, front to back,
by one ffmpeg process (:class:`~.video.FFmpegPipe`, the pipe video files are read with):

- **Stream time.** A frame's time is its presentation time counted from the first frame, as
  for a file (so a stream served from a file gives that file's times); formats without frame
  times (an MJPEG camera's multipart feed) are timed by arrival. ``info.started_at`` is
  the wall-clock time (UTC, ISO 8601) of second 0, so an event at ``t`` happened at
  ``started_at + t``. After a reconnect the new connection's times restart, so its first
  frame is placed at the wall-clock time elapsed since second 0: the time axis stays the wall
  clock's, with a gap for the outage. A resumed run (``origin``) continues the axis of the
  run it resumes the same way.
- **Sampling.** ``every`` samples by stream time exactly as for a file (the first frame at or
  after each target). Every frame is decoded (there is nothing to seek to); given
  ``max_side`` (the analysis size), ffmpeg shrinks each frame before the RGB conversion as it
  does for files, so a 1080p camera sends a ninth of the bytes through the pipe and the frames
  are those a file run of the same footage analyses. A reader thread drains ffmpeg at the
  stream's pace: when the analysis falls behind, the oldest waiting samples are dropped (and
  counted in ``stats.skipped``) rather than letting the camera's buffer overflow.
- **End and outages.** When the server closes the stream (its end), the source ends. When the
  connection fails (no data for ``timeout`` seconds, a reset), it is opened again after 1, 2,
  4 ... s (at most 30), up to ``reconnect`` times in a row; then the source ends with a
  warning in ``stats.skipped`` and everything found until then stands. A stream that cannot
  be opened at all is an InputError within about ``timeout`` seconds.
- **Names.** ``str(source)`` is the URL with any password replaced by ``***``: it names the
  source in reports and messages, which must not leak credentials.

The ffmpeg child runs in its own process group, so a terminal's Ctrl-C reaches spotdiff only;
:meth:`StreamSource.interrupt` / :meth:`StreamSource.close` end the child (no orphan).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, UsageError
from ..types import Frame
from .base import TIME_EPS, FrameSource, SourceInfo, next_target
from .timecode import check_seconds
from .video import FFmpegPipe, find_ffmpeg, parse_input_summary, rgb_pipe_args

__all__ = ["StreamInfo", "StreamSource", "is_stream", "open_stream", "redact"]

# URL schemes handed to ffmpeg as live input. http(s) is here too: a camera's MJPEG or
# MPEG-TS feed; a video *file* behind an http URL also works, read front to back.
STREAM_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "srt", "udp", "tcp", "rtp")
_WEBCAM = re.compile(r"^webcam:(\d+)$")
_V4L2_DEVICE = re.compile(r"^/dev/video\d+$")

DEFAULT_TIMEOUT = 10.0  # s without data before a connection counts as lost (or never opened)
DEFAULT_RECONNECT = 3  # reconnections in a row before giving up
_BACKOFF_FIRST, _BACKOFF_MAX = 1.0, 30.0  # s: the wait before reconnect k is first * 2**(k-1)
_QUEUE = 32  # samples waiting for the analysis before the oldest is dropped
# How ffmpeg says its input ended because the server closed it (not a failure): an HTTP or TCP
# server that closes the connection gives EIO, a file or a closed pipe EOF.
_CLOSED_BY_SERVER = ("End of file", "Input/output error")
# Formats whose frames carry no capture time: ffmpeg numbers them at a guessed 25 fps (an MJPEG
# camera sending 5 fps would run 5x slow), so their time is when they arrive.
_UNTIMED_FORMATS = frozenset({"mpjpeg", "mjpeg", "jpeg_pipe", "png_pipe", "image2pipe"})
_INPUT_FORMAT = re.compile(r"Input #0, ([\w,]+), from")


def is_stream(spec: Any) -> bool:
    """True for a URL with a scheme in :data:`STREAM_SCHEMES`, ``webcam:N`` or ``/dev/videoN``."""
    if not isinstance(spec, (str, os.PathLike)):
        return False
    text = os.fspath(spec)
    if _WEBCAM.match(text) or _V4L2_DEVICE.match(text):
        return True
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in STREAM_SCHEMES


def redact(text: str, url: str) -> str:
    """``text`` with the password of ``url`` (if it has one) replaced by ``***``."""
    try:
        password = urllib.parse.urlsplit(url).password
    except ValueError:
        return text
    if not password:
        return text
    for form in {password, urllib.parse.quote(password, safe="")}:
        text = text.replace(f":{form}@", ":***@")
    return text


@dataclasses.dataclass(frozen=True)
class StreamInfo(SourceInfo):
    """:class:`SourceInfo` plus ``started_at``: the wall-clock time (UTC, ISO 8601 with
    milliseconds) of stream second 0 (written to the report's source ``info``)."""

    started_at: str | None = None


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


def parse_started_at(text: str) -> float:
    """Seconds since the epoch of an ``info.started_at`` value (for resuming a stream)."""
    return dt.datetime.fromisoformat(text).timestamp()


class StreamSource(FrameSource):
    """Frames of a live stream or webcam, read once; see the module docstring.

    url: a URL (``rtsp://user:pass@cam/stream1``), ``/dev/videoN`` or ``webcam:N``.
    timeout: seconds without data before the connection counts as lost or unreachable.
    reconnect: how many times in a row to reconnect after a lost connection (0: never).
    origin: wall-clock time (epoch s) of second 0 of an earlier run being resumed: this run's
        times continue that run's axis (None: this run's first frame is second 0).
    after: the last time that earlier run processed: this run's frames come after it even if
        the clocks disagree (a stream whose timestamps ran ahead of the wall clock).
    max_side: shrink frames in ffmpeg so their long side is at most this (None: full size;
        ``sample(max_side=...)`` then shrinks the samples).
    """

    def __init__(
        self,
        url: str,
        timeout: float = DEFAULT_TIMEOUT,
        reconnect: int = DEFAULT_RECONNECT,
        origin: float | None = None,
        after: float | None = None,
        max_side: int | None = None,
    ) -> None:
        super().__init__()
        timeout = check_seconds(timeout, "--stream-timeout", "e.g. --stream-timeout 10")
        if reconnect < 0:
            raise UsageError(f"--reconnect must be 0 or more, not {reconnect}")
        self.url = os.fspath(url)
        webcam = _WEBCAM.match(self.url)
        self._device = f"/dev/video{webcam[1]}" if webcam else None
        if self._device is None and _V4L2_DEVICE.match(self.url):
            self._device = self.url
        if self._device is not None and not Path(self._device).exists():
            raise InputError(
                f"{self.url}: no webcam at {self._device}; check `ls /dev/video*` "
                "(and that you are in the video group)"
            )
        self.timeout, self.reconnect, self.origin = float(timeout), int(reconnect), origin
        self.after = after
        self._fit = max_side if max_side and max_side > 0 else None
        self._name = redact(self.url, self.url)
        self._exe = find_ffmpeg()
        if self._exe is None:
            raise UsageError(
                "reading a live stream needs ffmpeg; install imageio-ffmpeg (or put ffmpeg on PATH)"
            )
        self._stop = threading.Event()
        self._last_error = "no answer"  # why the latest connection attempt failed
        self._arrival_times = False  # the format has no timestamps (see _UNTIMED_FORMATS)
        self._lock = threading.Lock()
        self._pipe: FFmpegPipe | None = None
        self._info: StreamInfo | None = None
        self._wall0 = 0.0  # wall-clock time of second 0 (epoch s), set when it opens
        self._clock0 = 0.0  # time.monotonic() at second 0
        self._opened = (0.0, 0.0)  # (monotonic, wall) when the latest connection started
        self._thread: threading.Thread | None = None

    def __str__(self) -> str:
        return self._name

    # -- connecting -------------------------------------------------------------------------
    def _input(self) -> Any:
        import ffmpeg

        if self._device is not None:
            return ffmpeg.input(self._device, format="v4l2").video
        micros = str(int(self.timeout * 1e6))
        scheme = self.url.partition("://")[0].lower()
        if scheme in ("rtsp", "rtsps"):
            # TCP: a lost UDP packet is a smeared frame, and UDP rarely crosses a NAT or
            # firewall; RTSP's "timeout" is its socket I/O timeout (ffmpeg >= 5; was stimeout).
            return ffmpeg.input(self.url, rtsp_transport="tcp", timeout=micros).video
        # rw_timeout: every protocol's read/write timeout (no data for this long: an error).
        return ffmpeg.input(self.url, rw_timeout=micros).video

    def _connect(self) -> FFmpegPipe | None:
        """Start ffmpeg on the stream and wait for its header; None when it could not open
        it (``self._last_error`` says why) or the source was interrupted."""
        assert self._exe is not None
        # A live server sends from the moment we connect, so the first frame was captured
        # about now (a keyframe interval at most), however long ffmpeg then probes.
        self._opened = (time.monotonic(), time.time())
        scale = None
        if self._fit is not None:
            # shrunk_size() as ffmpeg expressions: the size is known only once it has probed.
            big, m = "max(iw,ih)", self._fit
            scale = (
                f"if(gt({big},{m}),round(iw*{m}/{big}),iw)",
                f"if(gt({big},{m}),round(ih*{m}/{big}),ih)",
            )
        args = rgb_pipe_args(self._exe, self._input(), scale=scale)
        pipe = FFmpegPipe(args, self.stats, new_session=True)
        with self._lock:
            if self._stop.is_set():
                pipe.close()
                return None
            self._pipe = pipe
        # ffmpeg's own timeout ends an unreachable server; the margin covers its probing
        # (a few seconds of a slow stream are read to find the codec parameters).
        if not pipe.header.wait(self.timeout + 20.0) or pipe.out_size is None:
            self._last_error = self._why(pipe, "no video stream in it")
            self._drop(pipe)
            return None
        return pipe

    def _why(self, pipe: FFmpegPipe, default: str) -> str:
        lines = [ln for ln in pipe.tail if ln and not ln.startswith(("Exiting", "Conversion"))]
        text = lines[-1] if lines else default
        text = re.sub(r"^(\[[^\]]*\]\s*)+", "", text)  # "[tcp @ 0x55...] " prefixes
        return redact(text, self.url)

    def _drop(self, pipe: FFmpegPipe) -> None:
        with self._lock:
            if self._pipe is pipe:
                self._pipe = None
        pipe.close()

    @property  # type: ignore[override]
    def info(self) -> StreamInfo:
        """Connects (once) and describes the stream; InputError when it cannot be opened."""
        if self._info is None:
            pipe = self._connect()
            if pipe is None:
                if self._stop.is_set():
                    raise InputError(f"{self._name}: stopped before the stream opened")
                hint = (
                    "check the device and that no other program holds it"
                    if self._device
                    else "check the address, that the camera is on and reachable, or raise "
                    "--stream-timeout"
                )
                raise InputError(
                    f"{self._name}: cannot open the stream ({self._last_error}); {hint}"
                )
            header = pipe.header_text
            summary = parse_input_summary(header)  # its duration is None for a live stream
            fps = (summary.fps or summary.tbr) if summary else None
            duration = summary.duration if summary else None
            assert pipe.out_size is not None
            fmt = _INPUT_FORMAT.search(header)
            self._arrival_times = bool(fmt) and bool(_UNTIMED_FORMATS & set(fmt[1].split(",")))
            width, height = (summary.width, summary.height) if summary else pipe.out_size
            # Second 0 is the first frame, captured about when the connection opened.
            self._clock0, self._wall0 = self._opened
            if self.origin is not None:  # resumed: continue the earlier run's time axis
                self._clock0 -= self._wall0 - self.origin
                self._wall0 = self.origin
            self._info = StreamInfo(
                name=self._name,
                kind="webcam" if self._device else "stream",
                width=width,
                height=height,
                duration=duration,
                fps=fps,
                frame_count=None,
                backend="ffmpeg",
                variable_frame_rate=None,
                started_at=_iso(self._wall0),
            )
        return self._info

    # -- reading ----------------------------------------------------------------------------
    def _segments(self) -> Iterator[tuple[np.ndarray, float]]:
        """(rgb, stream time) of every frame, across reconnections, until the stream ends,
        reconnecting fails or the source is interrupted."""
        _ = self.info  # connects on first use
        pipe = self._pipe
        delivered = pipe.out_size if pipe is not None else None
        last: float | None = None
        failures = 0
        while pipe is not None:
            offset: float | None = None  # stream time of this connection's first frame
            first_pts: float | None = None
            assert delivered is not None
            for rgb, pts, _n in pipe.frames(*delivered):
                if offset is None:
                    # The first connection of a new run starts at 0; a reconnection, or a
                    # resumed run, where the wall clock was when it connected.
                    opened = self._opened[0] - self._clock0
                    fresh = last is None and self.origin is None
                    floor = last if last is not None else self.after
                    offset = 0.0 if fresh else opened
                    if floor is not None:
                        offset = max(offset, floor + TIME_EPS * 4)
                    first_pts = pts
                if pts is None or first_pts is None or self._arrival_times:
                    # No timestamps: the arrival time is the best there is.
                    t = max(time.monotonic() - self._clock0, offset)
                else:
                    t = offset + pts - first_pts
                if last is not None and t <= last:
                    t = last + TIME_EPS * 4  # times only grow, as sampling expects
                last = t
                failures = 0
                yield rgb, t
            self._drop(pipe)
            pipe_error = pipe.demux_error
            if self._stop.is_set():
                return
            ended = pipe.returncode == 0 and (
                pipe_error is None or pipe_error.startswith(_CLOSED_BY_SERVER)
            )
            if ended:
                return  # the server closed the stream: its end
            lost_at = format_seconds(last)
            why = redact(pipe_error or self._why(pipe, "ffmpeg ended"), self.url)
            pipe = None
            while pipe is None and failures < self.reconnect:
                failures += 1
                wait = min(_BACKOFF_FIRST * 2 ** (failures - 1), _BACKOFF_MAX)
                if self._stop.wait(wait):
                    return
                pipe = self._connect()
                if pipe is not None and pipe.out_size != delivered:
                    self._last_error = f"its frame size changed to {pipe.out_size}"
                    self._drop(pipe)
                    pipe = None
            if pipe is None:
                self.stats.skipped.append(
                    f"{self._name}: connection lost at {lost_at} ({why}); gave up after "
                    f"{failures} reconnect{'s' if failures != 1 else ''}: nothing after that "
                    "was seen"
                )
                return
            self.stats.skipped.append(
                f"{self._name}: connection lost at {lost_at} ({why}); reconnected"
            )

    def _pump(self, every: float | None, every_frames: int | None, start: float,
              end: float | None, out: deque, ready: threading.Condition) -> None:  # fmt: skip
        """The reader thread: drain ffmpeg at the stream's pace, queue the samples."""
        size = self.output_size()
        target = start
        count = 0
        dropped = 0
        try:
            for rgb, t in self._segments():
                if t < start - TIME_EPS:
                    continue
                if end is not None and t >= end - TIME_EPS:
                    break
                if every_frames is not None:
                    count += 1
                    if (count - 1) % every_frames:
                        continue
                elif every is not None:
                    if t < target - TIME_EPS:
                        continue
                    target = next_target(t, start, every)
                if size != (rgb.shape[1], rgb.shape[0]):
                    import cv2

                    rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
                frame = Frame(pixels=rgb, source=self._name, timestamp=t, index=None)
                with ready:
                    if len(out) >= _QUEUE:
                        out.popleft()
                        dropped += 1
                        if dropped == 1:
                            self.stats.skipped.append(
                                f"{self._name}: the analysis fell behind the stream at "
                                f"{format_seconds(t)}; the oldest waiting samples are dropped"
                            )
                    out.append(frame)
                    ready.notify()
        except BaseException as exc:  # handed to the consumer
            with ready:
                out.append(exc)
                ready.notify()
        finally:
            if dropped > 1:
                self.stats.skipped.append(f"{self._name}: {dropped} samples dropped in all")
            with ready:
                out.append(None)  # the end
                ready.notify()

    def _samples(
        self, every: float | None, every_frames: int | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        out: deque = deque()
        ready = threading.Condition()
        self._thread = threading.Thread(
            target=self._pump,
            args=(every, every_frames, start, end, out, ready),
            name="spotdiff-stream",
            daemon=True,
        )
        self._thread.start()
        try:
            while True:
                with ready:
                    while not out:
                        ready.wait()
                    item = out.popleft()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield dataclasses.replace(item, index=self.frame_number(item.timestamp))
        finally:
            self.interrupt()
            self._thread.join(timeout=10)

    def _sample_seconds(
        self, every: float | None, start: float, end: float | None
    ) -> Iterator[Frame]:
        return self._samples(every, None, start, end)

    def _sample_frames(self, every: int, start: float, end: float | None) -> Iterator[Frame]:
        return self._samples(None, every, start, end)

    def interrupt(self) -> None:
        """Stop reading (any thread): ffmpeg is ended and the frame iterator finishes."""
        self._stop.set()
        with self._lock:
            pipe = self._pipe
        if pipe is not None:
            pipe.kill()

    def close(self) -> None:
        self.interrupt()
        with self._lock:
            pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)


def format_seconds(seconds: float | None) -> str:
    from .timecode import format_timecode

    return format_timecode(seconds or 0.0, millis=True)


def open_stream(
    url: str,
    timeout: float | None = None,
    reconnect: int | None = None,
    origin: float | None = None,
    after: float | None = None,
    max_side: int | None = None,
) -> StreamSource:
    """A :class:`StreamSource` (None: the defaults); it connects when first read."""
    return StreamSource(
        url,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        reconnect=DEFAULT_RECONNECT if reconnect is None else reconnect,
        origin=origin,
        after=after,
        max_side=max_side,
    )
