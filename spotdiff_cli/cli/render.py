"""All terminal output: Rich lives here and nowhere else."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def print_error(message: str) -> None:
    """One line, red, on stderr."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)


def print_caption_report(data: dict[str, Any], written: list[str] | None = None) -> None:
    """The sentences, numbered like the boxes in annotated.png, then where files went."""
    before, after = data["inputs"]["before"]["path"], data["inputs"]["after"]["path"]
    console.print(f"[dim]{before} → {after}[/]")
    for s in data["sentences"]:
        style = "dim" if s["kind"] in ("no_change",) else ""
        console.print(f"  [bold]{s['number']}.[/] [{style}]{s['text']}[/]" if style else f"  [bold]{s['number']}.[/] {s['text']}")
    al = data["alignment"]
    extras = []
    if abs(al["dx"]) >= 0.5 or abs(al["dy"]) >= 0.5:  # sub-pixel jitter is not news
        extras.append(f"camera shift dx={al['dx']:+.1f} dy={al['dy']:+.1f} px corrected")
    extras.append(f"{data['timings'].get('total', 0) * 1000:.0f} ms")
    console.print(f"[dim]  ({'; '.join(extras)})[/]")
    for note in data["notes"]:
        console.print(f"[yellow]  note:[/] {note}")
    if written:
        console.print(f"[dim]  wrote {', '.join(written)}[/]")


def print_models(rows: list[dict[str, Any]]) -> None:
    table = Table(title="captioners", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("family")
    table.add_column("trainable")
    table.add_column("what it does")
    for row in rows:
        table.add_row(row["name"], row["family"], "yes" if row["trainable"] else "no", row["summary"])
    console.print(table)


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

    def __enter__(self) -> "_TimelineProgress":
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
            self.tasks[source] = self.progress.add_task(Path(source).name, total=duration or None, position="", rate="")
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


def print_timeline(data: dict[str, Any], out: str | None) -> None:
    """One table row per event: source, time span, sentence, picture."""
    from pathlib import Path

    table = Table(title="what changed", title_justify="left")
    table.add_column("source")
    table.add_column("time", no_wrap=True)
    table.add_column("what changed")
    table.add_column("picture", style="dim")
    for s in data["sources"]:
        name = Path(s["source"]).name
        if s["error"]:
            table.add_row(name, "–", f"[red]skipped: {s['error']}[/]", "")
            continue
        for e in s["events"]:
            span = e["start_tc"] if e["start_tc"] == e["end_tc"] else f"{e['start_tc']}–{e['end_tc']}"
            table.add_row(name, span, e["text"], e["picture"] or "")
        if not s["events"]:
            table.add_row(name, "–", "[dim]no change[/]", "")
    console.print(table)
    totals = [f"{Path(s['source']).name}: {s['samples']} samples, {s['pairs_analysed']} analysed, {s['seconds']:.1f} s" for s in data["sources"] if not s["error"]]
    if totals:
        console.print("[dim]" + "; ".join(totals) + "[/]")
    if out:
        console.print(f"[dim]wrote {out}/timeline.json, .md, .csv, .html[/]")
    if not data["complete"]:
        console.print("[yellow]partial: the run did not finish; rerun with --resume to continue[/]")
