"""Timeline reports for ``spotdiff video``: the versioned dict, its writers (json, md, csv, html),
the event pictures, and reading a partial report back for ``--resume``.

The JSON is rewritten atomically while a run goes on, so a Ctrl-C or a crash leaves a valid
report of everything done so far (``"complete": false``), from which ``--resume`` continues.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import io
import json
import re
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from .. import __version__
from ..errors import OutputError
from ..frames.timecode import format_timecode
from ..types import Event, Report
from ..atomic import atomic_write_bytes
from .draw import annotated_image

SCHEMA = "spotdiff.timeline/1"
FRAMES_DIR = "frames"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name)[:60] or "source"


def _needs_millis(event: Event) -> bool:
    return any(abs(t - round(t)) > 1e-3 for t in (event.start, event.end))


def event_dict(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "start": round(event.start, 3),
        "end": round(event.end, 3),
        # Milliseconds on both ends when either needs them, so a span reads consistently.
        "start_tc": format_timecode(event.start, millis=_needs_millis(event)),
        "end_tc": format_timecode(event.end, millis=_needs_millis(event)),
        "text": event.text,
        "kind": event.kind,
        "noun": event.noun,
        "detections": event.detections,
        "boxes": [list(b) for b in event.boxes],
        "frames": {"before": round(event.frames[0], 3), "after": round(event.frames[1], 3)},
        "picture": event.picture,
    }


def timeline_to_dict(results: list, settings: dict[str, Any]) -> dict[str, Any]:
    """results: timeline.pipeline.SourceResult list (finished or partial)."""
    sources = []
    for r in results:
        sources.append(
            {
                "source": r.source,
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
                "events": [event_dict(e) for e in r.events],
                # Events still open when this was written (a partial report): shown, and
                # re-detected by --resume from the checkpoint below.
                "open_events": [event_dict(e) for e in r.pending],
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
    """The inverse of :func:`event_dict`."""
    return Event(
        id=int(data["id"]), source=source, start=float(data["start"]), end=float(data["end"]), text=data["text"],
        kind=data["kind"], noun=data["noun"], boxes=tuple(tuple(b) for b in data["boxes"]),
        frames=(float(data["frames"]["before"]), float(data["frames"]["after"])),
        detections=int(data["detections"]), picture=data["picture"],
    )


def timeline_from_dict(data: dict[str, Any]) -> dict[str, Any]:
    """The sources of a timeline dict (a finished or partial ``timeline.json``) as
    ``SourceResult`` values by source name: what ``--resume`` continues from.

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
                source=s["source"], info=s.get("info", {}),
                events=[event_from_dict(e, s["source"]) for e in s.get("events", [])],
                samples=int(s.get("samples", 0)), analysed=int(s.get("pairs_analysed", 0)),
                decoded=int(s.get("frames_decoded", 0)), processed_until=s.get("processed_until"),
                complete=bool(s.get("complete", False)), error=s.get("error"), seconds=float(s.get("seconds", 0.0)),
                pending=[event_from_dict(e, s["source"]) for e in s.get("open_events", [])],
                warnings=list(s.get("warnings", [])), ended_early_at=s.get("ended_early_at"),
                checkpoint=Checkpoint(**point) if point else None,
            )
        return results
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise OutputError(f"the timeline being resumed is damaged ({type(exc).__name__}: {exc}); start again with --overwrite") from exc


def write_event_picture(out_dir: str | Path, source: str, event: Event, report: Report) -> str:
    """Write the event's annotated frame pair and a thumbnail (the after half, boxes drawn)
    under ``out_dir/frames``; return the pair's path relative to ``out_dir``."""
    out = Path(out_dir) / FRAMES_DIR
    stem = f"{_slug(source)}-event-{event.id:04d}"
    picture = annotated_image(report)
    width = report.analysis.pair.before.pixels.shape[1]
    after_half = picture[:, picture.shape[1] - width :]
    thumb = cv2.resize(after_half, (240, max(1, round(after_half.shape[0] * 240 / width))), interpolation=cv2.INTER_AREA)
    atomic_write_bytes(out / f"{stem}.jpg", _jpeg(picture, 85))
    atomic_write_bytes(out / f"{stem}-thumb.jpg", _jpeg(thumb, 80))
    return f"{FRAMES_DIR}/{stem}.jpg"


def _jpeg(image: np.ndarray, quality: int) -> bytes:
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise OutputError("could not encode an event picture")
    return buf.tobytes()


def write_json(data: dict[str, Any], out: Path) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def write_csv(data: dict[str, Any], out: Path) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["source", "event", "start", "end", "start_s", "end_s", "kind", "noun", "text", "boxes", "picture"])
    for s in data["sources"]:
        for e in s["events"]:
            boxes = " ".join("x".join(map(str, b)) for b in e["boxes"])
            writer.writerow([Path(s["source"]).name, e["id"], e["start_tc"], e["end_tc"], e["start"], e["end"], e["kind"], e["noun"], e["text"], boxes, e["picture"] or ""])
    return buf.getvalue().encode()


def write_md(data: dict[str, Any], out: Path) -> bytes:
    lines = ["# Timeline of changes", ""]
    if not data["complete"]:
        lines += ["> **Partial report**: the run stopped before the end; `spotdiff video ... --resume` continues it.", ""]
    for s in data["sources"]:
        lines += [f"## {Path(s['source']).name}", "", f"`{s['source']}`", ""]
        if s["error"] and not s["events"] and s["complete"]:
            lines += [f"Skipped: {s['error']}", ""]
            continue
        if s["error"]:
            lines += [f"> **Stopped early**: {s['error']}", ""]
        lines += [f"> warning: {w}" for w in s.get("warnings", [])] + ([""] if s.get("warnings") else [])
        lines += ["| time | what | picture |", "|---|---|---|"]
        for e in s["events"]:
            span = e["start_tc"] if e["start_tc"] == e["end_tc"] else f"{e['start_tc']}–{e['end_tc']}"
            pic = f"[pair]({e['picture']})" if e["picture"] else ""
            lines.append(f"| {span} | {e['text']} | {pic} |")
        if not s["events"]:
            lines.append("| – | no change | |")
        lines += ["", f"{s['samples']} samples, {s['pairs_analysed']} pairs analysed in full, {s['seconds']:.1f} s.", ""]
    return "\n".join(lines).encode()


def write_html(data: dict[str, Any], out: Path) -> bytes:
    """One page: a row per event with an embedded thumbnail; click opens the annotated pair
    (a file under frames/, so the page stays small for long runs)."""
    esc = html.escape
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>spotdiff timeline</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4em;text-align:left;vertical-align:top}"
        "td.t{white-space:nowrap;font-variant-numeric:tabular-nums}img{border:1px solid #ccc}.partial{background:#fff6d5;padding:.5em}"
        "</style></head><body><h1>Timeline of changes</h1>"
    ]
    if not data["complete"]:
        parts.append("<p class=partial>Partial report: the run stopped before the end; <code>--resume</code> continues it.</p>")
    for s in data["sources"]:
        parts.append(f"<h2>{esc(Path(s['source']).name)}</h2><p><small>{esc(s['source'])}</small></p>")
        if s["error"] and not s["events"] and s["complete"]:
            parts.append(f"<p>Skipped: {esc(s['error'])}</p>")
            continue
        if s["error"]:
            parts.append(f"<p class=partial>Stopped early: {esc(s['error'])}</p>")
        parts.extend(f"<p class=partial>Warning: {esc(w)}</p>" for w in s.get("warnings", []))
        parts.append("<table><tr><th>time</th><th>what changed</th><th>where</th></tr>")
        for e in s["events"]:
            span = e["start_tc"] if e["start_tc"] == e["end_tc"] else f"{e['start_tc']}&ndash;{e['end_tc']}"
            cell = ""
            if e["picture"]:
                thumb_path = out / e["picture"].replace(".jpg", "-thumb.jpg")
                if thumb_path.is_file():
                    b64 = base64.b64encode(thumb_path.read_bytes()).decode()
                    cell = f'<a href="{esc(e["picture"])}"><img alt="event {e["id"]}" src="data:image/jpeg;base64,{b64}"></a>'
                else:
                    cell = f'<a href="{esc(e["picture"])}">frame pair</a>'
            parts.append(f"<tr><td class=t>{span}</td><td>{esc(e['text'])}</td><td>{cell}</td></tr>")
        if not s["events"]:
            parts.append("<tr><td class=t>&ndash;</td><td>no change</td><td></td></tr>")
        parts.append(f"</table><p><small>{s['samples']} samples, {s['pairs_analysed']} pairs analysed in full, {s['seconds']:.1f} s</small></p>")
    parts.append(f"<p><small>spotdiff {esc(data['tool']['version'])}</small></p></body></html>\n")
    return "".join(parts).encode()


TIMELINE_WRITERS: dict[str, Callable[[dict[str, Any], Path], bytes]] = {
    "json": write_json,
    "md": write_md,
    "csv": write_csv,
    "html": write_html,
}


def write_timeline(out_dir: str | Path, data: dict[str, Any], formats: tuple[str, ...] = ("json", "md", "csv", "html")) -> list[Path]:
    """(Re)write every timeline file atomically."""
    out = Path(out_dir)
    written = []
    for fmt in formats:
        path = out / f"timeline.{fmt}"
        atomic_write_bytes(path, TIMELINE_WRITERS[fmt](data, out))
        written.append(path)
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
            raise OutputError(f"--resume: {existing} is not valid JSON ({why}); start again with --overwrite") from exc
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise OutputError(f"--resume: {existing} is not a spotdiff timeline ({schema!r}); start again with --overwrite")
        return data
    if existing.exists() and not overwrite:
        raise OutputError(f"{existing} already exists; use --resume to continue it, --overwrite to start again, or another --out")
    return None
