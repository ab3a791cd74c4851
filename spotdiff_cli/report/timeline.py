"""Timeline reports for ``spotdiff video``: the versioned dict, its writers (json, md, csv, html,
and the vtt / srt subtitles of :mod:`.subtitles`), the event pictures and their names, and
reading a partial report back for ``--resume``.

Conventions a DVR-Scan or PySceneDetect user expects: every time is ``HH:MM:SS.mmm`` with a frame
number beside it (counted from 0, as DVR-Scan does; PySceneDetect's CSV counts from 1), the CSV
columns carry their names (``Start Frame``, ``Start Timecode``, ``Length (seconds)``...), and
every output names the source by its full path. Files made per source (pictures, clips,
subtitles of a run over several sources) are named by the file name *and* a short hash of the
full path, so ``day1/cam.mp4`` and ``day2/cam.mp4`` never overwrite each other.

Schema ``spotdiff.timeline/2`` (``/1`` is still read by ``--resume``): an event has ``start`` /
``end`` (the reported interval, s, padded), ``seen`` (first and last sample where the change
was seen), frame numbers, lengths, ``sentences`` (what was said inside it, with times) and
``pair_times`` (before / after times of the pictured pair; ``"frames"`` in v1).

The JSON is rewritten atomically while a run goes on, so a Ctrl-C or a crash leaves a valid
report of everything done so far (``"complete": false``), from which ``--resume`` continues.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from .. import __version__
from ..atomic import atomic_write_bytes
from ..errors import OutputError
from ..frames.timecode import format_timecode
from ..types import Event, EventSentence, Report
from .encoding import json_bytes, text_bytes
from .names import source_path, source_stem, subtitle_names
from .spans import frame_span, time_span
from .subtitles import SUBTITLE_WRITERS

SCHEMA = "spotdiff.timeline/2"
READABLE_SCHEMAS = ("spotdiff.timeline/1", SCHEMA)
FRAMES_DIR = "frames"
CLIPS_DIR = "clips"

# PySceneDetect's scene-list columns (DVR-Scan names the same quantities), "Event" for "Scene";
# ours follow.
CSV_COLUMNS = [
    "Event Number",
    "Start Frame",
    "Start Timecode",
    "Start Time (seconds)",
    "End Frame",
    "End Timecode",
    "End Time (seconds)",
    "Length (frames)",
    "Length (timecode)",
    "Length (seconds)",
    "Source",
    "Kind",
    "Noun",
    "Description",
    "Sentences",
    "Boxes",
    "Picture",
    "Clip",
]


# -- names -----------------------------------------------------------------------------------


def timecode(seconds: float) -> str:
    """``HH:MM:SS.mmm``: every time in every output, so columns line up and sort as text."""
    return format_timecode(seconds, millis=True)


# -- the dict ----------------------------------------------------------------------------------


def _frames_between(start: int | None, end: int | None) -> int | None:
    return end - start if start is not None and end is not None else None


def wall_time(started_at: str | None, seconds: float) -> str | None:
    """The wall-clock moment (UTC, ISO 8601) of ``seconds`` into a live stream whose second 0
    was ``started_at`` (its ``info.started_at``); None for files and folders, whose times are
    positions in the footage, not moments an operator can look up."""
    if not started_at:
        return None
    origin = datetime.datetime.fromisoformat(started_at)
    return (origin + datetime.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def event_dict(event: Event, started_at: str | None = None) -> dict[str, Any]:
    """One event as in ``timeline.json``. started_at: a live stream's wall-clock second 0, which
    adds ``wall_start`` / ``wall_end`` (absent otherwise, so file reports are unchanged)."""
    seen = event.seen_span
    length = max(0.0, event.end - event.start)
    wall = (
        {
            "wall_start": wall_time(started_at, event.start),
            "wall_end": wall_time(started_at, event.end),
        }
        if started_at
        else {}
    )
    return {
        "id": event.id,
        "start": round(event.start, 3),
        "end": round(event.end, 3),
        "start_tc": timecode(event.start),
        "end_tc": timecode(event.end),
        **wall,
        "start_frame": event.start_frame,
        "end_frame": event.end_frame,
        "length": round(length, 3),
        "length_tc": timecode(length),
        "length_frames": _frames_between(event.start_frame, event.end_frame),
        "seen": {"start": round(seen[0], 3), "end": round(seen[1], 3)},
        "text": event.text,
        "kind": event.kind,
        "noun": event.noun,
        "detections": event.detections,
        "sentences": [
            {
                "start": round(s.start, 3),
                "end": round(s.end, 3),
                "start_tc": timecode(s.start),
                "end_tc": timecode(s.end),
                "text": s.text,
                "kind": s.kind,
            }
            for s in event.sentences
        ],
        "boxes": [list(b) for b in event.boxes],
        "pair_times": {"before": round(event.frames[0], 3), "after": round(event.frames[1], 3)},
        "picture": event.picture,
        "clip": event.clip,
        # A tracked object's path: [time s, x, y, w, h] per look, original pixels ([] for an
        # event told from pixel changes alone).
        "track": [[round(t, 3), x, y, w, h] for t, x, y, w, h in event.track],
    }


def timeline_to_dict(results: list, settings: dict[str, Any]) -> dict[str, Any]:
    """results: timeline.pipeline.SourceResult list (finished or partial)."""
    sources = []
    for r in results:
        started_at = (r.info or {}).get("started_at")
        sources.append(
            {
                "source": r.source,
                "path": source_path(r.source),
                "info": r.info,
                "complete": r.complete,
                "error": r.error,
                "processed_until": r.processed_until,
                "samples": r.samples,
                "pairs_analysed": r.analysed,
                "frames_decoded": r.decoded,
                "seconds": round(r.seconds, 3),
                "warnings": list(r.warnings),
                "ended_early_at": r.ended_early_at,
                "events": [event_dict(e, started_at) for e in r.events],
                # Events still open when this was written (a partial report): shown, and
                # re-detected by --resume from the checkpoint below.
                "open_events": [event_dict(e, started_at) for e in r.pending],
                "checkpoint": dataclasses.asdict(r.checkpoint) if r.checkpoint else None,
            }
        )
    return {
        "schema": SCHEMA,
        "tool": {"name": "spotdiff", "version": __version__},
        "complete": all(s["complete"] for s in sources) if sources else False,
        "sources": sources,
        "settings": settings,
    }


def event_from_dict(data: dict[str, Any], source: str) -> Event:
    """The inverse of :func:`event_dict`; also reads a v1 event (``"frames"``, no sentences)."""
    pair = data["pair_times"] if "pair_times" in data else data["frames"]
    seen = data.get("seen")
    return Event(
        id=_count(data["id"], "id"),
        source=source,
        start=_seconds(data["start"], "start"),
        end=_seconds(data["end"], "end"),
        text=data["text"],
        kind=data["kind"],
        noun=data["noun"],
        boxes=tuple(tuple(b) for b in data["boxes"]),
        frames=(float(pair["before"]), float(pair["after"])),
        detections=_count(data["detections"], "detections"),
        picture=data["picture"],
        seen=(float(seen["start"]), float(seen["end"])) if seen else None,
        start_frame=data.get("start_frame"),
        end_frame=data.get("end_frame"),
        sentences=tuple(
            EventSentence(float(s["start"]), float(s["end"]), s["text"], s["kind"])
            for s in data.get("sentences", [])
        ),
        clip=data.get("clip"),
        track=tuple(
            (_seconds(t, "track time") or 0.0, int(x), int(y), int(w), int(h))
            for t, x, y, w, h in data.get("track") or ()
        ),
    )


def timeline_from_dict(data: dict[str, Any]) -> dict[str, Any]:
    """The sources of a timeline dict (a finished or partial ``timeline.json``, schema v1 or
    v2) as ``SourceResult`` values by source name: what ``--resume`` continues from.

    Raises OutputError when the dict is not a readable spotdiff timeline.
    """
    from ..timeline.pipeline import Checkpoint, SourceResult

    try:
        results = {}
        for s in data["sources"]:
            if not isinstance(s.get("source"), str):
                raise TypeError(f"source {s.get('source')!r} is not a path")
            point = s.get("checkpoint")
            results[s["source"]] = SourceResult(
                source=s["source"],
                info=s.get("info", {}),
                events=[event_from_dict(e, s["source"]) for e in s.get("events", [])],
                samples=_count(s.get("samples", 0), "samples"),
                analysed=_count(s.get("pairs_analysed", 0), "pairs_analysed"),
                decoded=_count(s.get("frames_decoded", 0), "frames_decoded"),
                processed_until=_seconds(s.get("processed_until"), "processed_until"),
                complete=bool(s.get("complete", False)),
                error=s.get("error"),
                seconds=_seconds(s.get("seconds", 0.0), "seconds") or 0.0,
                pending=[event_from_dict(e, s["source"]) for e in s.get("open_events", [])],
                warnings=list(s.get("warnings", [])),
                ended_early_at=_seconds(s.get("ended_early_at"), "ended_early_at"),
                checkpoint=_checkpoint(point, Checkpoint) if point else None,
            )
        return results
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise OutputError(
            f"the timeline being resumed is damaged ({type(exc).__name__}: {exc}); start again with --overwrite"
        ) from exc


def _seconds(value: Any, what: str) -> float | None:
    """A time read back from a report: a finite number of seconds, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is {value!r}, not a number of seconds")
    return float(value)


def _count(value: Any, what: str) -> int:
    """A count read back from a report: a whole number, not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is {value!r}, not a count")
    if value < 0 or value != int(value):
        raise ValueError(f"{what} is {value!r}, not a count")
    return int(value)


def _checkpoint(point: Any, checkpoint_type: Any) -> Any:
    """The stored checkpoint, its fields checked (a crafted one must not crash the resume)."""
    if not isinstance(point, dict):
        raise TypeError(f"checkpoint is {type(point).__name__}, not a mapping")
    times = {k: _seconds(point.get(k), k) for k in ("at", "replay_from")}
    if times["at"] is None or times["replay_from"] is None:
        raise ValueError("checkpoint has no time")
    counts = {k: _count(point.get(k, 0), k) for k in ("events", "samples", "analysed")}
    flags = {k: bool(point.get(k, False)) for k in ("active", "found")}
    unknown = set(point) - set(times) - set(counts) - set(flags)
    if unknown:
        raise ValueError(f"checkpoint has unknown fields {sorted(unknown)}")
    return checkpoint_type(**times, **counts, **flags)


# -- pictures ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EventPicture:
    """An event's picture, encoded: what a Dask worker sends back instead of writing files
    (the file name holds the event's number, which only the merge knows)."""

    pair: bytes  # JPEG: before | after, boxes drawn
    thumb: bytes  # JPEG: the after half, 240 px wide


def render_event_picture(
    report: Report,
    track: tuple[tuple[float, int, int, int, int], ...] = (),
    frame_size: tuple[int, int] | None = None,
) -> EventPicture:
    """The annotated frame pair and a thumbnail (the after half, boxes drawn), as JPEG bytes.
    track / frame_size: a tracked object's path (original pixels of a frame this size), drawn
    on the after half: where it was first and last seen, and the way between."""
    from .draw import annotated_image, draw_track

    picture = annotated_image(report)
    width = report.analysis.pair.before.pixels.shape[1]
    after_half = picture[:, picture.shape[1] - width :]
    if track and frame_size:
        draw_track(after_half, track, width / frame_size[0])
    thumb = cv2.resize(
        after_half,
        (240, max(1, round(after_half.shape[0] * 240 / width))),
        interpolation=cv2.INTER_AREA,
    )
    return EventPicture(_jpeg(picture, 85), _jpeg(thumb, 80))


def write_event_picture(
    out_dir: str | Path, source: str, event: Event, report: Report | EventPicture
) -> str:
    """Write the event's annotated frame pair and a thumbnail under ``out_dir/frames``; return
    the pair's path relative to ``out_dir``. report: the pair's report, or its picture already
    rendered (``render_event_picture``, on a Dask worker)."""
    out = Path(out_dir) / FRAMES_DIR
    stem = f"{source_stem(source)}-event-{event.id:04d}"
    if isinstance(report, EventPicture):
        picture = report
    else:
        picture = render_event_picture(report, event.track, event.frame_size)
    atomic_write_bytes(out / f"{stem}.jpg", picture.pair)
    atomic_write_bytes(out / f"{stem}-thumb.jpg", picture.thumb)
    return f"{FRAMES_DIR}/{stem}.jpg"


def _jpeg(image: np.ndarray, quality: int) -> bytes:
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise OutputError("could not encode an event picture")
    return buf.tobytes()


# -- writers -----------------------------------------------------------------------------------


def write_json(data: dict[str, Any], out: Path) -> bytes:
    return json_bytes(data)


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _said(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The sentences of an event dict (a resumed v1 event has none: its summary stands in)."""
    return event.get("sentences") or [
        {"start_tc": event["start_tc"], "text": event["text"], "kind": event["kind"]}
    ]


def write_csv(data: dict[str, Any], out: Path) -> bytes:
    """One row per event, PySceneDetect's columns first (see :data:`CSV_COLUMNS`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in data["sources"]:
        for e in s["events"]:
            writer.writerow(
                [
                    e["id"],
                    _blank(e.get("start_frame")),
                    e["start_tc"],
                    f"{e['start']:.3f}",
                    _blank(e.get("end_frame")),
                    e["end_tc"],
                    f"{e['end']:.3f}",
                    _blank(e.get("length_frames")),
                    e.get("length_tc", ""),
                    f"{e.get('length', 0.0):.3f}",
                    s.get("path", s["source"]),
                    e["kind"],
                    e["noun"],
                    e["text"],
                    " | ".join(f"{x['start_tc']} {x['text']}" for x in _said(e)),
                    " ".join("x".join(map(str, b)) for b in e["boxes"]),
                    _blank(e["picture"]),
                    _blank(e.get("clip")),
                ]
            )
    return text_bytes(buf.getvalue())


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_md(data: dict[str, Any], out: Path) -> bytes:
    from .summary import markdown_summary

    lines = ["# Timeline of changes", ""]
    if not data["complete"]:
        lines += [
            "> **Partial report**: the run stopped before the end; `spotdiff video ... --resume` continues it.",
            "",
        ]
    lines += markdown_summary(data)
    for s in data["sources"]:
        lines += [
            f"## {_md_cell(Path(s['source']).name)}",
            "",
            f"`{s.get('path', s['source'])}`",
            "",
        ]
        if s["error"] and not s["events"] and s["complete"]:
            lines += [f"Skipped: {_md_cell(s['error'])}", ""]
            continue
        if s["error"]:
            lines += [f"> **Stopped early**: {_md_cell(s['error'])}", ""]
        lines += [f"> warning: {_md_cell(w)}" for w in s.get("warnings", [])] + (
            [""] if s.get("warnings") else []
        )
        lines += ["| # | time | frames | what | picture |", "|---|---|---|---|---|"]
        for e in s["events"]:
            what = _md_cell(e["text"])
            said = _said(e)
            if len(said) > 1:
                what += "".join(f"<br>· {x['start_tc']} {_md_cell(x['text'])}" for x in said)
            links = [f"[pair]({e['picture']})" if e["picture"] else ""]
            if e.get("clip"):
                links.append(f"[clip]({e['clip']})")
            lines.append(
                f"| {e['id']} | {time_span(e, '–')} | {frame_span(e, '–')} | {what} | {' '.join(x for x in links if x)} |"
            )
        if not s["events"]:
            lines.append("| – | – | – | no change | |")
        lines += [
            "",
            f"{s['samples']} samples, {s['pairs_analysed']} pairs analysed in full, {s['seconds']:.1f} s.",
            "",
        ]
    return text_bytes("\n".join(lines))


def write_html(data: dict[str, Any], out: Path) -> bytes:
    """The timeline page (report/html.py): a time axis of the events, filters by kind and noun,
    each event's before / after pair, and jumps into the source video."""
    from .html import timeline_page

    return timeline_page(data, out)


TIMELINE_WRITERS: dict[str, Callable[[dict[str, Any], Path], bytes]] = {
    "json": write_json,
    "md": write_md,
    "csv": write_csv,
    "html": write_html,
}
"""Whole-timeline writers: ``timeline.<format>``."""

FORMATS = (*TIMELINE_WRITERS, *SUBTITLE_WRITERS)


def write_timeline(
    out_dir: str | Path,
    data: dict[str, Any],
    formats: tuple[str, ...] = FORMATS,
    several: bool | None = None,
) -> list[Path]:
    """(Re)write every timeline file atomically; subtitles one file per source (see
    :func:`subtitle_names`; sources that were skipped, having nothing to show, get none)."""
    from .editors import write_editor_timelines

    out = Path(out_dir)
    written = []
    for fmt in formats:
        if fmt in SUBTITLE_WRITERS:
            names = subtitle_names(data, fmt, several)
            for s in data["sources"]:
                if s["source"] in names:
                    path = out / names[s["source"]]
                    atomic_write_bytes(path, SUBTITLE_WRITERS[fmt](s))
                    written.append(path)
            continue
        path = out / f"timeline.{fmt}"
        atomic_write_bytes(path, TIMELINE_WRITERS[fmt](data, out))
        written.append(path)
    written += write_editor_timelines(out, data, several)
    return written


def check_out_dir(out_dir: str | Path, resume: bool, overwrite: bool) -> dict[str, Any] | None:
    """Refuse to clobber an earlier run; with ``resume`` return its report (or fail clearly)."""
    out = Path(out_dir)
    existing = out / "timeline.json"
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder path")
    if resume:
        if not existing.is_file():
            raise OutputError(f"--resume: {existing} not found; run without --resume first")
        try:
            data = json.loads(existing.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
            raise OutputError(
                f"--resume: {existing} is not valid JSON ({why}); start again with --overwrite"
            ) from exc
        if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
            schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise OutputError(
                f"--resume: {existing} is not a spotdiff timeline ({schema!r}); start again with --overwrite"
            )
        return data
    if existing.exists() and not overwrite:
        raise OutputError(
            f"{existing} already exists; use --resume to continue it, --overwrite to start again, or another --out"
        )
    return None
