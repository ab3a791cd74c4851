"""Event clips (``spotdiff video --clips``): each event of a video source cut into its own file
under ``clips/``, with the ffmpeg binary spotdiff already uses (imageio-ffmpeg's, unless
``$SPOTDIFF_FFMPEG`` or PATH has one).

A clip covers the event's interval (``--pad-before`` / ``--pad-after`` included) and, for a
change seen in one sample only, the sample before it too: the change happened between the two,
and an interval of one instant would be an empty clip.

**Stream copy first** (no quality loss, about as fast as copying the bytes): a copied clip can
only start on a keyframe, so it starts at the last keyframe at or before the interval, at most
:data:`MAX_LEAD_SECONDS` early (one GOP of most camera and web video; DVR-Scan's copy mode
accepts the same). When the nearest keyframe is further back (a long-GOP "smart codec"
recording), or the copy fails (a container that cannot take the stream), the clip is
**re-encoded** (H.264 in MP4, cut on the exact frame). A clip that cannot be made either way is
a warning on its source, and the run keeps its events.

**Overlapping events share one clip**, as DVR-Scan merges its padded events: when padding makes
intervals overlap (or touch), one clip covers them all and each of those events names it, so
the clips never hold the same footage twice (on the motorway clip with 1.5 s / 2 s of padding,
3 clips instead of 8 that added up to twice the source).
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..errors import UsageError
from ..frames.video import find_ffmpeg
from ..types import Event
from .timeline import CLIPS_DIR, source_stem

# How far before its interval a stream-copied clip may start (at the previous keyframe).
MAX_LEAD_SECONDS = 5.0
# Containers a stream copy keeps the source's extension in; anything else goes into Matroska,
# which holds nearly every codec.
_COPY_SUFFIXES = {".mp4", ".m4v", ".mov", ".mkv", ".avi", ".webm", ".ts", ".mts", ".flv"}
_PTS = re.compile(r"pts_time:\s*(-?[\d.]+)")

Method = Literal["copy", "encode"]


def require_ffmpeg() -> str:
    """The ffmpeg binary, or a one-line UsageError saying how to get one (checked before a run,
    not after an hour of analysis)."""
    ffmpeg = find_ffmpeg()
    if ffmpeg is None:
        raise UsageError(
            "--clips needs ffmpeg: pip install imageio-ffmpeg, put ffmpeg on PATH or set $SPOTDIFF_FFMPEG"
        )
    return ffmpeg


def keyframe_times(ffmpeg: str, video: str | Path) -> list[float]:
    """Presentation times (s, from the start of the file) of the video's keyframes: ffmpeg
    decodes only keyframes (``-skip_frame nokey``) and ``showinfo`` prints their times."""
    proc = subprocess.run(
        [
            ffmpeg,
            "-hide_banner",
            "-nostdin",
            "-skip_frame",
            "nokey",
            "-i",
            str(video),
            "-map",
            "0:v:0",
            "-vf",
            "showinfo",
            "-f",
            "null",
            "-",
        ],
        capture_output=True,
        text=True,
        errors="replace",
    )
    return sorted(float(t) for t in _PTS.findall(proc.stderr))


def clip_span(event: Event, duration: float | None, fps: float | None) -> tuple[float, float]:
    """(start, end) in seconds of the clip of ``event`` (see the module docstring)."""
    start = max(0.0, min(event.start, event.frames[0]))
    frame = 1.0 / fps if fps else 0.04
    end = event.end + frame  # the end frame itself, shown for its duration
    if duration:
        end = min(end, duration)
    return start, max(end, start + frame)


def clip_groups(
    events: list[Event], duration: float | None, fps: float | None
) -> list[list[Event]]:
    """Events whose clip spans overlap or touch, in groups (by start): one clip each."""
    groups: list[list[Event]] = []
    group_end = float("-inf")
    for event in sorted(events, key=lambda e: (clip_span(e, duration, fps)[0], e.id)):
        start, end = clip_span(event, duration, fps)
        if groups and start <= group_end + 1e-6:
            groups[-1].append(event)
            group_end = max(group_end, end)
        else:
            groups.append([event])
            group_end = end
    return groups


def cut_clip(
    ffmpeg: str,
    video: str | Path,
    start: float,
    end: float,
    dest_stem: Path,
    keyframes: list[float],
) -> tuple[Path, Method]:
    """Cut [start, end) of ``video`` to ``dest_stem`` + an extension; return the file written
    and how. Raises OSError / CalledProcessError-derived RuntimeError when neither way works."""
    lead = [k for k in keyframes if k <= start + 1e-3]
    suffix = Path(video).suffix.lower()
    # Names hold dots ("cam.mp4-1a2b3c4d-event-0001"): add the extension, never with_suffix.
    if lead and start - lead[-1] <= MAX_LEAD_SECONDS:
        copy_to = Path(f"{dest_stem}{suffix if suffix in _COPY_SUFFIXES else '.mkv'}")
        at = lead[-1]
        copied = _run(
            ffmpeg,
            ["-ss", f"{at:.3f}", "-i", str(video), "-t", f"{end - at:.3f}"],
            ["-map", "0:v:0", "-map", "0:a?", "-c", "copy", "-avoid_negative_ts", "make_zero"],
            copy_to,
        )
        if copied is None:
            return copy_to, "copy"
    encode_to = Path(f"{dest_stem}.mp4")
    for codec in (
        ["-c:v", "libx264", "-preset", "veryfast", "-crf", "20"],
        ["-c:v", "mpeg4", "-q:v", "3"],
    ):
        why = _run(
            ffmpeg,
            ["-ss", f"{start:.3f}", "-i", str(video), "-t", f"{end - start:.3f}"],
            ["-map", "0:v:0", "-map", "0:a?", *codec, "-pix_fmt", "yuv420p", "-c:a", "aac"],
            encode_to,
        )
        if why is None:
            return encode_to, "encode"
    raise RuntimeError(why or "ffmpeg failed")


def _run(ffmpeg: str, inputs: list[str], outputs: list[str], dest: Path) -> str | None:
    """Run one ffmpeg cut into a temporary file beside ``dest`` and rename it over ``dest``
    (a clip is never half-written); return None, or ffmpeg's last error line."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp{dest.suffix}")
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", *inputs, *outputs, str(tmp)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            return lines[-1] if lines else f"ffmpeg exited with {proc.returncode}"
        os.replace(tmp, dest)
        return None
    finally:
        tmp.unlink(missing_ok=True)


def write_event_clips(
    out_dir: str | Path,
    result: Any,
    *,
    ffmpeg: str | None = None,
    on_clip: Callable[[Event, Method], None] | None = None,
) -> Any:
    """Cut a clip for every event of ``result`` (a ``timeline.pipeline.SourceResult``) that has
    none yet; return the result with each event's ``clip`` set (a path relative to
    ``out_dir``) and a warning for each clip that could not be made. A folder of images has
    no video to cut: one warning. ``on_clip`` hears of each clip made (and how)."""
    groups = clip_groups(result.events, result.info.get("duration"), result.info.get("fps"))
    todo = [g for g in groups if not all(e.clip and (Path(out_dir) / e.clip).is_file() for e in g)]
    if not todo:
        return result
    warnings = list(result.warnings)
    if result.info.get("kind") != "video":
        note = f"{result.source}: --clips cuts videos; this is a {result.info.get('kind') or 'source'} of images, so it has no clips"
        if note not in warnings:
            warnings.append(note)
        return dataclasses.replace(result, warnings=warnings)
    ffmpeg = ffmpeg or require_ffmpeg()
    keyframes = keyframe_times(ffmpeg, result.source)
    stem = source_stem(result.source)
    clips_dir = Path(out_dir) / CLIPS_DIR
    done: dict[int, Event] = {}
    for group in todo:
        spans = [clip_span(e, result.info.get("duration"), result.info.get("fps")) for e in group]
        start, end = min(a for a, _ in spans), max(b for _, b in spans)
        first, last = group[0].id, group[-1].id
        name = f"event-{first:04d}" if len(group) == 1 else f"events-{first:04d}-{last:04d}"
        try:
            path, method = cut_clip(
                ffmpeg, result.source, start, end, clips_dir / f"{stem}-{name}", keyframes
            )
        except (OSError, RuntimeError) as exc:
            ids = ", ".join(str(e.id) for e in group)
            warnings.append(f"{result.source}: no clip for event {ids} ({exc})")
            continue
        for event in group:
            done[event.id] = dataclasses.replace(event, clip=f"{CLIPS_DIR}/{path.name}")
        if on_clip is not None:
            on_clip(done[group[0].id], method)
    events = [done.get(e.id, e) for e in result.events]
    return dataclasses.replace(result, events=events, warnings=warnings)
