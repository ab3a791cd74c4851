"""The README's examples do what the README says they do, run as a reader copies them, on the
footage they were written for (../shared/media; skipped without it)."""

from __future__ import annotations

import json
import shlex

from conftest import media
from console import REPO, run_spotdiff

README = REPO / "README.md"
# dvrscan_traffic_camera.expected.txt: DVR-Scan's events for the region 631,532,210,127.
MOTORWAY_TRUTH = [(0.4, 5.92), (14.36, 19.6), (21.72, 23.0)]


def readme_command(needle: str) -> list[str]:
    """The arguments after ``spotdiff`` of the README's example line holding ``needle``."""
    lines = [
        x for x in README.read_text().splitlines() if x.startswith("spotdiff ") and needle in x
    ]
    assert len(lines) == 1, lines
    return shlex.split(lines[0], comments=True)[1:]


def test_the_readme_roi_example_finds_the_motorway_cars_where_dvr_scan_does():
    """The watched-region example was `--every 1s`: its first event came at 3.0 s though the
    ground truth starts at 0.4 s, since a car crosses the region between two samples."""
    clip = media("dvrscan_traffic_camera.mp4")
    args = [str(clip) if a == "cam.mp4" else a for a in readme_command("--roi 631,532,210,127")]
    proc = run_spotdiff(*args, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(proc.stdout)["sources"][0]["events"]
    starts = [e["start"] for e in events]
    assert abs(starts[0] - 0.4) < 0.1, starts  # where the ground truth starts
    for start, _ in MOTORWAY_TRUTH:  # each interval found, within 0.3 s of its start
        assert any(abs(s - start) <= 0.3 for s in starts), (start, starts)
    for e in events:  # and nothing outside them
        assert any(a - 0.2 <= e["start"] and e["end"] <= b + 0.2 for a, b in MOTORWAY_TRUTH), e
    assert len(events) >= 6, starts  # most cars, not one in three
