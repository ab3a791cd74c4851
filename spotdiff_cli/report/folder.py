"""Reading a finished report folder back (``spotdiff summary`` and ``spotdiff search``): its
``timeline.json``, checked enough that every later step can trust the fields it reads, and
every way it can be wrong said in one line (a path that is not there, a folder without a
report, an empty or broken file, a schema this version does not read).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from .timeline import READABLE_SCHEMAS

TIMELINE = "timeline.json"


@dataclass(frozen=True)
class ReportFolder:
    """One report: where it is, its dict, and the sha256 of its ``timeline.json`` bytes (what
    the search index beside it was made from)."""

    path: Path
    data: dict[str, Any]
    digest: str

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)


def load_report(path: str | Path) -> ReportFolder:
    """The report in folder ``path`` (or ``path`` itself when it is a ``timeline.json``).

    Raises InputError with one line saying what is wrong and what to give instead.
    """
    given = Path(path)
    hint = "give the folder `spotdiff video ... -o DIR` wrote"
    if not given.exists():
        raise InputError(f"{given}: no such report folder; {hint}")
    folder, file = (given.parent, given) if given.is_file() else (given, given / TIMELINE)
    if given.is_file() and given.name != TIMELINE:
        raise InputError(f"{given} is a file, not a report folder; {hint}")
    if not file.is_file():
        raise InputError(f"{folder} holds no {TIMELINE}; {hint}")
    raw = file.read_bytes()
    if not raw.strip():
        raise InputError(f"{file} is empty; rerun `spotdiff video ... -o {folder} --overwrite`")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise InputError(f"{file} is not valid JSON ({why})") from exc
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in READABLE_SCHEMAS:
        shown = repr(schema) if schema is not None else "no schema"
        raise InputError(
            f"{file} is not a timeline this spotdiff reads ({shown}; it reads "
            f"{', '.join(READABLE_SCHEMAS)}); rerun `spotdiff video` with this version"
        )
    try:
        _check(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{file} is damaged ({exc}); rerun `spotdiff video`") from exc
    return ReportFolder(folder, data, hashlib.sha256(raw).hexdigest())


def _number(value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is {value!r}, not a number")


def _check(data: dict[str, Any]) -> None:
    """The fields summary and search read, of the right types (a hand-edited or truncated
    report fails here, in one line, rather than deep inside them)."""
    sources = data["sources"]
    if not isinstance(sources, list):
        raise TypeError("'sources' is not a list")
    for s in sources:
        if not isinstance(s, dict) or not isinstance(s.get("source"), str):
            raise TypeError("a source has no 'source' path")
        if not isinstance(s.get("events", []), list):
            raise TypeError(f"events of {s['source']} are not a list")
        for e in s.get("events", []):
            if not isinstance(e, dict):
                raise TypeError("an event is not an object")
            if isinstance(e.get("id"), bool) or not isinstance(e.get("id"), int):
                raise ValueError(f"an event id is {e.get('id')!r}")
            _number(e["start"], f"event {e['id']} start")
            _number(e["end"], f"event {e['id']} end")
            for key in ("text", "kind"):
                if not isinstance(e[key], str):
                    raise TypeError(f"event {e['id']} {key} is not text")
            if not isinstance(e.get("noun") or "", str):
                raise TypeError(f"event {e['id']} noun is not text")
            for x in e.get("sentences") or []:
                if not isinstance(x, dict) or not isinstance(x.get("text"), str):
                    raise TypeError(f"event {e['id']} has a sentence without text")
