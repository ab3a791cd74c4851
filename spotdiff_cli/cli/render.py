"""All terminal output: Rich lives here and nowhere else.

Every piece of text that comes from outside (paths, sentences, error messages) goes through
``escape`` before it meets Rich markup: a file named ``br[/red].png`` must print as itself, not
crash the renderer or paint the rest of the line.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def print_error(message: str) -> None:
    """One line, red, on stderr."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)


def print_warning_line(message: str) -> None:
    """One yellow ``warning:`` line on stderr; the run goes on. Safe from another thread
    (Rich's console lock), and drawn above a progress bar when one is shown."""
    err_console.print(f"[yellow]warning:[/] {escape(message)}", markup=True, soft_wrap=True)


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
    before, after = data["inputs"]["before"]["path"], data["inputs"]["after"]["path"]
    console.print(f"[dim]{escape(before)} → {escape(after)}[/]")
    for s in data["sentences"]:
        text = escape(s["text"])
        console.print(
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
    console.print(f"[dim]  ({'; '.join(extras)})[/]")
    for note in data["notes"]:
        console.print(f"[yellow]  note:[/] {escape(note)}")
    if written:
        console.print(f"[dim]  wrote {escape(', '.join(written))}[/]")


def print_models(rows: list[dict[str, Any]]) -> None:
    table = Table(title="models", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("family")
    table.add_column("trainable")
    table.add_column("weights")
    table.add_column("what it does")
    for row in rows:
        if row.get("weights"):
            shipped = escape(row["weights"])
        else:  # a trainable model without a file needs --weights; the others need none
            shipped = "[dim]none[/]" if row["trainable"] else "[dim]-[/]"
        table.add_row(
            row["name"],
            row["family"],
            "yes" if row["trainable"] else "no",
            shipped,
            escape(row["summary"]),
        )
    console.print(table)
    # The training data needs a sentence, too long for a column.
    for row in rows:
        if row.get("weights"):
            trained_on = row.get("trained_on") or "not stated in the manifest"
            console.print(
                f"[bold]{escape(row['name'])}[/] ships {escape(row['weights'])}: "
                f"trained on {escape(trained_on)}"
            )
    console.print("[dim]model cards: weights/README.md[/]")


class _TimelineProgress:
    """A Rich progress bar per source (position in the video, rate, time left)."""

    def __init__(self, enabled: bool) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.enabled = enabled and err_console.is_terminal
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
                escape(Path(source).name), total=duration or None, position="", rate=""
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


def print_timeline(data: dict[str, Any], out: str | None, stderr: bool = False) -> None:
    """A table per source (titled with its full path), a row per event: number, interval
    (HH:MM:SS.mmm), frames, the summary with the sentences said inside the event, picture.
    stderr: print there (stdout carries something else, e.g. ``--jsonl -``)."""
    target = err_console if stderr else console
    from pathlib import Path

    for s in data["sources"]:
        table = Table(
            title=f"what changed: {escape(s.get('path', s['source']))}", title_justify="left"
        )
        table.add_column("#", justify="right")
        table.add_column("time", no_wrap=True)
        table.add_column("frames", no_wrap=True, style="dim")
        table.add_column("what changed", ratio=1)
        table.add_column("picture", style="dim", overflow="fold")
        if s["error"] and not s["events"] and s["complete"]:
            table.add_row("", "–", "", f"[red]skipped: {escape(s['error'])}[/]", "")
            target.print(table)
            continue
        for e in s["events"]:
            span = (
                e["start_tc"] if e["start_tc"] == e["end_tc"] else f"{e['start_tc']}–{e['end_tc']}"
            )
            frames = "" if e.get("start_frame") is None else f"{e['start_frame']}–{e['end_frame']}"
            what = escape(e["text"])
            said = e.get("sentences") or []
            if len(said) > 1:
                what += "".join(
                    f"\n[dim]· {escape(x['start_tc'])} {escape(x['text'])}[/]" for x in said
                )
            table.add_row(str(e["id"]), span, frames, what, escape(e["picture"] or ""))
        if not s["events"]:
            table.add_row("", "–", "", "[dim]no change[/]", "")
        target.print(table)
    totals = [
        f"{escape(Path(s['source']).name)}: {s['samples']} samples, {s['pairs_analysed']} analysed, {s['seconds']:.1f} s"
        for s in data["sources"]
        if not s["error"]
    ]
    if totals:
        target.print("[dim]" + "; ".join(totals) + "[/]", soft_wrap=True)
    for s in data["sources"]:
        for warning in s.get("warnings", []):
            err_console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if out:
        target.print(
            f"[dim]wrote {escape(out)}/timeline.json, .md, .csv, .html and subtitles (.vtt, .srt)[/]",
            soft_wrap=True,
        )
    if not data["complete"]:
        target.print("[yellow]partial: the run did not finish; rerun with --resume to continue[/]")


def print_clips(methods: list[str], out: str) -> None:
    """How the event clips were made: stream copies, and re-encodes (where the keyframes were
    too far before an event, or a copy failed)."""
    if not methods:
        return
    copied, encoded = methods.count("copy"), methods.count("encode")
    how = f"{copied} stream-copied" + (f", {encoded} re-encoded" if encoded else "")
    err_console.print(
        f"[dim]clips: {len(methods)} written to {escape(out)}/clips/ ({how})[/]", soft_wrap=True
    )


def print_table(table: Any) -> None:
    """An ``evaluate.tables.Table`` (plain strings) as a Rich table, its notes dim below it."""
    rich = Table(title=escape(table.title), title_justify="left")
    for i, column in enumerate(table.columns):
        rich.add_column(escape(column), justify="right" if i >= table.right_from else "left")
    for row in table.rows:
        rich.add_row(*(escape(c) for c in row))
    console.print(rich)
    for note in table.notes:
        console.print(f"[dim]{escape(note)}[/]", soft_wrap=True)


def print_evaluation(evaluation: Any, protocols: tuple[str, ...], paths: dict[str, Any]) -> None:
    """The tables of ``evaluate.tables`` (Table-2 and Table-5 forms per protocol, change
    detection, attribute accuracy, the comparison), then perplexity, alignment precision,
    retrieval R@1 (models with a retrieval head), what was not computed and why, notes, and
    where the files went."""
    from ..evaluate.tables import tables

    models = evaluation.models()
    for table in tables(models, evaluation.split, protocols, evaluation.differences):
        print_table(table)
    runs = evaluation.runs
    perplexities = [r.perplexity for r in runs if r.perplexity is not None]
    if perplexities:
        console.print("perplexity: " + ", ".join(f"{p:.3f}" for p in perplexities))
        for group in ("changed", "distractor"):
            values = [r.perplexity_groups[group] for r in runs if group in r.perplexity_groups]
            if values:
                console.print(f"  {group} pairs: " + ", ".join(f"{p:.3f}" for p in values))
    elif runs[0].perplexity_note:
        # Say n/a rather than print nothing: a missing line reads like a forgotten metric.
        console.print(f"perplexity: n/a ({escape(runs[0].perplexity_note)})")
    aligned = [r for r in runs if r.alignment_precision is not None]
    if aligned:
        console.print(
            "alignment precision: "
            + ", ".join(
                f"{r.alignment_precision:.3f} ({r.alignment_count} alignments)" for r in aligned
            )
        )
    from ..evaluate.output import retrieval_line

    for run in runs:
        if run.retrieval:
            console.print(escape(retrieval_line(run.retrieval)), soft_wrap=True)
    skipped = {k: v for r in runs for p in r.results for k, v in p.skipped.items()}
    for metric, why in skipped.items():
        console.print(f"[dim]not computed: {escape(metric)}: {escape(why)}[/]")
    notes = [n for r in runs for n in r.notes] + list(evaluation.notes)
    for note in dict.fromkeys(notes):
        console.print(f"[yellow]note:[/] {escape(note)}")
    written = [str(p) for key, p in paths.items() if key in ("json", "markdown", "config")]
    written += [str(p) for key, p in paths.items() if key.startswith("summary")]
    console.print(f"[dim]wrote {escape(', '.join(written))}[/]", soft_wrap=True)


def print_line(text: str) -> None:
    """One plain line on stdout (escaped: paths may hold brackets)."""
    console.print(escape(text), soft_wrap=True)


def print_warning(label: str, text: str) -> None:
    """ "label: text" with a yellow label, on stdout."""
    console.print(f"[yellow]{escape(label)}:[/] {escape(text)}", soft_wrap=True)


def print_statistics(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column table: statistic, value (``spotdiff data stats``)."""
    table = Table(title=escape(title), title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for label, value in rows:
        table.add_row(escape(label), escape(value))
    console.print(table)


def print_dim(text: str) -> None:
    """A quiet note on stderr (which recipe, which file), escaped."""
    err_console.print(f"[dim]{escape(text)}[/]", soft_wrap=True)


class _StageProgress:
    """One progress bar at a time for a long job made of stages ("epoch 3/30", "features"),
    with log lines printed above it."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
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
            self.tasks[stage] = self.bar.add_task(escape(stage), total=total)
        self.bar.update(self.tasks[stage], completed=done)

    def log(self, line: str) -> None:
        self.bar.console.print(escape(line), highlight=False, soft_wrap=True)


def stage_progress() -> _StageProgress:
    return _StageProgress()


def print_training_result(result: Any, model: str) -> None:
    """How training ended, the best checkpoint and how to use it (or how to resume)."""
    best = f"{result.best_score:.4f}" if result.best_score is not None else "n/a"
    if result.interrupted:
        err_console.print(
            f"[yellow]interrupted[/] after {result.steps} steps; continue with "
            f"`spotdiff train --model {escape(model)} --out {escape(str(result.out_dir))} --resume`",
            soft_wrap=True,
        )
        return
    how = "stopped early" if result.stopped_early else "done"
    console.print(
        f"{how}: {result.epochs} epoch(s), {result.steps} steps in {result.seconds:.0f} s "
        f"({result.samples_per_second:.1f} samples/s); best validation "
        f"{getattr(result, 'val_metric', 'CIDEr')} {best}"
    )
    if result.best_path is not None:
        console.print(f"best checkpoint: {escape(str(result.best_path))}", soft_wrap=True)
        console.print(
            f"[dim]use it: spotdiff caption --model {escape(model)} --weights {escape(str(result.best_path))} BEFORE AFTER[/]",
            soft_wrap=True,
        )
