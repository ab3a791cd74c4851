"""``spotdiff video SOURCE...``: a timeline of what changed in videos, folders or file lists."""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from . import app
from .state import errors_to_exit

if TYPE_CHECKING:
    from ..config import AnalysisConfig, VideoConfig
    from ..frames.base import FrameSource
    from ..report.hooks import EventHook
    from ..timeline.pipeline import SourceResult
    from ..types import Event


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
) -> None:
    """Describe what changed over time, as a timeline of events."""
    from ..atomic import folder_lock
    from ..errors import OutputError, UsageError

    if resume and not out:
        raise UsageError("--resume needs --out DIR (the folder of the run to continue)")
    live = _watch_request(sources or [], watch, watch_idle, watch_poll) or _stream_request(
        sources or [], reconnect, stream_timeout
    )
    if not sources and live is None:
        raise UsageError("give a SOURCE (video, folder, glob, stream URL) or --watch DIR")
    if jsonl == "-" and as_json:
        raise UsageError("--json and --jsonl - both write to stdout; give --jsonl a file path")
    hook = None
    if on_event is not None:
        from ..report.hooks import EventHook

        hook = EventHook.parse(on_event, on_event_timeout)  # a typo fails now, not per event
    with contextlib.ExitStack() as held:
        if out:
            if out.exists() and not out.is_dir():
                raise OutputError(f"--out {out} is a file; give a folder path")
            # Held from the "does a report exist?" check to the last write: two runs given the
            # same --out at once cannot both pass the check and then mix their files.
            held.enter_context(folder_lock(out))
        _video(
            list(sources or []),
            live,
            out,
            resume,
            overwrite,
            as_json,
            config,
            hook,
            jsonl,
            settings_flags=dict(
                analysis=dict(delta=delta, work_size=work_size),
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
                ),
            ),
        )


@dataclass(frozen=True)
class _Watch:
    """``--watch DIR`` and its options; the source is opened once the settings are known
    (``--fps`` / ``--time-pattern`` may come from ``--config`` or the resumed report)."""

    folder: Path
    poll: float
    idle: Optional[float]

    def open(
        self, video: VideoConfig, previous: Optional[SourceResult], analysis: AnalysisConfig
    ) -> FrameSource:
        """The watched folder; resumed, on the time axis of the run it continues (its
        second 0 is kept in the report), so the files that run took come again with the
        same times and the checkpoint skips them."""
        from ..frames.watch import watch_folder

        origin = previous.info.get("origin") if previous is not None else None
        return watch_folder(
            self.folder,
            poll=self.poll,
            idle=self.idle,
            fps=video.fps,
            time_pattern=video.time_pattern,
            origin=origin,
        )


@dataclass(frozen=True)
class _Stream:
    """A stream URL or webcam given as SOURCE, with --reconnect and --stream-timeout."""

    url: str
    reconnect: int
    timeout: float

    def open(
        self, video: VideoConfig, previous: Optional[SourceResult], analysis: AnalysisConfig
    ) -> FrameSource:
        """The stream; resumed, a new session whose times continue the earlier run's axis
        (its wall-clock second 0, ``info.started_at``), after the last time it processed."""
        from ..frames.stream import open_stream, parse_started_at

        origin = after = None
        if previous is not None and previous.info.get("started_at"):
            origin = parse_started_at(previous.info["started_at"])
            after = previous.processed_until
        return open_stream(
            self.url,
            timeout=self.timeout,
            reconnect=self.reconnect,
            origin=origin,
            after=after,
            # Shrunk by ffmpeg, as a file's frames are: the analysis sees the same pixels.
            max_side=analysis.work_size,
        )


def _stream_request(sources: List[str], reconnect: int, timeout: float) -> Optional[_Stream]:
    """A stream SOURCE, or None; a stream must be the run's only source: each is read live,
    at its own pace, so another source would wait for it to end (run one spotdiff per camera)."""
    from ..errors import UsageError
    from ..frames.stream import is_stream

    streams = [s for s in sources if is_stream(s)]
    if not streams:
        return None
    if len(sources) > 1:
        raise UsageError(
            f"{streams[0]} is a live stream: give it alone (run one spotdiff per camera)"
        )
    return _Stream(streams[0], reconnect, timeout)


def _next_session(previous: SourceResult, replayable: bool) -> SourceResult:
    """A live source's earlier result, made ready to go on. A run that ended (the stream
    closed, the watch went idle) continues after everything it found: its events are final,
    so its end is a checkpoint. An interrupted watch (``replayable``: its files are still
    there) continues from its last checkpoint, as a file does; an interrupted stream cannot
    be read again, so it too keeps every event it closed and goes on from where it stopped
    (the events still open then are lost with the footage)."""
    import dataclasses

    from ..timeline.pipeline import Checkpoint

    if previous.processed_until is None or (replayable and not previous.complete):
        return previous
    point = previous.checkpoint
    at = previous.processed_until
    return dataclasses.replace(
        previous,
        complete=False,
        checkpoint=Checkpoint(
            at=at,
            # The comparison is rebuilt from here (a watched folder still holds the files).
            replay_from=min(point.replay_from, at) if point else at,
            events=len(previous.events),
            samples=previous.samples,
            analysed=previous.analysed,
        ),
    )


def _watch_request(
    sources: List[str],
    watch: Optional[Path],
    idle: Optional[float],
    poll: float,
) -> Optional[_Watch]:
    """What --watch asks for, or None without it; the combinations it excludes fail now."""
    from ..errors import UsageError

    if watch is None:
        if idle is not None:
            raise UsageError("--watch-idle needs --watch DIR")
        return None
    if sources:
        raise UsageError("--watch DIR replaces SOURCE; give one or the other")
    return _Watch(watch, poll, idle)


def _video(
    sources: List[str],
    watch: Optional[_Watch | _Stream],
    out: Optional[Path],
    resume: bool,
    overwrite: bool,
    as_json: bool,
    config: Optional[Path],
    hook: Optional[EventHook],
    jsonl: Optional[str],
    settings_flags: dict,
) -> None:
    from .. import api
    from ..config import Settings, resolve, settings_from_dict, to_dict
    from ..errors import UsageError
    from ..report.timeline import (
        check_out_dir,
        render_event_picture,
        timeline_from_dict,
        timeline_to_dict,
        write_timeline,
    )
    from . import render

    previous = check_out_dir(out, resume, overwrite) if out else None
    # Continue with the settings the run started with; flags given now still win.
    base = (
        settings_from_dict(previous.get("settings", {}), "the report being resumed")
        if previous
        else Settings()
    )
    settings = resolve(base, config, **settings_flags)
    settings_dict = to_dict(settings)
    if settings.video.clips:
        if not out:
            raise UsageError("--clips needs --out DIR (the clips are written under DIR/clips/)")
        from ..report.clips import require_ffmpeg

        require_ffmpeg()  # now, not after the analysis
    results = timeline_from_dict(previous) if previous else {}
    specs: list[str | FrameSource] = list(sources)
    if watch is not None:
        what = "--watch follows a folder" if isinstance(watch, _Watch) else "a stream is read"
        if settings.video.engine == "dask":
            raise UsageError(f"{what} on this machine; leave out --engine dask")
        if settings.video.clips and isinstance(watch, _Stream):
            raise UsageError("--clips cuts clips from a file; a live stream has none to cut")
        # The report's name for it: the folder as given, the URL without its password.
        name = str(watch.folder) if isinstance(watch, _Watch) else _stream_name(watch.url)
        if name in results:
            results[name] = _next_session(results[name], isinstance(watch, _Watch))
        specs = [watch.open(settings.video, results.get(name), settings.analysis)]
        sources = [str(specs[0])]

    def save() -> None:
        if out:
            write_timeline(
                out,
                timeline_to_dict([results[s] for s in sources if s in results], settings_dict),
                several=len(sources) > 1,
            )

    def on_update(result) -> None:
        results[result.source] = result
        save()

    on_event = functools.partial(_picture, str(out)) if out else None
    stream = None
    if jsonl is not None:
        from ..report.jsonl import JsonlWriter

        stream = JsonlWriter(
            jsonl, report_dir=out, append=resume, overwrite=overwrite and not resume
        )
    hooks = None
    if hook is not None:
        from ..report.hooks import HookRunner

        hooks = HookRunner(hook, render.print_warning_line, report_dir=out)
    closed = [c.write if c is stream else c.submit for c in (stream, hooks) if c is not None]

    def on_closed(source: str, event: Event) -> None:
        # A live stream's wall clock (its info, published after every sample of a live run,
        # so before any event can close) gives each event its moment on the clock.
        known = results.get(source)
        started_at = known.info.get("started_at") if known is not None and known.info else None
        for call in closed:  # the stream first: a line is cheap, a hook is queued
            call(source, event, started_at)

    live = watch is not None
    # Leaving this waits for the hooks still queued (each bounded by its timeout), so every
    # event's hook has run before the summary; Ctrl-C drops them instead, saying how many.
    with contextlib.ExitStack() as held:
        if stream is not None:
            held.enter_context(stream)
        if hooks is not None:
            held.enter_context(hooks)
        try:
            with render.timeline_progress(enabled=not as_json and jsonl != "-") as progress:
                finished = api.describe_video(
                    specs,
                    settings,
                    on_progress=progress.update,
                    on_event=on_event,
                    on_update=on_update,
                    on_error=render.print_skipped_source,
                    on_closed=on_closed if closed else None,
                    resume=results,
                    # Live: the report follows every frame, not every 2 s of a run that may
                    # then wait minutes for the next upload.
                    update_every=0.0 if live else 2.0,
                    # --engine dask: the pictures are drawn on the workers, written here.
                    render_picture=render_event_picture if out else None,
                )
            # --jobs N: workers cannot call on_update
            results.update({r.source: r for r in finished})
            if out and settings.video.clips:
                made: list[str] = []
                for name in [s for s in sources if s in results]:
                    results[name] = api.write_event_clips(
                        out, results[name], on_clip=lambda _event, how: made.append(how)
                    )
                    save()
                render.print_clips(made, str(out))
        finally:
            save()  # whatever happened, the report on disk says what was done
    data = timeline_to_dict([results[s] for s in sources if s in results], settings_dict)
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        # --jsonl -: stdout is the event stream; the summary goes to stderr.
        render.print_timeline(data, str(out) if out else None, stderr=jsonl == "-")
    if data["sources"] and all(s["error"] and not s["events"] for s in data["sources"]):
        raise typer.Exit(1)


def _picture(out_dir: str, source: str, event, report) -> str:
    from ..report.timeline import write_event_picture

    return write_event_picture(out_dir, source, event, report)


def _stream_name(url: str) -> str:
    from ..frames.stream import redact

    return redact(url, url)
