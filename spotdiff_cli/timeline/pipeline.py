"""One frame sequence -> events: sample, compare, first look, analyse, caption, merge.

Decoding runs in a background thread (OpenCV and the ffmpeg pipe release the GIL), so while one
sample is analysed the next is being decoded: wall time tends to max(decode, analysis), not
their sum. Everything is reported through callbacks, so the caller can draw a progress bar and
write a valid partial report at any moment (Ctrl-C, a crash) - nothing here prints or writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import cv2
import numpy as np

from ..analysis import resize_for_analysis
from ..analysis.onnx_runtime import one_thread_per_pass
from ..captioners.base import Hint
from ..config import AnalysisConfig, Settings, VideoConfig
from ..describer import PairDescriber
from ..errors import SpotdiffError, UsageError
from ..frames.base import TIME_EPS
from ..frames.sources import open_source
from ..frames.timecode import format_timecode, parse_every, parse_time, setting_seconds
from ..types import Analysis, BBox, Detection, Event, Frame, Report
from .compare import (
    Comparator,
    changed_pixels,
    changed_share,
    relative_to_watched,
    resize_like,
    thumbnail,
    watched_box,
)
from .events import EventBuilder
from .objects import ObjectWatcher, held_by, in_video_words
from .regions import parse_roi, watch_mask, watched_focus

T = TypeVar("T")
# Share of the frame a still camera may see changed (foreground, light) before a camera move
# estimated for the pair is believed (see _Looker._camera_checked).
STILL_BACKGROUND = 0.3
ProgressFn = Callable[[float, float | None, int], None]  # (position s, duration s or None, samples)
EventFn = Callable[[Event, Report], str | None]  # returns the picture's file name, if written
UpdateFn = Callable[["SourceResult"], None]
ClosedFn = Callable[[Event], None]  # an event that is final: closed, numbered, pictured
CheckpointFn = Callable[["Checkpoint"], bool]  # True: stop the run at this checkpoint


@dataclass(frozen=True)
class Checkpoint:
    """A moment a run can be resumed from and give exactly what an uninterrupted run gives.

    Taken after a sample at which no event was open: every event found so far is closed and
    numbered, and the next pair carries no recognition hints. A resumed run re-reads the samples
    from ``replay_from`` to ``at`` only to rebuild what each sample is compared with (the
    previous sample, or the background median of the last N), then goes on normally.

    at: timestamp (s) of that sample. replay_from: timestamp of the oldest sample the
    comparison still needs. events / samples / analysed: the run's counts at that moment.
    active / found: whether that sample passed the first look and whether the latest analysis
    found something (what decides if the next changed sample is described; see ``_Cadence``).
    """

    at: float
    replay_from: float
    events: int
    samples: int
    analysed: int
    active: bool = False
    found: bool = False


@dataclass
class SourceResult:
    """What one source produced; also the partial state written while it runs."""

    source: str
    info: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    samples: int = 0
    analysed: int = 0
    decoded: int = 0
    processed_until: float | None = None
    complete: bool = False
    error: str | None = None
    seconds: float = 0.0
    pending: list[Event] = field(default_factory=list)
    # Frames passed over, a source that ended before its stated duration, a size change: the
    # run goes on, and the report says what it did not see.
    warnings: list[str] = field(default_factory=list)
    # The source ended this many seconds in, well before the duration its header states
    # (a truncated file); None when it ended where it should.
    ended_early_at: float | None = None
    checkpoint: Checkpoint | None = None


# How far each stage may run ahead of the next (samples). Changes come in bursts (a car crossing
# a watched box: a dozen changed samples in a row, each analysed, passed through the detector and
# captioned, ~13 ms against ~1 ms to decode a frame); with a few samples of slack the decoding
# stopped within a frame of each burst, ffmpeg with it, and the run took the burst's time on top
# of the decoding's. Thirty samples (a second of 30 fps footage, ~20 MB of 640x360 frames) let
# ffmpeg decode through a burst while the later stages work it off: the motorway's --roi scan
# 1.32x -> 1.24x DVR-Scan's time, interleaved (3 and 2 before; 12 and 6 gave 1.28x).
DECODE_AHEAD = 30
STAGE_AHEAD = 20


def _prefetch(
    items: Iterator[T],
    depth: int = 3,
    wake: Callable[[], None] | None = None,
    name: str = "prefetch",
) -> Iterator[T]:
    """Iterate ``items`` in a background thread (``spotdiff-{name}``), ``depth`` items ahead.

    wake: called when the consumer stops early (Ctrl-C, an error), before the thread is
    joined: it must make ``items`` end soon when it is blocked waiting for input that may never
    come (a watched folder); readers of files end on their own.

    Close the returned generator (``contextlib.closing``) rather than abandoning it: closing
    stops the thread, closes ``items`` on that thread and joins it, so no thread is left inside
    OpenCV or a decoder when the interpreter exits (that aborts the process).
    """
    box: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                box.put(item)
            box.put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            box.put(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=work, name=f"spotdiff-{name}", daemon=True)
    thread.start()
    try:
        while True:
            item = box.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        if wake is not None:
            wake()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                box.get_nowait()
            except queue.Empty:
                thread.join(0.05)


def _hints_from(report: Report) -> tuple[Hint, ...]:
    """What this pair recognised where, for the next pair (the same frames, shifted by one)."""
    by_id = {c.id: c.bbox for c in report.analysis.clusters}
    hints = []
    for sentence in report.sentences:
        noun = sentence.details.get("noun")
        if not noun or not sentence.cluster_ids:
            continue
        for cid in sentence.cluster_ids:
            if cid in by_id:
                hints.append(
                    Hint(
                        by_id[cid],
                        noun,
                        str(sentence.details.get("recognised_by", "")),
                        float(sentence.details.get("recognition_confidence", 0.0)),
                    )
                )
    return tuple(hints)


def _sentence_box(report: Report, cluster_ids: tuple[int, ...], scale: float) -> BBox | None:
    boxes = [c.bbox for c in report.analysis.clusters if c.id in cluster_ids]
    if not boxes:
        return None
    x0 = min(b[0] for b in boxes)
    y0 = min(b[1] for b in boxes)
    x1 = max(b[0] + b[2] for b in boxes)
    y1 = max(b[1] + b[3] for b in boxes)
    s = report.analysis.scale * scale
    return (
        int(round(x0 * s)),
        int(round(y0 * s)),
        int(round((x1 - x0) * s)),
        int(round((y1 - y0) * s)),
    )


@dataclass
class _Cadence:
    """Which changed samples are described (``--describe-every``).

    A changed sample is analysed and captioned when it starts a change (the sample before it
    was quiet, or the latest analysis found nothing), or when it is the first sample in a new
    ``every``-long slot of video time; the changed samples in between carry the latest
    description forward. Slots are fixed on the time axis, and the state is two flags that a
    checkpoint records, so a resumed run makes the same choices as an uninterrupted one.

    every: slot length in seconds; 0 describes every changed sample.
    """

    every: float
    active: bool = False  # the previous sample passed the first look
    found: bool = False  # the latest analysis found something to describe
    last_time: float | None = None  # the previous sample's timestamp

    def _slot(self, timestamp: float) -> int:
        return int((timestamp + TIME_EPS) // self.every)

    def describe(self, timestamp: float) -> bool:
        """Should this changed sample be analysed (else it carries the last description)?"""
        return (
            self.every <= 0
            or not (self.active and self.found)
            or self.last_time is None
            or self._slot(timestamp) != self._slot(self.last_time)
        )


@dataclass
class _Sample:
    """One sample after the first look: the analysis of its pair when it changed enough."""

    timestamp: float
    analysis: Analysis | None  # None: the first sample, a quiet pair, or a replayed one
    continues: bool  # the pair's before frame is the previous pair's after frame (hints carry)
    replaying: bool  # re-read to rebuild the comparison state of a resumed run
    # Changed, but within the slot of a described one: the latest description goes on.
    carried: bool = False
    # The cadence after this sample (for a checkpoint taken here).
    active: bool = False
    found: bool = False
    # The frame at work size (read-only), for the object detector.
    pixels: np.ndarray | None = None
    # State a checkpoint does not record, so none is taken here: the next changed sample may
    # be carried on what the looker last described (``_Looker``'s held changes), or take the
    # detector's answer for this one (``ObjectWatcher.pass_due``).
    holding: bool = False


@dataclass(frozen=True)
class _View:
    """The watched area at the working size, fixed by the first frame."""

    watch: np.ndarray | None  # (H, W) bool, work pixels; None: the whole frame
    watch_thumb: np.ndarray | None  # the same over the thumbnail of ``crop``
    crop: tuple[slice, slice]  # the watched area's bounding box, work pixels
    analysis: AnalysisConfig  # size thresholds relative to the watched area


@dataclass(frozen=True)
class _Seen:
    """One frame at the working size after its first look (``_Looker.first_looks``)."""

    timestamp: float
    pixels: np.ndarray  # (H, W, 3) uint8, work size, read-only
    thumb: np.ndarray  # the first look's thumbnail of the watched box
    base: np.ndarray | None  # what it is compared with; None: nothing yet
    base_thumb: np.ndarray | None  # the same as a thumbnail; None when not compared
    share: float | None  # changed share of the (watched) thumbnail; None: not compared
    replaying: bool  # re-read to rebuild the comparison state of a resumed run
    view: _View
    # The detector's answer for this sample may stand for the next one's
    # (``ObjectWatcher.pass_due``): no checkpoint here.
    answer_carries: bool = False


def _to_thumb(
    pixels: np.ndarray, thumb: np.ndarray, crop: tuple[slice, slice]
) -> tuple[float, float, float, float]:
    """(x0, y0, sx, sy) mapping work pixels of ``pixels`` (H, W, 3) to the first look's
    ``thumb`` of its ``crop``: ``((x - x0) * sx, (y - y0) * sy)``."""
    rows, cols = crop
    x0, y0 = cols.start or 0, rows.start or 0
    width = (cols.stop or pixels.shape[1]) - x0
    height = (rows.stop or pixels.shape[0]) - y0
    return (x0, y0, thumb.shape[1] / width, thumb.shape[0] / height)


class _Looker:
    """The per-sample work that does not depend on captions: bring the frame to the working
    size, keep what it is compared with, take the cheap first look (Spot-the-diff §2.1's lower
    threshold) and analyse the pairs that pass it. Two stages, each on a thread of its own a
    few samples ahead of the captions: :meth:`first_looks` (with the decoding, and the
    detector's pass of a changed sample) and :meth:`look` (the decisions and the analyses)."""

    def __init__(
        self,
        video: VideoConfig,
        analysis: AnalysisConfig,
        watch: np.ndarray | None,
        reference: np.ndarray | None,
        describer: PairDescriber,
        warnings: list[str],
        resume_at: Checkpoint | None,
        describe_every: float = 0.0,
    ) -> None:
        self.video, self.analysis, self.watch, self.describer = video, analysis, watch, describer
        self.warnings, self.resume_at = warnings, resume_at
        self.comparator = Comparator(video, None)
        self.reference = reference
        # The watched area's bounding box in work pixels (x, y, w, h), once the first frame
        # is seen; None: the whole frame.
        self.region: BBox | None = None
        self.cadence = _Cadence(describe_every)
        # What the tracked things are, from the detector (``ObjectWatcher.movers``; set by the
        # run when it follows objects): a change that is only they standing where they were
        # last described is carried, not analysed again (``_held``).
        self.movers: Callable[[np.ndarray, BBox | None], list] | None = None
        # The detector's pass made as soon as a sample is seen to change, so later stages find
        # it made: whether it is due (``ObjectWatcher.pass_due``: time, pixels, changed, region,
        # thumb, changes since a thumbnail, work pixels to thumbnail), and making it
        # (``.warm``: pixels, thumb, region).
        self.pass_due: Callable[..., bool] | None = None
        self.warm: Callable[[np.ndarray, np.ndarray, BBox | None], None] | None = None
        self._described: tuple[np.ndarray, list | None] | None = None  # (frame, its movers)
        if resume_at is not None:
            self.cadence.active, self.cadence.found = resume_at.active, resume_at.found

    def _camera_checked(
        self,
        base: np.ndarray,
        pixels: np.ndarray,
        watch: np.ndarray | None,
        analysis: AnalysisConfig,
        moved: Analysis,
    ) -> Analysis:
        """A camera move is believed only when the static background disagrees with a still
        camera. A car filling a quarter of a fixed camera's view, with the exposure jumping
        as it comes, fools the homography fit into "the camera panned 19 px, tilted 145 px and
        zoomed out 20 %"; compared as they are, most of those two frames still agree, so the
        pair is analysed as a fixed camera's. A camera that really moved leaves little of the
        background where it was."""
        still = self.describer.analyse(
            base, pixels, watch=watch, analysis=dataclasses.replace(analysis, camera="fixed")
        )
        return still if still.mask.changed_fraction <= STILL_BACKGROUND else moved

    def _may_hold(self) -> bool:
        """Whether the next changed sample may be carried as held (``_held`` then asks)."""
        cadence = self.cadence
        return (
            self.movers is not None
            and self._described is not None
            and cadence.every > 0
            and cadence.active
            and cadence.found
        )

    def _held(
        self,
        pixels: np.ndarray,
        base_thumb: np.ndarray,
        thumb: np.ndarray,
        watch_thumb: np.ndarray | None,
        analysis: AnalysisConfig,
        crop: tuple[slice, slice],
    ) -> bool:
        """Whether this changed sample is the change described last going on in place: people
        standing at a table, shifting their weight. Each such pair was analysed and captioned
        again (the room clip at 1 s: 110 pairs analysed, 61 of them a person standing) to say
        what the tracker already tells ("stood in the centre for 18 s"); carried like a pair
        inside a ``--describe-every`` slot, the run's events are the same, sentences included,
        on the room, car park and motorway clips (the motorway's moving cars are never held).
        Only while a described change goes on (``_Cadence`` active and found), and never with
        ``--describe-every 0s``, which asks for every changed pair."""
        if not self._may_hold():
            return False
        now = self.movers(pixels, self.region)  # type: ignore[misc]
        if not now:
            return False
        frame, described = self._described
        if described is None:
            described = self.movers(frame, self.region)
            self._described = (frame, described)
        changed = changed_pixels(base_thumb, thumb, watch_thumb, analysis)
        return held_by(now, described, changed, _to_thumb(pixels, thumb, crop))

    def first_looks(self, frames: Iterator[Frame]) -> Iterator[_Seen]:
        """Each frame brought to the working size, with its first look: what it is compared
        with and how much of the (watched) thumbnail changed. Nothing here depends on an
        analysis, so it runs on the decoding thread, ahead of :meth:`look`; a sample seen to
        change has the detector's pass made here too (``warm``), beside the analysis of the
        pairs before it on the other thread."""
        # Closed with this generator, on its thread (``_prefetch``): no decoder outlives it.
        try:
            yield from self._first_looks(frames)
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()

    def _first_looks(self, frames: Iterator[Frame]) -> Iterator[_Seen]:
        video, analysis = self.video, self.analysis
        view: _View | None = None
        previous_thumb: np.ndarray | None = None
        size: tuple[int, int] | None = None  # (h, w) of the first frame: all are brought to it
        for frame in frames:
            timestamp = frame.timestamp or 0.0
            pixels = frame.pixels
            if size is None:
                size = pixels.shape[:2]
            elif pixels.shape[:2] != size:
                if not any("like the first frame" in w for w in self.warnings):
                    self.warnings.append(
                        f"{_where(frame)} is {pixels.shape[1]}x{pixels.shape[0]}, not {size[1]}x{size[0]} like the "
                        "first frame: frames of another size are resized to the first one's"
                    )
                pixels = cv2.resize(pixels, (size[1], size[0]), interpolation=cv2.INTER_AREA)
            pixels, _ = resize_for_analysis(pixels, analysis.work_size)
            # Frames are never changed once decoded; saying so lets the analysis reuse this
            # frame's grey and blurred images when it is the next pair's before frame.
            pixels.flags.writeable = False
            if view is None:
                view = self._view(pixels)
            if self.reference is not None and self.comparator.reference is None:
                self.comparator.reference = resize_like(self.reference, pixels)
            crop = view.crop
            thumb = thumbnail(pixels[crop])
            replaying = self.resume_at is not None and timestamp <= self.resume_at.at + TIME_EPS
            base = self.comparator.baseline()
            base_thumb = None
            share: float | None = None
            if base is not None and not replaying:
                base_thumb = (
                    previous_thumb
                    if video.compare == "previous" and previous_thumb is not None
                    else thumbnail(base[crop])
                )
                share = changed_share(base_thumb, thumb, view.watch_thumb, view.analysis)
            self.comparator.push(pixels)
            previous_thumb = thumb
            changed = share is not None and share >= video.lower
            due = self.pass_due is not None and not replaying
            if due:
                since = functools.partial(
                    changed_pixels,
                    after_thumb=thumb,
                    watch_thumb=view.watch_thumb,
                    analysis=view.analysis,
                )
                due = self.pass_due(  # type: ignore[misc]
                    timestamp,
                    pixels,
                    changed,
                    self.region,
                    thumb,
                    since,
                    _to_thumb(pixels, thumb, crop),
                )
            yield _Seen(
                timestamp,
                pixels,
                thumb,
                base,
                base_thumb,
                share,
                replaying,
                view,
                answer_carries=changed and self.pass_due is not None,
            )
            # The pass after the sample is handed on: the analysis thread may start on it
            # meanwhile (the held-change check, asking about the same frame, waits for this
            # pass rather than making its own: analysis/detect.py).
            if due:
                self.warm(pixels, thumb, self.region)  # type: ignore[misc]

    def _view(self, pixels: np.ndarray) -> _View:
        """What the first frame (at work size) fixes: the watched area at this size."""
        if self.watch is None:
            return _View(None, None, (slice(None), slice(None)), self.analysis)
        watch_work = resize_like(self.watch.astype(np.uint8), pixels) > 0
        crop = watched_box(watch_work)
        rows, cols = crop
        self.region = (
            cols.start or 0,
            rows.start or 0,
            (cols.stop or pixels.shape[1]) - (cols.start or 0),
            (rows.stop or pixels.shape[0]) - (rows.start or 0),
        )
        watch_thumb = resize_like(watch_work[crop].astype(np.uint8), thumbnail(pixels[crop])) > 0
        return _View(watch_work, watch_thumb, crop, relative_to_watched(self.analysis, watch_work))

    def look(self, seen: Iterator[_Seen]) -> Iterator[_Sample]:
        """The samples of :meth:`first_looks`, each changed pair analysed unless it is held or
        inside the slot of the last described one (``--describe-every``)."""
        video = self.video
        for sample in seen:
            timestamp, pixels, view = sample.timestamp, sample.pixels, sample.view
            continues = sample.base is not None and video.compare == "previous"
            result = None
            carried = False
            cadence = self.cadence
            if sample.share is not None:
                assert sample.base is not None and sample.base_thumb is not None
                if sample.share < video.lower:
                    continues = False  # the next pair's before frame is not this pair's after frame
                    cadence.active = False
                elif cadence.describe(timestamp) and not self._held(
                    pixels,
                    sample.base_thumb,
                    sample.thumb,
                    view.watch_thumb,
                    view.analysis,
                    view.crop,
                ):
                    result = self.describer.analyse(
                        sample.base,
                        pixels,
                        watch=view.watch,
                        analysis=view.analysis,
                        still_background=STILL_BACKGROUND,
                    )
                    if result.camera is not None:
                        result = self._camera_checked(
                            sample.base, pixels, view.watch, view.analysis, result
                        )
                    cadence.active = True
                    cadence.found = bool(result.clusters) or result.scene_changed
                    self._described = (pixels, None)
                else:
                    carried = True
            cadence.last_time = timestamp
            yield _Sample(
                timestamp,
                result,
                continues,
                sample.replaying,
                carried,
                cadence.active,
                cadence.found,
                pixels,
                holding=self._may_hold() or sample.answer_carries,
            )


def describe_source(
    spec: Any,
    settings: Settings,
    *,
    describer: PairDescriber | None = None,
    on_progress: ProgressFn | None = None,
    on_event: EventFn | None = None,
    on_update: UpdateFn | None = None,
    on_closed: ClosedFn | None = None,
    previous: SourceResult | None = None,
    update_every: float = 2.0,
    on_checkpoint: CheckpointFn | None = None,
) -> SourceResult:
    """Describe one video / folder / file list as a list of events.

    describer: the pair pipeline to use (built from ``settings`` when None; pass one to share
        its captioner across sources).
    on_closed: called once per event as soon as it is final (closed, numbered, its picture
        written), in the order events close; not for the events ``previous`` already holds.
    previous: a partial result of an earlier run of this source (``timeline_from_dict``): the
        run continues from its last checkpoint, keeps the events found before it and returns
        the merged result - the same events, ids and counts an uninterrupted run gives.
    on_checkpoint: called with each checkpoint as it is taken; returning True ends the run
        there (a distributed chunk ends at its first checkpoint past its nominal end; see
        ``timeline.distributed``): the result is returned not complete, resumable from it.
    A frame that cannot be read is skipped and reported; an error that ends the source early
    keeps every event found (``error`` set, ``complete`` False, so ``--resume`` can continue).
    """
    video = settings.video.validate()
    analysis = dataclasses.replace(settings.analysis, scene_fraction=video.upper).validate()
    run = _SourceRun(
        spec,
        settings,
        video,
        analysis,
        describer or PairDescriber(analysis, settings.caption),
        _Callbacks(on_progress, on_event, on_update, on_closed, on_checkpoint, update_every),
        previous,
    )
    return run.run()


@dataclass(frozen=True)
class _Callbacks:
    """What a source's run reports to its caller (see ``describe_source``)."""

    on_progress: ProgressFn | None
    on_event: EventFn | None
    on_update: UpdateFn | None
    on_closed: ClosedFn | None
    on_checkpoint: CheckpointFn | None
    update_every: float


class _SourceRun:
    """One source, sample by sample. ``run`` reads top to bottom: open the source and build
    what the run needs (``_start``), then for each sample say what changed (``_said``), link
    it to the objects followed (``_with_objects``), give it to the events (``_advance``), take a
    checkpoint where nothing is open (``_checkpoint``) and report progress; at the end close
    what is still open (``_finish``). Errors keep everything found (see ``describe_source``)."""

    def __init__(
        self,
        spec: Any,
        settings: Settings,
        video: VideoConfig,
        analysis: AnalysisConfig,
        describer: PairDescriber,
        calls: _Callbacks,
        previous: SourceResult | None,
    ) -> None:
        self.spec, self.settings, self.video, self.analysis = spec, settings, video, analysis
        self.describer, self.calls = describer, calls
        self.name = str(spec)
        self.resume_at = previous.checkpoint if previous is not None else None
        self.result = _continued(previous, self.name)
        self.seconds_before = self.result.seconds
        self.started = time.perf_counter()
        self.last_update = self.started
        self.reports: dict[float, Report] = {}  # the pictured pair of each open event
        self.hints: tuple[Hint, ...] = ()  # what the previous pair recognised where
        self.last_described: tuple[list[Detection], Report | None] = ([], None)
        self.index = -1  # samples of this run (replayed ones not counted)
        self.seen_skips = 0
        self.was_changed = False
        self.stopped = False
        self.objects: ObjectWatcher | None = None  # made by _start when objects are followed

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> SourceResult:
        result = self.result
        self.source = open_spec(self.spec, self.video)
        opencv_threads = cv2.getNumThreads()
        try:
            self._start()
            if self.source.focus is not None:
                # A watched run's per-frame work is on crops of a few hundred pixels (the first
                # look, the analysis window, the recognisers' crops), which OpenCV's thread pool
                # splits into hand-offs that cost more than they share: on one thread the
                # motorway's --roi scan takes 0.03-0.04 s less CPU and 1.6 % less time
                # (interleaved, 16 rounds). Whole frames keep the pool (the room clip is 5 %
                # slower without it).
                cv2.setNumThreads(1)
            try:
                self._samples()
                result.warnings.extend(self.source.stats.skipped[self.seen_skips :])
                if not self.stopped:
                    # The events still open close here; writing their pictures can fail as
                    # any write can (a full disk), so this is inside the same error handling.
                    self._finish()
            except SpotdiffError as exc:
                # The source broke off (a decoder error), or a write failed (a picture on a
                # full disk): keep everything found, say where it stopped, leave it resumable.
                at = format_timecode(result.processed_until or 0.0)
                result.error = f"{exc} (stopped at {at})"
                result.pending = self.builder.pending()
                result.decoded = self.source.stats.decoded
                result.complete = False
                return result
            except BaseException:
                # Ctrl-C or a bug: report the state reached first, so the partial report on
                # disk covers every finished sample and lists the events still open
                # (--resume re-detects them whole from the last checkpoint).
                if self.calls.on_update is not None:
                    self._publish()
                raise
            result.decoded = self.source.stats.decoded
            if self.stopped:  # nothing is open at a checkpoint: the result is final up to it
                return result
            result.events.sort(key=lambda e: (e.start, e.id))
            result.pending = []
            result.complete = True
            _check_end(result, self.info.duration, self.video, self.source)
            _check_one_sample(result, self.video)
        finally:
            cv2.setNumThreads(opencv_threads)
            self.source.close()
            if self.objects is not None:
                self.objects.close()  # its pinned detector answers
            result.seconds = self.seconds_before + time.perf_counter() - self.started
        return result

    def _start(self) -> None:
        """What the run needs once the source is open: its size, the watched region, what each
        sample is compared with, the event builder, the looker, the object watcher."""
        video, analysis, source, resume_at = self.video, self.analysis, self.source, self.resume_at
        # The recognisers load in the background while the first frames are decoded, instead
        # of at the first changed pair, when every core is busy (once per process; the motorway
        # --roi row 2-3 % faster, the room clip 1 %, interleaved runs), each pass on one thread:
        # this run's own threads keep the cores busy (onnx_runtime.one_thread_per_pass).
        one_thread_per_pass()
        self.describer.warm_up()
        info = self.info = source.info
        self.result.info = dataclasses.asdict(info)
        _check_start(source, video.start, self.name)
        long_side = max(info.width, info.height)
        self.work_pixels_scale = (
            long_side / analysis.work_size
            if analysis.work_size and long_side > analysis.work_size
            else 1.0
        )
        watch = watch_mask(info.width, info.height, tuple(video.roi), video.mask)
        # What a watched run reads of each frame: the source may decode the rest once a second.
        source.focus = (
            watched_focus(watch, self.work_pixels_scale, analysis) if watch is not None else None
        )
        reference = None
        if video.compare == "reference":
            from ..frames import load_image

            reference = load_image(video.reference)
        self.history: deque[float] = deque(
            maxlen=video.background_samples if video.compare == "background" else 1
        )
        first_id = resume_at.events + 1 if resume_at else 1
        self.builder = EventBuilder.for_source(self.name, source, video, first_id)
        start = _restart_time(resume_at.replay_from, video) if resume_at else video.start
        self.frames = source.sample(video.every, start, video.end, max_side=analysis.work_size)
        self.looker = _Looker(
            video,
            analysis,
            watch,
            reference,
            self.describer,
            self.result.warnings,
            resume_at,
            describe_every=setting_seconds(video.describe_every, "--describe-every", info.fps),
        )
        self.objects = (
            ObjectWatcher(
                info.width,
                info.height,
                self.work_pixels_scale,
                setting_seconds(video.look_every, "--look-every", info.fps),
                first_time=(
                    source._position(parse_time(video.start, what="--start"), "--start")
                    if video.start is not None
                    else 0.0
                ),
                every=parse_every(video.every).seconds or 0.0,
                in_flight=DECODE_AHEAD + 2 * STAGE_AHEAD,
            )
            # --no-recognise: no looking for people and vehicles, by pixels or by detector.
            if video.objects and self.settings.caption.recognise
            else None
        )
        if self.objects is not None:
            self.looker.movers = self.objects.movers
            self.looker.pass_due = self.objects.pass_due
            self.looker.warm = self.objects.warm

    def _samples(self) -> None:
        """Every sample, in order. Stages on threads of their own: decoding with the first
        looks (and the detector's pass of a changed sample), the pixel analysis of each changed
        pair, the detector's naming passes, and here the captions and events. Captions need the previous
        pair's recognition (hints), so they stay in order on this thread; the analysis does
        not, so it runs ahead on the other core. A live source (a watched folder) waiting for
        the next file must stop waiting when the run stops, or closing the readers would wait
        for an upload forever."""
        wake = getattr(self.source, "interrupt", None)
        seen = _prefetch(self.looker.first_looks(self.frames), depth=DECODE_AHEAD, name="decode")
        looked = self.looker.look(seen)
        # Only the grounded captioner names changes with the detector (a learned model
        # writes its own words).
        if self.objects is not None and self.settings.caption.model == "grounded":
            looked = self._look_ahead(_prefetch(looked, depth=STAGE_AHEAD, name="analysis"))
            last = "naming"
        else:
            last = "analysis"
        with contextlib.closing(
            _prefetch(looked, depth=STAGE_AHEAD, wake=wake, name=last)
        ) as stream:
            for sample in stream:
                detections = self._said(sample)
                before_time = self.result.processed_until
                if before_time is None:
                    before_time = sample.timestamp
                self.history.append(sample.timestamp)
                self.result.processed_until = sample.timestamp
                if sample.replaying:
                    continue  # already counted by the run being resumed
                self.index += 1
                self.result.samples += 1
                self._advance(sample, detections, before_time)
                if not self.builder.open and not sample.holding and self._checkpoint(sample):
                    self.stopped = True
                    return
                self._report_progress(sample.timestamp)

    def _look_ahead(self, samples: Iterator[_Sample]) -> Iterator[_Sample]:
        """The detector's passes that name each analysed pair's changes, one stage ahead of
        the captions, on a thread of their own (``ObjectWatcher.look_ahead``): done here they
        overlap the captions of the samples before instead of following them."""
        with contextlib.closing(samples):  # type: ignore[arg-type]
            for sample in samples:
                if not sample.replaying:
                    self.objects.look_ahead(sample.analysis, sample.continues)  # type: ignore[union-attr]
                yield sample

    # -- one sample ------------------------------------------------------------------------

    def _said(self, sample: _Sample) -> list[Detection]:
        """What this sample says changed: the sentences of its pair, or, inside the slot of the
        last described pair (``--describe-every``), those sentences carried on."""
        if not sample.continues:
            self.hints = ()  # hints only carry over between consecutive pairs of one sequence
        if sample.carried:
            # The change goes on: its sentences continue the open events, so each ends where
            # the change did.
            said, report = self.last_described
            before = self.result.processed_until or sample.timestamp
            detections = [
                dataclasses.replace(d, time=sample.timestamp, before_time=before) for d in said
            ]
            if detections and report is not None:
                self.reports[sample.timestamp] = report
            return detections
        if sample.analysis is None:
            return []
        return self._caption(sample)

    def _caption(self, sample: _Sample) -> list[Detection]:
        """Caption a changed pair: one detection per sentence, its box in source pixels."""
        timestamp, info, result = sample.timestamp, self.info, self.result
        report = self.describer.caption(sample.analysis, hints=self.hints)
        self.hints = _hints_from(report)
        result.analysed += 1
        before_time = result.processed_until if result.processed_until is not None else timestamp
        detections = []
        for sentence in report.sentences:
            if sentence.kind == "no_change":
                continue
            box = _sentence_box(report, sentence.cluster_ids, self.work_pixels_scale)
            noun = str(sentence.details.get("noun", ""))
            detection = Detection(timestamp, before_time, sentence, box, noun)
            detections.append(in_video_words(detection, info.width, info.height))
        if detections:
            self.reports[timestamp] = report
        self.last_described = (detections, report)
        return detections

    def _advance(self, sample: _Sample, detections: list[Detection], before_time: float) -> None:
        """Give the sample's detections (with the objects' share) to the event builder, close
        and picture the events that became final, and forget the pictures no event needs."""
        timestamp, builder, objects = sample.timestamp, self.builder, self.objects
        live: set[int] | None = None
        if objects is not None:
            changed = sample.analysis is not None or sample.carried
            objects.region = self.looker.region
            detections = _with_objects(
                objects,
                builder,
                sample,
                detections,
                before_time,
                changed=changed,
                starts_change=changed and not self.was_changed,
            )
            self.was_changed = changed
            for track in objects.expired(timestamp):
                builder.tell(track, objects.story(track, to_end=False))
            live = objects.live_ids
            if detections and timestamp not in self.reports and sample.analysis:
                self.reports[timestamp] = self.last_described[1]  # type: ignore[assignment]
        for event in builder.add(self.index, detections, time=timestamp, live_tracks=live):
            _close(self.result, event, self.reports, self.calls.on_event, self.calls.on_closed)
        if objects is not None and objects.arrived:
            _adopt_arrivals(objects, builder, timestamp)
        pictured = {o.pictured.time for o in builder.open}
        for t in [t for t in self.reports if t not in pictured]:
            del self.reports[t]

    def _checkpoint(self, sample: _Sample) -> bool:
        """Nothing is open: a moment to resume from. True when the caller ends the run here."""
        if self.objects is not None:
            self.objects.reset()  # what a run resumed from here starts with
        result = self.result
        result.checkpoint = Checkpoint(
            sample.timestamp,
            self.history[0],
            len(result.events),
            result.samples,
            result.analysed,
            sample.active,
            sample.found,
        )
        on_checkpoint = self.calls.on_checkpoint
        return on_checkpoint is not None and on_checkpoint(result.checkpoint)

    def _report_progress(self, timestamp: float) -> None:
        skipped = self.source.stats.skipped
        if len(skipped) > self.seen_skips:
            self.result.warnings.extend(skipped[self.seen_skips :])
            self.seen_skips = len(skipped)
        if self.calls.on_progress:
            self.calls.on_progress(timestamp, self.info.duration, self.result.samples)
        if (
            self.calls.on_update
            and time.perf_counter() - self.last_update > self.calls.update_every
        ):
            self._publish()
            self.last_update = time.perf_counter()

    def _finish(self) -> None:
        """The source ended: the objects still followed end, and every open event closes."""
        if self.objects is not None:
            for track, in_view in self.objects.finish():
                self.builder.tell(track, self.objects.story(track, to_end=in_view))
        for event in self.builder.finish():
            _close(self.result, event, self.reports, self.calls.on_event, self.calls.on_closed)

    def _publish(self) -> None:
        _publish(
            self.result,
            self.builder,
            self.source,
            self.started,
            self.seconds_before,
            self.calls.on_update,  # type: ignore[arg-type]
        )


def open_spec(spec: Any, video: VideoConfig) -> Any:
    """Open a video, folder or file list with the settings that say how to read it."""
    return open_source(
        spec,
        backend=video.backend,
        sort=video.sort,
        fps=video.fps,
        time_pattern=video.time_pattern,
    )


def _continued(previous: SourceResult | None, name: str) -> SourceResult:
    """The result a run starts from: empty, or an earlier partial run cut back to its checkpoint
    (events closed after it, and counts made after it, are found again by this run)."""
    if previous is None:
        return SourceResult(source=name)
    point = previous.checkpoint
    if point is None:  # nothing was safely finished: start over, keeping only the time spent
        return SourceResult(source=name, seconds=previous.seconds, decoded=previous.decoded)
    return SourceResult(
        source=name,
        info=previous.info,
        events=sorted(previous.events[: point.events], key=lambda e: (e.start, e.id)),
        samples=point.samples,
        analysed=point.analysed,
        decoded=previous.decoded,
        processed_until=point.at,
        seconds=previous.seconds,
        warnings=list(previous.warnings),
        checkpoint=point,
    )


def _restart_time(replay_from: float, video: VideoConfig) -> float:
    """Where sampling restarts to meet ``replay_from`` again on the original sampling grid.

    Samples are the first frames at or after ``start + k*every``: restarting at the grid point
    at or before that sample (not at its own timestamp) keeps every later target where it was,
    so the resumed run takes exactly the frames the uninterrupted one took.
    """
    spec = parse_every(video.every)
    origin = parse_time(video.start, what="--start").seconds if video.start is not None else 0.0
    if spec.seconds is None or origin is None:
        return replay_from  # every N frames: counting restarts at that very frame
    k = int((replay_from + TIME_EPS - origin) // spec.seconds)
    return origin + k * spec.seconds


def _publish(
    result: SourceResult,
    builder: EventBuilder,
    source: Any,
    started: float,
    before: float,
    on_update: UpdateFn,
) -> None:
    result.pending = builder.pending()
    result.decoded = source.stats.decoded
    result.seconds = before + time.perf_counter() - started
    on_update(result)


def _where(frame: Frame) -> str:
    if frame.index is not None and Path(frame.source).suffix.lower() not in (
        ".png",
        ".jpg",
        ".jpeg",
        ".bmp",
        ".tif",
        ".tiff",
        ".webp",
    ):
        return f"frame {frame.index} ({format_timecode(frame.timestamp or 0.0)})"
    return Path(frame.source).name


def _check_start(source: Any, start: str | None, name: str) -> None:
    """``--start`` at or past the end would sample nothing and report "no change": say so."""
    duration = source.info.duration
    if start is None or not duration:
        return
    seconds = source._position(parse_time(start, what="--start"), "--start")
    if seconds >= duration - TIME_EPS:
        raise UsageError(
            f"{name}: --start {start} is past the end ({format_timecode(duration)}); give an earlier --start"
        )


def _check_end(
    result: SourceResult, duration: float | None, video: VideoConfig, source: Any
) -> None:
    """A source that stops well before the duration its header states was cut short (a
    truncated download, a recording that crashed): say when it ended instead of calling the
    run complete as if nothing were missing."""
    if not duration or result.processed_until is None:
        return
    expected = duration
    if video.end is not None:
        expected = min(expected, source._position(parse_time(video.end, what="--end"), "--end"))
    spec = parse_every(video.every)
    fps = source.info.fps or 25.0
    step = spec.seconds if spec.seconds is not None else (spec.frames or 1) / fps
    # The last sample lands up to one step (plus a frame) before the end in an intact file.
    slack = max(step + 2.0 / fps, 0.02 * expected, 1.0)
    if result.processed_until < expected - slack:
        result.ended_early_at = result.processed_until
        result.warnings.append(
            f"{result.source} ended at {format_timecode(result.processed_until)}, but its header says "
            f"{format_timecode(duration)}: the file looks truncated; nothing after that point was seen"
        )


def _check_one_sample(result: SourceResult, video: VideoConfig) -> None:
    """A whole run that sampled one frame had nothing to compare it with (an image given as a
    video, or a clip shorter than ``--every``): "no change" alone would read as an answer."""
    if result.samples != 1 or video.compare == "reference":
        return
    result.warnings.append(
        f"{result.source} gave one frame, so nothing was compared: to compare two images use "
        "`spotdiff caption BEFORE AFTER`; for a video, sample it more often (--every)"
    )


def _with_objects(
    objects: ObjectWatcher,
    builder: EventBuilder,
    sample: _Sample,
    detections: list[Detection],
    before_time: float,
    *,
    changed: bool,
    starts_change: bool,
) -> list[Detection]:
    """Look for objects at this sample when it is time to (``ObjectWatcher.wants_look``), tell
    the builder about the tracks that ended, and return the sample's detections with those the
    tracked objects explain made theirs."""
    look = None
    wanted = objects.wants_look(sample.timestamp, changed, starts_change, detections)
    if sample.pixels is not None and wanted:
        active = sample.analysis.mask.active if sample.analysis is not None else None
        look = objects.look(sample.timestamp, sample.pixels, detections, active)
    light = sample.analysis is not None and bool(sample.analysis.mask.lighting_changed)
    return objects.explain(detections, sample.timestamp, before_time, look, light)


def _adopt_arrivals(objects: ObjectWatcher, builder: EventBuilder, timestamp: float) -> None:
    """The changes an object's arrival made just before it was first tracked join its event."""
    for track in objects.arrived:
        for sighting in track.sightings:  # wherever it was seen, just after a change there
            builder.adopt(track.id, sighting.box, sighting.time - 2.0 * objects.look_every)


def _with_picture(event: Event, reports: dict[float, Report], on_event: EventFn | None) -> Event:
    report = reports.get(event.frames[1])
    if on_event is None or report is None:
        return event
    return dataclasses.replace(event, picture=on_event(event, report))


def _close(
    result: SourceResult,
    event: Event,
    reports: dict[float, Report],
    on_event: EventFn | None,
    on_closed: ClosedFn | None,
) -> None:
    """An event is final: its picture is written and it joins the result. When the picture
    cannot be written, the event is kept all the same (without one) before the error goes on."""
    try:
        event = _with_picture(event, reports, on_event)
    except BaseException:
        result.events.append(event)
        raise
    result.events.append(event)
    if on_closed is not None:
        on_closed(event)


def check_syntax(video: VideoConfig) -> None:
    """Parse the time and box syntax now: a typo in ``--every`` is the user's, reported once
    before any source is opened (not as the same "skipped" line for every source)."""
    video.validate()
    parse_every(video.every)
    for what, value in (("--start", video.start), ("--end", video.end)):
        if value is not None:
            parse_time(value, what=what)
    for what, value in (
        ("--describe-every", video.describe_every),
        ("--look-every", video.look_every),
    ):
        parse_time(value, what=what)
    for box in video.roi:
        parse_roi(box)
