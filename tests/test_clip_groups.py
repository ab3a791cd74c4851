"""Padded events that overlap share one clip (DVR-Scan merges them too), so the clips of a
report never hold the same footage twice."""

from __future__ import annotations

import json

from conftest import media
from console import run_spotdiff

from spotdiff_cli.report.clips import clip_groups
from spotdiff_cli.types import Event


def event(i: int, start: float, end: float) -> Event:
    return Event(i, "cam.mp4", start, end, "x", "appeared", "", (), (start, start))


def test_overlapping_and_touching_spans_make_one_group_and_gaps_split_them():
    events = [event(1, 0.0, 2.0), event(2, 1.5, 4.0), event(3, 4.0, 5.0), event(4, 9.0, 10.0)]
    groups = clip_groups(events, duration=20.0, fps=25.0)
    assert [[e.id for e in g] for g in groups] == [[1, 2, 3], [4]]


def test_motorway_padded_clips_do_not_repeat_footage(tmp_path):
    """The README's DVR-Scan-style command: 3 clips, not 8 that add up to twice the source."""
    source = media("dvrscan_traffic_camera.mp4")  # skips when ../shared is absent
    out = tmp_path / "report"
    proc = run_spotdiff(
        "video", source, "--every", "1f", "--roi", "631,532,210,127",
        "--pad-before", "1.5s", "--pad-after", "2s", "--clips", "--out", out, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = json.loads((out / "timeline.json").read_text())["sources"][0]["events"]
    clips = sorted({e["clip"] for e in events})
    assert len(clips) < len(events)
    assert all((out / c).is_file() for c in clips)
    assert sorted(p.name for p in (out / "clips").iterdir()) == [c.split("/")[1] for c in clips]
