"""``spotdiff video --engine dask``: 1 worker against 2 on four sources (not a test).

    .venv/bin/python benchmarks/dask_scaling.py [--repeat 2] [--chunk 10m] [--every 1s]

Four sources from ../shared/media (the two Intel clips, the motorway clip and its variable
frame rate re-encode: 3:47 of video in all), described three ways one right after the other,
``--repeat`` times, each by the installed console script with ``--json`` (interpreter start,
cluster start and shutdown included, as a user would time it):

- local: ``--engine local`` (one process, the sources in turn) - the baseline;
- dask-1: ``--engine dask --workers 1`` (a LocalCluster of one worker process);
- dask-2: ``--engine dask --workers 2``.

It prints the median wall seconds of each, the ratios to the local baseline and the scaling
ratio dask-1 / dask-2, and checks that the three timelines have the same events (ids, times,
text). ``--chunk`` is passed to both Dask runs (the default keeps each of these clips whole:
the work is split by source). Timings on a shared machine are noisy: compare the ratios, and
say how busy the machine was (the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO.parent / "shared" / "media"
SPOTDIFF = Path(sys.executable).parent / "spotdiff"
CLIPS = (
    "intel_car-detection.mp4",
    "intel_one-by-one-person-detection.mp4",
    "dvrscan_traffic_camera.mp4",
    "dvrscan_traffic_camera_vfr.mp4",
)
WAYS = {
    "local": ("--engine", "local"),
    "dask-1": ("--engine", "dask", "--workers", "1"),
    "dask-2": ("--engine", "dask", "--workers", "2"),
}


def run(way: str, clips: list[Path], every: str, chunk: str) -> tuple[float, list]:
    """Wall seconds of one run, and its events (what must not depend on the engine)."""
    args = [str(SPOTDIFF), "video", *map(str, clips), "--every", every, "--json", *WAYS[way]]
    if way != "local":
        args += ["--chunk", chunk]
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{way} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    sources = json.loads(proc.stdout)["sources"]
    events = [
        [(e["id"], e["start"], e["end"], e["text"]) for e in source["events"]] for source in sources
    ]
    return seconds, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--every", default="1s")
    parser.add_argument("--chunk", default="10m")
    options = parser.parse_args()
    clips = [MEDIA / name for name in CLIPS]
    missing = [c.name for c in clips if not c.is_file()]
    if missing:
        sys.exit(f"needs ../shared/media/{', '.join(missing)}")
    print(f"{len(clips)} sources, --every {options.every}, Dask --chunk {options.chunk}")
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    timelines: dict[str, list] = {}
    for _ in range(options.repeat):
        for way in WAYS:  # one right after the other: a busy spell slows all three alike
            seconds, events = run(way, clips, options.every, options.chunk)
            times[way].append(seconds)
            timelines[way] = events
            print(f"  {way:7s} {seconds:6.1f} s", flush=True)
    same = all(timelines[way] == timelines["local"] for way in WAYS)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    median = {way: statistics.median(t) for way, t in times.items()}
    print(f"\n{'way':8s} {'median s':>9s} {'/ local':>8s}")
    for way in WAYS:
        print(f"{way:8s} {median[way]:9.1f} {median[way] / median['local']:8.2f}")
    print(f"\nwall-time ratio 1 worker / 2 workers: {median['dask-1'] / median['dask-2']:.2f}")
    print(f"same events from all three: {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
