"""Nothing found is lost: a full disk, a failed open, a resume with other sources, an output that
is an input, an overwrite. Each test reads the report after the failure and after ``--resume``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import cv2
import pytest
from conftest import draw_box, textured_background
from console import one_error_line, run_spotdiff
from test_video_outputs import write_clip as write_video_clip

from spotdiff_cli import video_run
from spotdiff_cli.errors import OutputError
from spotdiff_cli.report import timeline as timeline_report

COLOURS = [(220, 40, 40), (40, 60, 220), (40, 200, 60), (230, 200, 30)]


def _visits(i: int):
    """Four visits of 1.5 s, one after another, in four places: four events at --every 0.5s."""
    boxes = []
    for k, colour in enumerate(COLOURS):
        if 20 + 30 * k <= i < 35 + 30 * k:
            boxes.append(((30 + 60 * k, 40 + 40 * k, 50, 40), colour))
    return boxes


def write_clip(path: Path, boxes=_visits, frames: int = 140, fps: int = 10) -> Path:
    return write_video_clip(path, boxes, frames, fps)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return write_clip(tmp_path_factory.mktemp("loss") / "visits.avi")


@pytest.fixture(scope="module")
def other_clip(tmp_path_factory) -> Path:
    return write_clip(
        tmp_path_factory.mktemp("loss-other") / "other.avi",
        boxes=lambda i: [((100, 100, 60, 50), COLOURS[0])] if 30 <= i < 60 else [],
        frames=80,
    )


FLAGS = {"video": {"every": "0.5s"}, "caption": {"recognise": False}}


def events_of(out: Path) -> list[tuple]:
    data = json.loads((out / "timeline.json").read_text())
    return [
        (s["source"], e["id"], e["start"], e["end"], e["text"])
        for s in data["sources"]
        for e in s["events"]
    ]


@pytest.fixture(scope="module")
def uninterrupted(clip, tmp_path_factory) -> list[tuple]:
    out = tmp_path_factory.mktemp("whole") / "report"
    video_run.run_video([str(clip)], out=out, flags=FLAGS)
    found = events_of(out)
    assert len(found) >= 3, found
    return found


def test_a_full_disk_while_the_last_pictures_are_written_loses_no_event(
    clip, uninterrupted, tmp_path, monkeypatch
):
    """The disk fills as the last events' pictures are written (the ones closed at the end of
    the source, outside the sample loop): the report keeps every event, says it is incomplete
    and why, and --resume after space is freed gives the uninterrupted run's events."""
    out = tmp_path / "report"
    real = timeline_report.write_event_picture
    written = []

    def fills_up(out_dir, source, event, report):
        if len(written) >= len(uninterrupted) - 1:  # the last picture does not fit
            raise OutputError(f"cannot write {out_dir}/frames/x.jpg: No space left on device")
        written.append(event.id)
        return real(out_dir, source, event, report)

    monkeypatch.setattr(timeline_report, "write_event_picture", fills_up)
    outcome = video_run.run_video([str(clip)], out=out, flags=FLAGS)
    data = json.loads((out / "timeline.json").read_text())
    source = data["sources"][0]
    assert data["complete"] is False and outcome.timeline["complete"] is False
    assert "No space left on device" in source["error"]
    assert len(source["events"]) == len(uninterrupted)  # the last one too, without a picture
    assert [e["picture"] is None for e in source["events"]].count(True) == 1

    monkeypatch.setattr(timeline_report, "write_event_picture", real)  # space freed
    video_run.run_video([str(clip)], out=out, resume=True)
    assert events_of(out) == uninterrupted
    final = json.loads((out / "timeline.json").read_text())
    assert final["complete"] is True and final["sources"][0]["error"] is None
    assert all((out / e["picture"]).is_file() for e in final["sources"][0]["events"])


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
    )
    return proc.returncode == 0


def test_a_real_full_disk_then_resume_through_the_console_script(clip, uninterrupted, tmp_path):
    """A real file system that fills up (a 64 KiB tmpfs: the report fits, not every picture):
    exit 1 with one line, the report on disk is partial, never "complete" with fewer events;
    after the file system grows, --resume finishes with the uninterrupted run's events."""
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "64k"):
        pytest.skip("mounting a small tmpfs needs root and a kernel that allows it")
    try:
        out = disk / "report"
        proc = run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
        assert proc.returncode == 1, proc.stderr
        assert "No space left on device" in one_error_line(proc)
        if (out / "timeline.json").is_file():
            data = json.loads((out / "timeline.json").read_text())
            assert data["complete"] is False
            assert len(events_of(out)) <= len(uninterrupted)
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        if not (out / "timeline.json").is_file():
            pytest.skip("the disk filled before the first report; nothing to resume")
        proc = run_spotdiff("video", clip, "--out", out, "--resume")
        assert proc.returncode == 0, proc.stderr
        assert [e[1:] for e in events_of(out)] == [e[1:] for e in uninterrupted]
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_resume_with_another_source_keeps_the_report_it_held(clip, other_clip, tmp_path):
    out = tmp_path / "report"
    run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    before = events_of(out)
    proc = run_spotdiff("video", other_clip, "--out", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    after = events_of(out)
    assert [e for e in after if e[0] == before[0][0]] == before  # every earlier event stays
    assert any(e[0].endswith("other.avi") for e in after)
    assert all((out / p).is_file() for p in _pictures(out))


def _pictures(out: Path) -> list[str]:
    data = json.loads((out / "timeline.json").read_text())
    return [e["picture"] for s in data["sources"] for e in s["events"] if e["picture"]]


def test_jsonl_that_is_the_source_is_refused_before_anything_is_written(clip, tmp_path):
    source = tmp_path / "cam.avi"
    source.write_bytes(clip.read_bytes())
    size = source.stat().st_size
    proc = run_spotdiff("video", source, "--jsonl", source, "--overwrite")
    assert proc.returncode == 2
    assert "--jsonl" in one_error_line(proc) and "source" in one_error_line(proc)
    assert source.stat().st_size == size


def test_a_source_that_cannot_be_opened_writes_no_report(clip, tmp_path):
    out = tmp_path / "report"
    proc = run_spotdiff("video", tmp_path / "typo.avi", "--out", out)
    assert proc.returncode == 1
    assert not (out / "timeline.json").exists()
    proc = run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    assert proc.returncode == 0, proc.stderr  # the corrected rerun is not "already exists"


def test_a_failed_open_with_overwrite_leaves_the_earlier_report(clip, tmp_path):
    out = tmp_path / "report"
    run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    before = events_of(out)
    proc = run_spotdiff("video", tmp_path / "typo.avi", "--out", out, "--overwrite")
    assert proc.returncode == 1
    assert events_of(out) == before
    assert all((out / p).is_file() for p in _pictures(out))


def test_overwrite_leaves_no_stale_picture(clip, other_clip, tmp_path):
    out = tmp_path / "report"
    run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    old = set(os.listdir(out / "frames"))
    assert len(old) >= 6
    (out / "notes.txt").write_text("mine")  # not the report's: stays
    proc = run_spotdiff("video", other_clip, "--no-recognise", "--out", out, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    kept = set(os.listdir(out / "frames"))
    named = {Path(p).name for p in _pictures(out)}
    assert named and named <= kept
    assert all(n in named or n.replace("-thumb", "") in named for n in kept), kept
    assert (out / "notes.txt").read_text() == "mine"


def test_video_report_carries_its_config(clip, tmp_path):
    out = tmp_path / "report"
    run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    config = (out / "config.yaml").read_text()
    assert "every: 0.5s" in config
    again = tmp_path / "again"
    proc = run_spotdiff("video", clip, "--config", out / "config.yaml", "--out", again)
    assert proc.returncode == 0, proc.stderr
    assert [e[1:] for e in events_of(again)] == [e[1:] for e in events_of(out)]


def test_the_library_run_is_what_the_cli_does(clip, uninterrupted, tmp_path):
    """A Python user gets the same report, JSON Lines included, without the CLI."""
    out = tmp_path / "report"
    lines = tmp_path / "events.jsonl"
    outcome = video_run.run_video([str(clip)], out=out, flags=FLAGS, jsonl=str(lines))
    assert events_of(out) == uninterrupted
    assert len(lines.read_text().splitlines()) == len(uninterrupted)
    assert not outcome.failed and outcome.timeline["complete"] is True
    with contextlib.suppress(FileNotFoundError):
        assert (out / "config.yaml").is_file()


@pytest.mark.parametrize(
    "field, value",
    [
        ("samples", "1e400"),
        ("processed_until", '"soon"'),
        ("seconds", "NaN"),
        ("checkpoint", '{"at": "x", "replay_from": 0}'),
        ("checkpoint", '{"at": 1, "replay_from": 0, "evil": 1}'),
    ],
)
def test_a_crafted_timeline_is_refused_in_one_line(clip, tmp_path, field, value):
    out = tmp_path / "report"
    run_spotdiff("video", clip, "--every", "0.5s", "--no-recognise", "--out", out)
    path = out / "timeline.json"
    data = json.loads(path.read_text())
    data["sources"][0]["complete"] = False
    data["sources"][0][field] = "@@CRAFTED@@"
    path.write_text(json.dumps(data).replace('"@@CRAFTED@@"', value))
    proc = run_spotdiff("video", clip, "--out", out, "--resume")
    assert proc.returncode in (1, 2)
    assert "damaged" in one_error_line(proc)


def test_file_names_that_are_not_utf8_still_give_every_report(tmp_path):
    folder = tmp_path / "cam"
    folder.mkdir()
    background = textured_background(240, 320, seed=3)
    names = [b"a-before.png", b"b-caf\xe9.png"]
    images = [background, draw_box(background, 100, 80, 60, 50, COLOURS[1])]
    for name, image in zip(names, images):
        ok, png = cv2.imencode(".png", image[:, :, ::-1])  # cv2.imwrite crashes on such names
        assert ok
        (Path(os.fsdecode(os.path.join(os.fsencode(folder), name)))).write_bytes(png.tobytes())
    after = os.fsdecode(os.path.join(os.fsencode(folder), names[1]))
    proc = run_spotdiff("caption", folder / "a-before.png", after, "--out", tmp_path / "pair")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "pair" / "report.json").read_text(encoding="utf-8"))
    assert os.fsencode(report["inputs"]["after"]["path"]).endswith(names[1])
    proc = run_spotdiff("video", folder, "--fps", "1", "--out", tmp_path / "timeline")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "timeline" / "timeline.json").read_text())["complete"]
