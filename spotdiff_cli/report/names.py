"""What the files a report writes per source are called: the source's full path, a file-name
stem that tells two ``cam.mp4`` in different folders apart, and the per-source names of the
subtitles and edit lists (shared by report.timeline, report.editors, report.clips)."""

from __future__ import annotations

import glob
import hashlib
import os
import re
from pathlib import Path
from typing import Any


def source_path(source: str) -> str:
    """The full path of a source as the user named it (a glob stays a pattern, made absolute)."""
    if os.path.exists(source) or glob.has_magic(source):
        return os.path.abspath(source)
    return source


def source_stem(source: str) -> str:
    """A file-name stem for what is written per source: its name and 8 hex digits of the hash
    of its full path (two ``cam.mp4`` in different folders get different stems)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(source).name)[:60] or "source"
    digest = hashlib.sha1(source_path(source).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{slug}-{digest[:8]}"


def subtitle_names(data: dict[str, Any], fmt: str, several: bool | None = None) -> dict[str, str]:
    """Source name -> subtitle file name: ``timeline.<fmt>`` for a run over one source,
    ``timeline-<name>-<hash>.<fmt>`` per source when there are several (``several``: whether
    the run has several sources; a partial report may not list them all yet)."""
    shown = [s for s in data["sources"] if not (s["error"] and not s["events"] and s["complete"])]
    if several is None:
        several = len(data["sources"]) > 1
    if not several:
        return {s["source"]: f"timeline.{fmt}" for s in shown}
    return {s["source"]: f"timeline-{source_stem(s['source'])}.{fmt}" for s in shown}
