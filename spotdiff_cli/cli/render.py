"""All terminal output: Rich lives here and nowhere else.

Every piece of text that comes from outside (paths, sentences, error messages) goes through
``safe`` before it meets Rich markup: a file named ``br[/red].png`` must print as itself, not
crash the renderer or paint the rest of the line, and a file named ``\\x1b[31mRED.png`` must not
recolour the terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8 are shown
as ``\\x1b``-style escapes (``visible``).

When stdout is not a terminal (piped, redirected, a CI log), output is plain lines: no tables,
no wrapping at 80 columns, one event or sentence a line, for ``grep`` and ``cut``. ``spotdiff
-q`` (``STATE.quiet``) silences progress bars, tables and summaries; errors and warnings always
print.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

# emoji=False: a file named ":smile:.png" prints as itself, too.
console = Console(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)

# C0 controls, DEL, C1 controls (ESC and CSI start terminal commands), and lone surrogates
# (a file name's bytes that are not UTF-8, as os.fsdecode keeps them): none may reach a terminal.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the original byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` with every control character and undecodable byte written as its escape
    (``\\x1b``, ``\\n``, ``\\x9b``), as Python's repr writes them: what a terminal shows is
    what the name holds, and nothing in it can move the cursor, recolour or retitle."""
    return _UNSAFE.sub(_escape_char, str(text))


def safe(text: object) -> str:
    """An outside string ready for Rich markup: control characters made visible, then markup
    escaped."""
    return escape(visible(text))


def _quiet() -> bool:
    from .state import STATE

    return STATE.quiet


def _plain(target: Console) -> bool:
    """Plain lines, not tables or wrapped text: the output goes to a file or a pipe."""
    return not target.is_terminal


def _say(text: str, target: Console = console, **kwargs: Any) -> None:
    """One line of markup (outside strings already ``safe``); never wrapped into a file."""
    if _plain(target):
        kwargs["soft_wrap"] = True
    target.print(text, **kwargs)


def _cell(value: Any) -> str:
    """A table cell as plain text: markup resolved, one line."""
    text = Text.from_markup(value).plain if isinstance(value, str) else str(value)
    return " ".join(text.splitlines())


def _print_table(table: Table, target: Console = console) -> None:
    """A Rich table on a terminal; elsewhere its title, then a header line and a line per row,
    tab-separated (``cut -f``)."""
    if not _plain(target):
        target.print(table)
        return
    if table.title:
        target.print(_cell(table.title), markup=False, soft_wrap=True)
    columns = [list(c.cells) for c in table.columns]
    target.print("\t".join(_cell(c.header) for c in table.columns), markup=False, soft_wrap=True)
    for row in zip(*columns):
        target.print("\t".join(_cell(c) for c in row), markup=False, soft_wrap=True)


def print_error(message: str) -> None:
    """One line, red, on stderr."""
    err_console.print(f"[bold red]error:[/] {safe(message)}", markup=True, soft_wrap=True)


def print_warning_line(message: str) -> None:
    """One yellow ``warning:`` line on stderr; the run goes on. Safe from another thread
    (Rich's console lock), and drawn above a progress bar when one is shown."""
    err_console.print(f"[yellow]warning:[/] {safe(message)}", markup=True, soft_wrap=True)


def print_skipped_source(source: str, message: str) -> None:
    """A source that could not be read (or broke off): one line; the run goes on."""
    # Messages usually start with the path already; do not say it twice.
    print_error(
        f"{message if message.startswith(source) else f'{source}: {message}'} (skipped)"
        if "stopped at" not in message
        else message
    )


def print_caption_report(data: dict[str, Any], written: list[str] | None = None) -> None:
    """The sentences, numbered like the boxes in annotated.png, then where files went."""
    if _quiet():
        return
    before, after = data["inputs"]["before"]["path"], data["inputs"]["after"]["path"]
    _say(f"[dim]{safe(before)} → {safe(after)}[/]")
    for s in data["sentences"]:
        text = safe(s["text"])
        _say(
            f"  [bold]{s['number']}.[/] [dim]{text}[/]"
            if s["kind"] == "no_change"
            else f"  [bold]{s['number']}.[/] {text}"
        )
    al = data["alignment"]
    extras = []
    if data.get("camera"):  # the camera sentence says how it moved
        extras.append("after image warped onto the before image")
    elif abs(al["dx"]) >= 0.5 or abs(al["dy"]) >= 0.5:  # sub-pixel jitter is not news
        extras.append(f"camera shift dx={al['dx']:+.1f} dy={al['dy']:+.1f} px corrected")
    extras.append(f"{data['timings'].get('total', 0) * 1000:.0f} ms")
    _say(f"[dim]  ({'; '.join(extras)})[/]")
    for note in data["notes"]:
        _say(f"[yellow]  note:[/] {safe(note)}")
    if written:
        _say(f"[dim]  wrote {safe(', '.join(written))}[/]")


def print_models(rows: list[dict[str, Any]]) -> None:
    if _quiet():
        return
    table = Table(title="models", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("family")
    table.add_column("trainable")
    table.add_column("weights")
    table.add_column("what it does")
    for row in rows:
        if row.get("weights"):
            shipped = safe(row["weights"])
        else:  # a trainable model without a file needs --weights; the others need none
            shipped = "[dim]none[/]" if row["trainable"] else "[dim]-[/]"
        table.add_row(
            safe(row["name"]),
            safe(row["family"]),
            "yes" if row["trainable"] else "no",
            shipped,
            safe(row["summary"]),
        )
    _print_table(table)
    # The training data, the scores and the warnings need sentences, too long for a column.
    for row in rows:
        if row.get("weights"):
            trained_on = row.get("trained_on") or "not stated in the manifest"
            _say(
                f"[bold]{safe(row['name'])}[/] ships {safe(row['weights'])}: "
                f"trained on {safe(trained_on)}"
            )
            if row.get("checks"):
                _say(f"  checks: {safe(row['checks'])}")
            if row.get("warning"):
                _say(f"  [yellow]warning:[/] {safe(row['warning'])}")
        elif row.get("note"):
            _say(
                f"[bold]{safe(row['name'])}[/]: [yellow]no shipped weights:[/] {safe(row['note'])}"
            )
    bare = [
        r["name"] for r in rows if r["trainable"] and not r.get("weights") and not r.get("note")
    ]
    if bare:
        _say(
            f"no shipped weights (train them with `spotdiff train --model NAME`, then pass "
            f"--weights): {safe(', '.join(bare))}"
        )
    _say("[dim]model cards: weights/README.md[/]")


class _TimelineProgress:
    """A Rich progress bar per source (position in the video, rate, time left); none under
    ``--quiet`` or when stderr is not a terminal."""

    def __init__(self, enabled: bool) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.enabled = enabled and err_console.is_terminal and not _quiet()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[position]}"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=err_console,
            transient=False,
        )
        self.tasks: dict[str, int] = {}
        self._started: dict[str, float] = {}

    def __enter__(self) -> _TimelineProgress:
        if self.enabled:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)

    def update(self, source: str, position: float, duration: float | None, samples: int) -> None:
        if not self.enabled:
            return
        import time
        from pathlib import Path

        from ..frames.timecode import format_timecode

        if source not in self.tasks:
            self.tasks[source] = self.progress.add_task(
                safe(Path(source).name), total=duration or None, position="", rate=""
            )
            self._started[source] = time.perf_counter()
        elapsed = max(1e-6, time.perf_counter() - self._started[source])
        self.progress.update(
            self.tasks[source],
            completed=position if duration else samples,
            position=format_timecode(position),
            rate=f"{samples / elapsed:.1f} samples/s",
        )


def timeline_progress(enabled: bool = True) -> _TimelineProgress:
    return _TimelineProgress(enabled)


def _produced_nothing(s: dict[str, Any]) -> bool:
    """A source that failed before reading anything (missing, unreadable): its error line was
    printed when it failed, and a table would only repeat it."""
    return bool(s["error"]) and not s["events"] and not s.get("samples")


def print_timeline(data: dict[str, Any], out: str | None, stderr: bool = False) -> None:
    """A table per source (titled with its full path), a row per event: number, interval
    (HH:MM:SS.mmm; one time for an event seen in one sample), frames, the summary with the
    sentences said inside the event, picture. Piped or redirected: the same as plain lines, an
    event a line. Nothing but the warnings when every source failed before reading anything
    (their error lines were printed as they failed) or under ``--quiet``.
    stderr: print there (stdout carries something else, e.g. ``--jsonl -``)."""
    target = err_console if stderr else console
    from pathlib import Path

    sources = data["sources"]
    nothing = bool(sources) and all(_produced_nothing(s) for s in sources)
    if not _quiet() and not nothing:
        for s in sources:
            if _plain(target):
                _timeline_lines(s, target)
            else:
                _timeline_table(s, target)
        totals = [
            f"{safe(Path(s['source']).name)}: {s['samples']} sample{'' if s['samples'] == 1 else 's'}, {s['pairs_analysed']} analysed, {s['seconds']:.1f} s"
            for s in sources
            if not s["error"]
        ]
        if totals:
            target.print("[dim]" + "; ".join(totals) + "[/]", soft_wrap=True)
    for s in sources:
        for warning in s.get("warnings", []):
            print_warning_line(warning)
    if out and not _quiet() and not nothing:
        target.print(
            f"[dim]wrote {safe(out)}/timeline.json, .md, .csv, .html{_edit_lists(out)}[/]",
            soft_wrap=True,
        )
    if not data["complete"] and not nothing:
        target.print(
            "[yellow]partial: the run did not finish; rerun with --resume to continue[/]",
            soft_wrap=True,
        )


def _edit_lists(out: str) -> str:
    """The end of the "wrote" line: the subtitles, and the edit lists (.edl, .otio) as far as
    they are in ``out`` (report/editors.py), with why an .otio is missing."""
    from pathlib import Path

    from ..report.editors import EDITOR_FORMATS, skipped_formats

    subtitles = "subtitles (.vtt, .srt)"
    folder = Path(out)
    found = [ext for ext in EDITOR_FORMATS if any(folder.glob(f"timeline*.{ext}"))]
    if not found:
        return f" and {subtitles}"
    why = skipped_formats().get("otio") if "otio" not in found else None
    listed = ", ".join(f".{ext}" for ext in found) + (f"; .otio {why}" if why else "")
    return f", {subtitles} and edit lists ({safe(listed)})"


def _timeline_table(s: dict[str, Any], target: Console) -> None:
    from ..report.spans import frame_span, time_span

    table = Table(title=f"what changed: {safe(s.get('path', s['source']))}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("time", no_wrap=True)
    table.add_column("frames", no_wrap=True, style="dim")
    table.add_column("what changed", ratio=1)
    table.add_column("picture", style="dim", overflow="fold")
    if s["error"] and not s["events"] and s["complete"]:
        table.add_row("", "–", "", f"[red]skipped: {safe(s['error'])}[/]", "")
        target.print(table)
        return
    for e in s["events"]:
        what = safe(e["text"])
        said = e.get("sentences") or []
        if len(said) > 1:
            what += "".join(f"\n[dim]· {safe(x['start_tc'])} {safe(x['text'])}[/]" for x in said)
        table.add_row(
            str(e["id"]),
            safe(time_span(e, "–")),
            frame_span(e, "–"),
            what,
            safe(e["picture"] or ""),
        )
    if not s["events"]:
        table.add_row("", "–", "", "[dim]no change[/]", "")
    target.print(table)


def _timeline_lines(s: dict[str, Any], target: Console) -> None:
    """One source as plain lines: its path, then an event a line (``#3 00:00:14.400–00:00:19.600
    frames 360–490: a car appeared ... (frames/picture.jpg)``), each sentence said inside the
    event indented below it."""
    from ..report.spans import frame_span, time_span

    lines = [f"what changed: {s.get('path', s['source'])}"]
    if s["error"] and not s["events"] and s["complete"]:
        lines.append(f"  skipped: {s['error']}")
    for e in s["events"]:
        frames = frame_span(e, "–")
        line = (
            f"  #{e['id']} {time_span(e, '–')}{f' frames {frames}' if frames else ''}: {e['text']}"
        )
        if e["picture"]:
            line += f" ({e['picture']})"
        lines.append(line)
        said = e.get("sentences") or []
        if len(said) > 1:
            lines += [f"      · {x['start_tc']} {x['text']}" for x in said]
    if not s["events"] and not (s["error"] and s["complete"]):
        lines.append("  no change")
    for line in lines:
        target.print(visible(line), markup=False, soft_wrap=True)


def print_clips(methods: list[str], out: str) -> None:
    """How the event clips were made: stream copies, and re-encodes (where the keyframes were
    too far before an event, or a copy failed)."""
    if not methods or _quiet():
        return
    copied, encoded = methods.count("copy"), methods.count("encode")
    how = f"{copied} stream-copied" + (f", {encoded} re-encoded" if encoded else "")
    err_console.print(
        f"[dim]clips: {len(methods)} written to {safe(out)}/clips/ ({how})[/]", soft_wrap=True
    )


def print_table(table: Any) -> None:
    """An ``evaluate.tables.Table`` (plain strings) as a Rich table, its notes dim below it."""
    if _quiet():
        return
    rich = Table(title=safe(table.title), title_justify="left")
    for i, column in enumerate(table.columns):
        rich.add_column(safe(column), justify="right" if i >= table.right_from else "left")
    for row in table.rows:
        rich.add_row(*(safe(c) for c in row))
    _print_table(rich)
    for note in table.notes:
        _say(f"[dim]{safe(note)}[/]", soft_wrap=True)


def print_evaluation(evaluation: Any, protocols: tuple[str, ...], paths: dict[str, Any]) -> None:
    """The tables of ``evaluate.tables`` (Table-2 and Table-5 forms per protocol, change
    detection, attribute accuracy, the comparison), then perplexity, alignment precision,
    retrieval R@1 (models with a retrieval head), what was not computed and why, notes, and
    where the files went. Nothing under ``--quiet`` (the files hold it all)."""
    if _quiet():
        return
    from ..evaluate.tables import tables

    models = evaluation.models()
    for table in tables(models, evaluation.split, protocols, evaluation.differences):
        print_table(table)
    runs = evaluation.runs
    perplexities = [r.perplexity for r in runs if r.perplexity is not None]
    if perplexities:
        _say("perplexity: " + ", ".join(f"{p:.3f}" for p in perplexities))
        for group in ("changed", "distractor"):
            values = [r.perplexity_groups[group] for r in runs if group in r.perplexity_groups]
            if values:
                _say(f"  {group} pairs: " + ", ".join(f"{p:.3f}" for p in values))
    elif runs[0].perplexity_note:
        # Say n/a rather than print nothing: a missing line reads like a forgotten metric.
        _say(f"perplexity: n/a ({safe(runs[0].perplexity_note)})")
    aligned = [r for r in runs if r.alignment_precision is not None]
    if aligned:
        _say(
            "alignment precision: "
            + ", ".join(
                f"{r.alignment_precision:.3f} ({r.alignment_count} alignments)" for r in aligned
            )
        )
    from ..evaluate.output import retrieval_line

    for run in runs:
        if run.retrieval:
            _say(safe(retrieval_line(run.retrieval)), soft_wrap=True)
    skipped = {k: v for r in runs for p in r.results for k, v in p.skipped.items()}
    for metric, why in skipped.items():
        _say(f"[dim]not computed: {safe(metric)}: {safe(why)}[/]")
    notes = [n for r in runs for n in r.notes] + list(evaluation.notes)
    for note in dict.fromkeys(notes):
        _say(f"[yellow]note:[/] {safe(note)}")
    written = [str(p) for key, p in paths.items() if key in ("json", "markdown", "config")]
    written += [str(p) for key, p in paths.items() if key.startswith("summary")]
    _say(f"[dim]wrote {safe(', '.join(written))}[/]", soft_wrap=True)


def print_line(text: str) -> None:
    """One plain line on stdout (escaped: paths may hold brackets); silent under ``--quiet``."""
    if _quiet():
        return
    console.print(safe(text), soft_wrap=True)


def print_warning(label: str, text: str) -> None:
    """ "label: text" with a yellow label, on stdout (a warning: printed under ``--quiet``
    too)."""
    console.print(f"[yellow]{safe(label)}:[/] {safe(text)}", soft_wrap=True)


def print_statistics(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column table: statistic, value (``spotdiff data stats``)."""
    if _quiet():
        return
    table = Table(title=safe(title), title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for label, value in rows:
        table.add_row(safe(label), safe(value))
    _print_table(table)


def print_dim(text: str) -> None:
    """A quiet note on stderr (which recipe, which file), escaped; none under ``--quiet``."""
    if _quiet():
        return
    err_console.print(f"[dim]{safe(text)}[/]", soft_wrap=True)


class _StageProgress:
    """One progress bar at a time for a long job made of stages ("epoch 3/30", "features"),
    with log lines printed above it; neither under ``--quiet``."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.quiet = _quiet()
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
            disable=self.quiet,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _StageProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)

    def update(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            for old in self.tasks.values():  # the finished stage goes away
                self.bar.remove_task(old)
            self.tasks.clear()
            self.tasks[stage] = self.bar.add_task(safe(stage), total=total)
        self.bar.update(self.tasks[stage], completed=done)

    def log(self, line: str) -> None:
        if not self.quiet:
            self.bar.console.print(safe(line), highlight=False, soft_wrap=True)


def stage_progress() -> _StageProgress:
    return _StageProgress()


def print_training_result(result: Any, model: str) -> None:
    """How training ended, the best checkpoint and how to use it (or how to resume: printed
    under ``--quiet`` too)."""
    best = f"{result.best_score:.4f}" if result.best_score is not None else "n/a"
    if result.interrupted:
        err_console.print(
            f"[yellow]interrupted[/] after {result.steps} steps; continue with "
            f"`spotdiff train --model {safe(model)} --out {safe(str(result.out_dir))} --resume`",
            soft_wrap=True,
        )
        return
    if _quiet():
        return
    how = "stopped early" if result.stopped_early else "done"
    _say(
        f"{how}: {result.epochs} epoch(s), {result.steps} steps in {result.seconds:.0f} s "
        f"({result.samples_per_second:.1f} samples/s); best validation "
        f"{getattr(result, 'val_metric', 'CIDEr')} {best}"
    )
    if result.best_path is not None:
        _say(f"best checkpoint: {safe(str(result.best_path))}", soft_wrap=True)
        _say(
            f"[dim]use it: spotdiff caption --model {safe(model)} --weights {safe(str(result.best_path))} BEFORE AFTER[/]",
            soft_wrap=True,
        )


def print_summary(summary: Any, several: bool) -> None:
    """``spotdiff summary``: a paragraph per source under its name (and its report folder,
    over several), each claim followed by the events it rests on (``#3``), then the totals."""
    from ..report.summary import paragraph

    for s in summary.sources:
        where = f"{s.report}: " if several else ""
        _say(f"[bold]{safe(where + s.name)}[/]")
        _say(safe(paragraph(s.claims, lambda r: f"#{r.event}")) or "[dim]nothing to say[/]")
        _say("")
    if summary.overall:
        _say(safe(paragraph(summary.overall, lambda r: "")))


def print_search(hits: list[Any], show_page: bool) -> None:
    """``spotdiff search``: a ranked event a line (score, source and number, time, kind and
    noun, what it said), its picture below, and with ``--open`` its card in the page."""
    if not hits:
        err_console.print("no event matches", soft_wrap=True)
        return
    for rank, h in enumerate(hits, 1):
        e = h.event
        span = e.get("start_tc") or f"{e['start']:.3f}"
        if e.get("end_tc") and e.get("end_tc") != span:
            span += f"–{e['end_tc']}"
        if e.get("wall_start"):
            span += f" ({e['wall_start']})"
        what = " ".join(x for x in (e["kind"], e.get("noun") or "") if x)
        name = h.source.replace("\\", "/").rsplit("/", 1)[-1]
        _say(
            f"{rank}. [bold]{h.score:.2f}[/] {safe(name)} #{e['id']} {safe(span)} "
            f"[dim]{safe(what)}[/] {safe(e['text'])}"
        )
        if h.picture:
            _say(f"   [dim]picture:[/] {safe(h.picture)}")
        if show_page:
            _say(f"   [dim]open:[/] {safe(h.page)}")
