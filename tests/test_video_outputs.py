"""What a DVR-Scan or PySceneDetect user expects of ``spotdiff video``'s events and files: events as
intervals (padding, a minimum length, a visit as one event, numbers in time order), HH:MM:SS.mmm
with frame numbers everywhere, the named CSV columns, full paths, pictures that never overwrite
each other, clips, subtitles, schema v2 with ``--resume`` still reading v1, and folders timed by
their file names.

Synthetic clips are 320x240 MJPG at 10 fps, 10 s, over a textured background, so every time
below follows from the script:

- visit: a red box in the lower right from 2.0 s to 6.9 s (gone at 7.0 s);
- crossing: a red box in the lower right from 1.0 s to 5.9 s, and a blue box in the upper left
  from 3.0 s to 3.9 s (it comes and goes while the first is still there);
- parked: a red box arrives in the lower right at 3.0 s and stays.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
from pathlib import Path

import cv2
import pytest
from conftest import draw_box, textured_background
from console import one_error_line, run_spotdiff
from typer.testing import CliRunner

from spotdiff_cli.cli import app
from spotdiff_cli.report.clips import cut_clip, keyframe_times
from spotdiff_cli.timeline.events import EventBuilder
from spotdiff_cli.types import Detection, Sentence

runner = CliRunner()
RED, BLUE = (220, 40, 40), (40, 60, 220)
LOWER_RIGHT = (200, 150, 50, 40)
UPPER_LEFT = (30, 20, 50, 40)
TIMECODE = re.compile(r"^\d\d:\d\d:\d\d\.\d\d\d$")
CSV_HEADER = [
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


def write_clip(path: Path, boxes, frames: int = 100, fps: int = 10) -> Path:
    background = textured_background(240, 320, seed=7)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (320, 240))
    assert writer.isOpened()
    for i in range(frames):
        image = background
        for box, colour in boxes(i):
            image = draw_box(image, *box, colour)
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def _visit(i: int):
    return [(LOWER_RIGHT, RED)] if 20 <= i < 70 else []


def _crossing(i: int):
    boxes = [(LOWER_RIGHT, RED)] if 10 <= i < 60 else []
    return boxes + ([(UPPER_LEFT, BLUE)] if 30 <= i < 40 else [])


def _parked(i: int):
    return [(LOWER_RIGHT, RED)] if i >= 30 else []


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("outputs")
    return {
        "visit": write_clip(d / "visit.avi", _visit),
        "crossing": write_clip(d / "crossing.avi", _crossing),
        "parked": write_clip(d / "parked.avi", _parked),
    }


def run(*args):
    return runner.invoke(app, ["video", *[str(a) for a in args], "--no-recognise"])


def timeline(*args) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def events(data: dict, source: int = 0) -> list[dict]:
    return data["sources"][source]["events"]


# -- events as intervals ------------------------------------------------------------------------


def test_numbers_follow_start_times_when_a_later_event_ends_first(clips, tmp_path):
    out = tmp_path / "run"
    result = run(clips["crossing"], "--every", "1s", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "timeline.json").read_text())
    found = [(e["id"], e["start"], e["end"], e["kind"]) for e in events(data)]
    # The blue box's visit (3-4 s) is over long before the red one's (1-6 s), yet is number 2.
    assert found == [(1, 1.0, 6.0, "visited"), (2, 3.0, 4.0, "visited")]
    rows = list(csv.DictReader(io.StringIO((out / "timeline.csv").read_text())))
    assert [r["Event Number"] for r in rows] == ["1", "2"]
    md = (out / "timeline.md").read_text()
    assert md.index("| 1 | 00:00:01.000") < md.index("| 2 | 00:00:03.000")
    assert sorted(p.name for p in (out / "frames").iterdir() if "thumb" not in p.name) == [
        f"crossing.avi-{_hash(clips['crossing'])}-event-000{i}.jpg" for i in (1, 2)
    ]


def test_a_change_seen_in_consecutive_samples_is_one_event_with_one_sentence(clips):
    data = timeline(clips["parked"], "--every", "0.5s", "--compare", "background")
    [event] = events(data)
    assert (event["start"], event["end"], event["kind"]) == (3.0, 4.5, "appeared")
    assert [(s["start"], s["end"], s["text"]) for s in event["sentences"]] == [
        (3.0, 4.5, "a red object appeared in the lower right")
    ]
    assert event["detections"] == 4


def _detection(t: float, kind: str, box, text: str | None = None) -> Detection:
    return Detection(t, t - 1.0, Sentence(text or f"{kind} at {box}", kind=kind), box, "object")


def test_a_moving_object_split_into_two_clusters_stays_one_event():
    # Sample 2 sees the object twice: gone from where it was, appeared where it is now. Each
    # cluster is compared with every box of the event's latest sample, and a departure may
    # follow an arrival, so nothing splits off.
    builder = EventBuilder("cam.mp4", 640, 480, 0.08, 1)
    assert builder.add(0, [_detection(1.0, "appeared", (100, 100, 40, 40))]) == []
    moved = [
        _detection(2.0, "disappeared", (100, 100, 40, 40)),
        _detection(2.0, "appeared", (150, 100, 40, 40)),
    ]
    assert builder.add(1, moved) == []
    assert builder.add(2, [_detection(3.0, "changed", (180, 100, 40, 40))]) == []
    [event] = builder.finish()
    assert (event.id, event.start, event.end, event.detections) == (1, 1.0, 3.0, 4)


def test_an_untracked_visit_is_told_with_the_noun_its_pairs_agreed_on():
    # A car crossing a small --roi in half a second is never tracked; its first pair showed
    # too little of it to name ("a small grey object appeared"), the pairs after named it.
    def said(t, kind, text, noun):
        return Detection(t, t - 0.2, Sentence(text, kind=kind), (300, 380, 30, 20), noun)

    builder = EventBuilder("cam.mp4", 640, 480, 0.08, 1)
    builder.add(
        0, [said(1.0, "appeared", "a small grey object appeared near the bottom centre", "object")]
    )
    builder.add(1, [said(1.2, "moved", "the small black car near the bottom centre moved", "car")])
    builder.add(2, [said(1.4, "moved", "the small blue car near the bottom centre moved", "car")])
    builder.add(
        3, [said(1.6, "disappeared", "the person near the bottom centre is gone", "person")]
    )
    [event] = builder.finish()
    assert (event.noun, event.kind) == ("car", "visited")
    assert event.text == "a car appeared near the bottom centre and was gone 0.6 s later"
    # What each pair said stays as it was said.
    assert event.sentences[0].text == "a small grey object appeared near the bottom centre"


def test_a_visit_waits_for_its_departure_up_to_max_visit():
    arrival = [_detection(10.0, "appeared", (100, 100, 40, 40))]
    departure = [_detection(70.0, "disappeared", (100, 100, 40, 40))]

    def build(max_visit: float) -> list:
        builder = EventBuilder("cam.mp4", 640, 480, 0.08, 1, max_visit=max_visit)
        found = builder.add(0, arrival, time=10.0)
        for sample, t in enumerate(range(20, 70, 10), start=1):
            found += builder.add(sample, [], time=float(t))
        # An arrival waiting for its departure is not final (no resume checkpoint yet); one
        # that waited longer than max_visit is.
        assert bool(builder.open) == (max_visit >= 60)
        return found + builder.add(6, departure, time=70.0) + builder.finish()

    [visit] = build(max_visit=600)
    assert (visit.start, visit.end, visit.kind) == (10.0, 70.0, "visited")
    assert visit.text.endswith("and was gone 1 min later")
    arrived, left = build(max_visit=30)
    assert (arrived.id, arrived.kind, left.id, left.kind) == (1, "appeared", 2, "disappeared")


def test_pending_events_carry_the_numbers_they_will_finish_with():
    builder = EventBuilder("cam.mp4", 640, 480, 0.08, 1, max_visit=600)
    builder.add(0, [_detection(1.0, "appeared", (400, 300, 40, 40))], time=1.0)
    builder.add(1, [_detection(2.0, "appeared", (10, 10, 40, 40))], time=2.0)
    builder.add(2, [_detection(3.0, "disappeared", (10, 10, 40, 40))], time=3.0)
    builder.add(3, [], time=4.0)
    builder.add(4, [], time=5.0)  # the second visit is over, the first still waits
    # The second is closed but cannot be numbered before the first, which started earlier.
    assert len(builder.open) == 2
    pending = [(e.id, e.start) for e in builder.pending()]
    assert pending == [(1, 1.0), (2, 2.0)]
    final = [(e.id, e.start) for e in builder.finish()]
    assert final == pending


def test_padding_widens_the_interval_within_the_source_and_keeps_what_was_seen(clips):
    data = timeline(
        clips["visit"], "--every", "1s", "--pad-before", "3s", "--pad-after", "00:00:05"
    )
    [event] = events(data)
    # 2.0 - 3 is clipped to the start of the clip, 7.0 + 5 to its last frame (9.9 s).
    assert (event["start"], event["end"]) == (0.0, 9.9)
    assert (event["start_frame"], event["end_frame"], event["length_frames"]) == (0, 99, 99)
    assert event["seen"] == {"start": 2.0, "end": 7.0}
    assert event["pair_times"] == {"before": 1.0, "after": 2.0}


def test_min_length_drops_events_seen_for_less(clips):
    # The parked car is seen once (3.0 s): length 0. The visit is seen from 2 s to 7 s.
    assert len(events(timeline(clips["parked"], "--every", "1s"))) == 1
    assert events(timeline(clips["parked"], "--every", "1s", "--min-length", "0.5s")) == []
    kept = events(timeline(clips["visit"], "--every", "1s", "--min-length", "5s"))
    assert [(e["id"], e["kind"]) for e in kept] == [(1, "visited")]
    assert events(timeline(clips["visit"], "--every", "1s", "--min-length", "51f")) == []


@pytest.mark.parametrize(
    "args,option",
    [
        (["--pad-before", "soon"], "--pad-before"),
        (["--min-length", "-1s"], "--min-length"),
        (["--max-visit", "1x"], "--max-visit"),
        (["--time-pattern", "%Q"], "--time-pattern"),
        (["--fps", "2", "--time-pattern", "%Y%m%d"], "--time-pattern"),
    ],
)
def test_bad_event_and_time_options_are_one_line_usage_errors(clips, args, option):
    result = run(clips["visit"], *args)
    assert result.exit_code == 2, result.output
    assert option in result.output and len(result.output.strip().splitlines()) == 1


class _StopAfter:
    """Stands in for the progress bar and presses Ctrl-C after ``n`` samples of the source
    whose name ends with ``source``."""

    def __init__(self, n: int, source: str) -> None:
        self.n, self.source = n, source

    def update(self, source, position, duration, samples) -> None:
        if source.endswith(self.source) and samples >= self.n:
            raise KeyboardInterrupt


def _interrupt(monkeypatch, stop_after: int, source: str, *args) -> None:
    from spotdiff_cli.cli import render

    with monkeypatch.context() as m:
        m.setattr(
            render,
            "timeline_progress",
            lambda enabled=True: contextlib.nullcontext(_StopAfter(stop_after, source)),
        )
        assert run(*args).exit_code == 130


def _without_runtime(data: dict) -> list[list[dict]]:
    return [
        [{k: v for k, v in e.items() if k != "picture"} for e in s["events"]]
        for s in data["sources"]
    ]


@pytest.mark.parametrize("stop_after", [4, 6])  # mid-visit (both boxes there), after the first
def test_resume_mid_visit_with_padding_gives_the_uninterrupted_events(
    clips, tmp_path, monkeypatch, stop_after
):
    options = ["--every", "1s", "--pad-before", "1s", "--pad-after", "0.5s", "--min-length", "0.5s"]
    full = timeline(clips["crossing"], clips["visit"], *options)
    out = tmp_path / "run"
    _interrupt(
        monkeypatch, stop_after, "crossing.avi", clips["crossing"], clips["visit"], *options,
        "--out", out,
    )  # fmt: skip
    partial = json.loads((out / "timeline.json").read_text())
    assert partial["complete"] is False and partial["sources"][0]["open_events"]
    assert run(clips["crossing"], clips["visit"], "--out", out, "--resume").exit_code == 0
    resumed = json.loads((out / "timeline.json").read_text())
    assert _without_runtime(resumed) == _without_runtime(full)


# -- the files ----------------------------------------------------------------------------------


def _hash(path: Path) -> str:
    import hashlib

    return hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]


def test_every_output_has_timecodes_frame_numbers_and_the_full_path(clips, tmp_path):
    out = tmp_path / "run"
    result = run(clips["visit"], "--every", "1s", "--out", out)
    assert result.exit_code == 0, result.output
    path = str(clips["visit"].resolve())
    data = json.loads((out / "timeline.json").read_text())
    assert data["schema"] == "spotdiff.timeline/2"
    source = data["sources"][0]
    assert source["path"] == path
    [event] = source["events"]
    assert "frames" not in event and event["pair_times"] == {"before": 1.0, "after": 2.0}
    for key in ("start_tc", "end_tc", "length_tc"):
        assert TIMECODE.match(event[key]), event[key]
    assert all(TIMECODE.match(s["start_tc"]) for s in event["sentences"])
    assert (event["start_frame"], event["end_frame"]) == (20, 70)

    rows = list(csv.reader(io.StringIO((out / "timeline.csv").read_text())))
    assert rows[0] == CSV_HEADER
    assert rows[1][:11] == [
        "1",
        "20",
        "00:00:02.000",
        "2.000",
        "70",
        "00:00:07.000",
        "7.000",
        "50",
        "00:00:05.000",
        "5.000",
        path,
    ]
    assert rows[1][11] == "visited" and rows[1][13].startswith("a red object appeared")
    assert rows[1][14] == (
        "00:00:02.000 a red object appeared in the lower right | "
        "00:00:07.000 the red object in the lower right is gone"
    )
    md = (out / "timeline.md").read_text()
    assert path in md and "| 1 | 00:00:02.000–00:00:07.000 | 20–70 |" in md
    assert "<br>· 00:00:07.000 the red object in the lower right is gone" in md
    page = (out / "timeline.html").read_text()
    assert path in page and "00:00:02.000–00:00:07.000" in page and "20–70" in page
    # The terminal table (wide enough not to wrap) says the same.
    assert path in result.stdout and "00:00:02.000–00:00:07.000" in result.stdout
    assert "20–70" in result.stdout


def test_pictures_of_two_sources_with_the_same_name_never_overwrite_each_other(clips, tmp_path):
    one, two = tmp_path / "day1", tmp_path / "day2"
    one.mkdir(), two.mkdir()
    (one / "cam.avi").write_bytes(clips["visit"].read_bytes())
    write_clip(two / "cam.avi", lambda i: [(UPPER_LEFT, BLUE)] if i >= 30 else [])
    out = tmp_path / "run"
    result = run(one / "cam.avi", two / "cam.avi", "--every", "1s", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "timeline.json").read_text())
    pictures = [events(data, i)[0]["picture"] for i in range(2)]
    assert pictures == [
        f"frames/cam.avi-{_hash(one / 'cam.avi')}-event-0001.jpg",
        f"frames/cam.avi-{_hash(two / 'cam.avi')}-event-0001.jpg",
    ]
    first, second = (cv2.imread(str(out / p)) for p in pictures)
    assert first.shape == second.shape and (first != second).any()
    # Two sources: a subtitle file each, named the same way.
    for i, folder in enumerate((one, two)):
        vtt = (out / f"timeline-cam.avi-{_hash(folder / 'cam.avi')}.vtt").read_text()
        assert str(folder / "cam.avi") in vtt
        assert events(data, i)[0]["sentences"][0]["text"] in vtt
    assert not (out / "timeline.vtt").exists()


def test_subtitles_play_each_sentence_at_its_time(clips, tmp_path):
    out = tmp_path / "run"
    assert run(clips["crossing"], "--every", "1s", "--out", out).exit_code == 0
    vtt = (out / "timeline.vtt").read_text()
    assert vtt.startswith("WEBVTT\n")
    cues = re.findall(r"(\d\d:\d\d:\d\d\.\d{3}) --> (\d\d:\d\d:\d\d\.\d{3})\n(.+)", vtt)
    assert cues == [
        ("00:00:01.000", "00:00:03.000", "a red object appeared in the lower right"),
        ("00:00:03.000", "00:00:05.000", "a blue object appeared in the upper left"),
        ("00:00:04.000", "00:00:06.000", "the blue object in the upper left is gone"),
        ("00:00:06.000", "00:00:08.000", "the red object in the lower right is gone"),
    ]
    srt = (out / "timeline.srt").read_bytes().decode()
    blocks = [b for b in srt.split("\r\n\r\n") if b.strip()]
    assert [b.split("\r\n")[0] for b in blocks] == ["1", "2", "3", "4"]
    assert blocks[1].split("\r\n")[1] == "00:00:03,000 --> 00:00:05,000"


# -- clips --------------------------------------------------------------------------------------


def _frames_in(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    count = 0
    while cap.grab():
        count += 1
    cap.release()
    return count


def test_clips_are_stream_copies_through_the_console_script(clips, tmp_path):
    out = tmp_path / "run"
    proc = run_spotdiff(
        "video", clips["visit"], "--every", "1s", "--no-recognise", "--out", out, "--clips",
        "--pad-after", "1s",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "1 stream-copied" in proc.stderr
    data = json.loads((out / "timeline.json").read_text())
    [event] = events(data)
    assert event["clip"] == f"clips/visit.avi-{_hash(clips['visit'])}-event-0001.avi"
    # From the sample before the arrival (1.0 s: the change happened after it) to 8.0 s,
    # every frame a keyframe in MJPG, so the copy is cut exactly: 1.0 .. 8.0 s inclusive.
    assert _frames_in(out / event["clip"]) == 71
    assert f"clips/{Path(event['clip']).name}" in (out / "timeline.csv").read_text()


def test_a_clip_is_re_encoded_when_the_keyframe_is_too_far_back(clips, tmp_path):
    from spotdiff_cli.frames.video import find_ffmpeg

    ffmpeg = find_ffmpeg()
    long_gop = tmp_path / "long-gop.mp4"
    subprocess.run(
        [ffmpeg, "-v", "error", "-i", str(clips["visit"]), "-c:v", "libx264", "-g", "1000",
         "-pix_fmt", "yuv420p", str(long_gop)],
        check=True,
    )  # fmt: skip
    keyframes = keyframe_times(ffmpeg, long_gop)
    assert keyframes == [0.0]
    # An event at 6.0-7.0 s: the only keyframe is 6 s earlier, more than a clip may lead by.
    path, how = cut_clip(ffmpeg, long_gop, 6.0, 7.0, tmp_path / "cut.mp4-event", keyframes)
    assert (how, path.name) == ("encode", "cut.mp4-event.mp4")
    assert _frames_in(path) == 10
    # Near the keyframe a copy does: it starts on the keyframe, a little early.
    path, how = cut_clip(ffmpeg, long_gop, 1.0, 2.0, tmp_path / "early", keyframes)
    # (A stream copy ends on a packet: a frame or two past the end is fine, short is not.)
    assert how == "copy" and 20 <= _frames_in(path) <= 23


def test_clips_need_out_and_folders_have_none(clips, tmp_path, write_png):
    result = run(clips["visit"], "--clips")
    assert result.exit_code == 2 and "--clips needs --out" in result.output
    folder = tmp_path / "snaps"
    folder.mkdir()
    scene = textured_background(240, 320, seed=7)
    for i in range(4):
        image = draw_box(scene, *LOWER_RIGHT, RED) if i >= 2 else scene
        cv2.imwrite(str(folder / f"{i}.png"), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    out = tmp_path / "run"
    result = run(folder, "--fps", "1", "--out", out, "--clips")
    assert result.exit_code == 0, result.output
    source = json.loads((out / "timeline.json").read_text())["sources"][0]
    assert source["events"] and source["events"][0]["clip"] is None
    assert any("no clips" in w for w in source["warnings"])


# -- --resume reads schema v1 -------------------------------------------------------------------


def _as_v1(data: dict) -> dict:
    """A v2 timeline written the way spotdiff.timeline/1 wrote it."""
    data = json.loads(json.dumps(data))
    data["schema"] = "spotdiff.timeline/1"
    for source in data["sources"]:
        source.pop("path", None)
        for event in source["events"] + source["open_events"]:
            event["frames"] = event.pop("pair_times")
            for key in ("start_frame", "end_frame", "length", "length_tc", "length_frames"):
                event.pop(key)
            for key in ("seen", "sentences", "clip"):
                event.pop(key)
    return data


def test_resume_continues_a_version_1_report(clips, tmp_path, monkeypatch):
    full = timeline(clips["crossing"], clips["visit"], "--every", "1s")
    out = tmp_path / "run"
    # Stopped in the second source, at 3 s: the first is finished, the second mid-visit.
    _interrupt(
        monkeypatch, 4, "visit.avi", clips["crossing"], clips["visit"], "--every", "1s",
        "--out", out,
    )  # fmt: skip
    report = out / "timeline.json"
    partial = json.loads(report.read_text())
    assert partial["sources"][0]["complete"] and not partial["sources"][1]["complete"]
    report.write_text(json.dumps(_as_v1(partial)))
    result = run(clips["crossing"], clips["visit"], "--out", out, "--resume")
    assert result.exit_code == 0, result.output
    resumed = json.loads(report.read_text())
    assert resumed["schema"] == "spotdiff.timeline/2"
    # The finished source comes back as v1 left it (its sentences, seen span, frame numbers
    # were never written); the resumed one is found whole again.
    first = events(resumed, 0)
    assert [(e["id"], e["start"], e["end"], e["kind"]) for e in first] == [
        (e["id"], e["start"], e["end"], e["kind"]) for e in events(full, 0)
    ]
    assert first[0]["pair_times"] == events(full, 0)[0]["pair_times"]
    assert _without_runtime(resumed)[1] == _without_runtime(full)[1]


# -- folders ------------------------------------------------------------------------------------


@pytest.fixture
def same_mtime_folder(tmp_path) -> Path:
    """12 snapshots named by their capture time, 10 s apart, all with one mtime (a copy), and
    one stray file without a time in its name. The red box is there from the 6th on."""
    folder = tmp_path / "cam"
    folder.mkdir()
    scene = textured_background(240, 320, seed=7)
    for i in range(12):
        image = draw_box(scene, *LOWER_RIGHT, RED) if i >= 5 else scene
        minutes, seconds = divmod(i * 10, 60)
        name = f"cam1_20240501_12{minutes:02d}{seconds:02d}.png"
        cv2.imwrite(str(folder / name), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    cv2.imwrite(str(folder / "thumbnail.png"), cv2.cvtColor(scene, cv2.COLOR_RGB2BGR))
    for path in folder.iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))
    return folder


def test_a_folder_timed_by_its_file_names(same_mtime_folder):
    names = sorted(p.name for p in same_mtime_folder.iterdir())
    assert "cam1_20240501_120000.png" in names and "cam1_20240501_120150.png" in names
    data = timeline(same_mtime_folder, "--time-pattern", "%Y%m%d_%H%M%S", "--every", "20s")
    source = data["sources"][0]
    assert source["samples"] == 6  # 0, 20, ... 100 s
    [event] = source["events"]
    assert (event["start"], event["kind"]) == (60.0, "appeared")
    assert event["start_frame"] == 6  # the file's place in time order
    assert any("thumbnail.png" in w and "--time-pattern" in w for w in source["warnings"])


def test_a_folder_without_usable_times_says_how_to_give_them(same_mtime_folder):
    (same_mtime_folder / "thumbnail.png").unlink()
    proc = run_spotdiff("video", same_mtime_folder, "--every", "1s", "--no-recognise")
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert "--fps" in line and "--time-pattern" in line and "12 images" in line
    # Either fix works.
    by_fps = timeline(same_mtime_folder, "--fps", "0.1", "--every", "10s")
    assert by_fps["sources"][0]["samples"] == 12
    assert [e["start"] for e in events(by_fps)] == [50.0]


@pytest.mark.parametrize(
    "pattern,name,seconds",
    [
        ("%Y%m%d_%H%M%S", "cam1_20240501_120010.jpg", 1714564810.0),
        ("%Y-%m-%d %H.%M.%S.%f", "IMG 2024-05-01 12.00.10.250.png", 1714564810.25),
        ("cam1_%s", "cam1_1714564810.5.jpg", 1714564810.5),
        # Digits of the right shape that are no date (month 13) are passed over.
        ("%Y%m%d", "run_20241301_then_20240501.png", 1714521600.0),
        ("%Y%m%d_%H%M%S", "thumbnail.jpg", None),
    ],
)
def test_time_patterns_find_the_time_anywhere_in_the_name(pattern, name, seconds):
    from spotdiff_cli.frames.folder import compile_time_pattern

    assert compile_time_pattern(pattern).seconds(name) == seconds
