"""``spotdiff video --engine dask``: sources, and time chunks of long videos, described on a
Dask cluster (``dask.distributed``), merged here into the timeline a local run gives.

Who does what
-------------
Workers open sources by path or URL (the same string the user gave) and run the ordinary
``describe_source`` over one chunk; they write nothing. What comes back is the timeline's own
structures (``SourceResult``, events, checkpoints) and each event's picture as JPEG bytes. This
process merges them, numbers the events, writes the pictures and calls the run's callbacks
(``on_closed`` for ``--jsonl`` / ``--on-event``, ``on_update`` for the report on disk) exactly
as the local path does, in the same order per source.

Chunks, and why the merge equals an uninterrupted run
-----------------------------------------------------
A video longer than ``--chunk`` is cut at nominal borders ``T_1 < T_2 < ...`` of video time. The
difficulty is state: what a sample is compared with (the previous sample, or the median of the
last N), the describe cadence, and the events still open at a border. The resume machinery
(``pipeline.Checkpoint`` with ``describe_source(previous=...)``) already defines a moment from
which a run gives exactly what an uninterrupted run gives: a sample after which no event is
open; resuming there replays the samples the comparison needs and goes on. Chunks are built on
it, not on a second mechanism:

- Chunk j runs from a *made-up* checkpoint: it replays the comparison window before
  ``A_j = T_j - overlap`` (the samples on the run's own sampling grid, so the comparator holds
  exactly what the uninterrupted run's holds), then describes normally from ``A_j``. It keeps
  every checkpoint it takes at or after ``T_j`` and ends at its first checkpoint at or after
  ``T_{j+1}`` (``describe_source(on_checkpoint=...)``): past its nominal end, at a quiet point.
- Chunk j-1 ends at checkpoint q, the uninterrupted run's first quiet point at or after
  ``T_j`` (chunk j-1 is exact up to there, by induction from chunk 0, which starts where the
  run starts). If chunk j has a checkpoint at the same sample with the same comparison window
  (``replay_from``) and cadence flags, both runs are in the same state at q: nothing open,
  the same frames to compare with, the same next decisions. From q on, chunk j's events are the
  uninterrupted run's, up to numbering: they are renumbered by the difference of the two
  event counts at q. Events that closed before q come from chunk j-1 only, so each event comes
  from exactly one chunk.
- If chunk j does not agree at q (it started inside a change it could not see whole, and that
  fragment is still open at q), its result is dropped and chunk j is run again *from q* -
  an ordinary ``--resume`` from the true checkpoint, exact by construction. This costs one
  chunk's time; it never costs correctness.

Why this overlap: the comparison window is replayed exactly, so that part needs no margin.
The ``overlap`` of fully described video before ``T_j`` (a quarter of the chunk, at most a
minute) only makes agreement at q likely: a change that began within it is seen whole by
chunk j, so its fragment cannot still be open when the uninterrupted run is quiet. Most
changes a fixed camera sees (a person crossing, a car passing) last well under a minute; a
longer one costs a re-run, not a wrong event. A source with no quiet moment after a border (a
busy road watched whole) is in effect described by the chunk before it, to the end.

Sources that are not cut: folders and file lists, ``--every`` in frames, ``--start`` in frames
and videos of unknown duration run as one chunk each (still in parallel with other sources).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings, VideoConfig
from ..errors import SpotdiffError, UsageError
from ..frames.base import TIME_EPS
from ..frames.timecode import format_timecode, parse_every, parse_time
from ..types import Event, Report
from .pipeline import Checkpoint, SourceResult, describe_source, open_spec

PictureFn = Callable[[Report], Any]
"""Renders an event's picture on the worker (a module-level function, so it pickles); what it
returns reaches ``on_event`` in place of the pair's Report. The report layer provides it
(``report.timeline.render_event_picture``): the timeline layer draws nothing itself."""

DEFAULT_WORKERS = 2
# A chunk whose task raised (a bug, a worker that ran out of memory) is tried this many more
# times; a worker that dies mid-chunk is handled by the scheduler, which runs the chunk again
# elsewhere (up to Dask's ``distributed.scheduler.allowed-failures``). A SpotdiffError is the
# source's own error (an unreadable file) and is reported, not retried.
RETRIES = 2
MAX_OVERLAP = 60.0  # seconds; see the module docstring


class ClusterError(SpotdiffError):
    """The Dask cluster cannot be reached or used."""


@dataclass(frozen=True)
class MergeStep:
    """How one chunk joined a source's timeline (for progress displays and the benchmark).

    chunk: its index; start: its nominal start (s); at: the quiet sample where it took over
    from the chunk before (None for the first); rerun: whether it was run again from that
    checkpoint because its own run did not agree there.
    """

    chunk: int
    start: float
    at: float | None
    rerun: bool


@dataclass
class ChunkResult:
    """What a worker returns for one chunk: the run as ``describe_source`` left it, the
    checkpoints it took at or after the chunk's nominal start, and the pictures of its events
    (by the result's own event numbers), encoded."""

    result: SourceResult
    checkpoints: list[Checkpoint] = field(default_factory=list)
    pictures: dict[int, Any] = field(default_factory=dict)


# -- on a worker ---------------------------------------------------------------------------------


def _describer(analysis: Any, caption: Any) -> Any:
    """One pair describer per worker process and settings: a chunk does not pay for building
    the captioner again (the local path shares one across sources the same way)."""
    from ..describer import PairDescriber

    try:
        hash((analysis, caption))
    except TypeError:  # settings holding something unhashable: one for this chunk
        return PairDescriber(analysis, caption)
    return _kept_describer(analysis, caption)


@functools.lru_cache(maxsize=4)
def _kept_describer(analysis: Any, caption: Any) -> Any:
    from ..describer import PairDescriber

    return PairDescriber(analysis, caption)


def probe_source(spec: str, settings: Settings) -> dict[str, Any] | str:
    """The source's ``SourceInfo`` as a dict (duration, fps, kind...), or its own error (a
    missing file, not a video), read on a worker: this process may not see the workers' files."""
    try:
        source = open_spec(spec, settings.video)
        try:
            return dataclasses.asdict(source.info)
        finally:
            source.close()
    except SpotdiffError as exc:
        return str(exc)


def run_chunk(
    spec: str,
    settings: Settings,
    previous: SourceResult | None,
    begin: float,
    until: float | None,
    render: PictureFn | None,
) -> ChunkResult:
    """Describe ``spec`` from ``previous`` (a checkpoint: the run's real state, or a chunk's
    made-up warm-up; None: the source's start) to its first checkpoint at or after ``until``
    (None: to the end). Keeps the checkpoints at or after ``begin``; ``render`` draws each
    event's picture (None: no pictures). Runs on a worker."""
    checkpoints: list[Checkpoint] = []
    drawn: dict[int, Any] = {}

    def on_checkpoint(point: Checkpoint) -> bool:
        if point.at >= begin - TIME_EPS:
            checkpoints.append(point)
        return until is not None and point.at >= until - TIME_EPS

    def on_event(event: Event, report: Report) -> None:
        # Named once the merge numbers it; a tracked object's path drawn on it.
        drawn[event.id] = (
            render(report, event.track, event.frame_size) if event.track else render(report)
        )

    analysis = dataclasses.replace(settings.analysis, scene_fraction=settings.video.upper)
    try:
        result = describe_source(
            spec,
            settings,
            describer=_describer(analysis, settings.caption),
            on_event=on_event if render is not None else None,
            previous=previous,
            on_checkpoint=on_checkpoint,
        )
    except SpotdiffError as exc:
        result = SourceResult(source=str(spec), error=str(exc), complete=True)
    return ChunkResult(result, checkpoints, drawn)


# -- the plan ------------------------------------------------------------------------------------


def chunk_starts(info: dict[str, Any], video: VideoConfig) -> list[float]:
    """Nominal chunk starts (s) for a source with this ``SourceInfo``: ``[origin]`` when it is
    not cut (see the module docstring), else every ``--chunk`` from ``--start`` to the end."""
    every = parse_every(video.every)
    start = parse_time(video.start, what="--start") if video.start is not None else None
    origin = start.seconds if start is not None else 0.0
    duration = info.get("duration")
    if info.get("kind") != "video" or not duration or every.seconds is None or origin is None:
        return [origin or 0.0]
    end = duration
    if video.end is not None:
        end = min(end, parse_time(video.end, what="--end").to_seconds(info.get("fps")))
    length = parse_every(video.chunk, what="--chunk").seconds
    assert length is not None  # VideoConfig.validate refuses frame counts
    starts = [origin]
    while starts[-1] + length < end - TIME_EPS:
        starts.append(origin + len(starts) * length)
    return starts


def warm_start(name: str, begin: float, video: VideoConfig) -> SourceResult | None:
    """The made-up checkpoint a chunk starting at ``begin`` runs from: describe from the grid
    point ``overlap`` before it, after replaying the samples the comparison needs (one for
    ``previous``, ``background_samples`` for ``background``). None: that reaches back to the
    run's start, so the chunk simply starts there (and is exact)."""
    every = parse_every(video.every).seconds
    assert every is not None
    origin = parse_time(video.start).seconds if video.start is not None else 0.0
    assert origin is not None
    length = parse_every(video.chunk, what="--chunk").seconds or 0.0
    overlap = min(length / 4, MAX_OVERLAP)
    window = video.background_samples if video.compare == "background" else 1
    # Grid points: samples are the first frames at or after origin + k * every, so a run
    # restarted at a grid point takes exactly the frames the uninterrupted run took.
    first = int((begin - overlap - origin + TIME_EPS) // every)  # first described grid point
    if first - window < 0:
        return None
    replay_from = origin + (first - window) * every
    # Replayed: every sample before the grid point `first` (a sample is at or after its point).
    at = origin + first * every - 2 * TIME_EPS
    return SourceResult(source=name, checkpoint=Checkpoint(at, replay_from, 0, 0, 0))


# -- merging, here -------------------------------------------------------------------------------


def _same_state(a: Checkpoint, b: Checkpoint) -> bool:
    """Two runs at these checkpoints are in the same state: the same sample, nothing open, the
    same samples to compare with, the same describe cadence (event and sample counts may
    differ: they are renumbered). ``found`` counts only while ``active``: after a quiet sample
    the next changed one is described whatever it says, and that analysis sets it anew."""
    return (
        abs(a.at - b.at) < TIME_EPS
        and abs(a.replay_from - b.replay_from) < TIME_EPS
        and a.active == b.active
        and (a.found == b.found or not a.active)
    )


def _translated(end: Checkpoint, point: Checkpoint, q: Checkpoint) -> Checkpoint:
    """A chunk's checkpoint ``end`` in the run's terms, the chunk having been at ``point``
    where the run was at ``q``: counts shifted; ``found`` is the run's until the chunk's next
    analysis (a chunk that started cold may not know it, see ``_same_state``)."""
    return dataclasses.replace(
        end,
        events=end.events + q.events - point.events,
        samples=end.samples + q.samples - point.samples,
        analysed=end.analysed + q.analysed - point.analysed,
        found=end.found if end.analysed != point.analysed else q.found,
    )


@dataclass
class _Source:
    """One source's merge: the exact timeline so far (``merged``, up to ``frontier``) and the
    chunk results waiting for their turn."""

    name: str
    starts: list[float]
    merged: SourceResult | None = None
    frontier: Checkpoint | None = None  # the uninterrupted run's state where merged ends
    next_chunk: int = 0  # the chunk that continues from the frontier
    done: bool = False
    waiting: dict[int, tuple[str, ChunkResult]] = field(default_factory=dict)
    # Seconds and frames decoded by every task but the first (merged or dropped): with the
    # first's, the work the run did for this source.
    spent: float = 0.0
    decoded: int = 0

    def chunk_for(self, at: float) -> int:
        """The chunk whose nominal span holds the sample at ``at``."""
        return max(j for j, t in enumerate(self.starts) if t <= at + TIME_EPS)


Callbacks = dict[str, Callable[..., Any] | None]
# What a task is: a source's probe, its first chunk (exact: from the start, or from the
# checkpoint being resumed), a chunk from a made-up warm-up start, or a chunk re-run from the
# frontier (exact).
PROBE, FIRST, WARM, RERUN = "probe", "first", "warm", "rerun"


class _Run:
    """The client side of one ``--engine dask`` run: submits probes and chunks, merges chunk
    results per source as they arrive, re-runs a chunk that did not agree."""

    def __init__(self, client: Any, settings: Settings, callbacks: Callbacks) -> None:
        from dask.distributed import as_completed

        self.client, self.settings, self.video = client, settings, settings.video
        self.cb = callbacks
        # Pictures are drawn on the worker only when someone takes them.
        self.render = callbacks.get("render_picture") if callbacks.get("on_event") else None
        self.pending = as_completed(loop=client.loop)
        self.tags: dict[str, tuple[str, str, int]] = {}  # future key -> (kind, source, chunk)
        self.futures: dict[tuple[str, int], Any] = {}  # (source, chunk) -> its latest task
        self.sources: dict[str, _Source] = {}
        self.specs: dict[str, str] = {}
        self.resume: dict[str, SourceResult] = {}
        self.results: dict[str, SourceResult] = {}

    # submitting

    def _submit(self, tag: tuple[str, str, int], fn: Any, *args: Any, priority: int = 0) -> Any:
        future = self.client.submit(fn, *args, pure=False, retries=RETRIES, priority=priority)
        self.tags[future.key] = tag
        self.pending.add(future)
        return future

    def _submit_chunk(self, kind: str, src: _Source, j: int, previous: SourceResult | None):
        until = src.starts[j + 1] if j + 1 < len(src.starts) else None
        self.futures[src.name, j] = self._submit(
            (kind, src.name, j),
            run_chunk,
            self.specs[src.name],
            self.settings,
            previous,
            src.starts[j],
            until,
            self.render,
            # Earlier chunks first, as the merge advances from the start; a re-run blocks it.
            priority=1000 if kind == RERUN else -j,
        )

    def start(self, specs: list[Any], resume: dict[str, SourceResult]) -> None:
        self.resume = resume
        for spec in specs:
            name = str(spec)
            self.specs[name] = str(spec)
            self._submit((PROBE, name, 0), probe_source, self.specs[name], self.settings)

    def _planned(self, name: str, info: dict[str, Any] | str) -> None:
        if isinstance(info, str):  # the source's own error: reported, the others go on
            self.results[name] = SourceResult(source=name, error=info, complete=True)
            if on_update := self.cb.get("on_update"):
                on_update(self.results[name])
            return
        src = self.sources[name] = _Source(name, chunk_starts(info, self.video))
        previous = self.resume.get(name)
        point = previous.checkpoint if previous is not None else None
        src.next_chunk = src.chunk_for(point.at) if point is not None else 0
        self._submit_chunk(FIRST, src, src.next_chunk, previous)
        for j in range(src.next_chunk + 1, len(src.starts)):
            self._submit_chunk(WARM, src, j, warm_start(name, src.starts[j], self.video))

    # merging

    def _arrived(self, src: _Source, kind: str, j: int, chunk: ChunkResult) -> None:
        if kind != FIRST:
            src.spent += chunk.result.seconds
            src.decoded += chunk.result.decoded
        if j >= src.next_chunk:
            src.waiting[j] = (kind, chunk)
        while not src.done and src.next_chunk in src.waiting:
            if not self._advance(src):
                break

    def _advance(self, src: _Source) -> bool:
        """Merge the chunk that continues from the frontier; False when it must be re-run."""
        j = src.next_chunk
        kind, chunk = src.waiting.pop(j)
        if kind == FIRST:
            previous = self.resume.get(src.name)
            base = (previous.checkpoint if previous else None) or Checkpoint(0.0, 0.0, 0, 0, 0)
            src.merged = dataclasses.replace(
                chunk.result,
                # A resumed run's result holds the earlier run's events: final, pictured.
                events=[e for e in chunk.result.events if e.id <= base.events],
                warnings=[],
            )
            self._take(src, kind, j, chunk, base, base)
            return True
        q = src.frontier
        assert q is not None and src.merged is not None
        point = (
            q if kind == RERUN else next((c for c in chunk.checkpoints if _same_state(c, q)), None)
        )
        if point is None:  # it started inside a change it could not see whole: run it from q
            # (the resume path numbers on from the events it is given, as --resume does)
            again = SourceResult(
                source=src.name, info=src.merged.info, events=list(src.merged.events), checkpoint=q
            )
            self._submit_chunk(RERUN, src, j, again)
            return False
        self._take(src, kind, j, chunk, point, q)
        return True

    def _take(
        self, src: _Source, kind: str, j: int, chunk: ChunkResult, point: Checkpoint, q: Checkpoint
    ) -> None:
        """Append ``chunk``'s events after ``point`` (its own state at the frontier ``q``),
        renumbered after the frontier's count; the frontier moves to where the chunk ended."""
        merged, result = src.merged, chunk.result
        assert merged is not None
        shift = (q.events - point.events, q.samples - point.samples, q.analysed - point.analysed)
        on_event, on_closed = self.cb.get("on_event"), self.cb.get("on_closed")
        for event in sorted((e for e in result.events if e.id > point.events), key=lambda e: e.id):
            new = dataclasses.replace(event, id=event.id + shift[0])
            picture = chunk.pictures.get(event.id)
            if on_event is not None and picture is not None:
                new = dataclasses.replace(new, picture=on_event(src.name, new, picture))
            merged.events.append(new)
            if on_closed is not None:
                on_closed(src.name, new)
        merged.samples = result.samples + shift[1]
        merged.analysed = result.analysed + shift[2]
        merged.processed_until = result.processed_until
        merged.info = result.info or merged.info
        merged.warnings.extend(w for w in result.warnings if w not in merged.warnings)
        end = result.checkpoint
        if end is not None and end.at >= q.at - TIME_EPS:
            src.frontier = _translated(end, point, q)
        elif kind != FIRST:  # it ran to the end with no quiet moment after q: q is the last
            src.frontier = q
        else:  # the run has not been quiet once (it ends here: a chunk stops only when quiet)
            src.frontier = None
        merged.checkpoint = src.frontier
        if on_merge := self.cb.get("on_merge"):
            at = None if kind == FIRST else q.at
            on_merge(src.name, MergeStep(j, src.starts[j], at, kind == RERUN))
        if result.complete or result.error:
            merged.complete, merged.error = result.complete, result.error
            merged.ended_early_at = result.ended_early_at
            merged.pending = [dataclasses.replace(e, id=e.id + shift[0]) for e in result.pending]
            src.done = True
            skipped = range(j + 1, len(src.starts))
        else:
            assert src.frontier is not None
            following = src.chunk_for(src.frontier.at)
            skipped = range(j + 1, following)
            src.next_chunk = following
        # Chunks the merge went past (a change that kept the chunk before busy beyond them)
        # are not needed: stop them.
        for k in skipped:
            future = self.futures.pop((src.name, k), None)
            if future is not None:
                future.cancel()
            src.waiting.pop(k, None)
        self._publish(src)

    def _publish(self, src: _Source) -> None:
        merged = src.merged
        assert merged is not None
        snapshot = dataclasses.replace(
            merged,
            events=sorted(merged.events, key=lambda e: (e.start, e.id)),
            warnings=list(merged.warnings),
            seconds=merged.seconds + src.spent,
            decoded=merged.decoded + src.decoded,
        )
        self.results[src.name] = snapshot
        if on_progress := self.cb.get("on_progress"):
            duration = (merged.info or {}).get("duration")
            on_progress(src.name, merged.processed_until or 0.0, duration, merged.samples)
        if on_update := self.cb.get("on_update"):
            on_update(snapshot)

    def _failed(self, name: str, what: str, exc: BaseException | None) -> None:
        """A task that failed for good (raised after its retries, or its workers kept dying):
        the source keeps what was merged and says where it stopped."""
        src = self.sources.get(name)
        merged = self.results.get(name)
        where = f" (stopped at {format_timecode(merged.processed_until or 0.0)})" if merged else ""
        message = f"{what} failed on the cluster: {type(exc).__name__}: {exc}{where}"
        if src is not None:
            src.done = True
        result = dataclasses.replace(merged) if merged else SourceResult(source=name)
        result.error, result.complete = message, False  # --resume tries it again
        self.results[name] = result
        if on_update := self.cb.get("on_update"):
            on_update(result)

    # the loop

    def wait(self, ctrl_c: _CtrlC) -> dict[str, SourceResult]:
        """Handle tasks as they finish until none is left. Ctrl-C ends the loop with
        KeyboardInterrupt before anything else is merged."""
        ctrl_c.deferred = True  # raised here, at the next look, not inside Dask's callbacks
        stop = ctrl_c.seen
        while not self.pending.is_empty():
            ready = self.pending.next_batch(block=False) if self.pending.has_ready() else []
            if not ready:
                stop.wait(0.05)
            for future in ready:
                if stop.is_set():
                    break
                self._handle(future)
            if stop.is_set():
                raise KeyboardInterrupt
        return self.results

    def _handle(self, future: Any) -> None:
        kind, name, j = self.tags.pop(future.key)
        src = self.sources.get(name)
        if future.status == "cancelled" or (src is not None and src.done):
            return
        if future.status != "finished":
            if kind == WARM and src is not None:  # its turn re-runs it from the checkpoint
                self._arrived(src, kind, j, ChunkResult(SourceResult(source=name)))
                return
            what = f"reading {name}" if kind == PROBE else f"{name} chunk {j + 1}"
            self._failed(name, what, future.exception())
            return
        value = future.result()
        future.release()
        if kind == PROBE:
            self._planned(name, value)
        else:
            assert src is not None
            self._arrived(src, kind, j, value)


class _CtrlC:
    """The SIGINT handler of a Dask run. Raising KeyboardInterrupt from a signal handler is
    not enough here: Dask runs callbacks (its garbage-collection diagnostics) that print an
    exception raised inside them and drop it, after which the run went on and merged chunks
    whose decoders the same Ctrl-C had ended - as if the video stopped there - and exited 0.
    So Ctrl-C is remembered in ``seen``; once ``deferred`` (the merge loop, which looks every
    50 ms) it is raised there only, else (starting the cluster) at once as well."""

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.deferred = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.seen.set()
        if not self.deferred:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[_CtrlC]:
        main = threading.current_thread() is threading.main_thread()
        if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            yield self  # Ctrl-C does not raise KeyboardInterrupt here: leave it alone
            return
        signal.signal(signal.SIGINT, self)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def dask_setup(worker: Any) -> None:
    """Run by each worker process of the cluster ``connect`` starts (a Dask preload): Ctrl-C in
    a terminal reaches the whole process group, but stopping is this process's job - it shuts
    the cluster down - so workers ignore the signal instead of printing their tracebacks."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def connect(video: VideoConfig) -> Iterator[Any]:
    """A Dask client: of the running cluster at ``video.scheduler``, else of a LocalCluster of
    ``video.workers`` processes (one thread each: a chunk's pipeline runs its own threads)
    started here and shut down on leaving, Ctrl-C included."""
    from ..extras import require_scale_extra

    require_scale_extra("--engine dask")
    import dask
    from dask.distributed import Client, LocalCluster

    if video.scheduler:
        from distributed.comm import parse_address
        from distributed.comm.addressing import parse_host_port
        from distributed.comm.registry import get_backend

        # How long to keep trying: Dask's own setting (30 s unless configured, e.g.
        # DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s).
        timeout = dask.config.get("distributed.comm.timeouts.connect")
        try:
            # A malformed address fails here, before a Client exists: one that fails inside
            # its constructor is left half made and stalls the interpreter's exit.
            scheme, location = parse_address(video.scheduler)
            get_backend(scheme)
            if scheme in ("tcp", "tls", "ws", "wss"):
                parse_host_port(location)
            client = Client(video.scheduler, timeout=timeout, set_as_default=False)
        except (OSError, ValueError, TypeError) as exc:
            raise ClusterError(
                f"cannot reach the Dask scheduler at {video.scheduler} ({exc}); start one with "
                "`dask scheduler` and give its tcp://HOST:PORT, or leave out --scheduler to "
                "start a cluster on this machine"
            ) from exc
        try:
            yield client
        finally:
            client.close()
        return
    # Dask starts workers with MALLOC_TRIM_THRESHOLD_ set, to hand memory back to the OS. Any
    # fixed malloc threshold stops glibc from adapting its mmap threshold, so every frame-sized
    # array is mapped and unmapped again: a clip took 14.0 s instead of 7.6 s that way here
    # (benchmarks/dask_scaling.py). Workers started here keep glibc's default.
    environ = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    environ = {k: v for k, v in environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(
            n_workers=video.workers or DEFAULT_WORKERS,
            threads_per_worker=1,
            processes=True,
            # Any free port: the scheduler serves HTTP even without a dashboard, and a fixed one
            # (8787) taken by another cluster on this machine is a warning printed mid-run.
            dashboard_address=":0",
            # Workers busy in a chunk when the cluster shuts down log tracebacks about lost
            # heartbeats; what matters reaches this process as task results and errors.
            silence_logs=logging.CRITICAL,
            preload=[__name__],  # dask_setup below, in each worker process
        )
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def describe_distributed(
    specs: list[Any],
    settings: Settings,
    *,
    on_progress: Callable[[str, float, float | None, int], None] | None = None,
    on_event: Callable[[str, Event, Any], str | None] | None = None,
    on_update: Callable[[SourceResult], None] | None = None,
    on_error: Callable[[str, str], None] | None = None,
    on_closed: Callable[[str, Event], None] | None = None,
    on_merge: Callable[[str, MergeStep], None] | None = None,
    render_picture: PictureFn | None = None,
    resume: dict[str, SourceResult] | None = None,
    client: Any = None,
) -> list[SourceResult]:
    """``describe_sources`` on Dask (``settings.video.engine == "dask"``): the same callbacks,
    called here in this process, and the same results, in the order of ``specs``.

    on_event(source, event, picture): ``picture`` is what ``render_picture(report)`` returned
    on the worker (``report.timeline.render_event_picture`` gives an ``EventPicture``, which
    ``write_event_picture`` takes in place of a Report); without ``render_picture`` events have
    no picture and ``on_event`` is not called.
    on_merge(source, step): once per chunk as it joins the source's timeline.
    client: a ``dask.distributed.Client`` to use (else one is made from ``settings.video``).
    """
    for spec in specs:
        if not isinstance(spec, (str, bytes)) and not hasattr(spec, "__fspath__"):
            raise UsageError(
                "--engine dask reads sources by path or URL; a watched folder runs on this "
                "machine: leave out --engine dask"
            )
    callbacks: Callbacks = dict(
        on_progress=on_progress,
        on_event=on_event,
        on_update=on_update,
        on_closed=on_closed,
        on_merge=on_merge,
        render_picture=render_picture,
    )
    with contextlib.ExitStack() as stack:
        ctrl_c = stack.enter_context(_CtrlC().installed())
        if client is None:
            client = stack.enter_context(connect(settings.video))
        run = _Run(client, settings, callbacks)
        try:
            run.start(specs, resume or {})
            results = run.wait(ctrl_c)
        except BaseException:
            # Ctrl-C or a bug: nothing more is merged; the cluster (if started here) shuts down
            # on leaving, and the report on disk holds what was merged (on_update).
            with contextlib.suppress(Exception):
                client.cancel(list(run.futures.values()))
            raise
    out = []
    for spec in specs:
        result = results.get(str(spec)) or SourceResult(source=str(spec), complete=True)
        if result.error and on_error:
            on_error(result.source, result.error)
        out.append(result)
    return out
