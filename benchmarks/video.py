"""Cost of ``spotdiff video`` against decoding the same sampled frames alone (not a test).

    .venv/bin/python benchmarks/video.py [VIDEO] [--times 20] [--repeat 1] [--no-cli]

For each clip (VIDEO, VIDEO concatenated ``--times`` times with ffmpeg's concat demuxer and
``-c copy``, and VIDEO upscaled to 1920x1080) and each interval (1s, 30s) it measures, in the
same process and one right after the other, so that a busy machine slows both alike:

- decode: ``open_source(path).sample(every)`` consumed (same backend as the pipeline, RGB
  arrays produced, nothing else done);
- pipeline: ``describe_source`` with default settings (first look, analysis, captions, events);
- cli: the wall time of ``spotdiff video PATH --every N --out TMP`` in a subprocess (adds the
  interpreter start, imports and report writing).

It prints a table with the ratios pipeline/decode and cli/decode (goal: pipeline <= 1.5x) and
samples per second. VIDEO defaults to ../shared/media/dvrscan_traffic_camera.mp4. Timings on a
shared machine are noisy: compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spotdiff_cli.config import Settings, VideoConfig  # noqa: E402
from spotdiff_cli.frames.sources import open_source  # noqa: E402
from spotdiff_cli.timeline import describe_source  # noqa: E402

DEFAULT = REPO.parent / "shared" / "media" / "dvrscan_traffic_camera.mp4"


def ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def concat(path: Path, times: int, out_dir: Path) -> Path:
    listing = out_dir / "list.txt"
    listing.write_text("".join(f"file '{path.resolve()}'\n" for _ in range(times)))
    out = out_dir / f"{path.stem}_x{times}{path.suffix}"
    subprocess.run([ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-f", "concat", "-safe", "0",
                    "-i", str(listing), "-c", "copy", str(out)], check=True)
    return out


def upscale(path: Path, out_dir: Path) -> Path:
    out = out_dir / f"{path.stem}_1080p.mp4"
    subprocess.run([ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-i", str(path), "-vf", "scale=1920:1080",
                    "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-an", str(out)], check=True)
    return out


def time_decode(path: Path, every: str) -> tuple[float, int]:
    start = time.perf_counter()
    with open_source(path) as src:
        n = sum(1 for _ in src.sample(every))
    return time.perf_counter() - start, n


def time_pipeline(path: Path, every: str):
    settings = Settings(video=VideoConfig(every=every))
    start = time.perf_counter()
    result = describe_source(str(path), settings)
    return time.perf_counter() - start, result


def time_cli(path: Path, every: str, out_dir: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(REPO / ".venv" / "bin" / "spotdiff"), "video", str(path), "--every", every, "--out", str(out_dir),
                    "--overwrite", "--json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("video", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--times", type=int, default=20, help="concatenate the clip this many times for the long clip")
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each measurement")
    parser.add_argument("--no-cli", action="store_true", help="skip the subprocess CLI timing")
    parser.add_argument("--no-1080p", action="store_true")
    args = parser.parse_args()
    if not args.video.is_file():
        sys.exit(f"{args.video}: not found")

    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        clips = [("720p", args.video), (f"720p x{args.times}", concat(args.video, args.times, tmp_dir))]
        if not args.no_1080p:
            clips.append(("1080p", upscale(args.video, tmp_dir)))
        rows = []
        for label, path in clips:
            for every in ("1s", "30s"):
                decode = pipe = cli = float("inf")
                for _ in range(args.repeat):
                    d, n = time_decode(path, every)
                    p, result = time_pipeline(path, every)
                    decode, pipe = min(decode, d), min(pipe, p)
                    if not args.no_cli:
                        cli = min(cli, time_cli(path, every, tmp_dir / "out"))
                rows.append((label, every, n, result.analysed, len(result.events), decode, pipe, cli))
                print(f"  {label} --every {every}: decode {decode:.2f}s pipeline {pipe:.2f}s cli {cli:.2f}s", file=sys.stderr)

    head = f"{'clip':<11} {'every':>5} {'samples':>7} {'analysed':>8} {'events':>6} {'decode s':>8} {'pipeline s':>10} {'cli s':>6} {'pipe/dec':>8} {'cli/dec':>7} {'samples/s':>9}"
    print(head)
    print("-" * len(head))
    for label, every, n, analysed, events, decode, pipe, cli in rows:
        cli_text = f"{cli:6.2f}" if cli != float("inf") else "     -"
        ratio_cli = f"{cli / decode:7.2f}" if cli != float("inf") else "      -"
        print(f"{label:<11} {every:>5} {n:>7} {analysed:>8} {events:>6} {decode:8.2f} {pipe:10.2f} {cli_text} {pipe / decode:8.2f} {ratio_cli} {n / pipe:9.1f}")


if __name__ == "__main__":
    main()
