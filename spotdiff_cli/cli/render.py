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
