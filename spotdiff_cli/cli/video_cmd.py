"""``spotdiff video SOURCE...``: a timeline of what changed in videos, folders or file lists."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import ModuleType
from typing import List, Optional

import typer

from .options import config_option, given, setting
from .root import app
from .state import errors_to_exit, resume_hint, set_interrupt_hint


@app.command("video")
@errors_to_exit
def video(
    ctx: typer.Context,
    sources: Optional[List[str]] = typer.Argument(
        None,
        help="Videos (mp4, mkv, avi, mov, gif...), folders of images, globs, or one live "
        "stream: rtsp://..., http(s)://..., /dev/video0 or webcam:0.",
        show_default=False,
    ),
    every: Optional[str] = setting("every"),
    start: Optional[str] = setting("start"),
    end: Optional[str] = setting("end"),
    compare: Optional[str] = setting("compare"),
    reference: Optional[str] = setting("reference"),
    roi: Optional[List[str]] = setting("roi"),
    mask: Optional[str] = setting("mask"),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write timeline.json/md/csv/html and event pictures here."
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the run recorded in --out."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier timeline in --out."
    ),
    jobs: Optional[int] = setting("jobs"),
    engine: Optional[str] = setting("engine"),
    scheduler: Optional[str] = setting("scheduler"),
    workers: Optional[int] = setting("workers"),
    chunk: Optional[str] = setting("chunk"),
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
    config: Optional[Path] = config_option(),
    lower: Optional[float] = setting("lower"),
    upper: Optional[float] = setting("upper"),
    backend: Optional[str] = setting("backend"),
    sort: Optional[str] = setting("sort"),
    fps: Optional[float] = setting("fps"),
    time_pattern: Optional[str] = setting("time_pattern"),
    pad_before: Optional[str] = setting("pad_before"),
    pad_after: Optional[str] = setting("pad_after"),
    min_length: Optional[str] = setting("min_length"),
    max_visit: Optional[str] = setting("max_visit"),
    describe_every: Optional[str] = setting("describe_every"),
    clips: Optional[bool] = setting("clips"),
    model: Optional[str] = setting("model"),
    weights: Optional[str] = setting("weights"),
    device: Optional[str] = setting("device"),
    max_sentences: Optional[int] = setting("max_sentences"),
    recognise: Optional[bool] = setting("recognise"),
    delta: Optional[float] = setting("delta"),
    work_size: Optional[int] = setting("work_size"),
    camera: Optional[str] = setting("camera"),
    objects: Optional[bool] = setting("objects"),
    look_every: Optional[str] = setting("look_every"),
) -> None:
    """Describe what changed over time, as a timeline of events."""
    if sources and backend != "opencv":
        from ..frames.video import probe_ahead

        probe_ahead(list(sources))  # answered while the pipeline's modules load
    from .. import video_run
    from ..errors import UsageError

    def render() -> ModuleType:
        # Rich (cli/render.py: ~17 ms of imports) is loaded when something is drawn: a --json
        # run that warns of nothing prints only its timeline, and its start is on the clock.
        from . import render as module

        return module

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
    set_interrupt_hint(resume_hint(out) if out else None)
    drawn = not as_json and jsonl != "-"
    progress_bar = render().timeline_progress() if drawn else contextlib.nullcontext(None)
    with progress_bar as progress:
        outcome = video_run.run_video(
            list(sources or []),
            out=out,
            resume=resume,
            overwrite=overwrite,
            config=config,
            flags=given(ctx.params),  # the setting options, by field name (options.py)
            live=live,
            jsonl=jsonl,
            hook=hook,
            on_progress=progress.update if progress is not None else None,
            on_skipped=lambda *told: render().print_skipped_source(*told),
            on_warning=lambda *told: render().print_warning_line(*told),
            on_clips=lambda *told: render().print_clips(*told),
        )
    if as_json:
        typer.echo(json.dumps(outcome.timeline, indent=2, ensure_ascii=False))
    else:
        # --jsonl -: stdout is the event stream; the summary goes to stderr.
        render().print_timeline(outcome.timeline, str(out) if out else None, stderr=jsonl == "-")
    if outcome.failed:
        raise typer.Exit(1)
