"""Where a ``spotdiff video`` run spends its time, stage by stage (not a test).

    .venv/bin/python benchmarks/video_stages.py [--rows person-1s,motorway-roi,...]

For each row of ``benchmarks/video.py`` a fresh child process imports spotdiff (timed: the
start-up every run pays), then runs the pipeline in-process through ``api.describe_video``
with timers wrapped around its stages, and prints, per stage, the time spent in it (exclusive:
a stage's time excludes the stages it calls, so the detector's passes inside the captions'
naming count once, as the detector's), the calls, the milliseconds per call, and the thread
it ran on. The stages run on four threads (decoding with the first looks and the detector's
pass of a changed sample, pair analysis, the detector's naming passes, captions + objects +
events), so their sum exceeds the wall time: the wall time is set by the busiest thread and by
the cores there are.

Timers cost a microsecond or two per call; figures on a busy machine are inflated - compare
within one run. Results go to ``docs/video.md`` ("Where the time goes").

``--cpu`` times each stage by its thread's CPU time instead of the wall clock: what the stage
costs, not how long it waited for a core, so the figures hold on a busy machine too. The
process's whole CPU time (ffmpeg's included) is printed beside them, and each thread's CPU time
(the ffmpeg process's and the native threads' apart); what the stages do not account for is
start-up, onnxruntime's and OpenCV's worker threads, the ffmpeg process and thread hand-offs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from video import MEDIA, ROWS  # noqa: E402  (the rows of benchmarks/video.py)

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, threading, time
clock = time.thread_time if sys.argv[5] == "cpu" else time.perf_counter
started = time.perf_counter()
from spotdiff_cli import api
from spotdiff_cli.config import Settings, resolve
from spotdiff_cli.timeline import pipeline
from spotdiff_cli.timeline.events import EventBuilder
from spotdiff_cli.timeline.objects import ObjectWatcher
from spotdiff_cli.timeline.tracks import ObjectTracker
from spotdiff_cli.describer import PairDescriber
from spotdiff_cli.analysis.detect import ObjectDetector
imported = time.perf_counter() - started

# Each thread's whole CPU time, by name (the pipeline names its stages' threads).
thread_cpu = {}
_run = threading.Thread.run
def _run_timed(self):
    try:
        _run(self)
    finally:
        thread_cpu[self.name] = thread_cpu.get(self.name, 0.0) + time.thread_time()
threading.Thread.run = _run_timed

totals = {}   # stage -> [exclusive seconds, calls, thread names]
local = threading.local()
lock = threading.Lock()

def timed(stage, fn):
    def wrapper(*args, **kwargs):
        stack = getattr(local, "stack", None)
        if stack is None:
            stack = local.stack = []
        stack.append(0.0)
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = clock() - t0
            children = stack.pop()
            if stack:
                stack[-1] += elapsed
            with lock:
                entry = totals.setdefault(stage, [0.0, 0, set()])
                entry[0] += elapsed - children
                entry[1] += 1
                entry[2].add(threading.current_thread().name)
    return wrapper

def patch(owner, name, stage):
    setattr(owner, name, timed(stage, getattr(owner, name)))

patch(pipeline, "changed_share", "first look (thumbnails)")
patch(pipeline, "thumbnail", "first look (thumbnails)")
patch(PairDescriber, "analyse", "pair analysis (align, mask, clusters)")
patch(pipeline._Looker, "_camera_checked", "pair analysis (align, mask, clusters)")
patch(PairDescriber, "caption", "captions (naming, words, waits)")
patch(ObjectDetector, "_detect", "detector passes")
patch(ObjectWatcher, "look", "objects (tracker, waits for a pass)")
patch(ObjectWatcher, "explain", "objects (tracker, waits for a pass)")
patch(ObjectTracker, "__init__", "tracker start (norfair import)")

# The watchers made, to read how many samples took an earlier pass's answer.
watchers = []
_watcher_init = ObjectWatcher.__init__
def watcher_init(self, *args, **kwargs):
    _watcher_init(self, *args, **kwargs)
    watchers.append(self)
ObjectWatcher.__init__ = watcher_init
patch(EventBuilder, "add", "events")

open_spec = pipeline.open_spec
def timed_open(*args, **kwargs):
    source = open_spec(*args, **kwargs)
    sample = source.sample
    def sample_timed(*a, **k):
        frames = sample(*a, **k)
        step = timed("decode (ffmpeg pipe, resize)", lambda: next(frames, None))
        def frames_timed():
            try:
                while True:
                    frame = step()
                    if frame is None:
                        return
                    yield frame
            finally:
                frames.close()
        return frames_timed()
    source.sample = sample_timed
    return source
pipeline.open_spec = timed("open source (probe)", timed_open)

clip, every, roi, flags = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
video = {"every": every, **flags}
if roi:
    video["roi"] = [roi]
settings = resolve(Settings(), None, video=video)
t0 = time.perf_counter()
(result,) = api.describe_video([clip], settings)
wall = time.perf_counter() - t0
thread_cpu["MainThread (imports included)"] = time.thread_time()
usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
cpu = sum(u.ru_utime + u.ru_stime for u in usage)
ffmpeg = usage[1].ru_utime + usage[1].ru_stime
print(json.dumps({
    "imports": imported, "wall": wall, "cpu": cpu, "samples": result.samples,
    "analysed": result.analysed, "ffmpeg": ffmpeg, "threads": thread_cpu,
    "events": len(result.events),
    "spared": sum(w.passes_spared for w in watchers),
    "stages": {k: [v[0], v[1], sorted(v[2])] for k, v in totals.items()},
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="rows of benchmarks/video.py")
    parser.add_argument(
        "--cpu", action="store_true", help="time stages by thread CPU time, not the wall clock"
    )
    args = parser.parse_args()
    for key in args.rows.split(","):
        row = ROWS[key]
        clip = MEDIA / row.clip
        if not clip.is_file():
            print(f"{row.name}: {row.clip} not in ../shared/media, skipped")
            continue
        flags = dict(zip(row.flags[::2], row.flags[1::2], strict=True))
        settings_flags = {k.lstrip("-").replace("-", "_"): v for k, v in flags.items()}
        roi = ",".join(map(str, row.roi)) if row.roi else ""
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHILD,
                str(clip),
                f"{row.every_frames}f",
                roi,
                json.dumps(settings_flags),
                "cpu" if args.cpu else "wall",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=dict(os.environ, HF_HUB_OFFLINE="1"),
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{row.name} failed:\n{proc.stderr[-3000:]}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"\n{row.name.strip()}: {got['samples']} samples, {got['analysed']} analysed, "
            f"{got['events']} events, {got['spared']} samples on an earlier detector pass's "
            f"answer; imports {got['imports']:.2f} s, pipeline wall "
            f"{got['wall']:.2f} s, process CPU {got['cpu']:.2f} s (ffmpeg's included)"
        )
        python = got["cpu"] - got["ffmpeg"]
        named = sum(got["threads"].values())
        print(
            "  CPU by thread: "
            + ", ".join(
                f"{name.replace('spotdiff-', '')} {seconds:.2f}"
                for name, seconds in sorted(got["threads"].items(), key=lambda kv: -kv[1])
            )
            + f"; native threads (onnxruntime's, OpenCV's) {python - named:.2f}; ffmpeg {got['ffmpeg']:.2f} s"
        )
        unit = "cpu s" if args.cpu else "s"
        print(f"  {'stage':40} {unit:>7} {'calls':>6} {'ms/call':>8}  thread")
        stages = sorted(got["stages"].items(), key=lambda kv: -kv[1][0])
        for stage, (seconds, calls, threads) in stages:
            print(
                f"  {stage:40} {seconds:7.2f} {calls:6d} {1000 * seconds / max(calls, 1):8.1f}  "
                + ",".join(t.replace("spotdiff-", "") for t in threads)
            )


if __name__ == "__main__":
    main()
