"""``spotdiff search REPORT_DIR... QUERY``: events found by what they mean and what they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from . import app
from .state import errors_to_exit


@app.command("search")
@errors_to_exit
def search(
    reports: List[Path] = typer.Argument(
        ...,
        help="Report folders written by `spotdiff video -o DIR` (or their timeline.json).",
        show_default=False,
    ),
    query: str = typer.Argument(
        ...,
        help='What to find, in words: "a red car parked near the entrance", "a person after '
        '00:01:30". "" with filters lists what the filters let through.',
        show_default=False,
    ),
    kind: Optional[List[str]] = typer.Option(
        None, "--kind", help="Only events of this kind (visited, passed, parked...); repeatable."
    ),
    noun: Optional[List[str]] = typer.Option(
        None, "--noun", help="Only events about this (person, car, vehicle...); repeatable."
    ),
    colour: Optional[List[str]] = typer.Option(
        None, "--colour", "--color", help="Only events that name this colour; repeatable."
    ),
    after: Optional[str] = typer.Option(
        None,
        "--after",
        help="Only events going on after this: a time in the video (90s, 00:01:30) or, for a "
        "live stream's report, a time of day (22:00) or a date and time (2026-11-25T22:00).",
    ),
    before: Optional[str] = typer.Option(None, "--before", help="Only events before this."),
    source: Optional[List[str]] = typer.Option(
        None, "--source", help="Only sources whose path contains this; repeatable."
    ),
    limit: int = typer.Option(10, "--limit", "-n", min=1, help="Show at most this many."),
    rank: str = typer.Option(
        "both",
        "--rank",
        help="both (meaning and the words the query names), meaning (the sentence encoder "
        "alone) or filters (the named words alone).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    show_page: bool = typer.Option(
        False, "--open", help="Also print each event's card in timeline.html (file URL#anchor)."
    ),
) -> None:
    """Find events by what they mean: ranked by the shipped sentence encoder (offline), narrowed
    by the nouns, colours, kinds, places and times the query names or the flags give."""
    import os

    # One BLAS thread: a query is a few products of ~10 x 384 rows, which OpenBLAS's threads
    # slow down (9 ms on one thread, 20-220 ms with two on a busy 2-core machine); indexing a
    # report loses about a fifth. Only takes effect before numpy is first imported (here).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..errors import UsageError
    from ..report.folder import load_report
    from ..report.search import MODES, filters_from_flags
    from ..report.search import search as run_search
    from . import render

    if rank not in MODES:
        raise UsageError(f"--rank {rank!r}: use {', '.join(MODES)}")
    flags = filters_from_flags(kind or (), noun or (), colour or (), after, before, source or ())
    if not query.strip() and flags == filters_from_flags():
        raise UsageError('give a QUERY in words, or "" with --kind, --noun, --colour, --after...')
    loaded = [load_report(p) for p in reports]
    hits = run_search(loaded, query, flags, mode=rank, limit=limit)
    if as_json:
        typer.echo(
            json.dumps(
                {"query": query, "results": [h.as_dict() for h in hits]},
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        render.print_search(hits, show_page)
