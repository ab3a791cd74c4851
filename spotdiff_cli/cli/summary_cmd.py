"""``spotdiff summary REPORT_DIR...``: the night in one paragraph per source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import typer

from .root import app
from .state import errors_to_exit


@app.command("summary")
@errors_to_exit
def summary(
    reports: List[Path] = typer.Argument(
        ...,
        help="Report folders written by `spotdiff video -o DIR` (or their timeline.json); "
        "several: a folder of nights.",
        show_default=False,
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the summary as JSON (claims with their events)."
    ),
) -> None:
    """Say in a paragraph what happened: who and what came and went, the longest stay, when
    it was busiest, what is different at the end, what was unusual."""
    from ..report.folder import load_report
    from ..report.summary import summarise, summary_dict
    from . import render

    loaded = [load_report(p) for p in reports]  # every bad folder fails before any output
    result = summarise([(str(p), r.data) for p, r in zip(reports, loaded)])
    if as_json:
        typer.echo(json.dumps(summary_dict(result), indent=2, ensure_ascii=False))
    else:
        render.print_summary(result, several=len(reports) > 1)
