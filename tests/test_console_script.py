"""The installed ``spotdiff`` console script, run as a subprocess as a user or a cron job runs it.

Each of the tool's commonest answers ("no visible change", "the lighting changed", "the whole view
changed", a change too small to name) and each way out (an error after the analysis, a Python
script that exits right after ``describe_pair``, Ctrl-C in ``video``) must end with its own exit
code and a clean interpreter shutdown - never a signal. A native thread left running at exit
aborts the process only sometimes, so every case runs many times.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background
from console import (
    REPO,
    SPOTDIFF,
    check_clean_exit,
    ctrl_c_reaches_child,
    env,
    one_error_line,
    run_many,
    run_python,
)

TIMES = 10  # enough to catch a shutdown race that hits one run in three (issue 8)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("console")
    scene = textured_background(240, 320, seed=1)
    # A different view: big coloured stripes over most of the frame (a scene cut).
    other = scene.copy()
    for i, colour in enumerate([(30, 200, 60), (240, 240, 40), (30, 40, 200), (250, 250, 250)]):
        other[i * 60 : i * 60 + 40, :] = colour
    pictures = {
        "scene": scene,
        "brighter": np.clip(scene.astype(np.float32) * 1.4, 0, 255).astype(np.uint8),
        "other": other,
        "speck": draw_box(scene, 150, 110, 3, 3, (250, 250, 250)),
        "object": draw_box(scene, 120, 90, 50, 40, (220, 40, 40)),
    }
    paths = {}
    for name, image in pictures.items():
        paths[name] = d / f"{name}.png"
        cv2.imwrite(str(paths[name]), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return paths


@pytest.mark.parametrize(
    "after,expected",
    [
        ("scene", "there is no visible change"),
        ("brighter", "the lighting changed"),
        ("other", "the whole view changed"),
        ("speck", "there is no visible change"),
        ("object", "appeared"),
    ],
)
def test_every_common_answer_exits_0_cleanly_every_time(images, after, expected):
    for proc in run_many(TIMES, "caption", images["scene"], images[after]):
        assert proc.returncode == 0
        assert expected in proc.stdout, proc.stdout


def test_json_answer_exits_0_cleanly_every_time(images):
    for proc in run_many(TIMES, "caption", images["scene"], images["scene"], "--json"):
        assert proc.returncode == 0
        assert json.loads(proc.stdout)["sentences"][0]["kind"] == "no_change"


def test_an_output_error_after_the_analysis_is_one_line_every_time(images, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for proc in run_many(
        TIMES, "caption", images["scene"], images["object"], "--out", blocker / "report"
    ):
        assert proc.returncode == 1
        assert "a-file" in one_error_line(proc)


def test_a_python_script_that_exits_right_after_describe_pair_exits_cleanly(images):
    code = (
        "from spotdiff_cli import api\n"
        f"report = api.describe_pair({str(images['scene'])!r}, {str(images['object'])!r})\n"
        "print(report.sentences[0].text)\n"
    )
    for _ in range(TIMES):
        proc = run_python(code)
        assert proc.returncode == 0 and "appeared" in proc.stdout


def _write_clip(path: Path, frames: int, moving: bool) -> Path:
    background = textured_background(240, 320, seed=3)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    for i in range(frames):
        image = (
            draw_box(background, (8 * i) % 260, 100, 40, 40, (220, 40, 40))
            if moving
            else background
        )
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def test_video_with_no_events_exits_0_cleanly_every_time(tmp_path):
    clip = _write_clip(tmp_path / "still.avi", 40, moving=False)
    for proc in run_many(TIMES, "video", clip, "--every", "1f"):
        assert proc.returncode == 0
        assert "no change" in proc.stdout


# ~20 s; the default run keeps test_video_robust's Ctrl-C-then-resume through the console
# script (4 s) and test_terminal_output's Ctrl-C with --out.
@pytest.mark.slow
def test_ctrl_c_during_video_exits_130_and_leaves_a_partial_report(tmp_path):
    clip = _write_clip(tmp_path / "busy.avi", 400, moving=True)
    # Interrupt at different moments: while loading, decoding, analysing, recognising.
    for i, delay in enumerate(np.linspace(0.3, 3.0, TIMES)):
        out = tmp_path / f"run{i}"
        args = ("video", str(clip), "--every", "1f", "--out", str(out))
        proc = subprocess.Popen(
            [str(SPOTDIFF), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
            env=env(),
            preexec_fn=ctrl_c_reaches_child,
        )
        time.sleep(float(delay))
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        finished = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
        check_clean_exit(finished, args)
        assert proc.returncode == 130, f"after {delay:.2f} s: exit {proc.returncode}\n{stderr}"
        if (out / "timeline.json").exists():
            assert json.loads((out / "timeline.json").read_text())["complete"] is False
