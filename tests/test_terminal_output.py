"""What a newcomer sees on the terminal (issue 25), through the installed console script:

- piped or redirected, the output is plain lines: a caption's header and sentences whole, a
  timeline an event a line (no table, no wrapping at 80 columns); an event seen in one sample
  shows one time and one frame number, on a terminal too (never "30–30");
- control characters in a file name never reach the terminal: they print as ``\\x1b``;
- ``-q/--quiet`` silences progress, tables and summaries but never errors and warnings;
- a missing source prints its error line and nothing else;
- Ctrl-C says how to continue.

"On a terminal" is a real pseudo-terminal (``pty``), as a user's shell gives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import cv2
import pytest
import typer
from conftest import draw_box, media, textured_background
from console import (
    REPO,
    SPOTDIFF,
    check_clean_exit,
    ctrl_c_reaches_child,
    env,
    one_error_line,
    run_spotdiff,
)
from typer.testing import CliRunner

RED = (220, 40, 40)
EXAMPLE = REPO / "examples" / "parking-lot"
# ESC [31m recolours, ESC ]0; ... BEL retitles the window; \x9b is a one-byte CSI (C1).
HOSTILE = "\x1b[31mRED\x1b]0;title\x07\x9b"
HOSTILE_SHOWN = "\\x1b[31mRED\\x1b]0;title\\x07\\x9b"


def write_parked(path: Path) -> Path:
    """10 s at 10 fps: a red box arrives at 3.0 s (frame 30) and stays, so at --every 1s the
    change is seen in one sample: an event that starts and ends at 3.0 s, frame 30."""
    background = textured_background(240, 320)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    assert writer.isOpened()
    for i in range(100):
        image = draw_box(background, 200, 150, 50, 40, RED) if i >= 30 else background
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


@pytest.fixture(scope="module")
def parked(tmp_path_factory) -> Path:
    return write_parked(tmp_path_factory.mktemp("parked") / "parked.avi")


def in_terminal(*args: object, cwd: Path = REPO) -> tuple[str, str, int]:
    """Run the console script with stdout on a pseudo-terminal 100 columns wide (stderr a
    pipe: no progress bar to wade through); returns (terminal output, stderr, exit code)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    extra = {k: v for k, v in env(TERM="xterm-256color").items() if k != "COLUMNS"}
    proc = subprocess.Popen(
        [str(SPOTDIFF), *(str(a) for a in args)],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=extra,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    stderr = proc.stderr.read().decode("utf-8", "replace")
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace"), stderr, proc.returncode


# -- piped: plain lines ----------------------------------------------------------------------


def test_piped_caption_keeps_its_header_and_sentences_on_one_line_each(tmp_path):
    folder = tmp_path / ("a folder with a long name, as photo libraries have" + "-" * 30)
    folder.mkdir()
    before, after = folder / "before.jpg", folder / "after.jpg"
    shutil.copy(EXAMPLE / "before.jpg", before)
    shutil.copy(EXAMPLE / "after.jpg", after)
    proc = run_spotdiff("caption", before, after)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{before} → {after}", proc.stdout
    assert lines[1] == "  1. a large white car appeared in the upper left", proc.stdout


def test_piped_timeline_is_an_event_a_line_and_one_time_for_a_one_sample_event(parked, tmp_path):
    proc = run_spotdiff("video", parked, "--no-recognise", "--out", tmp_path / "report")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"what changed: {parked}"
    assert lines[1].startswith(
        "  #1 00:00:03.000 frames 30: a red object appeared in the lower right (frames/"
    ), proc.stdout
    assert not any(c in proc.stdout for c in "│┃━"), proc.stdout  # no table
    assert "30–30" not in proc.stdout and "03.000–00:00:03.000" not in proc.stdout


def test_a_one_sample_event_in_the_terminal_table_shows_one_frame_number(parked):
    out, stderr, code = in_terminal("video", parked, "--no-recognise")
    assert code == 0, stderr
    assert "│" in out, out  # a terminal still gets the table
    row = re.sub(r"\x1b\[[0-9;]*m", "", next(x for x in out.splitlines() if "03.000" in x))
    assert "30–30" not in row and "03.000–00:00:03.000" not in row, out
    assert "│ 30 " in row, out


# -- control characters ------------------------------------------------------------------------


@pytest.fixture
def hostile_pair(tmp_path) -> tuple[Path, Path]:
    before = tmp_path / "before.jpg"
    after = tmp_path / f"{HOSTILE}.jpg"
    shutil.copy(EXAMPLE / "before.jpg", before)
    shutil.copy(EXAMPLE / "after.jpg", after)
    return before, after


def test_control_characters_in_a_file_name_never_reach_the_terminal(hostile_pair, tmp_path):
    before, after = hostile_pair
    out, stderr, code = in_terminal("caption", before.name, after.name, cwd=tmp_path)
    assert code == 0, stderr
    assert "\x1b[31mRED" not in out and "\x1b]0;" not in out and "\x07" not in out, repr(out)
    assert f"before.jpg → {HOSTILE_SHOWN}.jpg" in out, repr(out)
    piped = run_spotdiff("caption", before.name, after.name, cwd=tmp_path)
    assert piped.stdout.splitlines()[0] == f"before.jpg → {HOSTILE_SHOWN}.jpg"


def test_control_characters_in_an_error_line_are_shown_escaped(tmp_path):
    proc = run_spotdiff("caption", EXAMPLE / "before.jpg", tmp_path / f"{HOSTILE}.jpg")
    line = one_error_line(proc)
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, repr(proc.stderr)
    assert f"{HOSTILE_SHOWN}.jpg" in line
    missing = run_spotdiff("video", tmp_path / f"{HOSTILE}.mp4")
    assert "\x1b" not in missing.stderr + missing.stdout, repr(missing.stderr)
    assert f"{HOSTILE_SHOWN}.mp4" in one_error_line(missing)


def test_the_error_boundarys_os_error_line_shows_the_path_escaped():
    """state.py's line for an OSError that escaped the library names exc.filename: escaped too."""
    from spotdiff_cli.cli.state import errors_to_exit

    app = typer.Typer()

    @app.command()
    @errors_to_exit
    def run() -> None:
        raise PermissionError(13, "Permission denied", f"/data/{HOSTILE}.png")

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 1 and "\x1b" not in result.output and "\x07" not in result.output
    assert result.output.startswith(f"error: /data/{HOSTILE_SHOWN}.png: Permission denied;")


def test_a_timeline_of_a_hostile_file_name_prints_it_escaped(parked, tmp_path):
    clip = tmp_path / f"{HOSTILE}.avi"
    shutil.copy(parked, clip)
    for out in (
        run_spotdiff("video", clip, "--no-recognise").stdout,
        in_terminal("video", clip)[0],
    ):
        assert "\x1b[31mRED" not in out and "\x1b]0;" not in out and "\x07" not in out, repr(out)
        assert HOSTILE_SHOWN in out.replace("\r\n", "").replace("\n", ""), repr(out)


# -- --quiet -----------------------------------------------------------------------------------


def test_quiet_prints_nothing_but_errors_warnings_and_what_a_flag_asked_for(parked, tmp_path):
    report = tmp_path / "report"
    quiet = run_spotdiff("-q", "video", parked, "--no-recognise", "--out", report)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet
    assert len(json.loads((report / "timeline.json").read_text())["sources"][0]["events"]) == 1
    caption = run_spotdiff("--quiet", "caption", EXAMPLE / "before.jpg", EXAMPLE / "after.jpg")
    assert caption.returncode == 0 and caption.stdout == "" and caption.stderr == ""
    # With --exit-code, a quiet caption is `grep -q`: the answer is the exit code.
    changed = run_spotdiff(
        "-q", "caption", EXAMPLE / "before.jpg", EXAMPLE / "after.jpg", "--exit-code"
    )
    assert changed.returncode == 1 and changed.stdout == ""
    # What a flag asks for still comes.
    data = run_spotdiff("-q", "video", parked, "--no-recognise", "--json")
    assert json.loads(data.stdout)["sources"][0]["events"][0]["start"] == 3.0
    # Errors and warnings always print.
    missing = run_spotdiff("-q", "video", tmp_path / "missing.mp4")
    assert missing.returncode == 1 and missing.stdout == ""
    assert "missing.mp4" in one_error_line(missing)
    hooked = run_spotdiff("-q", "video", parked, "--no-recognise", "--on-event", "false")
    assert hooked.returncode == 0 and hooked.stdout == ""
    assert hooked.stderr.startswith("warning:"), hooked.stderr


# -- a missing source --------------------------------------------------------------------------


def test_a_missing_source_prints_its_error_line_and_nothing_else(tmp_path):
    proc = run_spotdiff("video", tmp_path / "missing.mp4")
    assert proc.returncode == 1
    assert proc.stdout == "", proc.stdout
    assert "missing.mp4" in one_error_line(proc)
    out, stderr, code = in_terminal("video", tmp_path / "missing.mp4")
    assert code == 1 and out.strip() == "", out


def test_a_missing_source_beside_a_good_one_keeps_the_summary(parked, tmp_path):
    proc = run_spotdiff("video", parked, tmp_path / "missing.mp4", "--no-recognise")
    assert "#1 00:00:03.000 frames 30" in proc.stdout and "skipped:" in proc.stdout
    assert "missing.mp4" in one_error_line(proc)


# -- Ctrl-C ------------------------------------------------------------------------------------


def test_an_interrupt_says_the_commands_hint_and_exits_130(tmp_path):
    from spotdiff_cli.cli.state import errors_to_exit, resume_hint, set_interrupt_hint

    app = typer.Typer()

    @app.command()
    @errors_to_exit
    def run(out: str = "") -> None:
        set_interrupt_hint(resume_hint(out) if out else None)
        raise KeyboardInterrupt

    night = tmp_path / "night"
    # Ctrl-C before the first report (the sources still opening): nothing to continue
    early = CliRunner().invoke(app, ["--out", str(night)])
    assert early.exit_code == 130
    assert " ".join(early.output.split()) == (
        f"error: interrupted before anything was found; nothing was written to {night}"
    )
    night.mkdir()
    (night / "timeline.json").write_text("{}")
    result = CliRunner().invoke(app, ["--out", str(night)])
    assert result.exit_code == 130
    assert " ".join(result.output.split()) == (
        f"error: interrupted; the report in {night} holds what was found so far: rerun with "
        "--resume to continue"
    )
    plain = CliRunner().invoke(app, [])
    assert plain.exit_code == 130 and plain.output.strip() == "error: interrupted"
    set_interrupt_hint(None)


def test_ctrl_c_in_video_with_out_says_how_to_continue(tmp_path):
    clip = media("intel_one-by-one-person-detection.mp4")  # 139 s: still running at Ctrl-C
    out = tmp_path / "night"
    proc = subprocess.Popen(
        [str(SPOTDIFF), "video", str(clip), "--every", "1f", "--no-recognise", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        cwd=REPO, env=env(), preexec_fn=ctrl_c_reaches_child,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (out / "timeline.json").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no partial report in a minute"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    check_clean_exit(done, ("video",))
    assert proc.returncode == 130, stderr
    assert one_error_line(done) == (
        f"error: interrupted; the report in {out} holds what was found so far: rerun with "
        "--resume to continue"
    )
