"""Subtitle files of a timeline (WebVTT and SubRip), so the sentences play over the video in any
player: load ``timeline.vtt`` (browsers, VLC, mpv) or ``timeline.srt`` (everything else) next
to the source.

One cue per sentence of each event, from the first to the last sample it was said in, held on
screen at least :data:`MIN_CUE_SECONDS` so a change seen in one sample can be read. Cues of
changes in different places may overlap in time; both formats allow it (players stack them).
Writers take one source's dict from the timeline (``report.timeline.timeline_to_dict``) and
return the file's bytes; nothing here touches the disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..frames.timecode import format_timecode
from .encoding import text_bytes

# Long enough to read a ten-word sentence; a change seen in one sample has no length of its own.
MIN_CUE_SECONDS = 2.0


@dataclass(frozen=True)
class Cue:
    """One subtitle: ``text`` on screen from ``start`` to ``end`` (s); ``event``: its number."""

    start: float
    end: float
    text: str
    event: int


def cues(source: dict[str, Any]) -> list[Cue]:
    """The cues of one source's events, in time order (a v2 event dict has ``sentences``; a
    resumed v1 event has only its summary, which then stands for them)."""
    found = []
    for event in source.get("events", []):
        said = event.get("sentences") or [
            {"start": event["start"], "end": event["end"], "text": event["text"]}
        ]
        for sentence in said:
            start = float(sentence["start"])
            end = max(float(sentence["end"]), start + MIN_CUE_SECONDS)
            found.append(Cue(start, end, str(sentence["text"]), int(event["id"])))
    return sorted(found, key=lambda c: (c.start, c.event, c.end))


def _clock(seconds: float, separator: str) -> str:
    # Both formats want HH:MM:SS plus milliseconds; SubRip separates them with a comma.
    return format_timecode(seconds, millis=True).replace(".", separator)


def write_vtt(source: dict[str, Any]) -> bytes:
    """WebVTT: a header, a NOTE naming the source, one identified cue per sentence. Cue text is
    escaped (``&``, ``<`` and ``>`` start markup in WebVTT)."""
    lines = [
        "WEBVTT",
        "",
        f"NOTE spotdiff timeline of {_note(source.get('path', source['source']))}",
        "",
    ]
    for number, cue in enumerate(cues(source), start=1):
        text = cue.text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        lines += [
            f"event-{cue.event}-{number}",
            f"{_clock(cue.start, '.')} --> {_clock(cue.end, '.')}",
            text,
            "",
        ]
    return text_bytes("\n".join(lines))


def write_srt(source: dict[str, Any]) -> bytes:
    """SubRip: numbered cues, ``HH:MM:SS,mmm`` times, blank-line separated (CRLF, as the format's
    oldest readers expect)."""
    blocks = []
    for number, cue in enumerate(cues(source), start=1):
        blocks.append(
            f"{number}\r\n{_clock(cue.start, ',')} --> {_clock(cue.end, ',')}\r\n{cue.text}\r\n"
        )
    return text_bytes("\r\n".join(blocks))


def _note(text: str) -> str:
    """A WebVTT NOTE ends at a blank line and may not contain "-->"."""
    return " ".join(str(text).split()).replace("-->", "->")


SUBTITLE_WRITERS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "vtt": write_vtt,
    "srt": write_srt,
}
