"""Edit decision lists of a timeline, for video editors: the events as a CMX 3600 EDL
(``timeline.edl``, which every editing system imports: Resolve, Premiere, Avid...) and as an
OpenTimelineIO file (``timeline.otio``: DaVinci Resolve, OTIO's own otioview and otioconvert),
beside the VTT/SRT subtitles and named as they are (one file per source,
``timeline-<name>-<hash>.<ext>`` when a run has several).

Both hold the same edits: one cut per event, the event's interval of the source (from its
start to its end plus one frame, held at least :data:`~.subtitles.MIN_CUE_SECONDS` as its
subtitle is, and never past the source's end), laid back to back on a sequence that starts at
01:00:00:00 (an editing system's default), named by the event's number and summary. The .otio
keeps each event's number, kind, noun and sentences in the clip's ``metadata["spotdiff"]`` and
marks the event on the clip, so a script can go back from a cut to the report.

- The EDL is written by hand (the format is a few fixed columns, and OpenTimelineIO's CMX 3600
  adapter is a separate plugin package since OTIO 0.16). Timecodes count whole frames at the
  source's rate when it is a timecode rate (24, 25, 30, 48, 50, 60; 23.976 / 29.97 / 59.94
  non-drop-frame at 24 / 30 / 60 a timecode second, as editing systems label them), else at the
  first of 25, 30, 24, 50, 60 that is a whole multiple of it (10 and 15 fps at 30, 12.5 at 25),
  or at 25 from the seconds (a folder of snapshots). Reel ``AX`` (an auxiliary, file-based source), the file
  in ``* FROM CLIP NAME`` and ``* SOURCE FILE`` comments, the summary in ``* COMMENT``, and a
  red ``* LOC`` marker at the event's start (source timecode, as OTIO's CMX reader takes it).
  No ``* FROM CLIP`` line: Premiere names every clip "UNKNOWN" in an EDL that has one.
- The .otio needs ``opentimelineio`` (an optional import: ``pip install opentimelineio``), and
  counts at the EDL's rate (OTIO, too, gives timecodes at timecode rates only). Without it the
  .otio is skipped and :func:`skipped_formats` says why, for the caller to show.

``write_editor_timelines(out_dir, data)`` takes the dict of ``report.timeline.timeline_to_dict``,
as the subtitle writers do, and writes atomically.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_bytes
from .names import subtitle_names
from .subtitles import MIN_CUE_SECONDS

# An editing system's sequences start here by default (01:00:00:00).
RECORD_START_SECONDS = 3600.0
# Timecode rates editing systems (and OTIO) accept: whole ones, and the NTSC ones (x 1000/1001)
# written at the next whole number, non-drop-frame, as editors label them.
SMPTE_RATES = (24, 25, 30, 48, 50, 60)
NTSC_RATES = (23.976, 29.97, 47.952, 59.94)
# For any other source rate, the first of these that is a whole multiple of it (10 and 15 fps at
# 30, 12.5 at 25), so every source frame falls on a timecode frame; else 25, from the seconds.
FALLBACK_RATES = (25, 30, 24, 50, 60)
OTIO_MISSING = "needs opentimelineio: pip install opentimelineio"
# The extensions written (one file per source, named as the subtitles are).
EDITOR_FORMATS = ("edl", "otio")


def edl_rate(fps: float | None) -> tuple[float, int]:
    """(frames per second to count with, frames per timecode second) for a source's rate."""
    if fps and fps > 0:
        if any(abs(fps - r) < 0.01 for r in SMPTE_RATES):
            return float(round(fps)), int(round(fps))
        for ntsc in NTSC_RATES:
            if abs(fps - ntsc) < 0.01:
                return 1000 * math.ceil(ntsc) / 1001, math.ceil(ntsc)
        for rate in FALLBACK_RATES:
            if abs(rate / fps - round(rate / fps)) < 0.001:
                return float(rate), rate
    return float(FALLBACK_RATES[0]), FALLBACK_RATES[0]


def timecode(frames: int, base: int) -> str:
    """``HH:MM:SS:FF``, ``base`` frames a timecode second (non-drop-frame)."""
    seconds, frame = divmod(max(0, frames), base)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours:02d}:{minute:02d}:{second:02d}:{frame:02d}"


def edits(source: dict[str, Any], rate: float) -> list[tuple[dict[str, Any], int, int]]:
    """(event, first frame, frame after the last) of each event of one source, at ``rate``: its
    interval plus the source frame it ends on, held at least MIN_CUE_SECONDS, clipped to the source's
    end when known, and never empty."""
    info = source.get("info") or {}
    duration, fps = info.get("duration"), info.get("fps")
    end_of_source = round(float(duration) * rate) if duration else None
    frame = 1 / float(fps) if fps and fps > 0 else 1 / rate  # one frame of the source
    found = []
    for event in sorted(source.get("events", []), key=lambda e: (e["start"], e["id"])):
        first = round(float(event["start"]) * rate)
        after = max(
            round((float(event["end"]) + frame) * rate),
            round((float(event["start"]) + MIN_CUE_SECONDS) * rate),
        )
        if end_of_source is not None:
            after = min(after, end_of_source)
        found.append((event, first, max(after, first + 1)))
    return found


def _text(text: object) -> str:
    """Text that encodes as UTF-8: a file name's bytes that are not UTF-8 become U+FFFD."""
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _one_line(text: object) -> str:
    """Comments of an EDL are one line each; readers split on line ends."""
    return " ".join(_text(text).split())


def _name(source: dict[str, Any]) -> str:
    return Path(source["source"]).name or source["source"]


def write_edl(source: dict[str, Any]) -> bytes:
    """One source's events as a CMX 3600 EDL (text, CRLF line ends as the format's oldest
    readers expect)."""
    rate, base = edl_rate((source.get("info") or {}).get("fps"))
    name = _one_line(_name(source))
    path = _one_line(source.get("path", source["source"]))
    lines = [f"TITLE: spotdiff events {name}"[:70], "FCM: NON-DROP FRAME", ""]
    record = round(RECORD_START_SECONDS * rate)
    for number, (event, first, after) in enumerate(edits(source, rate), start=1):
        length = after - first
        lines += [
            f"{number:03d}  AX       V     C        "
            f"{timecode(first, base)} {timecode(after, base)} "
            f"{timecode(record, base)} {timecode(record + length, base)}",
            f"* FROM CLIP NAME: {name}",
            f"* SOURCE FILE: {path}",
            f"* COMMENT: #{event['id']} {_one_line(event['kind'])}: {_one_line(event['text'])}",
            f"* LOC: {timecode(first, base)} RED     #{event['id']} {_one_line(event['kind'])}",
            "",
        ]
        record += length
    return "\r\n".join(lines).encode("utf-8")


def otio_available() -> bool:
    try:
        import opentimelineio  # noqa: F401
    except ImportError:
        return False
    return True


def write_otio(source: dict[str, Any]) -> bytes:
    """One source's events as an OpenTimelineIO timeline (JSON): a video track of one clip per
    event, each referencing the source file, marked and annotated with its event. Needs
    ``opentimelineio``."""
    import opentimelineio as otio

    info = source.get("info") or {}
    rate, _ = edl_rate(info.get("fps"))  # the EDL's: a timecode rate editing systems accept
    name = _text(_name(source))
    path = source.get("path", source["source"])
    url = Path(path).as_uri() if Path(path).is_absolute() else _text(path)
    available = None
    if info.get("duration"):
        available = otio.opentime.TimeRange(
            otio.opentime.RationalTime(0, rate),
            otio.opentime.RationalTime(round(float(info["duration"]) * rate), rate),
        )
    timeline = otio.schema.Timeline(name=f"spotdiff events: {name}")
    timeline.global_start_time = otio.opentime.RationalTime(
        round(RECORD_START_SECONDS * rate), rate
    )
    track = otio.schema.Track(name="events", kind=otio.schema.TrackKind.Video)
    for event, first, after in edits(source, rate):
        clip = otio.schema.Clip(
            name=f"#{event['id']} {_text(event['text'])}",
            media_reference=otio.schema.ExternalReference(
                target_url=url, available_range=available
            ),
            source_range=otio.opentime.TimeRange(
                otio.opentime.RationalTime(first, rate),
                otio.opentime.RationalTime(after - first, rate),
            ),
        )
        clip.metadata["spotdiff"] = {
            "event": event["id"],
            "kind": event["kind"],
            "noun": event.get("noun"),
            "start": event["start"],
            "end": event["end"],
            "text": event["text"],
            "sentences": [
                {"start": s["start"], "text": s["text"]} for s in event.get("sentences") or []
            ],
            "picture": event.get("picture"),
        }
        clip.markers.append(
            otio.schema.Marker(
                name=f"#{event['id']} {event['kind']}",
                marked_range=otio.opentime.TimeRange(
                    otio.opentime.RationalTime(first, rate), otio.opentime.RationalTime(0, rate)
                ),
                color=otio.schema.MarkerColor.RED,
                metadata={"spotdiff": {"text": event["text"]}},
            )
        )
        track.append(clip)
    timeline.tracks.append(track)
    return otio.adapters.write_to_string(timeline, "otio_json").encode("utf-8")


def skipped_formats() -> dict[str, str]:
    """Editor formats that :func:`write_editor_timelines` leaves out here, and why."""
    return {} if otio_available() else {"otio": OTIO_MISSING}


def write_editor_timelines(
    out_dir: Path, data: dict[str, Any], several: bool | None = None
) -> list[Path]:
    """Write ``timeline.edl`` and (with opentimelineio) ``timeline.otio`` for each source that
    has something to show, named as its subtitles are (``several`` as for
    ``report.timeline.write_timeline``: whether the run has several sources); returns the paths
    written."""
    writers = {"edl": write_edl}
    if otio_available():
        writers["otio"] = write_otio
    out = Path(out_dir)
    written = []
    for ext, writer in writers.items():
        names = subtitle_names(data, ext, several)
        for source in data["sources"]:
            if source["source"] in names:
                path = out / names[source["source"]]
                atomic_write_bytes(path, writer(source))
                written.append(path)
    return written
