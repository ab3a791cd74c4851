"""Many sources -> their timelines: in turn in this process, in local processes (``--jobs``)
or on Dask (``--engine dask``, ``timeline.distributed``), with the same callbacks and results.
One source is ``pipeline.describe_source``; this module only decides where each one runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..describer import PairDescriber
from ..errors import SpotdiffError
from ..types import Event, Report
from .pipeline import SourceResult, UpdateFn, check_syntax, describe_source


def describe_sources(
    specs: list[Any],
    settings: Settings,
    *,
    on_progress: Callable[[str, float, float | None, int], None] | None = None,
    on_event: Callable[[str, Event, Report], str | None] | None = None,
    on_update: UpdateFn | None = None,
    on_error: Callable[[str, str], None] | None = None,
    on_closed: Callable[[str, Event], None] | None = None,
    resume: dict[str, SourceResult] | None = None,
    update_every: float = 2.0,
    render_picture: Callable[[Report], Any] | None = None,
) -> list[SourceResult]:
    """Every source in turn (or in ``settings.video.jobs`` processes), sharing one pair
    describer. A source that cannot be read is reported through ``on_error`` and skipped; the
    others go on. ``resume``: partial results of an earlier run, by source name (finished
    sources are returned as they are, unfinished ones continued). ``on_closed(source, event)``:
    once per event when it is final; with several jobs, for each source when its worker
    returns (a worker process cannot call back), in the order sources finish; on Dask
    (``settings.video.engine``, see ``timeline.distributed``), as each chunk joins the timeline.
    ``update_every``: seconds between ``on_update`` calls while a source runs (0: after every
    sample, for live sources whose report must follow each upload). ``render_picture``: on
    Dask only, a picklable function a worker runs on an event's Report; ``on_event`` then
    receives its result in place of the Report (see ``timeline.distributed``)."""
    check_syntax(settings.video)
    resume = resume or {}
    todo = [s for s in specs if str(s) not in resume or not resume[str(s)].complete]
    if settings.video.engine == "dask" and todo:
        from .distributed import describe_distributed  # imports dask: only when asked for

        finished = {
            r.source: r
            for r in describe_distributed(
                todo,
                settings,
                on_progress=on_progress,
                on_event=on_event,
                on_update=on_update,
                on_error=on_error,
                on_closed=on_closed,
                render_picture=render_picture,
                resume=resume,
            )
        }
    elif settings.video.jobs > 1 and len(todo) > 1:
        finished = {
            r.source: r
            for r in _describe_parallel(todo, settings, on_event, on_error, resume, on_closed)
        }
    else:
        finished = {}
        analysis = dataclasses.replace(settings.analysis, scene_fraction=settings.video.upper)
        describer = PairDescriber(analysis, settings.caption)
        published: dict[str, SourceResult] = {}

        def remember(result: SourceResult) -> None:
            published[result.source] = result
            if on_update:
                on_update(result)

        for spec in todo:
            name = str(spec)
            try:
                result = describe_source(
                    spec,
                    settings,
                    describer=describer,
                    on_progress=(lambda pos, dur, n, _name=name: on_progress(_name, pos, dur, n))
                    if on_progress
                    else None,
                    on_event=(lambda event, report, _name=name: on_event(_name, event, report))
                    if on_event
                    else None,
                    on_update=remember,
                    on_closed=(lambda event, _name=name: on_closed(_name, event))
                    if on_closed
                    else None,
                    previous=resume.get(name),
                    update_every=update_every,
                )
            except SpotdiffError as exc:
                partial = published.get(name)
                if partial is not None:
                    # It ran before it failed: what it found stays, resumable from its last
                    # checkpoint, never replaced by an empty result that claims to be complete.
                    result = dataclasses.replace(partial, error=str(exc), complete=False)
                else:  # it could not be opened: skipped, with the reason
                    result = SourceResult(source=name, error=str(exc), complete=True)
            if result.error and on_error:
                on_error(name, result.error)
            finished[name] = result
            if on_update:
                on_update(result)
    return [finished.get(str(s)) or resume[str(s)] for s in specs]


def _closed_by_worker(
    result: SourceResult, previous: SourceResult | None, on_closed: Callable[[str, Event], None]
) -> None:
    """``on_closed`` for the events a worker's run closed, in the order they closed: ids count
    up as events close, and those up to the resumed checkpoint were an earlier run's."""
    done = previous.checkpoint.events if previous and previous.checkpoint else 0
    for event in sorted((e for e in result.events if e.id > done), key=lambda e: e.id):
        on_closed(result.source, event)


def _worker(
    spec: Any, settings: Settings, on_event: Any, previous: SourceResult | None
) -> SourceResult:
    name = str(spec)
    try:
        return describe_source(
            spec,
            settings,
            on_event=(lambda event, report: on_event(name, event, report)) if on_event else None,
            previous=previous,
        )
    except SpotdiffError as exc:
        return SourceResult(source=name, error=str(exc), complete=True)


def _describe_parallel(
    specs, settings, on_event, on_error, resume, on_closed=None
) -> list[SourceResult]:
    """One process per source, at most ``jobs`` at once; results in the order given.
    ``on_event`` must be picklable (a module-level function or a functools.partial of one);
    ``on_closed`` runs here, in this process, for each source as its worker returns."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Never more processes than sources: --jobs is an upper bound, not a number to start.
    with ProcessPoolExecutor(max_workers=max(1, min(settings.video.jobs, len(specs)))) as pool:
        futures = [
            pool.submit(_worker, spec, settings, on_event, resume.get(str(spec))) for spec in specs
        ]
        if on_closed is not None:
            for future in as_completed(futures):
                result = future.result()
                _closed_by_worker(result, resume.get(result.source), on_closed)
        results = [f.result() for f in futures]
    for result in results:
        if result.error and on_error:
            on_error(result.source, result.error)
    return results
