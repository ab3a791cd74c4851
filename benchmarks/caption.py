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
unmeasured pass over all of them; then each pair ``--repeat`` times.
Shown: the median per pair (wall, and the process's CPU seconds over all threads), and per stage
the medians of the report's own timings (resize, align, mask, cluster, camera, describe) and,
from a separate pass with the library's functions wrapped in timers, the parts of describe:
reading the clusters (colour, event), the detector (NanoDet, one forward pass per image), the
classifier (efficientnet-lite0, one batch) and the rest (HOG, sentences). A fixed OpenCV
workload (a 5x5 blur of a 720p frame, 20 times) is timed in the same process as a gauge of how
busy the machine was.

``--before PATH`` measures another checkout (``git worktree add``) in the same rounds: the
whole-process rows alternate run by run, the two trees' warm processes take turns pair by pair,
and the warm pairs' sentences are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

# A long-lived child process per tree (so that --before can import another revision's
# spotdiff_cli), answering one JSON line per command: "<i>" describes pair i once; "parts" runs
# every pair once more with the library's stage functions wrapped in timers; "gauge" times a
# fixed OpenCV workload.
_WARM = r"""
import json, sys, time
import cv2
from spotdiff_cli.describer import PairDescriber
media, clip, starts, gap = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
cap = cv2.VideoCapture(f"{media}/{clip}")
frames = {}
for index in sorted({i for s in starts for i in (s, s + gap)}):
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, image = cap.read()
    if not ok:
        raise SystemExit(f"{clip}: no frame {index}")
    frames[index] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
pairs = [(frames[s], frames[s + gap]) for s in starts]
describer = PairDescriber()
for a, b in pairs:
    describer.describe(a, b)

def gauge():
    t = time.perf_counter()
    for _ in range(20):
        cv2.GaussianBlur(pairs[0][0], (5, 5), 0)
    return time.perf_counter() - t

def parts():
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
        return owner, name, inner
    undo = [
        timed(grounded, "read_cluster", "read clusters"),
        timed(grounded, "_recognise", "recognise"),
        timed(detect.ObjectDetector, "_forward", "detector"),
        timed(recognise, "_imagenet_probs", "classifier"),
    ]
    describe = sum(describer.describe(a, b).timings["describe"] for a, b in pairs)
    for owner, name, inner in undo:
        setattr(owner, name, inner)
    out = {k: v / len(pairs) for k, v in spent.items()}
    out["recognise: rest (HOG, boxes)"] = out["recognise"] - out["detector"] - out["classifier"]
    out["sentences, colours"] = describe / len(pairs) - out["read clusters"] - out["recognise"]
    del out["recognise"]
    return out

print(json.dumps({"size": f"{pairs[0][0].shape[1]}x{pairs[0][0].shape[0]}"}), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "gauge":
        answer = {"gauge": gauge()}
    elif command == "parts":
        answer = {"parts": parts()}
    else:
        a, b = pairs[int(command)]
        c, t = time.process_time(), time.perf_counter()
        report = describer.describe(a, b)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        answer = {
            "wall": wall,
            "cpu": cpu,
            "timings": report.timings,
            "sentences": [s.text for s in report.sentences],
        }
    print(json.dumps(answer), flush=True)
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


class _Child:
    """One tree's warm process, asked one command at a time."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WARM, str(MEDIA), CLIP, json.dumps(STARTS), str(GAP)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tree, None),
            cwd=tree,
        )
        self.size = self._answer()["size"]
        os.kill(self.proc.pid, signal.SIGSTOP)

    def ask(self, command: str) -> dict:
        assert self.proc.stdin is not None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        # Stopped while the other tree works: a waiting process's thread pools (OpenCV's,
        # OpenBLAS's) may spin a while after each job, on a core the measured one needs.
        os.kill(self.proc.pid, signal.SIGSTOP)
        return answer

    def _answer(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise SystemExit(f"{self.tree}: warm process failed:\n{err[-2000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def warm_pairs(trees: list[tuple[str, Path]], repeat: int) -> None:
    if not (MEDIA / CLIP).is_file():
        print(f"warm pair: {MEDIA / CLIP} is missing, skipped")
        return
    children: dict[str, _Child] = {}
    try:
        for label, tree in trees:
            children[label] = _Child(tree)
    except BaseException:
        for child in children.values():
            child.close()
        raise
    walls: dict[str, list[list[float]]] = {k: [[] for _ in STARTS] for k in children}
    cpus: dict[str, list[float]] = {k: [] for k in children}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in children}
    gauges: dict[str, list[float]] = {k: [] for k in children}
    sentences: dict[str, list] = {k: [None] * len(STARTS) for k in children}
    try:
        # Pair by pair, the trees taking turns (first one, then the other first), so a load
        # that comes and goes falls on both.
        for rep in range(repeat):
            order = list(children) if rep % 2 == 0 else list(children)[::-1]
            for label in order:
                gauges[label].append(children[label].ask("gauge")["gauge"])
            for i in range(len(STARTS)):
                for label in order:
                    r = children[label].ask(str(i))
                    walls[label][i].append(r["wall"])
                    cpus[label].append(r["cpu"])
                    for k, v in r["timings"].items():
                        stages[label].setdefault(k, []).append(v)
                    sentences[label][i] = r["sentences"]
        parts = {label: child.ask("parts")["parts"] for label, child in children.items()}
    finally:
        for child in children.values():
            child.close()
    for label, child in children.items():
        ms = [1000 * statistics.median(w) for w in walls[label]]
        print(
            f"warm pair, {child.size}, {len(STARTS)} pairs x {repeat}, {label}: median "
            f"{statistics.median(ms):.0f} ms per pair (pairs' medians {min(ms):.0f}-"
            f"{max(ms):.0f} ms), CPU {1000 * statistics.median(cpus[label]):.0f} ms (all "
            f"threads); gauge {1000 * statistics.median(gauges[label]):.1f} ms"
        )
        print(
            "  "
            + "  ".join(
                f"{k} {1000 * statistics.median(v):.1f}"
                for k, v in stages[label].items()
                if k != "total"
            )
        )
        print("  describe = " + "  ".join(f"{k} {1000 * v:.1f}" for k, v in parts[label].items()))
    if len(children) == 2:
        a, b = sentences.values()
        print(f"  sentences {'identical' if a == b else 'DIFFER'} between the two trees")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="whole-process runs per row")
    parser.add_argument("--repeat", type=int, default=5, help="warm passes per pair")
    parser.add_argument("--before", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--no-pyc", action="store_true", help="no bytecode cache (a dev checkout)")
    parser.add_argument("--only", choices=("process", "warm"), help="one of the two measures")
    args = parser.parse_args()
    trees = ([("before", args.before.resolve())] if args.before else []) + [("now", REPO)]
    for _, tree in trees:  # a tree without spotdiff_cli would fall through to the installed one
        found = subprocess.run(
            [sys.executable, "-c", "import spotdiff_cli; print(spotdiff_cli.__file__)"],
            capture_output=True,
            text=True,
            env=_env(tree, None),
            cwd=tree,
            check=False,
        ).stdout.strip()
        if not found or not Path(found).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"{tree} has no spotdiff_cli (it imported {found or 'nothing'})")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    if args.only != "warm":
        whole_process(trees, args.runs, not args.no_pyc)
    if args.only != "process":
        warm_pairs(trees, args.repeat)


if __name__ == "__main__":
    main()
