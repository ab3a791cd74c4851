"""``spotdiff video SOURCE...``: a timeline of what changed in videos, folders or file lists."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import List, Optional

import typer

from . import app
from .state import errors_to_exit


@app.command("video")
@errors_to_exit
def video(
    sources: List[str] = typer.Argument(..., help="Videos (mp4, mkv, avi, mov, gif...), folders of images, or globs.", show_default=False),
    every: Optional[str] = typer.Option(None, "--every", "-e", help="Sample spacing: 30s, 1.5m, 00:00:30.5 or 25f. \\[default: 1s]"),
    start: Optional[str] = typer.Option(None, "--start", help="Start here (same syntax)."),
    end: Optional[str] = typer.Option(None, "--end", help="Stop here (same syntax)."),
    compare: Optional[str] = typer.Option(None, "--compare", help="previous, reference or background. \\[default: previous]"),
    reference: Optional[str] = typer.Option(None, "--reference", help="Image every sample is compared with (--compare reference)."),
    roi: Optional[List[str]] = typer.Option(None, "--roi", help="Watch only this box x,y,w,h (repeatable)."),
    mask: Optional[str] = typer.Option(None, "--mask", help="Image: white = watch, black = ignore (trees, clocks)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write timeline.json/md/csv/html and event pictures here."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run recorded in --out."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier timeline in --out."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Process this many sources at once. \\[default: 1]"),
    as_json: bool = typer.Option(False, "--json", help="Print the timeline JSON to stdout."),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML settings (flags override it)."),
    lower: Optional[float] = typer.Option(None, "--lower", help="Changed share below which a pair is 'no change'. \\[default: 0.0005]"),
    upper: Optional[float] = typer.Option(None, "--upper", help="Changed share above which the view changed. \\[default: 0.5]"),
    backend: Optional[str] = typer.Option(None, "--backend", help="Video decoder: auto, ffmpeg or opencv. \\[default: auto]"),
    sort: Optional[str] = typer.Option(None, "--sort", help="Folders: name (natural) or time (EXIF/mtime). \\[default: name]"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Captioner. \\[default: grounded]"),
    sentences: Optional[int] = typer.Option(None, "--sentences", "-n", help="At most this many sentences per pair. \\[default: 5]"),
    recognise: Optional[bool] = typer.Option(None, "--recognise/--no-recognise", help="Look for people and vehicles. \\[default: on]"),
    delta: Optional[float] = typer.Option(None, "--delta", help="RGB distance above which a pixel changed. \\[default: 40]", rich_help_panel="Analysis"),
    work_size: Optional[int] = typer.Option(None, "--work-size", help="Analyse at this long side, px. \\[default: 640]", rich_help_panel="Analysis"),
) -> None:
    """Describe what changed over time, as a timeline of events."""
    from .. import api
    from ..config import Settings, resolve, to_dict
    from ..report.timeline import check_out_dir, timeline_to_dict, write_event_picture, write_timeline
    from ..timeline import SourceResult
    from . import render

    previous = check_out_dir(out, resume, overwrite) if out else None
    if resume and not out:
        from ..errors import UsageError

        raise UsageError("--resume needs --out DIR (the folder of the run to continue)")
    base = Settings()
    if previous is not None:
        # Continue with the settings the run started with; flags given now still win.
        from ..config import _apply

        base = _apply(base, previous.get("settings", {}), "the report being resumed")
    settings = resolve(
        base,
        config,
        analysis=dict(delta=delta, work_size=work_size),
        caption=dict(model=model, max_sentences=sentences, recognise=recognise),
        video=dict(every=every, start=start, end=end, compare=compare, reference=reference,
                   roi=tuple(roi) if roi else None, mask=mask, lower=lower, upper=upper,
                   backend=backend, sort=sort, jobs=jobs),
    )
    settings.video.validate()
    # Time syntax is the user's mistake, not the source's: fail once, before anything is read
    # (otherwise every source would be "skipped" with the same message).
    from ..frames.timecode import parse_every, parse_time

    parse_every(settings.video.every)
    for what, value in (("--start", settings.video.start), ("--end", settings.video.end)):
        if value is not None:
            parse_time(value, what=what)
    from ..timeline.regions import parse_roi

    for box in settings.video.roi:
        parse_roi(box)
    settings_dict = to_dict(settings)

    done: dict[str, SourceResult] = {}
    resume_points: dict[str, tuple[float, int]] = {}
    if previous is not None:
        done, resume_points = _restore(previous)
    todo = [s for s in sources if s not in done or not done[s].complete]
    results: dict[str, SourceResult] = dict(done)

    def save() -> None:
        if out:
            ordered = [results[s] for s in sources if s in results]
            write_timeline(out, timeline_to_dict(ordered, settings_dict))

    def on_update(result: SourceResult) -> None:
        earlier = done.get(result.source)
        if earlier is not None and not earlier.complete:
            # A resumed source: what the earlier run found, then what this run adds.
            result = dataclasses.replace(
                result,
                events=earlier.events + result.events,
                samples=earlier.samples + result.samples,
                analysed=earlier.analysed + result.analysed,
                decoded=earlier.decoded + result.decoded,
                seconds=earlier.seconds + result.seconds,
                info=result.info or earlier.info,
            )
        results[result.source] = result
        save()

    on_event = functools.partial(_picture, str(out)) if out else None
    try:
        with render.timeline_progress(enabled=not as_json) as progress:
            finished = api.describe_video(
                todo,
                settings,
                on_progress=progress.update,
                on_event=on_event,
                on_update=on_update,
                # Messages usually start with the path already; do not say it twice.
                on_error=lambda source, message: render.print_error(
                    f"{message if message.startswith(source) else f'{source}: {message}'} (skipped)"),
                resume=resume_points,
            )
        for result in finished:  # --jobs N: the worker processes cannot call on_update
            on_update(result)
    finally:
        save()  # whatever happened, the report on disk says what was done
    ordered = [results[s] for s in sources if s in results]
    data = timeline_to_dict(ordered, settings_dict)
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        render.print_timeline(data, str(out) if out else None)
    if ordered and all(r.error for r in ordered):
        raise typer.Exit(1)


def _picture(out_dir: str, source: str, event, report) -> str:
    from ..report.timeline import write_event_picture

    return write_event_picture(out_dir, source, event, report)


def _restore(previous: dict) -> tuple[dict, dict[str, tuple[float, int]]]:
    """Rebuild finished sources and resume points from a partial timeline.json."""
    from ..timeline import SourceResult
    from ..types import Event

    done: dict[str, SourceResult] = {}
    points: dict[str, tuple[float, int]] = {}
    for s in previous.get("sources", []):
        events = [
            Event(e["id"], s["source"], e["start"], e["end"], e["text"], e["kind"], e["noun"],
                  tuple(tuple(b) for b in e["boxes"]), (e["frames"]["before"], e["frames"]["after"]), e["detections"], e["picture"])
            for e in s.get("events", [])
        ]
        result = SourceResult(source=s["source"], info=s.get("info", {}), events=events, samples=s.get("samples", 0),
                              analysed=s.get("pairs_analysed", 0), decoded=s.get("frames_decoded", 0),
                              processed_until=s.get("processed_until"), complete=s.get("complete", False),
                              error=s.get("error"), seconds=s.get("seconds", 0.0))
        if not result.complete and result.processed_until is not None:
            restart = result.processed_until
            opened = [e["frames"]["before"] for e in s.get("open_events", [])]
            if opened:
                # Events still open when the run stopped are re-detected whole: restart at the
                # sample their first detection was compared with, and drop the events closed
                # since then (the rerun finds them again, with the same numbers).
                restart = min(restart, *opened)
                result.events = [e for e in events if e.start <= restart]
            points[s["source"]] = (restart, len(result.events) + 1)
        done[s["source"]] = result
    return done, points
