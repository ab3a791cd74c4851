"""Decoding only the keyframes where they are every frame a sampling keeps (frames/keyframes.py):
the same frames, times and indices as decoding everything, fewer frames decoded, and a plan
that the decoded frames contradict falls back to decoding everything."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import draw_box, textured_background

from spotdiff_cli.frames import keyframes
from spotdiff_cli.frames.keyframes import PacketIndex, frame_plan, scan_packets, time_plan
from spotdiff_cli.frames.sources import open_source
from spotdiff_cli.frames.video import find_ffmpeg

FPS = 10
FRAMES = 95
GOP = 5  # a keyframe every half second


def _index(count: int, gop: int, fps: float = FPS, start: float = 0.0) -> PacketIndex:
    times = start + np.arange(count) / fps
    return PacketIndex(times=times, keys=np.arange(count) % gop == 0)


def test_a_frame_sampling_on_the_keyframe_grid_is_planned_from_the_keyframes():
    index = _index(100, GOP)
    same = frame_plan(index, GOP)
    assert same is not None and same.select is None
    assert same.indices == tuple(range(0, 100, GOP))
    every_other = frame_plan(index, 2 * GOP)
    assert every_other is not None and every_other.select == "not(mod(n,2))"
    assert every_other.indices == tuple(range(0, 100, 2 * GOP))
    # Off the grid, or keyframes everywhere (nothing to skip): the ordinary pass.
    assert frame_plan(index, 3) is None
    assert frame_plan(index, 7) is None
    assert frame_plan(_index(100, 1), 5) is None


def test_keyframes_after_the_last_kept_frame_are_left_out_by_their_count():
    index = PacketIndex(times=np.arange(12) / FPS, keys=np.isin(np.arange(12), [0, 5, 10, 11]))
    plan = frame_plan(index, GOP)
    assert plan is not None and plan.indices == (0, 5, 10) and plan.select == "lt(n,3)"


def test_a_time_sampling_keeps_the_first_frame_at_or_after_each_target():
    index = _index(100, GOP, start=1.4)  # a container start time
    plan = time_plan(index, 1.4, 0.5, "select-expr")
    assert plan is not None and plan.select == "select-expr"
    assert plan.indices == tuple(range(0, 100, GOP))
    assert np.allclose(plan.times, 1.4 + np.arange(0, 100, GOP) / FPS)
    assert time_plan(index, 1.4, 0.3, "select-expr") is None  # lands between keyframes


def test_a_stream_that_does_not_start_on_a_keyframe_gets_no_plan():
    index = _index(100, GOP)
    index.keys[0] = False
    assert frame_plan(index, GOP) is None


@pytest.fixture(scope="module")
def h264_clip(tmp_path_factory) -> Path:
    """An H.264 clip with a keyframe every GOP frames and B frames, a box crossing it."""
    ffmpeg = find_ffmpeg()
    if ffmpeg is None:
        pytest.skip("needs ffmpeg")
    path = tmp_path_factory.mktemp("keyframes") / "gop.mp4"
    background = textured_background(120, 160)
    raw = b"".join(
        draw_box(background, 5 + i, 40, 30, 30, (220, 40, 40)).tobytes() for i in range(FRAMES)
    )
    subprocess.run(
        [ffmpeg, "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "160x120"]
        + ["-r", str(FPS), "-i", "-", "-c:v", "libx264", "-g", str(GOP), "-keyint_min", str(GOP)]
        + ["-sc_threshold", "0", "-bf", "2", "-pix_fmt", "yuv420p", str(path)],
        input=raw,
        check=True,
    )
    return path


@pytest.fixture(scope="module")
def ts_clip(h264_clip) -> Path:
    """The same stream in MPEG-TS: its timestamps start at 1.4 s, not 0."""
    path = h264_clip.with_suffix(".ts")
    subprocess.run(
        [find_ffmpeg(), "-v", "error", "-i", str(h264_clip), "-c", "copy", str(path)], check=True
    )
    return path


def _sampled(path: Path, every: str, keyframes_allowed: bool, start: str | None = None, end=None):
    with open_source(str(path)) as source:
        source._reader.keyframes = keyframes_allowed
        digest = hashlib.sha256()
        frames = []
        for frame in source.sample(every, start=start, end=end):
            digest.update(frame.pixels.tobytes())
            frames.append((round(frame.timestamp, 6), frame.index))
        return digest.hexdigest(), frames, source.stats.decoded, source._reader.keyframe_fallbacks


@pytest.mark.parametrize("every", ["5f", "10f", "0.5s", "1s"])
def test_keyframes_only_give_the_frames_of_decoding_everything(h264_clip, every):
    index = scan_packets(find_ffmpeg(), str(h264_clip))
    assert index is not None and index.times.size == FRAMES
    assert np.flatnonzero(index.keys).tolist() == list(range(0, FRAMES, GOP))
    fast = _sampled(h264_clip, every, True)
    slow = _sampled(h264_clip, every, False)
    assert fast[:2] == slow[:2] and fast[1]
    assert fast[3] == 0  # no fallback
    assert slow[2] == FRAMES and fast[2] == len(range(0, FRAMES, GOP))  # the keyframes alone


@pytest.mark.parametrize(
    ("every", "start", "end"), [("5f", "2", None), ("0.5s", "2.5", "7"), ("1s", "1.95", None)]
)
def test_a_run_that_seeks_decodes_keyframes_only_from_there(h264_clip, ts_clip, every, start, end):
    """--start, a resumed run's replay and Dask's chunks seek: the frames from the seek point
    are planned the same way (the last case seeks just before a keyframe)."""
    for clip in (h264_clip, ts_clip):
        fast = _sampled(clip, every, True, start, end)
        slow = _sampled(clip, every, False, start, end)
        assert fast[:2] == slow[:2] and fast[1] and fast[3] == 0
        assert fast[2] <= slow[2] / GOP + 1  # the keyframes alone (and one before the seek)


def test_a_stream_that_starts_late_is_planned_on_its_own_times(ts_clip):
    fast = _sampled(ts_clip, "5f", True)
    assert fast[:2] == _sampled(ts_clip, "5f", False)[:2]
    assert fast[1][0][0] == 0.0 and fast[2] == len(range(0, FRAMES, GOP)) and fast[3] == 0


def test_a_sampling_between_keyframes_decodes_everything(h264_clip):
    fast = _sampled(h264_clip, "3f", True)
    assert fast[:2] == _sampled(h264_clip, "3f", False)[:2]
    assert fast[2] == FRAMES


def test_a_plan_the_decoded_frames_contradict_falls_back_to_decoding_everything(
    h264_clip, monkeypatch
):
    """A container whose key flags lie (here: every second frame claimed a keyframe): the
    keyframes-only pass gives other frames than planned, and the rest comes from the ordinary
    pass, with nothing delivered twice or missed."""
    real = scan_packets(find_ffmpeg(), str(h264_clip))
    assert real is not None
    lying = PacketIndex(times=real.times, keys=np.arange(FRAMES) % 2 == 0)
    monkeypatch.setattr(keyframes, "scan_packets", lambda *a, **k: lying)
    monkeypatch.setattr("spotdiff_cli.frames.video.scan_packets", lambda *a, **k: lying)
    fast = _sampled(h264_clip, "2f", True)
    assert fast[3] == 1
    assert fast[:2] == _sampled(h264_clip, "2f", False)[:2]


@pytest.fixture
def scans(monkeypatch) -> list[float | None]:
    """How far each packet scan the video reader makes reads (None: the whole file), in order."""
    import spotdiff_cli.frames.video as video

    made: list[float | None] = []

    def counted(exe, path, seconds=None, **kwargs):
        made.append(seconds)
        return scan_packets(exe, path, seconds=seconds, **kwargs)

    monkeypatch.setattr(video, "scan_packets", counted)
    return made


def test_a_long_file_is_scanned_whole_only_where_its_start_admits_a_plan(
    h264_clip, monkeypatch, scans
):
    import spotdiff_cli.frames.video as video

    monkeypatch.setattr(video, "LONG_SECONDS", 5.0)  # the clip is 9.5 s: "long"
    monkeypatch.setattr(video, "PREFIX_SECONDS", 3.0)
    off_grid = _sampled(h264_clip, "3f", True)
    assert scans == [3.0] and off_grid[2] == FRAMES  # the first 3 s ruled it out
    scans.clear()
    on_grid = _sampled(h264_clip, "5f", True)
    assert scans == [3.0, None] and on_grid[2] == len(range(0, FRAMES, GOP))
    assert on_grid[:2] == _sampled(h264_clip, "5f", False)[:2]


def test_a_short_file_is_scanned_once_whole(h264_clip, scans):
    """The probe knows the clip lasts 9.5 s: no first-minute scan before the whole one."""
    assert _sampled(h264_clip, "5f", True)[:2] == _sampled(h264_clip, "5f", False)[:2]
    assert scans == [None]
