"""``spotdiff video`` when things go wrong: a corrupt frame, a truncated file, frames of another
size, a run interrupted mid-event and resumed. Found events are never lost, and a resumed run
gives exactly what an uninterrupted one gives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background
from console import run_spotdiff

from spotdiff_cli.config import CaptionConfig, Settings, VideoConfig
from spotdiff_cli.report.timeline import timeline_from_dict, timeline_to_dict
from spotdiff_cli.timeline import describe_sources

RED, BLUE = (220, 40, 40), (40, 60, 220)


def _script(i: int) -> list[tuple[tuple[int, int, int, int], tuple[int, int, int]]]:
    """A red box crossing the left half (frames 4-15), a blue box parked at the lower right
    (frames 18-27), and the red box back at the top (frames 30-35)."""
    boxes = []
    if 4 <= i < 16:
        boxes.append(((10 + 8 * (i - 4), 40, 36, 36), RED))
    if 18 <= i < 28:
        boxes.append(((230, 160, 50, 40), BLUE))
    if 30 <= i < 36:
        boxes.append(((140, 20, 40, 30), RED))
    return boxes


def _frame(i: int, background: np.ndarray) -> np.ndarray:
    image = background
    for box, colour in _script(i):
        image = draw_box(image, *box, colour)
    return image


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("robust") / "scripted.avi"
    background = textured_background(240, 320, seed=4)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    for i in range(42):
        writer.write(cv2.cvtColor(_frame(i, background), cv2.COLOR_RGB2BGR))
    writer.release()
    return path


@pytest.fixture
def frames_folder(tmp_path) -> Path:
    folder = tmp_path / "snapshots"
    folder.mkdir()
    background = textured_background(240, 320, seed=4)
    for i in range(42):
        cv2.imwrite(
            str(folder / f"frame{i:03d}.png"),
            cv2.cvtColor(_frame(i, background), cv2.COLOR_RGB2BGR),
        )
    return folder


def _events(data: dict, source: int = 0) -> list[tuple]:
    return [
        (e["id"], e["start"], e["end"], e["kind"], e["noun"], e["text"])
        for e in data["sources"][source]["events"]
    ]


# -- a bad frame, a truncated file, a size change -------------------------------------------------


def test_a_corrupt_frame_in_a_folder_is_skipped_and_every_event_is_kept(frames_folder):
    clean = json.loads(
        run_spotdiff("video", frames_folder, "--fps", "10", "--every", "1f", "--json").stdout
    )
    (frames_folder / "frame010.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not really a png")
    proc = run_spotdiff("video", frames_folder, "--fps", "10", "--every", "1f", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    source = data["sources"][0]
    assert source["error"] is None and source["complete"] is True
    assert any("frame010.png" in w for w in source["warnings"]), source["warnings"]
    # The three changes are still there (the one crossing the bad frame included).
    assert [e[3] for e in _events(data)] == [e[3] for e in _events(clean)]
    assert len(_events(data)) >= 3


def test_a_truncated_mp4_says_where_it_ended(clip, tmp_path):
    import imageio_ffmpeg

    mp4 = tmp_path / "whole.mp4"
    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(),
            "-v",
            "error",
            "-i",
            str(clip),
            "-vf",
            "loop=loop=5:size=42",
            "-c:v",
            "mpeg4",
            "-g",
            "10",
            "-movflags",
            "+faststart",
            str(mp4),
        ],
        check=True,
    )
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(mp4.read_bytes()[: mp4.stat().st_size // 2])
    proc = run_spotdiff("video", cut, "--every", "1s", "--json")
    assert proc.returncode == 0
    source = json.loads(proc.stdout)["sources"][0]
    assert (
        source["ended_early_at"] is not None
        and source["ended_early_at"] < 0.75 * source["info"]["duration"]
    )
    assert any("truncated" in w for w in source["warnings"])
    whole = json.loads(run_spotdiff("video", mp4, "--every", "1s", "--json").stdout)["sources"][0]
    assert whole["ended_early_at"] is None and not whole["warnings"]


def test_frames_of_another_size_are_resized_with_a_warning(frames_folder):
    big = cv2.imread(str(frames_folder / "frame020.png"))
    cv2.imwrite(str(frames_folder / "frame020.png"), cv2.resize(big, (640, 480)))
    proc = run_spotdiff("video", frames_folder, "--fps", "10", "--every", "1f", "--json")
    assert proc.returncode == 0
    source = json.loads(proc.stdout)["sources"][0]
    assert source["complete"] and any("640x480" in w for w in source["warnings"])
    assert len(source["events"]) >= 3


def test_one_image_given_as_a_video_says_nothing_was_compared(frames_folder):
    proc = run_spotdiff("video", frames_folder / "frame000.png")
    assert proc.returncode == 0
    assert "1 sample," in proc.stdout and "1 samples" not in proc.stdout
    assert "gave one frame, so nothing was compared" in proc.stderr
    assert "spotdiff caption BEFORE AFTER" in proc.stderr
    # Two frames or more are compared, and nothing is said about it.
    proc = run_spotdiff("video", frames_folder, "--fps", "10", "--every", "1f", "--json")
    assert not any("one frame" in w for w in json.loads(proc.stdout)["sources"][0]["warnings"])


def test_start_past_the_end_is_said(clip):
    proc = run_spotdiff("video", clip, "--start", "10m")
    assert proc.returncode == 1
    assert "past the end" in proc.stderr


# -- resume == uninterrupted ---------------------------------------------------------------------


class _Stop(Exception):
    pass


def _run(clip: Path, settings: Settings, stop_after: int | None = None, resume: dict | None = None):
    """describe_sources, optionally interrupted (KeyboardInterrupt) after ``stop_after`` samples;
    returns the timeline dict as written to disk, and read back."""
    saved: dict = {}

    def on_update(result) -> None:
        saved[result.source] = result

    def on_progress(source, position, duration, samples) -> None:
        if stop_after is not None and samples >= stop_after:
            raise KeyboardInterrupt

    try:
        results = describe_sources(
            [str(clip)], settings, on_progress=on_progress, on_update=on_update, resume=resume
        )
        saved.update({r.source: r for r in results})
    except KeyboardInterrupt:
        assert stop_after is not None
    data = json.loads(
        json.dumps(timeline_to_dict(list(saved.values()), {}))
    )  # through JSON, as on disk
    return data


@pytest.mark.parametrize("compare", ["previous", "background"])
def test_resumed_runs_give_the_events_ids_and_counts_of_an_uninterrupted_run(clip, compare):
    settings = Settings(
        video=VideoConfig(every="1f", compare=compare), caption=CaptionConfig(recognise=True)
    )
    full = _run(clip, settings)
    assert len(_events(full)) >= 3
    # Stop before anything, mid-crossing, mid-visit, between events, near the end.
    for stop_after in (1, 9, 22, 29, 40):
        partial = _run(clip, settings, stop_after=stop_after)
        assert partial["complete"] is False
        resumed = _run(clip, settings, resume=timeline_from_dict(partial))
        assert resumed["complete"] is True
        assert _events(resumed) == _events(full), f"stopped after {stop_after} samples"
        for key in ("samples", "pairs_analysed"):
            assert resumed["sources"][0][key] == full["sources"][0][key], (stop_after, key)


def test_ctrl_c_then_resume_through_the_console_script_matches_an_uninterrupted_run(clip, tmp_path):
    import signal
    import time

    from console import REPO, SPOTDIFF, ctrl_c_reaches_child, env

    full = json.loads(run_spotdiff("video", clip, "--every", "1f", "--json").stdout)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [str(SPOTDIFF), "video", str(clip), "--every", "1f", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        env=env(),
        preexec_fn=ctrl_c_reaches_child,
    )
    # Wait until the run has written a partial report with something in it, then interrupt.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        report = out / "timeline.json"
        if report.exists() and json.loads(report.read_text())["sources"][0]["samples"] >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode in (0, 130)  # 0 only if it finished before the signal landed
    resumed = run_spotdiff("video", clip, "--out", out, "--resume", "--json")
    assert resumed.returncode == 0
    data = json.loads(resumed.stdout)
    assert _events(data) == _events(full)
    assert data["sources"][0]["samples"] == full["sources"][0]["samples"]


# -- two runs, one --out -------------------------------------------------------------------------


def test_two_captions_racing_for_one_out_folder_never_mix(tmp_path):
    from console import REPO, SPOTDIFF, env

    scene = textured_background(240, 320, seed=2)
    pairs = []
    for name, colour in (("red", RED), ("blue", BLUE)):
        before, after = tmp_path / f"{name}-a.png", tmp_path / f"{name}-b.png"
        cv2.imwrite(str(before), scene)
        cv2.imwrite(
            str(after), cv2.cvtColor(draw_box(scene, 100, 80, 60, 50, colour), cv2.COLOR_RGB2BGR)
        )
        pairs.append((before, after))
    for attempt in range(5):
        out = tmp_path / f"report{attempt}"
        procs = [
            subprocess.Popen(
                [str(SPOTDIFF), "caption", str(a), str(b), "--out", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
                env=env(),
            )
            for a, b in pairs
        ]
        codes = [p.wait(timeout=60) for p in procs]
        errors = [p.stderr.read() for p in procs]
        assert sorted(codes) == [0, 1], (codes, errors)
        loser = errors[codes.index(1)]
        assert "exists" in loser or "being written" in loser, loser
        report = json.loads((out / "report.json").read_text())
        winner = pairs[codes.index(0)]
        assert report["inputs"]["after"]["path"] == str(winner[1])
        assert str(winner[1]) in (out / "report.md").read_text()
        assert not [
            p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")
        ]  # no staging left
    shutil.rmtree(tmp_path)


def test_two_video_runs_on_one_out_folder_one_wins_the_other_says_so(clip, tmp_path):
    from console import REPO, SPOTDIFF, env

    out = tmp_path / "shared-out"
    procs = [
        subprocess.Popen(
            [str(SPOTDIFF), "video", str(clip), "--every", "1f", "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env(),
        )
        for _ in range(2)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    errors = [p.stderr.read() for p in procs]
    assert sorted(codes) == [0, 1], (codes, errors)
    loser = errors[codes.index(1)]
    assert "being written by another spotdiff run" in loser or "already exists" in loser, loser
    assert json.loads((out / "timeline.json").read_text())["complete"] is True


def _intervals(data: dict) -> list[tuple]:
    return [(e["start"], e["end"], e["noun"]) for e in data["sources"][0]["events"]]


def test_describing_every_frame_and_every_slot_find_the_same_intervals(clip):
    # --describe-every only spares the pairs inside a change going on: every event still starts
    # and ends on the sample where the change did, with far fewer pairs analysed.
    def run(describe_every: str) -> dict:
        video = VideoConfig(every="1f", describe_every=describe_every)
        return _run(clip, Settings(video=video, caption=CaptionConfig(recognise=True)))

    every_pair, slotted = run("0s"), run("0.3s")
    assert len(_intervals(every_pair)) >= 3
    assert _intervals(slotted) == _intervals(every_pair)
    assert slotted["sources"][0]["samples"] == every_pair["sources"][0]["samples"]
    analysed = (
        slotted["sources"][0]["pairs_analysed"],
        every_pair["sources"][0]["pairs_analysed"],
    )
    assert analysed[0] < 0.7 * analysed[1], analysed


def test_a_run_resumed_inside_a_slot_matches_an_uninterrupted_one(clip):
    settings = Settings(
        video=VideoConfig(every="1f", describe_every="0.5s"), caption=CaptionConfig(recognise=True)
    )
    full = _run(clip, settings)
    for stop_after in (6, 13, 21, 33):
        partial = _run(clip, settings, stop_after=stop_after)
        resumed = _run(clip, settings, resume=timeline_from_dict(partial))
        assert _events(resumed) == _events(full), f"stopped after {stop_after} samples"
        assert resumed["sources"][0]["pairs_analysed"] == full["sources"][0]["pairs_analysed"]
