"""``spotdiff video`` against a motion detector (DVR-Scan) and against decoding alone (not a test).

    .venv/bin/python benchmarks/video.py [--repeat 3] [--rows motorway-roi,motorway-full,...] [--before PATH]

Each row is one clip and one sampling, run three ways one right after the other, ``--repeat``
times (so a busy machine slows all three alike; the medians are compared):

- decode: spotdiff's own decoder yielding the same sampled frames as RGB arrays, nothing else
  (``open_source(path).sample(every)`` consumed) - the floor for any tool that looks at them
  (where every sampled frame is a keyframe, as on the person row, it decodes those alone:
  ``frames/keyframes.py``);
- dvr-scan: DVR-Scan 1.8 (MOG2 background subtraction, scan only, the same region and frame skip),
  installed in its own venv (``benchmarks/.dvrscan-venv``, made on first use from PyPI);
- spotdiff: the installed console script, ``spotdiff video CLIP --every ... --json`` (interpreter
  start, imports, recognisers and captions included), with its modules' bytecode cached first, as
  a pip install leaves it (DVR-Scan's install has its own): in a checkout run with
  ``PYTHONDONTWRITEBYTECODE=1`` every module changed since its last ``.pyc`` is compiled again at
  each start, 0.1-0.2 s of a run that does not measure spotdiff.

It prints the median seconds, events found, and the ratios spotdiff/dvr-scan and
spotdiff/decode. ``--before PATH`` (a checkout, e.g. ``git worktree add /tmp/base <commit>``)
also runs that tree's ``spotdiff_cli`` through the same console script in every round, the two
taking turns going first, and prints its row below: a change measured against what it replaced
on the same machine in the same minutes. Clips come from ../shared/media (rows whose clip is missing are skipped).
Timings on a shared machine are noisy: compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO.parent / "shared" / "media"
DVR_VENV = Path(__file__).resolve().parent / ".dvrscan-venv"
DVR_VERSION = "1.8.2.1"
SPOTDIFF = Path(sys.executable).parent / "spotdiff"


@dataclass(frozen=True)
class Row:
    name: str
    clip: str
    every_frames: int  # sample every N-th frame (DVR-Scan: --frame-skip N-1)
    roi: tuple[int, int, int, int] | None = None  # x, y, w, h
    flags: tuple[str, ...] = ()  # extra spotdiff flags


ROWS = {
    "motorway-roi": Row(
        "motorway ROI, every frame", "dvrscan_traffic_camera.mp4", 1, (631, 532, 210, 127)
    ),
    "motorway-full": Row("motorway full frame, every frame", "dvrscan_traffic_camera.mp4", 1),
    # What --describe-every (default 0.2s) spares: every changed pair described in full.
    "motorway-full-all": Row(
        "  same, --describe-every 0s",
        "dvrscan_traffic_camera.mp4",
        1,
        flags=("--describe-every", "0s"),
    ),
    "person-1s": Row("person clip, every 1 s", "intel_one-by-one-person-detection.mp4", 10),
    # The same clip off its keyframe grid (an I frame every 10): every frame decoded, as on a
    # camera whose keyframes do not fall on the samples (frames/keyframes.py).
    "person-7f": Row("  same, every 7 frames", "intel_one-by-one-person-detection.mp4", 7),
}


def dvr_scan() -> Path:
    """DVR-Scan's console script in the benchmark's own venv (created on first use)."""
    exe = DVR_VENV / "bin" / "dvr-scan"
    if not exe.exists():
        print(
            f"installing dvr-scan-headless=={DVR_VERSION} into {DVR_VENV} (once)", file=sys.stderr
        )
        subprocess.run([sys.executable, "-m", "venv", str(DVR_VENV)], check=True)
        subprocess.run(
            [str(DVR_VENV / "bin" / "pip"), "install", "-q", f"dvr-scan-headless=={DVR_VERSION}"],
            check=True,
        )
    return exe


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return seconds, proc.stdout + proc.stderr


def run_dvr(row: Row, clip: Path) -> tuple[float, int]:
    cmd = [str(dvr_scan()), "-i", str(clip), "-so", "-q"]
    if row.roi:
        x, y, w, h = row.roi
        cmd += ["-a", *map(str, (x, y, x + w, y, x + w, y + h, x, y + h))]
    if row.every_frames > 1:
        cmd += ["-fs", str(row.every_frames - 1)]
    seconds, out = timed(cmd)
    # -so -q prints the events as comma-separated timecodes: start,end,start,end,...
    codes = re.findall(r"\d\d:\d\d:\d\d\.\d+", out)
    return seconds, len(codes) // 2


def run_spotdiff(row: Row, clip: Path, tree: Path | None = None) -> tuple[float, int]:
    """The console script's run of ``row``; ``tree``: a checkout whose ``spotdiff_cli`` it
    imports instead (first on ``PYTHONPATH``; the script's own folder, not the working
    directory, is its ``sys.path[0]``)."""
    cmd = [str(SPOTDIFF), "video", str(clip), "--every", f"{row.every_frames}f", "--json"]
    cmd += list(row.flags)
    if row.roi:
        cmd += ["--roi", ",".join(map(str, row.roi))]
    seconds, out = timed(cmd, {"PYTHONPATH": str(tree)} if tree else None)
    data = json.loads(out[: out.rindex("}") + 1])
    return seconds, sum(len(s["events"]) for s in data["sources"])


def run_decode(row: Row, clip: Path) -> float:
    sys.path.insert(0, str(REPO))
    from spotdiff_cli.frames.sources import open_source

    start = time.perf_counter()
    with open_source(str(clip)) as source:
        for _ in source.sample(f"{row.every_frames}f", max_side=640):  # as the pipeline decodes
            pass
    return time.perf_counter() - start


def cache_bytecode() -> str:
    """Compile the ``spotdiff_cli`` the console script will import (this checkout, or the tree
    ``PYTHONPATH`` puts first) to ``__pycache__``, as installing it would. Returns its path."""
    import compileall

    # Asked from the console script's own folder, as the script itself imports: from the
    # checkout (sys.path's '' when run in it) the checkout would win over PYTHONPATH's tree.
    where = subprocess.run(
        [sys.executable, "-c", "import spotdiff_cli, os; print(os.path.dirname(spotdiff_cli.__file__))"],
        capture_output=True, text=True, check=True, cwd=SPOTDIFF.parent,
    ).stdout.strip()  # fmt: skip
    compileall.compile_dir(where, quiet=1)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="also time another checkout (git worktree add) in the same rounds, runs alternating",
    )
    args = parser.parse_args()
    if args.before is not None and not (args.before / "spotdiff_cli").is_dir():
        raise SystemExit(f"--before {args.before}: no spotdiff_cli there; give a checkout's root")
    dvr_scan()
    print(f"spotdiff from {cache_bytecode()} (bytecode cached)")
    if args.before is not None:
        import compileall

        compileall.compile_dir(str(args.before / "spotdiff_cli"), quiet=1)
        print(f"before: {args.before / 'spotdiff_cli'} (bytecode cached)")
    header = f"{'row':34} {'decode s':>9} {'dvr s':>7} {'ours s':>7} {'dvr ev':>6} {'our ev':>6} {'ours/dvr':>8} {'ours/dec':>8}"
    print(header)
    for key in args.rows.split(","):
        row = ROWS[key]
        clip = MEDIA / row.clip
        if not clip.is_file():
            print(f"{row.name:34} skipped: {clip} not found")
            continue
        decode, dvr, ours, before = [], [], [], []
        for round_ in range(args.repeat):
            decode.append(run_decode(row, clip))
            seconds, dvr_events = run_dvr(row, clip)
            dvr.append(seconds)
            # The two trees take turns going first, so neither always follows DVR-Scan.
            order = [None, args.before] if round_ % 2 == 0 else [args.before, None]
            for tree in order:
                if tree is None:
                    seconds, our_events = run_spotdiff(row, clip)
                    ours.append(seconds)
                elif args.before is not None:
                    seconds, before_events = run_spotdiff(row, clip, args.before)
                    before.append(seconds)
        d, v, o = statistics.median(decode), statistics.median(dvr), statistics.median(ours)
        print(
            f"{row.name:34} {d:9.2f} {v:7.2f} {o:7.2f} {dvr_events:6d} {our_events:6d} {o / v:8.2f} {o / d:8.2f}",
            flush=True,
        )
        if before:
            b = statistics.median(before)
            label = "  before (--before)"
            print(
                f"{label:34} {d:9.2f} {v:7.2f} {b:7.2f} {dvr_events:6d} {before_events:6d} {b / v:8.2f} {b / d:8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
