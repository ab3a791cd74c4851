"""One ``spotdiff video`` run, as a library object: what the CLI does, for a Python user too.

``run_video`` (or :class:`VideoRun` for finer control) owns everything a run does besides the
analysis itself (``timeline.runs.describe_sources``): the report folder and its lock, resuming
an earlier run, live sources (a watched folder, a stream), the JSON Lines stream and the
``--on-event`` hooks, the event pictures and clips, and every report write. It never prints:
progress, skipped sources, hook warnings and clips reach the caller through callbacks.

What it promises about the report folder (``out``):

- Nothing found is lost. The report is rewritten atomically while the run goes on; a failure at
  any point (a full disk while a picture is written, a decoder error, Ctrl-C) leaves a report of
  every event found so far, marked incomplete, from which ``resume`` continues. A resumed run
  keeps every source the report already held, not only the ones named again.
- Nothing a user wrote is overwritten silently: an existing report needs ``resume`` or
  ``overwrite``; with ``overwrite`` the earlier run's pictures, clips and timeline files are
  removed once the new run has something to write (a run that cannot open its source leaves
  the earlier report as it was, and writes none of its own, so the corrected rerun just works).
- An output is never one of the inputs (``--jsonl cam.avi`` would truncate the footage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import AnalysisConfig, Settings, VideoConfig, resolve, settings_from_dict, to_dict
from .errors import OutputError, UsageError
from .frames.base import FrameSource
from .timeline.pipeline import Checkpoint, SourceResult
from .types import Event

ProgressFn = Callable[
    [str, float, "float | None", int], None
]  # source, position, duration, samples
SkippedFn = Callable[[str, str], None]  # source, why it was skipped
WarningFn = Callable[[str], None]  # one line (a hook that failed)
ClipsFn = Callable[[list[str], str], None]  # how each clip was made ("copy"/"encode"), out dir

CONFIG_NAME = "config.yaml"


# -- live sources -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchedFolder:
    """``--watch DIR`` and its options; opened once the settings are known (``--fps`` /
    ``--time-pattern`` may come from ``--config`` or the resumed report)."""

    folder: Path
    poll: float = 1.0
    idle: float | None = None

    @property
    def name(self) -> str:
        return str(self.folder)

    def open(
        self, video: VideoConfig, previous: SourceResult | None, analysis: AnalysisConfig
    ) -> FrameSource:
        """The watched folder; resumed, on the time axis of the run it continues (its second 0
        is kept in the report), so the files that run took come again with the same times and
        the checkpoint skips them."""
        from .frames.watch import watch_folder

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
class LiveStream:
    """A stream URL or webcam given as the source, with ``--reconnect`` and ``--stream-timeout``."""

    url: str
    reconnect: int = 3
    timeout: float = 10.0

    @property
    def name(self) -> str:
        """The report's name for it: the URL without its password."""
        from .frames.stream import redact

        return redact(self.url, self.url)

    def open(
        self, video: VideoConfig, previous: SourceResult | None, analysis: AnalysisConfig
    ) -> FrameSource:
        """The stream; resumed, a new session whose times continue the earlier run's axis (its
        wall-clock second 0, ``info.started_at``), after the last time it processed."""
        from .frames.stream import open_stream, parse_started_at

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


LiveSource = WatchedFolder | LiveStream


def live_source(
    sources: list[str],
    watch: Path | None = None,
    watch_idle: float | None = None,
    watch_poll: float = 1.0,
    reconnect: int = 3,
    stream_timeout: float = 10.0,
) -> LiveSource | None:
    """What the command line asks to follow live, or None for files and folders; the
    combinations that cannot work fail now. A stream must be the run's only source: each is
    read at its own pace, so another source would wait for it to end (run one per camera)."""
    from .frames.stream import is_stream

    if watch is None:
        if watch_idle is not None:
            raise UsageError("--watch-idle needs --watch DIR")
    elif sources:
        raise UsageError("--watch DIR replaces SOURCE; give one or the other")
    else:
        return WatchedFolder(watch, watch_poll, watch_idle)
    streams = [s for s in sources if is_stream(s)]
    if not streams:
        return None
    if len(sources) > 1:
        raise UsageError(
            f"{streams[0]} is a live stream: give it alone (run one spotdiff per camera)"
        )
    return LiveStream(streams[0], reconnect, stream_timeout)


def next_session(previous: SourceResult, replayable: bool) -> SourceResult:
    """A live source's earlier result, made ready to go on. A run that ended (the stream
    closed, the watch went idle) continues after everything it found: its events are final, so
    its end is a checkpoint. An interrupted watch (``replayable``: its files are still there)
    continues from its last checkpoint, as a file does; an interrupted stream cannot be read
    again, so it too keeps every event it closed and goes on from where it stopped (the events
    still open then are lost with the footage)."""
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


# -- the run ------------------------------------------------------------------------------------


@dataclass
class VideoOutcome:
    """What a run produced: the timeline dict (as written to ``timeline.json``) and each source's
    result. ``failed``: every source failed and found nothing (the CLI exits 1)."""

    timeline: dict[str, Any]
    results: list[SourceResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        sources = self.timeline["sources"]
        return bool(sources) and all(s["error"] and not s["events"] for s in sources)


def previous_report(out: Path | None, resume: bool, overwrite: bool) -> dict[str, Any] | None:
    """The report a run continues (``resume``), after refusing to clobber one; None to start."""
    from .report.timeline import check_out_dir

    if resume and out is None:
        raise UsageError("--resume needs --out DIR (the folder of the run to continue)")
    return check_out_dir(out, resume, overwrite) if out is not None else None


def run_settings(
    previous: dict[str, Any] | None, config: str | Path | None = None, **flags: Any
) -> Settings:
    """The settings of a run: those a resumed run started with (else the defaults) < the
    ``config`` file < ``flags`` (nested dicts per section, None meaning "not given")."""
    base = (
        settings_from_dict(previous.get("settings", {}), "the report being resumed")
        if previous
        else Settings()
    )
    return resolve(base, config, **flags)


def run_video(
    sources: Iterable[str] = (),
    settings: Settings | None = None,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    config: str | Path | None = None,
    flags: dict[str, Any] | None = None,
    live: LiveSource | None = None,
    jsonl: str | None = None,
    hook: Any = None,
    on_progress: ProgressFn | None = None,
    on_skipped: SkippedFn | None = None,
    on_warning: WarningFn | None = None,
    on_clips: ClipsFn | None = None,
) -> VideoOutcome:
    """Describe ``sources`` (or ``live``) as a timeline and write the report into ``out``.

    settings: used as they are; else resolved from the resumed report's settings, ``config``
        and ``flags`` (see :func:`run_settings`).
    resume / overwrite: continue the report in ``out``, or replace it; neither refuses one.
    jsonl: a path (or ``-``) that receives each final event as a JSON line.
    hook: a ``report.hooks.EventHook`` run once per final event.
    The folder is locked for the whole run, so two runs given one ``out`` cannot mix files.
    """
    from .atomic import folder_lock

    out_dir = Path(out) if out is not None else None
    with contextlib.ExitStack() as held:
        if out_dir is not None:
            if out_dir.exists() and not out_dir.is_dir():
                raise OutputError(f"--out {out_dir} is a file; give a folder path")
            # Held from the "does a report exist?" check to the last write.
            held.enter_context(folder_lock(out_dir))
        previous = previous_report(out_dir, resume, overwrite)
        if settings is None:
            settings = run_settings(previous, config, **(flags or {}))
        run = VideoRun(
            list(sources),
            settings,
            out=out_dir,
            previous=previous,
            overwrite=overwrite,
            live=live,
            jsonl=jsonl,
            hook=hook,
            on_progress=on_progress,
            on_skipped=on_skipped,
            on_warning=on_warning,
            on_clips=on_clips,
        )
        return run.run()


class VideoRun:
    """One run over sources already checked: see :func:`run_video`, which builds it (and holds
    the folder lock, which a caller of this class holds itself)."""

    def __init__(
        self,
        sources: list[str],
        settings: Settings,
        *,
        out: Path | None = None,
        previous: dict[str, Any] | None = None,
        overwrite: bool = False,
        live: LiveSource | None = None,
        jsonl: str | None = None,
        hook: Any = None,
        on_progress: ProgressFn | None = None,
        on_skipped: SkippedFn | None = None,
        on_warning: WarningFn | None = None,
        on_clips: ClipsFn | None = None,
    ) -> None:
        from .report.timeline import timeline_from_dict

        if not sources and live is None:
            raise UsageError("give a SOURCE (video, folder, glob, stream URL) or --watch DIR")
        # Everything the report writes with is imported now: a Ctrl-C that lands inside a first
        # import leaves that module half made, and the final save after it would fail with
        # "partially initialized module" instead of writing what was found. (YAML writes only
        # a report folder's config.yaml: a --json run does not wait for it before decoding.)
        if out is not None:
            import yaml  # noqa: F401

        from .report import timeline as _writers  # noqa: F401

        self.settings = settings
        self.settings_dict = to_dict(settings)
        self.out = out
        self.overwrite = overwrite
        self.resuming = previous is not None
        self.live = live
        self.jsonl = jsonl
        self.hook = hook
        self.on_progress = on_progress
        self.on_skipped = on_skipped
        self.on_warning = on_warning or (lambda _line: None)
        self.on_clips = on_clips
        self._check_outputs(sources)
        self.results: dict[str, SourceResult] = timeline_from_dict(previous) if previous else {}
        # The report keeps every source it held: resuming with other sources adds them.
        self.recorded = list(self.results)
        self.specs: list[Any] = list(sources)
        self.names = list(sources)
        if live is not None:
            self._open_live(live)
        self._retired = previous is not None or not overwrite
        self._old_files = self._files_of_report(out) if out is not None and overwrite else []

    # -- checks -----------------------------------------------------------------------------

    def _check_outputs(self, sources: list[str]) -> None:
        video = self.settings.video
        if video.clips:
            if self.out is None:
                raise UsageError("--clips needs --out DIR (the clips are written under DIR/clips/)")
            from .report.clips import require_ffmpeg

            require_ffmpeg()  # now, not after the analysis
        if self.live is not None:
            what = (
                "--watch follows a folder"
                if isinstance(self.live, WatchedFolder)
                else "a stream is read"
            )
            if video.engine == "dask":
                raise UsageError(f"{what} on this machine; leave out --engine dask")
            if video.clips and isinstance(self.live, LiveStream):
                raise UsageError("--clips cuts clips from a file; a live stream has none to cut")
        if self.jsonl not in (None, "-"):
            target = Path(self.jsonl)
            for source in sources:
                if _same_file(target, Path(source)):
                    raise UsageError(
                        f"--jsonl {self.jsonl} is the source {source}: writing there would destroy "
                        "the footage; give the event stream another path"
                    )

    def _open_live(self, live: LiveSource) -> None:
        name = live.name
        if name in self.results:
            self.results[name] = next_session(self.results[name], isinstance(live, WatchedFolder))
        self.specs = [
            live.open(self.settings.video, self.results.get(name), self.settings.analysis)
        ]
        self.names = [str(self.specs[0])]

    # -- the report -------------------------------------------------------------------------

    def report_sources(self) -> list[SourceResult]:
        """The sources the report shows: those it already held, then this run's new ones."""
        order = self.recorded + [n for n in self.names if n not in self.recorded]
        return [self.results[n] for n in order if n in self.results]

    def timeline(self) -> dict[str, Any]:
        from .report.timeline import timeline_to_dict

        return timeline_to_dict(self.report_sources(), self.settings_dict)

    def _worth_writing(self) -> bool:
        """A report exists to say what a run saw: a run whose every source failed to open saw
        nothing, and writing one would only make the corrected rerun ask for --overwrite."""
        return self.resuming or any(
            r.info or r.events or r.processed_until is not None for r in self.results.values()
        )

    def save(self) -> None:
        """Rewrite the report (atomically) with everything known now."""
        if self.out is None or not self._worth_writing():
            return
        from .report.timeline import write_timeline

        data = self.timeline()
        if not self._retired:
            self._retire_previous(data)
        write_timeline(self.out, data, several=len(set(self.recorded + self.names)) > 1)
        _write_config(self.out / CONFIG_NAME, self.settings_dict)

    @staticmethod
    def _files_of_report(out: Path) -> list[Path]:
        """The files an earlier report in ``out`` wrote: its timeline files, subtitles, config,
        and the pictures and clips its events name (never anything else in the folder)."""
        import json

        from .report.editors import EDITOR_FORMATS
        from .report.timeline import FORMATS

        files = [out / f"timeline.{fmt}" for fmt in FORMATS] + [out / CONFIG_NAME]
        files += list(out.glob("timeline-*.vtt")) + list(out.glob("timeline-*.srt"))
        files += [p for ext in EDITOR_FORMATS for p in out.glob(f"timeline*.{ext}")]
        try:
            data = json.loads((out / "timeline.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        root = out.resolve()
        return [
            f
            for f in files + [out / name for name in _named_files(data)]
            if f.resolve().parent.is_relative_to(root)
        ]

    def _retire_previous(self, data: dict[str, Any]) -> None:
        """``overwrite``: the earlier report's files go once this run has a report to replace
        it with, so no stale picture or clip is left beside the new timeline. Files the new
        report names (a picture of the same event of the same source) are this run's: kept."""
        self._retired = True
        keep = {(self.out / name).resolve() for name in _named_files(data)}  # type: ignore[operator]
        for path in self._old_files:
            if path.resolve() not in keep and path.suffix not in (".json", ".yaml"):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    # -- running ----------------------------------------------------------------------------

    def run(self) -> VideoOutcome:
        """Describe the sources, write the report as the run goes, return what it found."""
        from .timeline import describe_sources

        render_event_picture = None
        if self.out is not None:  # the writers' imports (~10 ms) only for a run that writes
            from .report.timeline import render_event_picture

        stream = hooks = None
        if self.jsonl is not None:
            from .report.jsonl import JsonlWriter

            stream = JsonlWriter(
                self.jsonl,
                report_dir=self.out,
                append=self.resuming,
                overwrite=self.overwrite and not self.resuming,
            )
        closers = []
        # Sources skipped or broken off are told once the report is saved: when the report
        # itself cannot be written (a full disk), that is the one line the caller needs.
        skipped: list[tuple[str, str]] = []
        with contextlib.ExitStack() as held:
            if stream is not None:
                held.enter_context(stream)
                closers.append(stream.write)
            if self.hook is not None:
                from .report.hooks import HookRunner

                hooks = held.enter_context(HookRunner(self.hook, self.on_warning, self.out))
                closers.append(hooks.submit)
            # Leaving this waits for the hooks still queued (each bounded by its timeout), so
            # every event's hook has run before the caller reports; Ctrl-C drops them instead.
            try:
                finished = describe_sources(
                    self.specs,
                    self.settings,
                    on_progress=self.on_progress,
                    # A module-level function of the folder: --jobs pickles it for its workers.
                    on_event=functools.partial(_write_picture, str(self.out)) if self.out else None,
                    on_update=self._update,
                    on_error=lambda source, message: skipped.append((source, message)),
                    on_closed=functools.partial(_closed, self, closers) if closers else None,
                    resume=self.results,
                    # Live: the report follows every frame, not every 2 s of a run that may
                    # then wait minutes for the next upload.
                    update_every=0.0 if self.live is not None else 2.0,
                    # --engine dask: the pictures are drawn on the workers, written here.
                    render_picture=render_event_picture,
                )
                # --jobs N: workers cannot call on_update
                self.results.update({r.source: r for r in finished})
                if self.out is not None and self.settings.video.clips:
                    self._write_clips()
            finally:
                self._final_save()  # whatever happened, the report on disk says what was done
        if self.on_skipped is not None:
            for source, message in skipped:
                self.on_skipped(source, message)
        return VideoOutcome(self.timeline(), self.report_sources())

    def _final_save(self) -> None:
        try:
            self.save()
        except OutputError as exc:
            if self.out is not None and (self.out / "timeline.json").is_file():
                raise OutputError(
                    f"{exc}; {self.out}/timeline.json holds what was found up to its last save: "
                    "free space, then rerun with --resume"
                ) from exc
            raise

    def _update(self, result: SourceResult) -> None:
        self.results[result.source] = result
        self.save()

    def _write_clips(self) -> None:
        from .report.clips import write_event_clips

        made: list[str] = []
        for name in [n for n in self.names if n in self.results]:
            self.results[name] = write_event_clips(
                self.out, self.results[name], on_clip=lambda _event, how: made.append(how)
            )
            self.save()
        if self.on_clips is not None:
            self.on_clips(made, str(self.out))


def _write_picture(out_dir: str, source: str, event: Event, report: Any) -> str:
    from .report import timeline as timeline_report

    return timeline_report.write_event_picture(out_dir, source, event, report)


def _named_files(data: dict[str, Any]) -> list[str]:
    """The pictures (with their thumbnails) and clips a timeline dict's events name."""
    names: list[str] = []
    sources = data.get("sources") if isinstance(data, dict) else None
    for source in sources if isinstance(sources, list) else []:
        if not isinstance(source, dict):
            continue
        for event in list(source.get("events") or []) + list(source.get("open_events") or []):
            for key in ("picture", "clip"):
                name = event.get(key) if isinstance(event, dict) else None
                if isinstance(name, str) and name:
                    names.append(name)
                    if key == "picture":
                        path = Path(name)
                        names.append(str(path.with_name(path.stem + "-thumb" + path.suffix)))
    return names


def _closed(run: VideoRun, closers: list[Callable[..., None]], source: str, event: Event) -> None:
    # A live stream's wall clock (its info, published after every sample of a live run, so
    # before any event can close) gives each event its moment on the clock.
    known = run.results.get(source)
    started_at = known.info.get("started_at") if known is not None and known.info else None
    for call in closers:  # the stream first: a line is cheap, a hook is queued
        call(source, event, started_at)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _write_config(path: Path, settings: dict[str, Any]) -> None:
    """The resolved settings beside the report, reusable as ``--config`` to reproduce it
    (the hook is never among them: reproducing a report must not run someone's command)."""
    import json

    import yaml

    from .atomic import atomic_write_bytes

    plain = json.loads(json.dumps(settings))  # tuples as lists: safe_dump knows no tuples
    header = "# Resolved settings of this report; rerun with `spotdiff video SOURCE --config config.yaml`.\n"
    atomic_write_bytes(path, (header + yaml.safe_dump(plain, sort_keys=False)).encode())


__all__ = [
    "LiveSource",
    "LiveStream",
    "VideoOutcome",
    "VideoRun",
    "WatchedFolder",
    "live_source",
    "next_session",
    "previous_report",
    "run_settings",
    "run_video",
]
