"""frames/video.py's ffmpeg plumbing: the showinfo question asked once per binary, the pipes
widened so ffmpeg does not stop at every frame, and the filter graph's threads."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from spotdiff_cli.frames import video as video_frames

_F_GETPIPE_SZ = 1032


def _fake_ffmpeg(folder: Path) -> tuple[Path, Path]:
    """A stand-in binary that answers the showinfo question and counts how often it was asked."""
    asked = folder / "asked"
    exe = folder / "ffmpeg"
    exe.write_text(f'#!/bin/sh\necho x >> "{asked}"\necho "showinfo AVOptions: checksum"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe, asked


def _times_asked(asked: Path) -> int:
    return len(asked.read_text().splitlines()) if asked.exists() else 0


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in for ffmpeg")
def test_the_showinfo_question_is_asked_once_per_binary(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    exe, asked = _fake_ffmpeg(tmp_path)
    for _ in range(3):  # three processes' worth: the in-process memo forgotten each time
        video_frames._showinfo_help.cache_clear()
        assert video_frames._showinfo_options(str(exe)) == {"checksum": 0}
    assert _times_asked(asked) == 1
    # Another binary at the same path (an upgrade) is asked again.
    later = exe.stat().st_mtime_ns + 5_000_000_000
    os.utime(exe, ns=(later, later))
    video_frames._showinfo_help.cache_clear()
    assert video_frames._showinfo_options(str(exe)) == {"checksum": 0}
    assert _times_asked(asked) == 2
    # Without the cache, every process asks.
    monkeypatch.setenv("SPOTDIFF_FFMPEG_CACHE", "0")
    video_frames._showinfo_help.cache_clear()
    video_frames._showinfo_options(str(exe))
    assert _times_asked(asked) == 3
    video_frames._showinfo_help.cache_clear()


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in for ffmpeg")
def test_a_binary_that_fails_is_not_remembered(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    exe = tmp_path / "ffmpeg"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    video_frames._showinfo_help.cache_clear()
    assert video_frames._showinfo_help(str(exe)) is None
    assert not (tmp_path / "cache" / "spotdiff" / "ffmpeg").exists() or not any(
        (tmp_path / "cache" / "spotdiff" / "ffmpeg").iterdir()
    )
    video_frames._showinfo_help.cache_clear()


def _pipe_max() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _pipe_max() < video_frames.PIPE_BYTES,
    reason="pipe sizes are Linux's, up to its pipe-max-size",
)
def test_ffmpegs_pipes_hold_more_than_a_frame() -> None:
    import fcntl

    pipe = video_frames.FFmpegPipe([sys.executable, "-c", "import time; time.sleep(0.2)"], None)
    try:
        for stream in (pipe.proc.stdout, pipe.proc.stderr):
            assert fcntl.fcntl(stream.fileno(), _F_GETPIPE_SZ) >= video_frames.PIPE_BYTES
    finally:
        pipe.close()


def test_the_filter_graph_runs_on_the_threads_chosen(monkeypatch) -> None:
    import ffmpeg

    stream = ffmpeg.input("clip.mp4").video
    monkeypatch.setattr(video_frames, "FILTER_THREADS", 1)
    args = video_frames.rgb_pipe_args("ffmpeg", stream, scale=(640, 360))
    assert args[args.index("-filter_complex_threads") + 1] == "1"
    monkeypatch.setattr(video_frames, "FILTER_THREADS", None)
    assert "-filter_complex_threads" not in video_frames.rgb_pipe_args("ffmpeg", stream)


def _tiny_clip(path: Path) -> Path:
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for i in range(5):
        writer.write(np.full((48, 64, 3), 40 * i, np.uint8))
    writer.release()
    return path


def test_a_source_asked_about_ahead_takes_that_answer(tmp_path: Path, monkeypatch) -> None:
    exe = video_frames.find_ffmpeg()
    if exe is None:
        pytest.skip("no ffmpeg binary")
    clip = _tiny_clip(tmp_path / "clip.avi")
    monkeypatch.setattr(video_frames, "_AHEAD", {})  # other tests' commands asked about theirs
    video_frames.probe_ahead([str(tmp_path / "missing.mp4"), str(tmp_path), str(clip)])
    key = (exe, os.path.realpath(clip))
    assert list(video_frames._AHEAD) == [key]  # the file alone: not the folder, not the missing
    asked = []
    real_run = video_frames.subprocess.run
    monkeypatch.setattr(
        video_frames.subprocess,
        "run",
        lambda args, **kw: asked.append(args) or real_run(args, **kw),
    )
    source = video_frames.VideoSource(clip, backend="ffmpeg")
    try:
        assert (source.info.width, source.info.height) == (64, 48)
        assert not any("-i" in args for args in asked)  # the answer given ahead was taken
        assert key not in video_frames._AHEAD
    finally:
        source.close()
    # Opened again, it asks for itself.
    again = video_frames.VideoSource(clip, backend="ffmpeg")
    again.close()
    assert any("-i" in args for args in asked)


def test_answers_nobody_takes_are_reaped(tmp_path: Path, monkeypatch) -> None:
    if video_frames.find_ffmpeg() is None:
        pytest.skip("no ffmpeg binary")
    monkeypatch.setattr(video_frames, "_AHEAD", {})
    clips = [_tiny_clip(tmp_path / f"clip{i}.avi") for i in range(video_frames._AHEAD_KEPT + 3)]
    first = []
    for clip in clips:
        video_frames.probe_ahead([str(clip)])
        first = first or list(video_frames._AHEAD.values())
    assert len(video_frames._AHEAD) == video_frames._AHEAD_KEPT
    assert first[0].returncode is not None  # the oldest was ended and waited for
    for proc in video_frames._AHEAD.values():
        video_frames._forget(proc)
