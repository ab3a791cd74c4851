"""A watched run's focus (``FrameSource.focus``): ffmpeg cuts the watched box and its margin out
before the scaler, and sends the whole frame once a second. Inside the focus the frames are the
whole-frame path's to the bit; a run gives the same report either way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background

from spotdiff_cli import video_run
from spotdiff_cli.frames import video as video_frames
from spotdiff_cli.frames.video import VideoSource, find_ffmpeg, focus_cut


def test_the_cut_lands_on_the_scalers_grid_or_is_not_made() -> None:
    # 1280 -> 640: one delivered pixel is two decoded ones; 4:2:0 chroma wants steps of four
    cut = focus_cut((1280, 720), (640, 360), (631, 532, 210, 127))
    assert cut is not None
    assert all(v % 4 == 0 for v in cut.source[:2]) and all(v % 2 == 0 for v in cut.out[:2])
    x, y, w, h = cut.source
    assert x <= 631 and y <= 532 and x + w >= 631 + 210 and min(y + h, 720) >= 532 + 127
    assert cut.out == tuple(v // 2 for v in cut.source)
    # 1920 -> 640: three decoded pixels a delivered one
    cut = focus_cut((1920, 1080), (640, 360), (901, 500, 180, 120))
    assert (
        cut is not None and cut.source[0] % 6 == 0 and cut.source == tuple(3 * v for v in cut.out)
    )
    # reaching the frame's edge: the cut ends there, off the grid or not
    cut = focus_cut((1280, 720), (640, 360), (1100, 600, 180, 120))
    assert cut is not None and cut.out[0] + cut.out[2] == 640 and cut.out[1] + cut.out[3] == 360
    # a factor that is not whole (swscale's cut is then off by a few levels) or too much of
    # the frame: whole frames
    assert focus_cut((768, 432), (640, 360), (300, 120, 180, 150)) is None
    assert focus_cut((1366, 768), (640, 360), (600, 300, 100, 100)) is None
    assert focus_cut((1280, 720), (640, 360), (0, 0, 1000, 600)) is None


def _test_clip(path: Path, size: tuple[int, int], frames: int = 30, rate: int = 10) -> Path:
    """A moving test pattern, 4:2:0 MPEG-4, as most camera footage is."""
    exe = find_ffmpeg()
    if exe is None:
        pytest.skip("needs an ffmpeg binary")
    w, h = size
    subprocess.run(
        [exe, "-v", "error", "-f", "lavfi", "-i", f"testsrc2=size={w}x{h}:rate={rate}",
         "-frames:v", str(frames), "-pix_fmt", "yuv420p", "-c:v", "mpeg4", "-q:v", "4",
         "-y", str(path)],
        check=True,
    )  # fmt: skip
    return path


def _frames(path: Path, focus, every=None) -> list:
    source = VideoSource(path, backend="ffmpeg")
    source.focus = focus
    with source:
        return [(f.timestamp, f.index, f.pixels) for f in source.sample(every, max_side=640)]


@pytest.mark.parametrize(
    ("size", "focus", "every"),
    [
        ((1280, 720), (500, 300, 300, 200), None),  # every frame, 2x
        ((1920, 1080), (900, 450, 270, 240), "2f"),  # every 2nd frame, 3x
        ((640, 360), (40, 200, 200, 120), "0.2s"),  # no scaling, sampled by time
    ],
)
def test_a_focused_source_gives_the_whole_frames_pixels_inside_and_refreshes_the_rest(
    tmp_path: Path, size, focus, every
) -> None:
    clip = _test_clip(tmp_path / "pattern.mp4", size)
    whole = _frames(clip, None, every)
    focused = _frames(clip, focus, every)
    assert [(t, i) for t, i, _ in focused] == [(t, i) for t, i, _ in whole]
    out = focus_cut(size, whole[0][2].shape[1::-1], focus).out
    x, y, w, h = out
    refresh = round(video_frames.FOCUS_REFRESH_S * 10 / (2 if every else 1))
    for j, ((_, _, a), (_, _, b)) in enumerate(zip(whole, focused, strict=True)):
        assert not b.flags.writeable
        assert np.array_equal(a[y : y + h, x : x + w], b[y : y + h, x : x + w])
        # the rest is the whole frame of the latest refresh: exact there, older after it
        refreshed = whole[j - j % refresh][2]
        outside = np.ones(a.shape[:2], bool)
        outside[y : y + h, x : x + w] = False
        assert np.array_equal(b[outside], refreshed[outside])
        if j % refresh:
            assert not np.array_equal(b, a)  # the pattern moves: this part is not current


def test_a_focused_source_closed_early_leaves_no_ffmpeg(tmp_path: Path) -> None:
    clip = _test_clip(tmp_path / "pattern.mp4", (1280, 720), frames=60)
    source = VideoSource(clip, backend="ffmpeg")
    source.focus = (500, 300, 300, 200)
    frames = source.sample(None, max_side=640)
    for _ in range(3):
        next(frames)
    pipe = source._reader._procs[0]
    frames.close()
    source.close()
    assert pipe.returncode is not None


def _watched_clip(path: Path) -> Path:
    """720p, 10 fps: a red box crosses the watched region from 1 s to 3 s, a blue one moves
    outside it all along (what the focus refreshes only once a second)."""
    background = cv2.resize(textured_background(240, 320, seed=3), (1280, 720))
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (1280, 720))
    assert writer.isOpened()
    for i in range(50):
        image = draw_box(background, 40 + 20 * i, 60, 80, 60, (40, 60, 220))
        if 10 <= i < 30:
            image = draw_box(image, 560 + 8 * (i - 10), 420, 90, 70, (220, 40, 40))
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def test_a_watched_run_reports_the_same_with_the_focus_cut_out(tmp_path: Path, monkeypatch) -> None:
    clip = _watched_clip(tmp_path / "watched.avi")
    flags = {
        "video": {"every": "0.1s", "roi": ["520,380,300,200"]},
        "caption": {"recognise": False},
    }
    cuts = []
    real_cut = video_frames.focus_cut
    monkeypatch.setattr(video_frames, "focus_cut", lambda *a: cuts.append(real_cut(*a)) or cuts[-1])
    threads_seen = []
    real_cut_frames = video_frames._placed_in_whole

    def placed(*args):  # OpenCV's threads while the focused frames are read
        for item in real_cut_frames(*args):
            threads_seen.append(cv2.getNumThreads())
            yield item

    monkeypatch.setattr(video_frames, "_placed_in_whole", placed)
    threads_before = cv2.getNumThreads()
    video_run.run_video([str(clip)], out=tmp_path / "focused", flags=flags)
    assert cuts and cuts[0] is not None  # the run did cut its focus out
    # One OpenCV thread for the crops of a watched run, the caller's count given back after.
    assert threads_seen and set(threads_seen) == {1}
    assert cv2.getNumThreads() == threads_before
    monkeypatch.setattr(video_frames, "FOCUS_MAX_SHARE", 0.0)  # whole frames
    video_run.run_video([str(clip)], out=tmp_path / "whole", flags=flags)

    def events(out: Path) -> list:
        data = json.loads((out / "timeline.json").read_text())
        return [(e["start"], e["end"], e["text"]) for e in data["sources"][0]["events"]]

    found = events(tmp_path / "focused")
    assert found and found == events(tmp_path / "whole")
