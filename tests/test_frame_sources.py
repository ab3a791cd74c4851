"""Frame sources and sampling: what `spotdiff video` feeds the rest of the pipeline.

A synthetic clip drawn here (10 fps, 100 frames, a red square moving 1 px per frame) makes
timestamps and frame identity exact. Real footage from ../shared/media is used where present
(the variable-frame-rate clip, the GIF) and those tests skip cleanly without it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from spotdiff_cli.errors import InputError, UsageError
from spotdiff_cli.frames.folder import natural_key
from spotdiff_cli.frames.sources import SOURCES, FrameSource, open_source, sample
from spotdiff_cli.frames.video import available_backends

MEDIA = Path(__file__).resolve().parents[1].parent / "shared" / "media"
FPS, N_FRAMES, W, H = 10, 100, 160, 120
BACKENDS = available_backends()  # ffmpeg where a binary exists, always opencv


def _square_x(pixels: np.ndarray) -> int:
    """Left edge of the red square: it is at x = frame index, so this identifies the frame."""
    red = (pixels[:, :, 0] > 150) & (pixels[:, :, 1] < 100) & (pixels[:, :, 2] < 100)
    cols = np.flatnonzero(red.any(axis=0))
    return int(cols[0]) if cols.size else -1


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 fps, 100 frames, 160x120 MJPG AVI (MJPG: every frame a keyframe, exact seeks)."""
    path = tmp_path_factory.mktemp("video") / "moving.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (W, H))
    assert writer.isOpened()
    for i in range(N_FRAMES):
        img = np.zeros((H, W, 3), np.uint8)
        cv2.rectangle(img, (i, 40), (i + 20, 60), (0, 0, 255), -1)  # BGR red
        writer.write(img)
    writer.release()
    return path


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 s at 25 fps (1500 frames), tiny, keyframe every 25 frames: sparse sampling must seek."""
    path = tmp_path_factory.mktemp("video") / "long.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 25, (64, 48))
    for i in range(1500):
        img = np.full((48, 64, 3), i % 256, np.uint8)
        writer.write(img)
    writer.release()
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_metadata(clip: Path, backend: str) -> None:
    with open_source(clip, backend=backend) as src:
        info = src.info
    assert (info.width, info.height) == (W, H)
    assert info.fps == pytest.approx(FPS, rel=0.01)
    assert info.duration == pytest.approx(N_FRAMES / FPS, abs=0.15)
    assert info.backend == backend and info.name == "moving.avi"
    if info.frame_count is not None:
        assert info.frame_count == N_FRAMES


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_frames_in_order_with_presentation_times(clip: Path, backend: str) -> None:
    with open_source(clip, backend=backend) as src:
        frames = list(src)
    assert len(frames) == N_FRAMES
    assert [f.index for f in frames] == list(range(N_FRAMES))
    assert [f.timestamp for f in frames] == pytest.approx(
        [i / FPS for i in range(N_FRAMES)], abs=1e-3
    )
    first = frames[0]
    assert first.pixels.shape == (H, W, 3) and first.pixels.dtype == np.uint8
    assert first.source == str(clip)
    assert [_square_x(f.pixels) for f in frames[::10]] == list(
        range(0, N_FRAMES, 10)
    )  # RGB, right frame


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "every, start, end, expected",
    [
        ("1s", None, None, list(range(0, 100, 10))),
        ("2.5s", None, None, [0, 25, 50, 75]),
        ("25f", None, None, [0, 25, 50, 75]),
        ("3s", "1.5s", "8s", [15, 45, 75]),
        ("00:00:02", "00:00:05.000", None, [50, 70, 90]),
        ("1s", "0.05s", "3s", [1, 11, 21]),  # first frame at/after start, then start + k*every
        ("7f", "9s", None, [90, 97]),
        (None, "2s", "2.5s", [20, 21, 22, 23, 24]),  # end is exclusive
        ("0.1s", None, "0.35", [0, 1, 2, 3]),
        ("1s", "20f", "50f", [20, 30, 40]),  # positions as frame counts
    ],
)
def test_sampling_picks_the_right_frames(
    clip: Path, backend: str, every, start, end, expected
) -> None:
    with open_source(clip, backend=backend) as src:
        frames = list(sample(src, every, start, end))
    assert [f.index for f in frames] == expected
    assert [f.timestamp for f in frames] == pytest.approx([i / FPS for i in expected], abs=1e-3)
    assert [_square_x(f.pixels) for f in frames] == expected  # the pixels are that frame's


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_from_start_continues_without_gaps_or_repeats(clip: Path, backend: str) -> None:
    """A run stopped at T and resumed with start=T sees each sample exactly once."""
    with open_source(clip, backend=backend) as src:
        whole = [f.index for f in src.sample("1.5s")]
    first = [f.index for f in sample(clip, "1.5s", end="4.5s", backend=backend)]
    rest = [f.index for f in sample(clip, "1.5s", start="4.5s", backend=backend)]
    assert first + rest == whole == [0, 15, 30, 45, 60, 75, 90]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_sampling_seeks_instead_of_decoding_everything(
    long_clip: Path, backend: str
) -> None:
    with open_source(long_clip, backend=backend) as src:
        frames = list(src.sample("10s"))
        stats = src.stats
    assert [round(f.timestamp, 3) for f in frames] == [0, 10, 20, 30, 40, 50]
    assert stats.converted == 6
    assert stats.seeks >= 5
    assert stats.decoded < 60, f"decoded {stats.decoded} of 1500 frames: sampling did not seek"


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_sampling_walks_without_seeking(long_clip: Path, backend: str) -> None:
    with open_source(long_clip, backend=backend) as src:
        frames = list(src.sample("1s", end="10s"))
        stats = src.stats
    assert len(frames) == 10
    assert stats.seeks == 0 and stats.converted == 10  # skipped frames are never colour-converted


@pytest.mark.parametrize("backend", BACKENDS)
def test_seek_threshold_is_selectable(long_clip: Path, backend: str) -> None:
    walk = open_source(long_clip, backend=backend, seek_threshold=10**9)
    seek = open_source(long_clip, backend=backend, seek_threshold=0)
    with walk, seek:
        a = [f.timestamp for f in walk.sample("20s")]
        b = [f.timestamp for f in seek.sample("20s")]
    assert a == pytest.approx([0, 20, 40])
    assert b == pytest.approx([0, 20, 40])
    assert walk.stats.seeks == 0 and seek.stats.seeks >= 2
    assert walk.stats.decoded > 10 * seek.stats.decoded


def test_bad_time_syntax_fails_before_decoding(clip: Path) -> None:
    with open_source(clip) as src:
        with pytest.raises(UsageError, match="30s"):
            src.sample("every 30 seconds")
        with pytest.raises(UsageError, match="after --start"):
            src.sample("1s", start="5s", end="2s")
        assert src.stats.decoded == 0


def test_corrupt_video_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "holiday.mp4"
    bad.write_text("this is not a video\n")
    for backend in BACKENDS:
        with pytest.raises(InputError) as info:
            open_source(bad, backend=backend)
        message = str(info.value)
        assert "holiday.mp4" in message and "\n" not in message.strip()


def test_missing_file_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no such file"):
        open_source("/nonexistent/cam.mp4")


def test_unknown_kind_and_backend_are_usage_errors(clip: Path) -> None:
    with pytest.raises(UsageError, match="did you mean 'video'"):
        open_source(clip, kind="vidoe")
    with pytest.raises(UsageError, match="auto, ffmpeg or opencv"):
        open_source(clip, backend="gstreamer")


def test_registry_holds_the_builtin_plugins() -> None:
    assert {"video", "folder", "glob", "files"} <= set(SOURCES)


# -- folders, globs, lists --------------------------------------------------------------------


def _write_png(path: Path, value: int, mtime: float | None = None) -> None:
    cv2.imwrite(str(path), np.full((8, 12, 3), value, np.uint8))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """img1, img2, img10 with mtimes in the *reverse* order, plus files that are not images."""
    now = time.time()
    _write_png(tmp_path / "img10.png", 10, now - 300)
    _write_png(tmp_path / "img2.png", 2, now - 200)
    _write_png(tmp_path / "img1.png", 1, now - 100)
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".hidden.png").write_bytes(b"")
    return tmp_path


def test_folder_natural_sort(folder: Path) -> None:
    with open_source(folder) as src:
        frames = list(src)
        assert src.info.kind == "folder" and src.info.frame_count == 3
        assert (src.info.width, src.info.height) == (12, 8)
    assert [Path(f.source).name for f in frames] == ["img1.png", "img2.png", "img10.png"]
    assert [int(f.pixels[0, 0, 0]) for f in frames] == [1, 2, 10]
    assert [f.index for f in frames] == [0, 1, 2]


def test_natural_key_orders_numbers_by_value() -> None:
    names = ["frame_10.jpg", "frame_9.jpg", "Frame_100.jpg", "frame_1.jpg"]
    assert sorted(names, key=natural_key) == [
        "frame_1.jpg",
        "frame_9.jpg",
        "frame_10.jpg",
        "Frame_100.jpg",
    ]


def test_folder_time_sort_uses_mtime_without_exif(folder: Path) -> None:
    with open_source(folder, sort="time") as src:
        frames = list(src)
    assert [Path(f.source).name for f in frames] == ["img10.png", "img2.png", "img1.png"]
    assert [f.timestamp for f in frames] == pytest.approx([0, 100, 200], abs=0.01)


def test_folder_time_sort_prefers_exif_capture_time(tmp_path: Path) -> None:
    from PIL import Image

    for name, taken in [("a.jpg", "2024:05:01 12:00:30"), ("b.jpg", "2024:05:01 12:00:00")]:
        exif = Image.Exif()
        exif.get_ifd(0x8769)[36867] = taken  # DateTimeOriginal
        Image.new("RGB", (8, 8)).save(tmp_path / name, exif=exif)
    os.utime(tmp_path / "b.jpg", (time.time(), time.time()))  # mtime says b is newer: EXIF wins
    os.utime(tmp_path / "a.jpg", (time.time() - 1000, time.time() - 1000))
    with open_source(tmp_path, sort="time") as src:
        frames = list(src)
    assert [Path(f.source).name for f in frames] == ["b.jpg", "a.jpg"]
    assert [f.timestamp for f in frames] == pytest.approx([0.0, 30.0])


def test_folder_sampling_loads_only_sampled_files(tmp_path: Path) -> None:
    for i in range(20):
        _write_png(tmp_path / f"f{i}.png", i)
    with open_source(tmp_path, fps=2) as src:  # an exported sequence at 2 fps
        frames = list(src.sample("2s", start="1s"))
        assert [f.index for f in frames] == [2, 6, 10, 14, 18]
        assert [f.timestamp for f in frames] == pytest.approx([1, 3, 5, 7, 9])
        assert src.stats.decoded == 5
        assert [f.index for f in src.sample("5f", start="3f", end="15f")] == [3, 8, 13]


def test_glob_and_explicit_list(folder: Path) -> None:
    with open_source(str(folder / "img*.png")) as src:
        assert src.info.kind == "glob"
        assert [Path(f.source).name for f in src] == ["img1.png", "img2.png", "img10.png"]
    order = [folder / "img10.png", folder / "img1.png"]
    with open_source(order) as src:
        assert src.info.kind == "files"
        assert [Path(f.source).name for f in src] == ["img10.png", "img1.png"]  # order kept


def test_empty_folder_and_unmatched_glob_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no images found"):
        open_source(tmp_path)
    with pytest.raises(InputError, match="no images found"):
        open_source(str(tmp_path / "*.jpg"))


def test_corrupt_image_in_folder_is_skipped_and_reported(folder: Path) -> None:
    (folder / "img3.png").write_text("garbage")
    with open_source(folder) as src:  # one bad snapshot must not cost the whole folder
        names = [Path(f.source).name for f in src]
        assert names == ["img1.png", "img2.png", "img10.png"]
        assert len(src.stats.skipped) == 1 and "img3.png" in src.stats.skipped[0]


# -- real footage -----------------------------------------------------------------------------

needs_media = pytest.mark.skipif(not MEDIA.is_dir(), reason="../shared/media not present")


@needs_media
@pytest.mark.parametrize("backend", BACKENDS)
def test_variable_frame_rate_timestamps_are_presentation_times(backend: str) -> None:
    """288 frames at 25 fps then 288 at 12.5 fps: the frame at 20 s real time is frame 394, and
    index / 25 would call it 15.76 s. The timestamp must say 20 s."""
    path = MEDIA / "dvrscan_traffic_camera_vfr.mp4"
    with open_source(path, backend=backend) as src:
        assert src.info.duration == pytest.approx(34.5, abs=0.2)
        frames = list(src.sample("10s", start="10s", end="30s"))
    assert [f.timestamp for f in frames] == pytest.approx([10.0, 20.0], abs=0.05)
    assert all(f.pixels.shape == (720, 1280, 3) for f in frames)


@needs_media
@pytest.mark.parametrize("backend", BACKENDS)
def test_variable_frame_rate_frame_strides_follow_the_real_rate(backend: str) -> None:
    path = MEDIA / "dvrscan_traffic_camera_vfr.mp4"
    with open_source(path, backend=backend) as src:
        times = [f.timestamp for f in src.sample("10f", start="11s", end="12.5s")]
    # 25 fps (0.04 s) up to frame 288 at 11.52 s, then 12.5 fps (0.08 s): 10 frames from 11.0 s
    # reach 11.4 s, the next 10 cross the change (3 short + 7 long steps) and reach 12.08 s.
    assert times == pytest.approx([11.0, 11.4, 12.08], abs=0.005)


@needs_media
@pytest.mark.parametrize("backend", BACKENDS)
def test_gif_source(backend: str) -> None:
    path = MEDIA / "intel_person-bicycle-car-detection.gif"
    with open_source(path, backend=backend) as src:
        assert (src.info.width, src.info.height) == (480, 270)
        frames = list(src.sample("1s"))
    assert [f.timestamp for f in frames] == pytest.approx([0, 1, 2, 3], abs=0.05)
    assert frames[0].pixels.shape == (270, 480, 3)
    assert not np.array_equal(frames[0].pixels, frames[-1].pixels)  # the scene moves


def test_frame_source_is_the_protocol(clip: Path) -> None:
    src = open_source(clip)
    assert isinstance(src, FrameSource)
    assert open_source(src) is src
    src.close()


@needs_media
@pytest.mark.parametrize("backend", BACKENDS)
def test_variable_frame_rate_large_frame_strides_stay_exact(backend: str) -> None:
    """Strides large enough to seek: OpenCV's frame seek assumes a constant rate, so the source
    must notice the wrong landing and still return frames 0, 100, 200, 300."""
    path = MEDIA / "dvrscan_traffic_camera_vfr.mp4"
    with open_source(path, backend=backend, seek_threshold=0) as src:
        frames = list(src.sample("100f", end="13s"))
    assert [f.index for f in frames] == [0, 100, 200, 300]
    assert [f.timestamp for f in frames] == pytest.approx([0.0, 4.0, 8.0, 12.48], abs=0.005)


def test_a_frame_time_is_its_pts_in_the_time_base_not_the_rounded_pts_time():
    """Older ffmpeg prints pts_time with six significant digits: past 10,000 s (a night's
    recording) frames 0.04 s apart would share a time. The pipe reads each showinfo instance's
    time base and times frames by their integer pts."""
    import sys

    from spotdiff_cli.frames.base import DecodeStats
    from spotdiff_cli.frames.video import FFmpegPipe

    # Stands in for ffmpeg: one showinfo instance, two 2x2 frames 0.04 s apart at 8h20m.
    script = (
        "import sys\n"
        "err = sys.stderr\n"
        "err.write('[Parsed_showinfo_0 @ 0x1] config in time_base: 1/90000, frame_rate: 25/1\\n')\n"
        "for pts, shown in ((2700126000, '30001.4'), (2700129600, '30001.4')):\n"
        "    err.write(f'[Parsed_showinfo_0 @ 0x1] n:   0 pts:{pts} pts_time:{shown} duration:3600\\n')\n"
        "    err.flush()\n"
        "    sys.stdout.buffer.write(bytes(12)); sys.stdout.flush()\n"
    )
    pipe = FFmpegPipe([sys.executable, "-c", script], DecodeStats())
    try:
        times = [pts for _, pts, _ in pipe.frames(2, 2)]
    finally:
        pipe.close()
    assert times == [30001.4, 30001.44]
