"""Decode-only cost of sampling a video with each backend (not part of the test suite).

    .venv/bin/python benchmarks/decode.py [VIDEO] [--sweep]

Times ``sample(source, every)`` with the pixels discarded, for each backend and interval, and
prints the decoded / converted frame counts and seeks. A longer clip is made by concatenating
VIDEO 10x with ffmpeg's concat demuxer (``-c copy``: no re-encode) into a temp folder.
``--sweep`` compares always-seek with always-walk per gap, which is how the seek thresholds in
``spotdiff_cli/frames/video.py`` were chosen.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spotdiff_cli.frames.sources import open_source  # noqa: E402
from spotdiff_cli.frames.video import available_backends, find_ffmpeg  # noqa: E402

DEFAULT = (
    Path(__file__).resolve().parents[1].parent / "shared" / "media" / "dvrscan_traffic_camera.mp4"
)


def time_sampling(
    path: Path, backend: str, every: str, seek_threshold: int | None = None
) -> tuple[float, int, object]:
    start = time.perf_counter()
    with open_source(path, backend=backend, seek_threshold=seek_threshold) as src:
        n = sum(1 for _ in src.sample(every))
        stats = src.stats
    return time.perf_counter() - start, n, stats


def concat(path: Path, times: int, out_dir: Path) -> Path:
    listing = out_dir / "list.txt"
    listing.write_text("".join(f"file '{path}'\n" for _ in range(times)))
    out = out_dir / f"{path.stem}_x{times}{path.suffix}"
    subprocess.run(
        [
            find_ffmpeg(),
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "concat",
            "-safe",
            "0",
            "-i",
            str(listing),
            "-c",
            "copy",
            "-y",
            str(out),
        ],
        check=True,
    )
    return out


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    video = Path(args[0]) if args else DEFAULT
    backends = available_backends()
    print(f"{'clip':<36} {'backend':<7} {'every':>6} {'s':>7} {'samples':>7}  stats")
    for every in ("1s", "5s"):
        for backend in backends:
            secs, n, stats = time_sampling(video, backend, every)
            print(f"{video.name:<36} {backend:<7} {every:>6} {secs:7.2f} {n:7d}  {stats}")
    with tempfile.TemporaryDirectory() as tmp:
        long_clip = concat(video, 10, Path(tmp))
        for every in ("30s", "5s"):
            for backend in backends:
                secs, n, stats = time_sampling(long_clip, backend, every)
                print(f"{long_clip.name:<36} {backend:<7} {every:>6} {secs:7.2f} {n:7d}  {stats}")
        if "--sweep" in sys.argv:
            # Always seek (threshold 0) vs always walk (threshold huge), per gap in frames.
            for backend in backends:
                for gap in (5, 12, 25, 50, 100, 250):
                    row = []
                    for label, thr in (("seek", 0), ("walk", 10**9)):
                        secs, n, _ = time_sampling(long_clip, backend, f"{gap}f", thr)
                        row.append(f"{label} {secs / max(n, 1) * 1000:6.1f} ms/sample")
                    print(f"sweep {backend:<7} gap {gap:4d}f: " + "  ".join(row))


if __name__ == "__main__":
    main()
