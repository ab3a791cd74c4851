"""``spotdiff video SOURCE...``: a timeline of what changed in videos, folders or file lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from . import app
from .state import errors_to_exit, resume_hint, set_interrupt_hint


@app.command("video")
@errors_to_exit
def video(
    sources: Optional[List[str]] = typer.Argument(
        None,
        help="Videos (mp4, mkv, avi, mov, gif...), folders of images, globs, or one live "
        "stream: rtsp://..., http(s)://..., /dev/video0 or webcam:0.",
        show_default=False,
    ),
    every: Optional[str] = typer.Option(
        None, "--every", "-e", help="Sample spacing: 30s, 1.5m, 00:00:30.5 or 25f. \\[default: 1s]"
    ),
    start: Optional[str] = typer.Option(None, "--start", help="Start here (same syntax)."),
    end: Optional[str] = typer.Option(None, "--end", help="Stop here (same syntax)."),
    compare: Optional[str] = typer.Option(
        None, "--compare", help="previous, reference or background. \\[default: previous]"
    ),
    reference: Optional[str] = typer.Option(
        None, "--reference", help="Image every sample is compared with (--compare reference)."
    ),
    roi: Optional[List[str]] = typer.Option(
        None, "--roi", help="Watch only this box x,y,w,h (repeatable)."
    ),
    mask: Optional[str] = typer.Option(
        None, "--mask", help="Image: white = watch, black = ignore (trees, clocks)."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write timeline.json/md/csv/html and event pictures here."
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the run recorded in --out."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier timeline in --out."
    ),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", help="Process this many sources at once. \\[default: 1]"
    ),
    engine: Optional[str] = typer.Option(
        None,
        "--engine",
        help="local, or dask: sources and --chunk pieces of long videos on a Dask cluster "
        "(pip install 'spotdiff\\[scale]'). \\[default: local]",
        rich_help_panel="Scale out",
    ),
    scheduler: Optional[str] = typer.Option(
        None,
        "--scheduler",
        help="Use the running Dask cluster at tcp://HOST:PORT (workers read SOURCE by the "
        "same path or URL). \\[default: a cluster started on this machine]",
        rich_help_panel="Scale out",
    ),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        help="Worker processes of the cluster started on this machine. \\[default: 2]",
        rich_help_panel="Scale out",
    ),
    chunk: Optional[str] = typer.Option(
        None,
        "--chunk",
        help="Cut videos longer than this into pieces of video time described in parallel; "
        "the timeline is the same. \\[default: 10m]",
        rich_help_panel="Scale out",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the timeline JSON to stdout."),
    on_event: Optional[str] = typer.Option(
        None,
        "--on-event",
        help="Run this command for each event once it is final, e.g. "
        "'curl -sd {json} URL': split like a shell but run without one; {json} becomes the "
        "event's JSON as one argument, which also arrives on stdin. A failing hook is a "
        "warning; the run goes on.",
        rich_help_panel="Integrations",
    ),
    on_event_timeout: float = typer.Option(
        10.0,
        "--on-event-timeout",
        help="Stop an --on-event command after this many seconds (a warning, not an error).",
        rich_help_panel="Integrations",
    ),
    jsonl: Optional[str] = typer.Option(
        None,
        "--jsonl",
        help="Also write each event, once final, as one JSON line here (flushed at once, for "
        "tail -f); - for stdout, which then holds nothing else. An existing file needs "
        "--resume (append) or --overwrite.",
        rich_help_panel="Integrations",
    ),
    watch: Optional[Path] = typer.Option(
        None,
        "--watch",
        help="Follow this folder as a camera uploads images to it (instead of SOURCE): each "
        "file is read once its size stopped changing; the report is rewritten as frames "
        "come. Ctrl-C stops it (exit 130).",
        rich_help_panel="Live",
    ),
    watch_idle: Optional[float] = typer.Option(
        None,
        "--watch-idle",
        help="Stop --watch after this many seconds without a new file. \\[default: never]",
        rich_help_panel="Live",
    ),
    watch_poll: float = typer.Option(
        1.0,
        "--watch-poll",
        help="Look at the --watch folder every this many seconds; a file must be unchanged "
        "for one interval to be read.",
        rich_help_panel="Live",
    ),
    reconnect: int = typer.Option(
        3,
        "--reconnect",
        help="Streams (rtsp://, http(s)://, webcams): after a lost connection, reconnect up to "
        "this many times in a row (1, 2, 4... s apart), then end with a warning.",
        rich_help_panel="Live",
    ),
    stream_timeout: float = typer.Option(
        10.0,
        "--stream-timeout",
        help="Streams: seconds without data before the connection counts as lost (or the "
        "address as unreachable).",
        rich_help_panel="Live",
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", help="YAML settings (flags override it)."
    ),
    lower: Optional[float] = typer.Option(
        None, "--lower", help="Changed share below which a pair is 'no change'. \\[default: 0.0005]"
    ),
    upper: Optional[float] = typer.Option(
        None, "--upper", help="Changed share above which the view changed. \\[default: 0.5]"
    ),
    backend: Optional[str] = typer.Option(
        None, "--backend", help="Video decoder: auto, ffmpeg or opencv. \\[default: auto]"
    ),
    sort: Optional[str] = typer.Option(
        None, "--sort", help="Folders: name (natural) or time (EXIF/mtime). \\[default: name]"
    ),
    fps: Optional[float] = typer.Option(
        None,
        "--fps",
        help="Folders: frames per second (frame i at i/fps s). \\[default: EXIF or file times]",
    ),
    time_pattern: Optional[str] = typer.Option(
        None,
        "--time-pattern",
        help="Folders: read each image's time from its file name, e.g. '%Y%m%d_%H%M%S'.",
    ),
    pad_before: Optional[str] = typer.Option(
        None,
        "--pad-before",
        help="Widen each event this much earlier (time syntax). \\[default: 0s]",
        rich_help_panel="Events",
    ),
    pad_after: Optional[str] = typer.Option(
        None,
        "--pad-after",
        help="Widen each event this much later (time syntax). \\[default: 0s]",
        rich_help_panel="Events",
    ),
    min_length: Optional[str] = typer.Option(
        None,
        "--min-length",
        help="Drop events seen for less than this (first to last sample). \\[default: 0s]",
        rich_help_panel="Events",
    ),
    max_visit: Optional[str] = typer.Option(
        None,
        "--max-visit",
        help="An arrival and its departure within this are one event. \\[default: 10m]",
        rich_help_panel="Events",
    ),
    describe_every: Optional[str] = typer.Option(
        None,
        "--describe-every",
        help="Describe a change going on at most once per this much video; the samples "
        "between still find where it starts and ends (0s: describe every one). \\[default: 0.2s]",
        rich_help_panel="Events",
    ),
    clips: Optional[bool] = typer.Option(
        None,
        "--clips/--no-clips",
        help="Write each event as a video clip under --out/clips/. \\[default: no]",
        rich_help_panel="Events",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", "-m", help="Captioner. \\[default: grounded]"
    ),
    weights: Optional[str] = typer.Option(
        None, "--weights", help="Checkpoint for a trained model."
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="auto, cpu or cuda (trained models). \\[default: auto]"
    ),
    sentences: Optional[int] = typer.Option(
        None, "--sentences", "-n", help="At most this many sentences per pair. \\[default: 5]"
    ),
    recognise: Optional[bool] = typer.Option(
        None, "--recognise/--no-recognise", help="Look for people and vehicles. \\[default: on]"
    ),
    delta: Optional[float] = typer.Option(
        None,
        "--delta",
        help="RGB distance above which a pixel changed. \\[default: 40]",
        rich_help_panel="Analysis",
    ),
    work_size: Optional[int] = typer.Option(
        None,
        "--work-size",
        help="Analyse at this long side, px. \\[default: 640]",
        rich_help_panel="Analysis",
    ),
    camera: Optional[str] = typer.Option(
        None,
        "--camera",
        help="auto (follow a camera that panned, tilted, rolled or zoomed) or fixed (a camera "
        "on a wall: never report it moved). \\[default: auto]",
        rich_help_panel="Analysis",
    ),
    objects: Optional[bool] = typer.Option(
        None,
        "--objects/--no-objects",
        help="Follow people, vehicles and other things that come and go with the bundled "
        "detector, one event per object. \\[default: on]",
        rich_help_panel="Events",
    ),
    look_every: Optional[str] = typer.Option(
        None,
        "--look-every",
        help="While objects are followed, run the detector at most this often (time syntax). "
        "\\[default: 1s]",
        rich_help_panel="Events",
    ),
) -> None:
    """Describe what changed over time, as a timeline of events."""
    from .. import video_run
    from ..errors import UsageError
    from . import render

    live = video_run.live_source(
        list(sources or []), watch, watch_idle, watch_poll, reconnect, stream_timeout
    )
    if not sources and live is None:
        raise UsageError("give a SOURCE (video, folder, glob, stream URL) or --watch DIR")
    if jsonl == "-" and as_json:
        raise UsageError("--json and --jsonl - both write to stdout; give --jsonl a file path")
    hook = None
    if on_event is not None:
        from ..report.hooks import EventHook

        hook = EventHook.parse(on_event, on_event_timeout)  # a typo fails now, not per event
    flags = dict(
        analysis=dict(delta=delta, work_size=work_size, camera=camera),
        caption=dict(
            model=model,
            weights=weights,
            device=device,
            max_sentences=sentences,
            recognise=recognise,
        ),
        video=dict(
            every=every,
            start=start,
            end=end,
            compare=compare,
            reference=reference,
            roi=tuple(roi) if roi else None,
            mask=mask,
            lower=lower,
            upper=upper,
            backend=backend,
            sort=sort,
            fps=fps,
            time_pattern=time_pattern,
            jobs=jobs,
            engine=engine,
            scheduler=scheduler,
            workers=workers,
            chunk=chunk,
            pad_before=pad_before,
            pad_after=pad_after,
            min_length=min_length,
            max_visit=max_visit,
            describe_every=describe_every,
            clips=clips,
            objects=objects,
            look_every=look_every,
        ),
    )
    set_interrupt_hint(resume_hint(out) if out else None)
    with render.timeline_progress(enabled=not as_json and jsonl != "-") as progress:
        outcome = video_run.run_video(
            list(sources or []),
            out=out,
            resume=resume,
            overwrite=overwrite,
            config=config,
            flags=flags,
            live=live,
            jsonl=jsonl,
            hook=hook,
            on_progress=progress.update,
            on_skipped=render.print_skipped_source,
            on_warning=render.print_warning_line,
            on_clips=render.print_clips,
        )
    if as_json:
        typer.echo(json.dumps(outcome.timeline, indent=2, ensure_ascii=False))
    else:
        # --jsonl -: stdout is the event stream; the summary goes to stderr.
        render.print_timeline(outcome.timeline, str(out) if out else None, stderr=jsonl == "-")
    if outcome.failed:
        raise typer.Exit(1)
