"""One frame sequence -> events: sample, compare, first look, analyse, caption, merge.

Decoding runs in a background thread (OpenCV and the ffmpeg pipe release the GIL), so while one
sample is analysed the next is being decoded: wall time tends to max(decode, analysis), not
their sum. Everything is reported through callbacks, so the caller can draw a progress bar and
write a valid partial report at any moment (Ctrl-C, a crash) - nothing here prints or writes.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis import resize_for_analysis
from ..captioners.base import Hint
from ..config import Settings
from ..errors import SpotdiffError
from ..frames.sources import open_source
from ..types import BBox, Detection, Event, Frame, Report
from .compare import Comparator, changed_share, relative_to_watched, resize_like, thumbnail, watched_box
from .events import EventBuilder
from .regions import watch_mask

ProgressFn = Callable[[float, float | None, int], None]  # (position s, duration s or None, samples)
EventFn = Callable[[Event, Report], str | None]  # returns the picture's file name, if written
UpdateFn = Callable[["SourceResult"], None]


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


def _prefetch(frames: Iterator[Frame], depth: int = 3) -> Iterator[Frame]:
    """Iterate ``frames`` in a background thread, ``depth`` frames ahead."""
    box: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for frame in frames:
                if stop.is_set():
                    return
                box.put(frame)
            box.put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            box.put(exc)

    thread = threading.Thread(target=work, daemon=True)
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
                hints.append(Hint(by_id[cid], noun, str(sentence.details.get("recognised_by", "")),
                                  float(sentence.details.get("recognition_confidence", 0.0))))
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
    return (int(round(x0 * s)), int(round(y0 * s)), int(round((x1 - x0) * s)), int(round((y1 - y0) * s)))


def describe_source(
    spec: Any,
    settings: Settings,
    *,
    on_progress: ProgressFn | None = None,
    on_event: EventFn | None = None,
    on_update: UpdateFn | None = None,
    resume_from: float | None = None,
    first_event_id: int = 1,
    update_every: float = 2.0,
) -> SourceResult:
    """Describe one video / folder / file list as a list of events.

    resume_from: timestamp of the last sample a previous run finished; sampling restarts there
        (that sample only re-establishes the comparison baseline) and events are numbered from
        ``first_event_id``.
    """
    from .. import api

    video = settings.video.validate()
    analysis = dataclasses.replace(settings.analysis, scene_fraction=video.upper).validate()
    name = str(spec)
    result = SourceResult(source=name)
    started = time.perf_counter()
    source = open_source(spec, backend=video.backend, sort=video.sort)
    try:
        info = source.info
        result.info = {k: v for k, v in dataclasses.asdict(info).items()}
        work_pixels_scale = max(info.width, info.height) / analysis.work_size if analysis.work_size and max(info.width, info.height) > analysis.work_size else 1.0
        watch = watch_mask(info.width, info.height, tuple(video.roi), video.mask)
        reference = None
        if video.compare == "reference":
            from ..frames import load_image

            reference = load_image(video.reference)
        comparator = Comparator(video, None)
        builder = EventBuilder(name, info.width, info.height, video.merge_distance, video.merge_gap, first_event_id)
        caption = settings.caption
        start = resume_from if resume_from is not None else video.start
        frames = source.sample(video.every, start, video.end)
        reports: dict[float, Report] = {}
        watch_work = watch_thumb = None
        crop = (slice(None), slice(None))  # the watched area's bounding box, work pixels
        last_update = time.perf_counter()
        previous_thumb: np.ndarray | None = None
        try:
            for index, frame in enumerate(_prefetch(frames)):
                pixels, _ = resize_for_analysis(frame.pixels, analysis.work_size)
                if watch is not None and watch_work is None:
                    watch_work = resize_like(watch.astype(np.uint8), pixels) > 0
                    crop = watched_box(watch_work)
                    watch_thumb = resize_like(watch_work[crop].astype(np.uint8), thumbnail(pixels[crop])) > 0
                    analysis = relative_to_watched(analysis, watch_work)
                if reference is not None and comparator.reference is None:
                    comparator.reference = resize_like(reference, pixels)
                thumb = thumbnail(pixels[crop])
                base = comparator.baseline()
                detections: list[Detection] = []
                timestamp = frame.timestamp or 0.0
                if base is None or video.compare != "previous":
                    hints = ()  # hints only carry over between consecutive pairs of one sequence
                if base is not None and not (resume_from is not None and index == 0):
                    base_thumb = previous_thumb if video.compare == "previous" and previous_thumb is not None else thumbnail(base[crop])
                    if changed_share(base_thumb, thumb, watch_thumb, analysis) >= video.lower:
                        report = api.describe_pair(base, pixels, analysis, caption, watch=watch_work, hints=hints)
                        hints = _hints_from(report)
                        result.analysed += 1
                        before_time = result.processed_until if result.processed_until is not None else timestamp
                        for sentence in report.sentences:
                            if sentence.kind == "no_change":
                                continue
                            box = _sentence_box(report, sentence.cluster_ids, work_pixels_scale)
                            detections.append(Detection(timestamp, before_time, sentence, box, str(sentence.details.get("noun", ""))))
                        if detections:
                            reports[timestamp] = report
                    else:
                        hints = ()  # the next pair's before frame is not this pair's after frame
                comparator.push(pixels)
                previous_thumb = thumb
                result.samples += 1
                result.processed_until = timestamp
                for event in builder.add(index, detections):
                    result.events.append(_with_picture(event, reports, on_event))
                live = {d.time for o in builder.open for d in o.detections[:1]}
                for t in [t for t in reports if t not in live]:
                    del reports[t]
                if on_progress:
                    on_progress(timestamp, info.duration, result.samples)
                if on_update and time.perf_counter() - last_update > update_every:
                    result.pending = builder.pending()
                    result.decoded = source.stats.decoded
                    on_update(result)
                    last_update = time.perf_counter()
        except BaseException:
            # Ctrl-C or an error: report the state reached first, so the partial report on
            # disk covers every finished sample (not only those up to the last periodic
            # update) and lists the events still open, which --resume re-detects whole.
            if on_update is not None:
                result.pending = builder.pending()
                result.decoded = source.stats.decoded
                on_update(result)
            raise
        for event in builder.finish():
            result.events.append(_with_picture(event, reports, on_event))
        result.events.sort(key=lambda e: (e.start, e.id))
        result.pending = []
        result.complete = True
        result.decoded = source.stats.decoded
    finally:
        source.close()
        result.seconds = time.perf_counter() - started
    return result


def _with_picture(event: Event, reports: dict[float, Report], on_event: EventFn | None) -> Event:
    report = reports.get(event.frames[1])
    if on_event is None or report is None:
        return event
    return dataclasses.replace(event, picture=on_event(event, report))


def describe_sources(
    specs: list[Any],
    settings: Settings,
    *,
    on_progress: Callable[[str, float, float | None, int], None] | None = None,
    on_event: Callable[[str, Event, Report], str | None] | None = None,
    on_update: UpdateFn | None = None,
    on_error: Callable[[str, str], None] | None = None,
    resume: dict[str, tuple[float, int]] | None = None,
) -> list[SourceResult]:
    """Every source in turn (or in ``settings.video.jobs`` processes). A source that cannot be
    read is reported through ``on_error`` and skipped; the others go on."""
    resume = resume or {}
    results: list[SourceResult] = []
    if settings.video.jobs > 1 and len(specs) > 1:
        return _describe_parallel(specs, settings, on_event, on_error, resume)
    for spec in specs:
        name = str(spec)
        resume_from, first_id = resume.get(name, (None, 1))
        try:
            result = describe_source(
                spec,
                settings,
                on_progress=(lambda pos, dur, n, _name=name: on_progress(_name, pos, dur, n)) if on_progress else None,
                on_event=(lambda event, report, _name=name: on_event(_name, event, report)) if on_event else None,
                on_update=on_update,
                resume_from=resume_from,
                first_event_id=first_id,
            )
        except SpotdiffError as exc:
            result = SourceResult(source=name, error=str(exc), complete=True)
            if on_error:
                on_error(name, str(exc))
        results.append(result)
        if on_update:
            on_update(result)
    return results


def _worker(spec: Any, settings: Settings, on_event: Any, resume_from: float | None, first_id: int) -> SourceResult:
    name = str(spec)
    try:
        return describe_source(
            spec,
            settings,
            on_event=(lambda event, report: on_event(name, event, report)) if on_event else None,
            resume_from=resume_from,
            first_event_id=first_id,
        )
    except SpotdiffError as exc:
        return SourceResult(source=name, error=str(exc), complete=True)


def _describe_parallel(specs, settings, on_event, on_error, resume) -> list[SourceResult]:
    """One process per source, at most ``jobs`` at once; results in the order given.
    ``on_event`` must be picklable (a module-level function or a functools.partial of one)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=settings.video.jobs) as pool:
        futures = [
            pool.submit(_worker, spec, settings, on_event, *resume.get(str(spec), (None, 1))) for spec in specs
        ]
        results = [f.result() for f in futures]
    for result in results:
        if result.error and on_error:
            on_error(result.source, result.error)
    return results
