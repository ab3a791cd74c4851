"""How fast ``spotdiff caption`` answers (not a test): one whole process on the bundled example,
and one warm pair of 720p frames in a long-lived process.

    .venv/bin/python benchmarks/caption.py [--runs 7] [--repeat 5] [--before PATH] [--no-pyc]

**Whole process**: ``spotdiff caption examples/parking-lot/before.jpg examples/parking-lot/after.jpg``
(the README's Quick start) from interpreter start to exit, ``--runs`` times, next to two floors
measured in the same rounds - ``python -c pass`` and ``python -c "import cv2, numpy"``, what any
Python tool built on OpenCV pays before its first line - so a busy machine slows all rows alike.
Rows run round-robin; shown are the median and the least wall seconds, the median CPU seconds
(user + sys, all threads) and the main thread's CPU seconds - what an idle machine's wall time
comes near when the background loading (recognise.warm_up) keeps off the main thread's way.
Bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``, one unmeasured run first), as in an
installed package; ``--no-pyc`` measures a checkout run with ``PYTHONDONTWRITEBYTECODE=1``, which
compiles every spotdiff module on every start.

**Warm pair**: six 1280x720 pairs of the DVR-Scan traffic clip (frames N and N+30;
../shared/media/dvrscan_traffic_camera.mp4) described by one ``PairDescriber`` after one
unmeasured pass over all of them; then each pair ``--repeat`` times. Shown: the median per pair
(wall, and the process's CPU seconds over all threads), and per stage the medians of the report's own timings (resize, align, mask, cluster, camera,
describe) and, from a separate pass with the library's functions wrapped in timers, the parts of
describe: reading the clusters (colour, event), the detector (NanoDet, one forward pass per
image), the classifier (efficientnet-lite0, one batch) and the rest (HOG, sentences). A fixed
OpenCV workload (a 5x5 blur of a 720p frame, 20 times) is timed in the same process as a gauge
of how busy the machine was.

``--before PATH`` measures another checkout (``git worktree add``): in the same rounds for the
whole process, one after the other for the warm pairs (compare their gauges); the warm pairs'
sentences are compared too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO.parent / "shared" / "media"
EXAMPLE = ("examples/parking-lot/before.jpg", "examples/parking-lot/after.jpg")
CLIP = "dvrscan_traffic_camera.mp4"
STARTS = (0, 100, 200, 300, 400, 500)  # pairs (N, N + 30)
GAP = 30

# The console script's own code (spotdiff_cli.entry:main), run by this interpreter so that
# PYTHONPATH picks the tree; at the end the main thread's CPU seconds go to stderr.
_CLI = """import sys, time
sys.argv[0] = 'spotdiff'
try:
    from spotdiff_cli.entry import main
    main()
finally:
    sys.stderr.write(f"\\nmain-thread-cpu {time.thread_time()}\\n")
"""

# A child process per tree, so that --before can import another revision's spotdiff_cli.
_WARM = r"""
import json, statistics, sys, time
import cv2, numpy as np
from spotdiff_cli.describer import PairDescriber
media, clip, starts, gap, repeat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cap = cv2.VideoCapture(f"{media}/{clip}")
frames = {}
for index in sorted({i for s in starts for i in (s, s + gap)}):
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, image = cap.read()
    if not ok:
        raise SystemExit(f"{clip}: no frame {index}")
    frames[index] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
pairs = [(frames[s], frames[s + gap]) for s in starts]
size = f"{pairs[0][0].shape[1]}x{pairs[0][0].shape[0]}"

def gauge():
    image = pairs[0][0]
    t = time.perf_counter()
    for _ in range(20):
        cv2.GaussianBlur(image, (5, 5), 0)
    return time.perf_counter() - t

describer = PairDescriber()
for a, b in pairs:
    describer.describe(a, b)
gauges, per_pair, cpu_per_pair, stages, sentences = [gauge()], [], [], {}, []
for a, b in pairs:
    times, cpus = [], []
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        report = describer.describe(a, b)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        for k, v in report.timings.items():
            stages.setdefault(k, []).append(v)
    per_pair.append(statistics.median(times))
    cpu_per_pair.append(statistics.median(cpus))
    sentences.append([s.text for s in report.sentences])
gauges.append(gauge())

# The parts of describe, from the library's own functions wrapped in timers (a separate pass:
# the wrappers cost a little).
from spotdiff_cli.analysis import detect, recognise
from spotdiff_cli.captioners import grounded
spent = {"read clusters": 0.0, "detector": 0.0, "classifier": 0.0, "recognise": 0.0}
def timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(owner, name, wrapper)
timed(grounded, "read_cluster", "read clusters")
timed(grounded, "_recognise", "recognise")
timed(detect.ObjectDetector, "_forward", "detector")
timed(recognise, "_imagenet_probs", "classifier")
describe_total = 0.0
for a, b in pairs:
    for _ in range(repeat):
        describe_total += describer.describe(a, b).timings["describe"]
n = len(pairs) * repeat
parts = {k: v / n for k, v in spent.items()}
parts["recognise: rest (HOG, boxes)"] = parts["recognise"] - parts["detector"] - parts["classifier"]
parts["sentences, colours"] = describe_total / n - parts["read clusters"] - parts["recognise"]
print(json.dumps({
    "size": size,
    "per_pair": per_pair,
    "cpu_per_pair": cpu_per_pair,
    "stages": {k: statistics.median(v) for k, v in stages.items()},
    "describe_parts": parts,
    "gauge": statistics.median(gauges),
    "sentences": sentences,
}))
"""


def _env(tree: Path, pycache: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _timed_run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s of the child: user + sys, all its threads, CPU s of its main thread when
    it says (else nan))."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err[-2000:]}")
    said = [line.split()[1] for line in err.splitlines() if line.startswith("main-thread-cpu ")]
    return wall, usage.ru_utime + usage.ru_stime, float(said[-1]) if said else float("nan")


def whole_process(trees: list[tuple[str, Path]], runs: int, pyc: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="spotdiff-pyc-") as cache:
        rows: list[tuple[str, list[str], Path, dict[str, str]]] = [
            ("python -c pass", [sys.executable, "-c", "pass"], REPO, _env(REPO, None)),
            (
                "python -c 'import cv2, numpy'",
                [sys.executable, "-c", "import cv2, numpy"],
                REPO,
                _env(REPO, cache if pyc else None),
            ),
        ]
        for label, tree in trees:
            rows.append(
                (
                    f"spotdiff caption (example), {label}",
                    [sys.executable, "-c", _CLI, "caption", *EXAMPLE],
                    tree,
                    _env(tree, f"{cache}/{label}" if pyc else None),
                )
            )
        for _, argv, cwd, env in rows:  # compile the bytecode, fill the page cache
            _timed_run(argv, env, cwd)
        walls: dict[str, list[float]] = {r[0]: [] for r in rows}
        cpus: dict[str, list[float]] = {r[0]: [] for r in rows}
        mains: dict[str, list[float]] = {r[0]: [] for r in rows}
        for _ in range(runs):
            for label, argv, cwd, env in rows:
                wall, cpu, main = _timed_run(argv, env, cwd)
                walls[label].append(wall)
                cpus[label].append(cpu)
                mains[label].append(main)
    floor = statistics.median(walls[rows[1][0]])
    print(f"whole process, {runs} runs round-robin, bytecode {'cached' if pyc else 'not cached'}")
    print(f"  {'':44} {'wall s':>7} {'min':>6} {'cpu s':>7} {'main':>6} {'wall/(cv2+numpy)':>17}")
    for label, *_ in rows:
        wall, cpu = statistics.median(walls[label]), statistics.median(cpus[label])
        main = statistics.median(mains[label])
        print(
            f"  {label:44} {wall:7.3f} {min(walls[label]):6.3f} {cpu:7.3f} "
            f"{'' if main != main else f'{main:.3f}':>6} {wall / floor:17.2f}"
        )


def warm_pairs(trees: list[tuple[str, Path]], repeat: int) -> None:
    if not (MEDIA / CLIP).is_file():
        print(f"warm pair: {MEDIA / CLIP} is missing, skipped")
        return
    results = {}
    for label, tree in trees:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _WARM,
                str(MEDIA),
                CLIP,
                json.dumps(STARTS),
                str(GAP),
                str(repeat),
            ],
            capture_output=True,
            text=True,
            env=_env(tree, None),
            cwd=tree,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{tree}: warm pass failed:\n{proc.stderr[-2000:]}")
        results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    for label, r in results.items():
        ms = [1000 * t for t in r["per_pair"]]
        print(
            f"warm pair, {r['size']}, {len(ms)} pairs x {repeat}, {label}: median "
            f"{statistics.median(ms):.0f} ms per pair (pairs {min(ms):.0f}-{max(ms):.0f} ms), "
            f"CPU {1000 * statistics.median(r['cpu_per_pair']):.0f} ms (all threads); "
            f"gauge {1000 * r['gauge']:.1f} ms"
        )
        stages = r["stages"]
        print("  " + "  ".join(f"{k} {1000 * v:.1f}" for k, v in stages.items() if k != "total"))
        print(
            "  describe = "
            + "  ".join(
                f"{k} {1000 * v:.1f}" for k, v in r["describe_parts"].items() if k != "recognise"
            )
        )
    if len(results) == 2:
        a, b = results.values()
        same = a["sentences"] == b["sentences"]
        print(f"  sentences {'identical' if same else 'DIFFER'} between the two trees")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="whole-process runs per row")
    parser.add_argument("--repeat", type=int, default=5, help="warm passes per pair")
    parser.add_argument("--before", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--no-pyc", action="store_true", help="no bytecode cache (a dev checkout)")
    parser.add_argument("--only", choices=("process", "warm"), help="one of the two measures")
    args = parser.parse_args()
    trees = ([("before", args.before.resolve())] if args.before else []) + [("now", REPO)]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    if args.only != "warm":
        whole_process(trees, args.runs, not args.no_pyc)
    if args.only != "process":
        warm_pairs(trees, args.repeat)


if __name__ == "__main__":
    main()
