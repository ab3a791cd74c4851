"""How an event's time and frames read in the Markdown and HTML timelines (one place, so the two
pages cannot disagree)."""

from __future__ import annotations

import datetime
from typing import Any


def time_span(e: dict[str, Any], dash: str) -> str:
    """``00:00:05–00:00:08`` (one time when it starts and ends together); a live stream's event
    adds its moment on the clock, which is what an operator looks up."""
    span = e["start_tc"] if e["start_tc"] == e["end_tc"] else f"{e['start_tc']}{dash}{e['end_tc']}"
    if e.get("wall_start"):
        moment = datetime.datetime.fromisoformat(e["wall_start"])
        span += f" ({moment:%Y-%m-%d %H:%M:%S} UTC)"
    return span


def frame_span(e: dict[str, Any], dash: str) -> str:
    """``63–100`` (empty when the source has no frame numbers)."""
    start, end = e.get("start_frame"), e.get("end_frame")
    if start is None:
        return ""
    return f"{start}" if start == end else f"{start}{dash}{end}"
