"""The events as an editor imports them (report/editors.py): a CMX 3600 EDL, written by hand and
read back with OpenTimelineIO's own CMX 3600 reader where it is installed, and an OTIO file
(opentimelineio, an optional import; its tests skip without it, and without it the .otio is
skipped with the reason). The timeline comes from the installed console script (``--json``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import cv2
import pytest
from conftest import draw_box, textured_background
from console import run_spotdiff

from spotdiff_cli.report.editors import (
    edl_rate,
    skipped_formats,
    timecode,
    write_editor_timelines,
    write_edl,
)

RED = (220, 40, 40)
EDIT = re.compile(
    r"^(\d{3})  AX       V     C        "
    r"(\d\d:\d\d:\d\d:\d\d) (\d\d:\d\d:\d\d:\d\d) (\d\d:\d\d:\d\d:\d\d) (\d\d:\d\d:\d\d:\d\d)$"
)


def frames(tc: str, base: int) -> int:
    h, m, s, f = (int(x) for x in tc.split(":"))
    return ((h * 60 + m) * 60 + s) * base + f


@pytest.fixture(scope="module")
def timeline(tmp_path_factory) -> dict:
    """10 s at 10 fps: a red box visits the lower right from 2.0 s to 6.9 s; a blue one appears
    at 8.0 s and stays (seen in one sample at --every 1s: an event 8.0-8.0 s)."""
    d = tmp_path_factory.mktemp("editors")
    background = textured_background(240, 320)
    clip = d / "cam.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    for i in range(100):
        image = background
        if 20 <= i < 70:
            image = draw_box(image, 200, 150, 50, 40, RED)
        if i >= 80:
            image = draw_box(image, 30, 20, 50, 40, (40, 60, 220))
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    proc = run_spotdiff("video", clip, "--every", "1s", "--no-recognise", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [(e["start"], e["end"]) for e in data["sources"][0]["events"]] == [
        (2.0, 7.0),
        (8.0, 8.0),
    ]
    return data


def test_the_edl_has_a_cut_per_event_at_its_source_times_back_to_back(timeline, tmp_path):
    written = write_editor_timelines(tmp_path, timeline)
    assert tmp_path / "timeline.edl" in written
    text = (tmp_path / "timeline.edl").read_bytes().decode("utf-8")
    lines = text.split("\r\n")
    assert lines[0] == "TITLE: spotdiff events cam.avi" and lines[1] == "FCM: NON-DROP FRAME"
    cuts = [EDIT.match(x).groups() for x in lines if EDIT.match(x)]
    events = timeline["sources"][0]["events"]
    assert len(cuts) == len(events) == 2
    # 10 fps is no timecode rate: counted at 30, three timecode frames a source frame.
    record = frames("01:00:00:00", 30)
    for i, ((number, src_in, src_out, rec_in, rec_out), e) in enumerate(zip(cuts, events), 1):
        assert number == f"{i:03d}"
        assert frames(src_in, 30) == round(e["start"] * 30)
        assert frames(rec_in, 30) == record  # back to back from 01:00:00:00
        assert frames(rec_out, 30) - frames(rec_in, 30) == frames(src_out, 30) - frames(src_in, 30)
        record = frames(rec_out, 30)
    # The event's last frame is in the cut; one seen in a single sample is held 2 s, but not
    # past the clip's end.
    assert cuts[0][1:3] == ("00:00:02:00", "00:00:07:03")
    assert cuts[1][1:3] == ("00:00:08:00", "00:00:10:00")
    assert f"* COMMENT: #1 visited: {events[0]['text']}" in lines
    assert "* FROM CLIP NAME: cam.avi" in lines
    assert f"* SOURCE FILE: {timeline['sources'][0]['path']}" in lines


def test_opentimelineio_reads_the_edl_back_to_the_same_cuts(timeline, tmp_path):
    otio = pytest.importorskip("opentimelineio")
    if "cmx_3600" not in [a.name for a in otio.plugins.ActiveManifest().adapters]:
        pytest.skip("needs OTIO's CMX 3600 adapter: pip install otio-cmx3600-adapter")
    write_editor_timelines(tmp_path, timeline)
    read = otio.adapters.read_from_file(str(tmp_path / "timeline.edl"), rate=30)
    clips = list(read.tracks[0])
    events = timeline["sources"][0]["events"]
    assert [c.name for c in clips] == ["cam.avi", "cam.avi"]
    assert [c.source_range.start_time.to_seconds() for c in clips] == [2.0, 8.0]
    assert [c.source_range.duration.to_seconds() for c in clips] == [5.1, 2.0]
    assert [m.name for c in clips for m in c.markers] == [f"#{e['id']} {e['kind']}" for e in events]


def test_the_otio_file_references_the_source_and_keeps_each_event(timeline, tmp_path):
    otio = pytest.importorskip("opentimelineio")
    written = write_editor_timelines(tmp_path, timeline)
    assert tmp_path / "timeline.otio" in written and skipped_formats() == {}
    read = otio.adapters.read_from_file(str(tmp_path / "timeline.otio"))
    source = timeline["sources"][0]
    events = source["events"]
    assert read.global_start_time.to_timecode() == "01:00:00:00"
    clips = list(read.tracks[0])
    assert [c.metadata["spotdiff"]["event"] for c in clips] == [e["id"] for e in events]
    assert [c.metadata["spotdiff"]["text"] for c in clips] == [e["text"] for e in events]
    assert [c.source_range.start_time.to_seconds() for c in clips] == [2.0, 8.0]
    assert [c.source_range.duration.to_seconds() for c in clips] == [5.1, 2.0]
    assert {c.media_reference.target_url for c in clips} == {Path(source["path"]).as_uri()}
    assert clips[0].media_reference.available_range.duration.to_seconds() == 10.0
    assert [m.name for c in clips for m in c.markers] == [f"#{e['id']} {e['kind']}" for e in events]


def test_without_opentimelineio_the_edl_is_written_and_the_otio_skipped_with_the_reason(
    timeline, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "opentimelineio", None)  # import fails as if not installed
    assert write_editor_timelines(tmp_path, timeline) == [tmp_path / "timeline.edl"]
    assert skipped_formats() == {"otio": "needs opentimelineio: pip install opentimelineio"}


def test_several_sources_get_a_file_each_named_as_their_subtitles(timeline, tmp_path):
    from spotdiff_cli.report.timeline import subtitle_names

    other = json.loads(json.dumps(timeline["sources"][0]))
    other["source"] = other["path"] = "/elsewhere/cam.avi"
    skipped = {**other, "source": "missing.mp4", "path": "missing.mp4", "events": []}
    skipped.update(error="missing.mp4: no such file", complete=True)
    data = {**timeline, "sources": [timeline["sources"][0], other, skipped]}
    written = write_editor_timelines(tmp_path, data)
    edl = subtitle_names(data, "edl")
    assert sorted(p.name for p in written if p.suffix == ".edl") == sorted(edl.values())
    assert len(edl) == 2 and all(n.startswith("timeline-cam.avi-") for n in edl.values())


@pytest.mark.parametrize(
    "fps, rate, base",
    [(25.0, 25.0, 25), (29.97002997, 30000 / 1001, 30), (23.976, 24000 / 1001, 24),
     (60.0, 60.0, 60), (12.5, 25.0, 25), (10.0, 30.0, 30), (15.0, 30.0, 30), (7.3, 25.0, 25),
     (None, 25.0, 25)],
)  # fmt: skip
def test_timecodes_count_whole_frames_at_a_rate_editors_know(fps, rate, base):
    assert edl_rate(fps) == pytest.approx((rate, base))
    assert timecode(3600 * base + 61 * base + 3, base) == "01:01:01:03"


def test_a_12_5_fps_clip_is_timed_at_25_and_names_with_line_ends_stay_one_line():
    event = {
        "id": 1, "start": 1.04, "end": 1.04, "kind": "appeared", "text": "a car\nappeared",
        "sentences": [],
    }  # fmt: skip
    source = {"source": "/x/a\nb.mp4", "info": {"fps": 12.5, "duration": 30.0}, "events": [event]}
    lines = write_edl(source).decode().split("\r\n")
    cut = next(EDIT.match(x) for x in lines if EDIT.match(x))
    assert cut.group(2) == "00:00:01:01" and cut.group(3) == "00:00:03:01"  # 1.04 s at 25
    assert "* COMMENT: #1 appeared: a car appeared" in lines
    assert "* FROM CLIP NAME: a b.mp4" in lines


def test_video_out_writes_the_edit_lists_beside_the_subtitles(timeline, tmp_path):
    clip = timeline["sources"][0]["path"]
    proc = run_spotdiff("video", clip, "--every", "1s", "--no-recognise", "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r" / "timeline.edl").is_file()
    assert "edit lists (.edl" in proc.stdout
