"""``spotdiff search REPORT_DIR... QUERY``: events found by what they mean and what they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .root import app
from .state import errors_to_exit


@app.command("search")
@errors_to_exit
def search(
    words: List[str] = typer.Argument(
        ...,
        metavar="REPORT_DIR... QUERY",
        help="Report folders written by `spotdiff video -o DIR` (or their timeline.json), then "
        'what to find, in words: "a red car parked near the entrance", "a person after '
        '00:01:30". With only filters (--kind, --noun...), the QUERY may be left out or "".',
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
    # One BLAS thread (set by the console script, entry.py): a query is a few products of ~10
    # x 384 rows, which OpenBLAS's threads slow down (9 ms on one thread, 20-220 ms with two
    # on a busy 2-core machine); indexing a report loses about a fifth.
    from ..errors import UsageError
    from ..report.folder import load_report
    from ..report.search import MODES, filters_from_flags
    from ..report.search import search as run_search
    from . import render

    reports, query = _reports_and_query(words)
    if rank not in MODES:
        raise UsageError(f"--rank {rank!r}: use {', '.join(MODES)}")
    flags = filters_from_flags(kind or (), noun or (), colour or (), after, before, source or ())
    # A missing folder is the first thing to say, before what the query lacks.
    loaded = [load_report(p) for p in reports]
    if not query.strip() and flags == filters_from_flags():
        raise UsageError(
            'give a QUERY in words after the report folder (spotdiff search DIR "a red car"), '
            "or filters: --kind, --noun, --colour, --after..."
        )
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


def _reports_and_query(words: List[str]) -> tuple[List[Path], str]:
    """Split ``REPORT_DIR... QUERY``: the last word is the query unless it is itself a report.

    Click would give a lone argument to QUERY and then say "Missing argument 'reports'" to a
    user who did give a report; here a lone report means "no query" (filters alone may follow).
    """
    from ..errors import UsageError

    *reports, last = words
    if reports and not _looks_like_report(last):
        return [Path(r) for r in reports], last
    if _looks_like_report(last) or not reports and _looks_like_path(last):
        return [Path(r) for r in words], ""
    raise UsageError(
        f"no report folder before the query {last!r}: give one first, "
        f'e.g. spotdiff search night1/ "{last}"'
    )


def _looks_like_report(word: str) -> bool:
    # "" is a query (filters alone), though Path("") would be the current folder.
    return bool(word.strip()) and (Path(word).is_dir() or Path(word).name == "timeline.json")


def _looks_like_path(word: str) -> bool:
    """A lone word the user meant as a folder (missing or mistyped), not a sentence."""
    return "/" in word or "\\" in word or (" " not in word and word.strip() != "")
