"""Live runs: ``--jsonl`` (a JSON Lines event stream) and ``--watch DIR`` (a folder followed as
a camera uploads to it). Tiny synthetic frames, written by the test, so each runs in seconds."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import cv2
import numpy as np
from conftest import draw_box, textured_background
from console import check_clean_exit, one_error_line, run_spotdiff, start_spotdiff
from typer.testing import CliRunner

from spotdiff_cli.cli import app
from spotdiff_cli.frames.watch import WatchedFolderSource

runner = CliRunner()
RED, BLUE = (220, 40, 40), (40, 60, 220)
POLL = 0.1  # s: the tests' --watch-poll


def scene(i: int) -> np.ndarray:
    """Frame ``i`` of a 12-frame scene: a red box from 3 to 5, a blue one from 8 to 9."""
    image = textured_background(120, 160)
    if 3 <= i <= 5:
        image = draw_box(image, 100, 70, 30, 25, RED)
    if 8 <= i <= 9:
        image = draw_box(image, 15, 10, 30, 25, BLUE)
    return image


FRAMES = 12


def png(i: int) -> bytes:
    ok, data = cv2.imencode(".png", cv2.cvtColor(scene(i), cv2.COLOR_RGB2BGR))
    assert ok
    return data.tobytes()


def write_all(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(FRAMES):
        (folder / f"f{i:03d}.png").write_bytes(png(i))
    return folder


def run(*args: object):
    return runner.invoke(app, ["video", *[str(a) for a in args], "--no-recognise"])


def summary(events: list[dict]) -> list[tuple]:
    """What must agree between two runs of the same frames (not the source's name)."""
    return [(e["id"], e["start"], e["end"], e["kind"], e["text"]) for e in events]


def plain_events(folder: Path) -> list[dict]:
    result = run(folder, "--fps", "1", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["sources"][0]["events"]


# -- --jsonl ------------------------------------------------------------------------------------


def test_jsonl_stdout_holds_one_json_line_per_event_and_nothing_else(tmp_path):
    folder = write_all(tmp_path / "cam")
    proc = run_spotdiff(
        "video", folder, "--fps", "1", "--no-recognise", "--jsonl", "-", "--out", tmp_path / "r"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    payloads = [json.loads(line) for line in lines]  # every stdout line is one JSON value
    report = json.loads((tmp_path / "r" / "timeline.json").read_text())
    events = report["sources"][0]["events"]
    assert len(events) >= 2
    assert [p["event"]["id"] for p in payloads] == sorted(e["id"] for e in events)
    for p in payloads:
        assert p["schema"] == "spotdiff.event/1"
        assert p["source"] == str(folder)
        assert p["report_dir"] == str((tmp_path / "r").resolve())
        assert p["event"]["picture"]  # written before the event is sent
    assert "what changed" in proc.stderr  # the summary moved to stderr


def test_jsonl_file_and_refusing_an_existing_one_without_resume(tmp_path):
    folder = write_all(tmp_path / "cam")
    stream = tmp_path / "events.jsonl"
    result = run(folder, "--fps", "1", "--jsonl", stream, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    lines = stream.read_text().splitlines()
    assert [json.loads(x)["event"]["id"] for x in lines] == list(range(1, len(lines) + 1))
    assert len(lines) == len(plain_events(folder))

    refused = run_spotdiff(
        "video", folder, "--fps", "1", "--no-recognise", "--jsonl", stream, "--out", tmp_path / "s"
    )
    assert refused.returncode != 0
    assert "--resume" in one_error_line(refused)
    assert stream.read_text().splitlines() == lines  # untouched

    # --resume appends (a finished report: nothing more to send, the file is kept).
    again = run(folder, "--fps", "1", "--jsonl", stream, "--out", tmp_path / "r", "--resume")
    assert again.exit_code == 0, again.output
    assert stream.read_text().splitlines()[: len(lines)] == lines


# -- --watch ------------------------------------------------------------------------------------


def upload(folder: Path, pause: float) -> None:
    """A camera: one file every ``pause`` s; frame 6 arrives in two halves, the second after
    the watcher has seen the first at several polls."""
    for i in range(FRAMES):
        data = png(i)
        path = folder / f"f{i:03d}.png"
        if i == 6:
            with open(path, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                # Longer than a poll: the half looks stable, its missing PNG end keeps it out.
                time.sleep(POLL * 2.5)
                f.write(data[len(data) // 2 :])
        else:
            path.write_bytes(data)
        time.sleep(pause)


def test_watch_finds_what_the_folder_run_finds_as_files_arrive(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    out = tmp_path / "r"
    camera = threading.Thread(target=upload, args=(live, POLL * 2))
    camera.start()
    try:
        result = run(
            "--watch", live, "--fps", "1", "--watch-poll", POLL, "--watch-idle", 1.0,
            "--out", out, "--jsonl", tmp_path / "e.jsonl",
        )  # fmt: skip
    finally:
        camera.join()
    assert result.exit_code == 0, result.output
    data = json.loads((out / "timeline.json").read_text())
    source = data["sources"][0]
    assert source["complete"] and not source["warnings"], source["warnings"]
    assert source["samples"] == FRAMES
    assert summary(source["events"]) == summary(plain_events(live))
    streamed = [json.loads(x)["event"] for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert sorted(e["id"] for e in streamed) == [e["id"] for e in source["events"]]


def test_a_half_written_file_is_not_taken_until_it_is_whole(tmp_path):
    data = png(0)
    (tmp_path / "a.png").write_bytes(data[:100])
    source = WatchedFolderSource(tmp_path, poll=POLL, idle=POLL * 4)
    source._scan()  # first sight: not taken
    source._scan()  # the same size, but no PNG end yet: an upload that stalled
    assert not source._ready
    (tmp_path / "a.png").write_bytes(data)
    source._scan()  # changed since: still not taken
    assert not source._ready
    frames = list(source.sample(None))
    assert len(frames) == 1 and frames[0].pixels.shape == (120, 160, 3)
    assert not source.stats.skipped


def test_watch_idle_ends_a_watch_with_no_file(tmp_path):
    started = time.monotonic()
    result = run("--watch", tmp_path, "--watch-poll", POLL, "--watch-idle", 0.5)
    assert time.monotonic() - started < 10
    assert result.exit_code == 1  # the only source gave nothing
    assert "no image arrived" in result.output


def test_watch_needs_a_folder_and_no_source(tmp_path):
    both = run_spotdiff("video", tmp_path, "--watch", tmp_path)
    assert "--watch" in one_error_line(both)
    missing = run_spotdiff("video", "--watch", tmp_path / "nope")
    assert "no such folder" in one_error_line(missing)


def test_ctrl_c_ends_a_watch_with_exit_130_and_a_valid_timeline(tmp_path):
    live = write_all(tmp_path / "live")
    out = tmp_path / "r"
    args = ("video", "--watch", live, "--fps", "1", "--watch-poll", POLL, "--no-recognise")
    proc = start_spotdiff(*args, "--out", out)
    # Wait until every frame is in the report (it is rewritten after each one), then stop it
    # while it waits for the next upload.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            samples = json.loads((out / "timeline.json").read_text())["sources"][0]["samples"]
        except (OSError, ValueError, IndexError, KeyError):
            samples = 0
        if samples == FRAMES:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    done = type("Done", (), {"returncode": proc.returncode, "stdout": stdout, "stderr": stderr})
    check_clean_exit(done, tuple(str(a) for a in args))
    assert proc.returncode == 130, stderr
    data = json.loads((out / "timeline.json").read_text())
    source = data["sources"][0]
    assert source["samples"] == FRAMES
    # Events that closed before Ctrl-C are in it; the first (the red box) closed at frame 6.
    assert source["events"] and source["events"][0]["start"] == 3.0


def test_watch_reads_times_from_file_names_like_the_folder_run(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    for i in range(FRAMES):  # one snapshot every 10 s, named by its time
        (live / f"cam_20240501_12{i * 10 // 60:02d}{i * 10 % 60:02d}.png").write_bytes(png(i))
    pattern = "%Y%m%d_%H%M%S"
    folder = run(live, "--time-pattern", pattern, "--every", "10s", "--json")
    assert folder.exit_code == 0, folder.output
    watched = run(
        "--watch", live, "--time-pattern", pattern, "--every", "10s",
        "--watch-poll", POLL, "--watch-idle", 0.5, "--json",
    )  # fmt: skip
    assert watched.exit_code == 0, watched.output
    expected = json.loads(folder.stdout)["sources"][0]["events"]
    assert expected and summary(json.loads(watched.stdout)["sources"][0]["events"]) == summary(
        expected
    )


# -- --watch --resume ---------------------------------------------------------------------------


def watch_run(live: Path, out: Path, *args: object):
    return run(
        "--watch", live, "--watch-poll", POLL, "--watch-idle", 0.5, "--out", out,
        "--jsonl", out.parent / "e.jsonl", *args,
    )  # fmt: skip


def test_resuming_a_watch_goes_on_with_the_new_files_only(tmp_path):
    """A watch that went idle after frame 6, resumed once frames 7-11 arrived: the files it
    took are not taken again, and the report and stream are what one watch of all 12 gives."""
    live = tmp_path / "live"
    live.mkdir()
    for i in range(7):
        (live / f"f{i:03d}.png").write_bytes(png(i))
    out = tmp_path / "r"
    first = watch_run(live, out, "--fps", "1")
    assert first.exit_code == 0, first.output
    before = json.loads((out / "timeline.json").read_text())["sources"][0]
    assert before["complete"] and before["samples"] == 7 and before["events"]

    for i in range(7, FRAMES):
        (live / f"f{i:03d}.png").write_bytes(png(i))
    again = watch_run(live, out, "--resume")  # --fps 1 comes from the report's settings
    assert again.exit_code == 0, again.output
    after = json.loads((out / "timeline.json").read_text())["sources"][0]
    assert after["complete"] and after["samples"] == FRAMES
    assert summary(after["events"]) == summary(plain_events(live))
    assert summary(after["events"][: len(before["events"])]) == summary(before["events"])
    ids = [json.loads(x)["event"]["id"] for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert ids == [e["id"] for e in after["events"]]  # each sent once, in order


def test_a_resumed_watch_keeps_its_time_axis_when_old_files_are_gone(tmp_path):
    """Times from file names: second 0 is the first file's time, kept in the report, so a
    resumed watch whose folder was cleaned up still times new files as the first run did."""
    live = tmp_path / "live"
    live.mkdir()
    pattern = "%Y%m%d_%H%M%S"

    def name(i: int) -> str:  # one snapshot every 10 s
        return f"cam_20240501_12{i * 10 // 60:02d}{i * 10 % 60:02d}.png"

    for i in range(7):
        (live / name(i)).write_bytes(png(i))
    out = tmp_path / "r"
    first = watch_run(live, out, "--time-pattern", pattern, "--every", "10s")
    assert first.exit_code == 0, first.output
    before = json.loads((out / "timeline.json").read_text())["sources"][0]
    assert before["info"]["origin"] is not None

    for i in range(6):  # the uploads processed are cleaned up; the last one stays
        (live / name(i)).unlink()
    for i in range(7, FRAMES):
        (live / name(i)).write_bytes(png(i))
    again = watch_run(live, out, "--resume")
    assert again.exit_code == 0, again.output
    after = json.loads((out / "timeline.json").read_text())["sources"][0]
    assert after["samples"] == FRAMES and after["processed_until"] == 110.0
    new = after["events"][len(before["events"]) :]
    assert new and all(e["start"] > 60.0 for e in new)  # on the first run's axis
    assert [e["id"] for e in after["events"]] == list(range(1, len(after["events"]) + 1))
