"""The HTML pages people look at: the timeline of ``spotdiff video`` and the report of
``spotdiff caption``.

Both are Jinja2 templates (``report/templates/``) rendered with autoescape on, so every string a
user supplied (file names, sentences, errors) reaches the page escaped; the inline script reads
only ``data-`` attributes, so no user string is ever inside a ``<script>``. The pages are
self-contained: inline CSS and script, no URL anywhere else. The caption page embeds its images
as ``data:`` URIs (one file that opens anywhere); the timeline links the event pictures under
``frames/`` relatively (a long run stays a small page, pictures load as they scroll into view)
and the source video relatively to the report folder, so the folder opens from ``file://``.

This module lays the data out for the page (positions on the time axis, boxes scaled to the
pictures); the templates only place it.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import cv2
import numpy as np

from .. import __version__
from ..errors import OutputError
from ..frames.timecode import format_timecode
from ..types import Report
from .compose import cluster_numbers, scale_box
from .draw import PAIR_GAP, PALETTE, box_in_after, mask_image
from .encoding import text_bytes
from .spans import frame_span, time_span
from .summary import paragraph_parts, search_words, summarise

TEMPLATES = Path(__file__).parent / "templates"

# One colour per kind of change, the same on the time axis, the chips and the cards (Okabe-Ito,
# as the boxes of draw.py); a kind not listed gets one by its name.
KIND_COLOURS = {
    "appeared": "#009e73",
    "disappeared": "#d55e00",
    "moved": "#0072b2",
    "visited": "#cc79a7",
    "changed": "#e69f00",
    "lighting": "#b59f00",
    "camera": "#7a7a7a",
    "scene": "#56b4e9",
    "no_change": "#9a9a9a",
}
# What a browser's <video> plays (Chrome, Firefox, Safari, Edge alike): MP4, WebM and Ogg files
# holding H.264, VP8, VP9, AV1 or Theora. Anything else (AVI, MKV, MOV, GIF; MPEG-4 Part 2,
# HEVC or MJPEG inside an MP4) is a player that spins for ever, so the page says so instead.
BROWSER_CONTAINERS = {".mp4": "MP4", ".m4v": "MP4", ".webm": "WebM", ".ogv": "Ogg", ".ogg": "Ogg"}
BROWSER_CODECS = {
    "h264",
    "avc1",
    "avc",
    "vp8",
    "vp80",
    "vp9",
    "vp90",
    "vp09",
    "av1",
    "av01",
    "theora",
}
# Time-axis rows: events that overlap in time go on separate rows, up to this many.
MAX_LANES = 6
# A mark is at least this share of the axis wide, so a one-sample event stays clickable.
MIN_MARK = 0.8


@functools.cache
def _environment() -> Any:
    # jinja2 is imported here, not at module level: `spotdiff --help` and the JSON-only paths
    # never pay for it.
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: f"{v:.3f}%"
    env.globals.update(version=__version__, kind_colour=kind_colour)
    return env


def _render(template: str, **context: Any) -> bytes:
    return text_bytes(_environment().get_template(template).render(**context))


def kind_colour(kind: str) -> str:
    if kind in KIND_COLOURS:
        return KIND_COLOURS[kind]
    r, g, b = PALETTE[sum(kind.encode()) % len(PALETTE)]
    return f"#{r:02x}{g:02x}{b:02x}"


def _chips(items: list[tuple[str, str]]) -> dict[str, list[tuple[str, int]]]:
    """(kind, noun) of every item -> the filter chips: each value with its count, commonest
    first (an empty noun - lighting, camera - gets no chip of its own)."""
    kinds = Counter(k for k, _ in items)
    nouns = Counter(n for _, n in items if n)
    return {"kind": kinds.most_common(), "noun": nouns.most_common()}


# -- timeline ----------------------------------------------------------------------------------


def timeline_page(data: dict[str, Any], out: Path) -> bytes:
    """The timeline page of a ``spotdiff.timeline`` dict. out: the report folder (pictures are
    read there for their sizes, and the source video is linked relative to it)."""
    rois = _rois(data.get("settings", {}))
    sources = [_source(i, s, rois, out) for i, s in enumerate(data["sources"], 1)]
    events = [e for s in sources for e in s["events"]]
    summary = summarise([(".", data)])
    return _render(
        "timeline.html.j2",
        summary=[
            {"name": s.name, "claims": paragraph_parts(s.claims, lambda r: f"#{r.anchor}")}
            for s in summary.sources
            if s.claims
        ],
        # The totals sum the paragraphs above, whose links they would repeat (ambiguously: two
        # sources both have a #1).
        overall=[
            {**part, "links": [], "more": 0}
            for part in paragraph_parts(summary.overall, lambda r: f"#{r.anchor}")
        ],
        complete=data["complete"],
        sources=sources,
        chips=_chips([(e["kind"], e["noun"]) for e in events]),
        total=len(events),
        overlays=any(e["halves"] and (e["halves"]["roi"] or e["halves"]["later"]) for e in events),
    )


def _rois(settings: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    from ..errors import UsageError
    from ..timeline.regions import parse_roi

    boxes = []
    for text in (settings.get("video") or {}).get("roi") or []:
        try:
            boxes.append(parse_roi(str(text)))
        except UsageError:  # a hand-edited report being resumed: draw what can be read
            continue
    return boxes


def _video_url(source: dict[str, Any], out: Path) -> str | None:
    """The source video as a link from the report folder: relative when it can be (the folder
    and the footage move together), else a file:// URL; None for folders and streams."""
    path = source.get("path", source["source"])
    if (source.get("info") or {}).get("kind") != "video" or not os.path.isfile(path):
        return None
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(out))
    except ValueError:  # another drive (Windows): no relative path exists
        return Path(os.path.abspath(path)).as_uri()
    return quote(Path(rel).as_posix())


def unplayable_reason(path: str, info: dict[str, Any]) -> str | None:
    """Why a browser cannot play this video file (None: it can), from its extension and, when
    the source info names it, its codec (``info["codec"]``, as ffmpeg or a FourCC names it)."""
    suffix = Path(path).suffix.lower()
    if suffix not in BROWSER_CONTAINERS:
        kind = suffix[1:].upper() or "this kind of"
        return f"browsers play MP4, WebM and Ogg video, not {kind} files"
    codec = str(info.get("codec") or "").strip().lower()
    if codec and codec not in BROWSER_CODECS:
        return (
            f"its video is {codec}; browsers play H.264, VP8, VP9, AV1 and Theora "
            f"(re-encode it: ffmpeg -i {Path(path).name} -c:v libx264 out.mp4)"
        )
    return None


def _source(index: int, s: dict[str, Any], rois: list, out: Path) -> dict[str, Any]:
    info = s.get("info") or {}
    raw = s["events"]
    t0 = min([0.0, *(e["start"] for e in raw)])
    t1 = max(
        [
            info.get("duration") or 0.0,
            s.get("processed_until") or 0.0,
            *(e["end"] for e in raw),
        ]
    )
    t1 = t1 if t1 > t0 else t0 + 1.0
    video = _video_url(s, out)
    name = Path(s["source"]).name or s["source"]
    # A file the browser cannot play: a note linking it, and plain times instead of jumps.
    unplayable = unplayable_reason(s.get("path", s["source"]), info) if video else None
    player = video if unplayable is None else None
    elsewhere = name if unplayable else None
    events = [_event(index, e, info, rois, out, player, elsewhere) for e in raw]
    for e in events:
        e["card"] = _card(json.dumps(e, sort_keys=True))
    _place_on_axis(events, t0, t1)
    return {
        "index": index,
        "name": name,
        "path": s.get("path", s["source"]),
        "skipped": bool(s["error"] and not raw and s["complete"]),
        "error": s["error"],
        "warnings": s.get("warnings", []),
        "video": player,
        "unplayable": {"url": video, "why": unplayable} if unplayable else None,
        "axis": {"t0": t0, "t1": t1, "ticks": _ticks(t0, t1)},
        "lanes": max([1, *(e["lane"] + 1 for e in events)]),
        "events": events,
        "stats": f"{s['samples']} samples, {s['pairs_analysed']} pairs analysed in full, "
        f"{s['seconds']:.1f} s",
    }


def _event(
    index: int,
    e: dict[str, Any],
    info: dict[str, Any],
    rois: list,
    out: Path,
    video: str | None,
    elsewhere: str | None = None,
) -> dict[str, Any]:
    """One event card's data. video: the player's URL (None: no player on the page);
    elsewhere: the name of a video the browser cannot play, whose times the card gives as text
    to look up in a player."""
    said = e.get("sentences") or [
        {"start": e["start"], "start_tc": e["start_tc"], "text": e["text"], "kind": e["kind"]}
    ]
    return {
        "anchor": f"s{index}-e{e['id']}",
        "id": e["id"],
        "kind": e["kind"],
        "noun": e["noun"] or "",
        "text": e["text"],
        # What the page's search box matches, words only: no model in the browser.
        "words": search_words(e),
        "span": time_span(e, "–"),
        "frames": frame_span(e, "–"),
        "start": e["start"],
        "end": e["end"],
        "sentences": [
            {"t": x["start"], "tc": x["start_tc"], "text": x["text"], "kind": x["kind"]}
            for x in said
        ],
        "pair_times": {k: format_timecode(t, millis=True) for k, t in e["pair_times"].items()}
        if e.get("pair_times")
        else None,
        "picture": quote(e["picture"]) if e["picture"] else None,
        "clip": quote(e["clip"]) if e.get("clip") else None,
        "halves": _halves(e, info, rois, out),
        "video": video,
        "player": f"v{index}" if video else None,
        "elsewhere": elsewhere,
    }


@functools.lru_cache(maxsize=8192)
def _card(event: str) -> Any:
    """An event's card (markup), from its view as JSON. Cached: a run rewrites the page every
    few seconds, and escaping every card again cost 0.6 ms an event, most of a rewrite."""
    import markupsafe

    html = _environment().get_template("_event.html.j2").render(e=json.loads(event))
    return markupsafe.Markup(html)


def _halves(
    e: dict[str, Any], info: dict[str, Any], rois: list, out: Path
) -> dict[str, Any] | None:
    """How to show an event picture (before | gap | after, boxes drawn, at the analysed size)
    as two pictures, with the watched region and the later boxes of the event drawn over them in
    the picture's pixels. None when the picture is missing (the page links it instead)."""
    if not e["picture"]:
        return None
    path = out / e["picture"]
    try:
        stat = path.stat()
    except OSError:
        return None
    size = _picture_size(str(path), stat.st_mtime_ns, stat.st_size)
    if size is None:
        return None
    full_width, height = size
    width = (full_width - PAIR_GAP) // 2
    if width <= 0:
        return None
    # Boxes and regions are in source pixels; the picture is at the analysed size.
    scale = width / info["width"] if info.get("width") else None

    def scaled(box: list | tuple) -> list[float]:
        return [round(v * scale, 1) for v in box] if scale else []

    return {
        "width": width,
        "height": height,
        # The after half's share of the whole picture's width, for the CSS that shows one half.
        "zoom": round(100 * full_width / width, 4),
        "roi": [scaled(b) for b in rois] if scale else [],
        # boxes[0] is already drawn in the picture (its sentence's number); the rest are where
        # the change was seen later in the event (a car driving off, a door closing).
        # A tracked object's path is drawn in the picture itself (first and last box, the way
        # between): its many boxes would only hide it.
        "later": [scaled(b) for b in e["boxes"][1:]] if scale and not e.get("track") else [],
    }


@functools.lru_cache(maxsize=65536)
def _picture_size(path: str, mtime_ns: int, size: int) -> tuple[int, int] | None:
    """(width, height) of a picture, from its header; cached by file version, since a run
    rewrites the page after every update and the pictures already written do not change."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.size
    except (OSError, UnidentifiedImageError):
        return None


def _place_on_axis(events: list[dict[str, Any]], t0: float, t1: float) -> None:
    """Each event's left and width on the axis (percent) and its row: overlapping events go
    on separate rows, so each mark stays visible and clickable."""
    span = t1 - t0
    ends: list[float] = []
    for e in sorted(events, key=lambda x: (x["start"], x["id"])):
        left = 100 * (e["start"] - t0) / span
        width = max(MIN_MARK, 100 * (e["end"] - e["start"]) / span)
        left = min(left, 100 - width)
        lane = next((i for i, end in enumerate(ends) if end <= left), None)
        if lane is None and len(ends) < MAX_LANES:
            lane = len(ends)
            ends.append(0.0)
        elif lane is None:  # all rows taken: share the one that frees first
            lane = ends.index(min(ends))
        ends[lane] = left + width
        e.update(left=left, width=width, lane=lane)


def _ticks(t0: float, t1: float) -> list[dict[str, Any]]:
    """About six round times along the axis, labelled m:ss or h:mm:ss."""
    span = t1 - t0
    steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
    step = next((s for s in steps if span / s <= 6), steps[-1] * math.ceil(span / steps[-1] / 6))
    ticks = []
    t = math.ceil(t0 / step) * step
    while t <= t1 + 1e-9:
        left = 100 * (t - t0) / span
        # Labels at the ends align inwards, so none is cut off at the axis's edges.
        align = "start" if left < 5 else "end" if left > 92 else "mid"
        ticks.append({"left": left, "label": _clock(t), "align": align})
        t += step
    return ticks


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    h, rest = divmod(abs(whole), 3600)
    m, s = divmod(rest, 60)
    sign = "-" if whole < 0 else ""
    return f"{sign}{h}:{m:02d}:{s:02d}" if h else f"{sign}{m}:{s:02d}"


# -- caption report ----------------------------------------------------------------------------


def _data_uri(image: np.ndarray, fmt: str) -> str:
    """(H, W, 3) uint8 RGB -> a data: URI (JPEG for photos, PNG for the flat-coloured mask)."""
    params = [cv2.IMWRITE_JPEG_QUALITY, 88] if fmt == "jpeg" else []
    ok, buf = cv2.imencode(f".{fmt.replace('jpeg', 'jpg')}", image[:, :, ::-1], params)
    if not ok:
        raise OutputError(f"could not encode a {fmt.upper()} image")
    return f"data:image/{fmt};base64,{base64.b64encode(buf.tobytes()).decode()}"


def caption_page(data: dict[str, Any], report: Report) -> bytes:
    """The caption report: the sentences, before and after side by side (stacked on a phone)
    with each described change boxed and numbered like its sentence, drawn over the pictures
    so the boxes scale with them and can be hidden; the change mask and measurements below."""
    a = report.analysis
    before = report.original.before.pixels if report.original else a.pair.before.pixels
    after = report.original.after.pixels if report.original else a.pair.after.pixels
    numbers = cluster_numbers(report)
    sentences = []
    for s in data["sentences"]:
        noun = (s.get("details") or {}).get("noun") or ""
        r, g, b = PALETTE[(s["number"] - 1) % len(PALETTE)]
        sentences.append({**s, "noun": str(noun), "colour": f"#{r:02x}{g:02x}{b:02x}"})
    by_number = {s["number"]: s for s in sentences}
    boxes = []
    for cluster in a.clusters:
        number = numbers.get(cluster.id)
        if number is None:
            continue
        boxes.append(
            {
                "sentence": by_number[number],
                "before": scale_box(cluster.bbox, a.scale),
                # Where the object is in the after image as given (the alignment undone).
                "after": scale_box(box_in_after(cluster.bbox, a), a.scale),
            }
        )
    return _render(
        "caption.html.j2",
        data=data,
        sentences=sentences,
        boxes=boxes,
        chips=_chips([(s["kind"], s["noun"]) for s in sentences]),
        before={"src": _data_uri(before, "jpeg"), "w": before.shape[1], "h": before.shape[0]},
        after={"src": _data_uri(after, "jpeg"), "w": after.shape[1], "h": after.shape[0]},
        mask=_data_uri(mask_image(report), "png"),
        title=Path(data["inputs"]["after"]["path"]).name,
    )
