"""`spotdiff video` on synthetic clips with exact truth, run as a user runs it (Typer's CliRunner).

Each clip is 320x240 MJPG at 10 fps, 100 frames (10 s) over a textured static background, with a
red rectangle scripted frame by frame, so every expected time below follows from the script:

- moving: appears at frame 20 (2.0 s) at the left, moves right 4 px a frame, gone at frame 60 (6.0 s);
- visit: still at the lower right from frame 20 (2.0 s) to frame 69; gone at frame 70 (7.0 s)
  (one event, a visit: its arrival and its departure are its sentences);
- parked: arrives at frame 30 (3.0 s) at the lower right and stays.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background
from typer.testing import CliRunner

from spotdiff_cli.cli import app

runner = CliRunner()
RED = (220, 40, 40)
PARKED_BOX = (200, 150, 50, 40)


def write_video(
    path: Path, boxes, frames: int = 100, fps: int = 10, size: tuple[int, int] = (320, 240)
) -> Path:
    background = textured_background(size[1], size[0])
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, size)
    assert writer.isOpened()
    for i in range(frames):
        image = background
        for box in boxes(i):
            image = draw_box(image, *box, RED)
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def _moving(i: int):
    return [(20 + 4 * (i - 20), 100, 40, 40)] if 20 <= i < 60 else []


def _visit(i: int):
    return [PARKED_BOX] if 20 <= i < 70 else []


def _parked(i: int):
    return [PARKED_BOX] if i >= 30 else []


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clips")
    return {
        "moving": write_video(d / "moving.avi", _moving),
        "visit": write_video(d / "visit.avi", _visit),
        "parked": write_video(d / "parked.avi", _parked),
    }


def run(*args) -> object:
    return runner.invoke(app, ["video", *[str(a) for a in args], "--no-recognise"])


def timeline(*args) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def spans(data: dict, source: int = 0) -> list[tuple[float, float, str]]:
    return [(e["start"], e["end"], e["kind"]) for e in data["sources"][source]["events"]]


# -- time syntax, range, seeking -------------------------------------------------------------------


def test_every_in_seconds_and_frames_give_the_sample_counts(clips):
    assert timeline(clips["visit"], "--every", "1s")["sources"][0]["samples"] == 10
    assert timeline(clips["visit"], "--every", "10f")["sources"][0]["samples"] == 10
    assert timeline(clips["visit"], "--every", "0.5s")["sources"][0]["samples"] == 20
    assert timeline(clips["visit"], "--every", "25f")["sources"][0]["samples"] == 4


def test_bad_every_is_one_line_usage_error(clips):
    result = run(clips["visit"], "--every", "fast")
    assert result.exit_code == 2
    assert "--every" in result.output and "30s" in result.output


def test_start_and_end_limit_the_samples_and_the_events(clips):
    data = timeline(clips["visit"], "--every", "1s", "--start", "3s", "--end", "00:00:08")
    source = data["sources"][0]
    assert source["samples"] == 5  # 3, 4, 5, 6, 7 s (end exclusive)
    # The arrival at 2 s is before the range; only the departure at 7 s is in it.
    assert spans(data) == [(7.0, 7.0, "disappeared")]


def test_sparse_sampling_seeks_instead_of_decoding_everything(tmp_path):
    # 60 s at 10 fps: samples 200 frames apart are further than the decoders' seek thresholds.
    path = write_video(
        tmp_path / "long.avi",
        lambda i: [(60, 40, 40, 30)] if i >= 300 else [],
        frames=600,
        size=(160, 120),
    )
    data = timeline(path, "--every", "20s")
    source = data["sources"][0]
    assert source["samples"] == 3
    assert source["frames_decoded"] < 600 / 4
    assert [e["kind"] for e in source["events"]] == ["appeared"]
    assert source["events"][0]["start"] == 40.0


# -- merging ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("every", ["1s", "0.5s"])
def test_an_object_moving_across_samples_is_one_event(clips, every):
    data = timeline(clips["moving"], "--every", every)
    assert spans(data) == [(2.0, 6.0, "moved")]
    assert data["sources"][0]["events"][0]["text"] == "an object moved from the left to the centre"


def test_an_arrival_and_a_later_departure_are_one_visit_with_both_sentences(clips):
    data = timeline(clips["visit"], "--every", "1s")
    assert spans(data) == [(2.0, 7.0, "visited")]
    [visit] = data["sources"][0]["events"]
    assert visit["text"] == "a red object appeared in the lower right and was gone 5 s later"
    assert visit["boxes"][0] == pytest.approx(PARKED_BOX, abs=2)
    assert [(s["start"], s["kind"]) for s in visit["sentences"]] == [
        (2.0, "appeared"),
        (7.0, "disappeared"),
    ]
    assert visit["sentences"][0]["text"] == "a red object appeared in the lower right"
    assert "gone" in visit["sentences"][1]["text"]


# -- regions ---------------------------------------------------------------------------------------


def test_roi_away_from_the_change_reports_nothing(clips):
    assert spans(timeline(clips["visit"], "--every", "1s", "--roi", "0,0,150,100")) == []
    # ...and a box around it still sees it.
    assert spans(timeline(clips["visit"], "--every", "1s", "--roi", "180,130,100,90")) == [
        (2.0, 7.0, "visited")
    ]


def test_mask_image_blacking_out_the_change_reports_nothing(clips, tmp_path):
    mask = np.full((240, 320), 255, np.uint8)
    mask[140:200, 190:260] = 0  # black = ignore: the rectangle's place
    cv2.imwrite(str(tmp_path / "mask.png"), mask)
    assert spans(timeline(clips["visit"], "--every", "1s", "--mask", tmp_path / "mask.png")) == []


def test_bad_roi_is_a_usage_error(clips):
    result = run(clips["visit"], "--roi", "10,10,0,5")
    assert result.exit_code == 2 and "--roi" in result.output


# -- comparison modes ------------------------------------------------------------------------------


def test_background_reports_a_parked_object_once(clips):
    data = timeline(clips["parked"], "--every", "0.5s", "--compare", "background")
    # One event from the arrival until the median background has taken the car in (its end);
    # with --compare previous the same clip gives one single-sample event too, but a car that
    # parks for hours then leaves would also be reported leaving: see the next test.
    [(start, _end, kind)] = spans(data)
    assert (start, kind) == (3.0, "appeared")
    assert data["sources"][0]["events"][0]["boxes"][0] == pytest.approx(PARKED_BOX, abs=2)


def test_reference_compares_every_sample_with_one_image(clips, write_png):
    empty = write_png("empty.png", textured_background())
    data = timeline(clips["visit"], "--every", "1s", "--compare", "reference", "--reference", empty)
    # Against the empty scene the rectangle is there in every sample from 2 s to 6 s: one event.
    assert spans(data) == [(2.0, 6.0, "appeared")]


# -- output, overwrite, resume ---------------------------------------------------------------------


def test_out_writes_every_format_and_refuses_to_overwrite(clips, tmp_path):
    out = tmp_path / "run"
    result = run(clips["visit"], "--every", "1s", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "timeline.json").read_text())
    assert data["complete"] is True and len(data["sources"][0]["events"]) == 1
    csv_rows = (out / "timeline.csv").read_text().strip().splitlines()
    assert len(csv_rows) == 2 and csv_rows[1].startswith("1,20,00:00:02.000,2.000,70,00:00:07.000,")
    assert "a red object appeared in the lower right" in (out / "timeline.md").read_text()
    picture = data["sources"][0]["events"][0]["picture"]
    assert picture and (out / picture).is_file()
    page = (out / "timeline.html").read_text()
    assert "a red object appeared in the lower right" in page and f'src="{picture}"' in page

    again = run(clips["visit"], "--every", "1s", "--out", out)
    assert again.exit_code == 1
    assert "already exists" in again.output and "--overwrite" in again.output
    assert len(again.output.strip().splitlines()) == 1
    assert run(clips["visit"], "--every", "1s", "--out", out, "--overwrite").exit_code == 0


class _StopAfter:
    """Stands in for the progress bar and presses Ctrl-C after ``n`` samples."""

    def __init__(self, n: int) -> None:
        self.n = n

    def update(self, source, position, duration, samples) -> None:
        if samples >= self.n:
            raise KeyboardInterrupt


@pytest.mark.parametrize("stop_after", [5, 8])  # in the middle of the move; between two events
def test_interrupted_run_leaves_a_partial_report_and_resume_finishes_it(
    clips, tmp_path, monkeypatch, stop_after
):
    from spotdiff_cli.cli import render

    sources = [clips["moving"], clips["visit"]]
    full = timeline(*sources, "--every", "1s")

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(
            render,
            "timeline_progress",
            lambda enabled=True: contextlib.nullcontext(_StopAfter(stop_after)),
        )
        stopped = run(*sources, "--every", "1s", "--out", out)
    assert stopped.exit_code == 130
    partial = json.loads((out / "timeline.json").read_text())
    assert partial["complete"] is False
    first = partial["sources"][0]
    assert first["complete"] is False and first["samples"] == stop_after
    assert first["processed_until"] == stop_after - 1.0
    assert "Partial report" in (out / "timeline.md").read_text()

    result = run(*sources, "--out", out, "--resume")  # --every comes from the report
    assert result.exit_code == 0, result.output
    resumed = json.loads((out / "timeline.json").read_text())
    assert resumed["complete"] is True
    for i in range(2):
        assert spans(resumed, i) == spans(full, i)
        assert [e["id"] for e in resumed["sources"][i]["events"]] == [
            e["id"] for e in full["sources"][i]["events"]
        ]


def test_resume_needs_a_report(clips, tmp_path):
    result = run(clips["visit"], "--out", tmp_path / "nothing", "--resume")
    assert result.exit_code == 1 and "run without --resume first" in result.output


# -- many inputs -----------------------------------------------------------------------------------


def test_two_videos_are_reported_separately_with_their_names(clips, tmp_path):
    out = tmp_path / "run"
    result = run(clips["visit"], clips["moving"], "--every", "1s", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "timeline.json").read_text())
    assert [Path(s["source"]).name for s in data["sources"]] == ["visit.avi", "moving.avi"]
    assert spans(data, 0) == [(2.0, 7.0, "visited")]
    assert spans(data, 1) == [(2.0, 6.0, "moved")]
    rows = (out / "timeline.csv").read_text().strip().splitlines()[1:]
    assert [r.split(",")[10] for r in rows] == [str(clips["visit"]), str(clips["moving"])]


def test_an_unreadable_file_is_reported_and_skipped(clips, tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_text("this is not a video\n")
    result = run(broken, clips["visit"], "--every", "1s", "--json")
    assert result.exit_code == 0, result.output
    assert "broken.mp4" in result.stderr and "skipped" in result.stderr
    data = json.loads(result.stdout)
    assert data["sources"][0]["error"] and data["sources"][0]["events"] == []
    assert spans(data, 1) == [(2.0, 7.0, "visited")]


def test_only_unreadable_files_exit_1(tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_text("this is not a video\n")
    assert run(broken).exit_code == 1


def test_two_jobs_give_the_same_events_as_one(clips, tmp_path):
    sources = [clips["visit"], clips["moving"], clips["parked"]]
    one = timeline(*sources, "--every", "1s", "--jobs", "1")
    two = timeline(*sources, "--every", "1s", "--jobs", "2", "--out", tmp_path / "two")
    assert [s["source"] for s in two["sources"]] == [str(s) for s in sources]
    for i in range(3):
        assert spans(two, i) == spans(one, i)
    assert all(s["complete"] for s in two["sources"])


# -- a folder of images ----------------------------------------------------------------------------


def test_a_folder_of_images_is_a_source_in_natural_order(tmp_path, write_png):
    scene = textured_background()
    folder = tmp_path / "cam"
    folder.mkdir()
    # Natural order: 2 before 10. In plain string order "img10" would come before "img2" and the
    # rectangle would arrive first and then leave.
    for i in range(1, 13):
        image = draw_box(scene, *PARKED_BOX, RED) if i >= 10 else scene
        cv2.imwrite(str(folder / f"img{i}.png"), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    data = timeline(folder, "--every", "1f")
    source = data["sources"][0]
    assert source["samples"] == 12
    assert [(e["kind"], e["text"]) for e in source["events"]] == [
        ("appeared", "a red object appeared in the lower right")
    ]
