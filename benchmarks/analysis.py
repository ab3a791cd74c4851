"""Where the time goes in the pixel and object-level analysis, and grid DBSCAN vs sklearn.

    .venv/bin/python benchmarks/analysis.py [--repeat 5]

1. align + mask + cluster per pair at 224x224, 720p and 1080p, analysed at full resolution and
   at the default working size (640 px long side).
2. Clustering the same 720p and 1080p full-resolution masks with sklearn's DBSCAN on every active
   pixel (the baseline) and with spotdiff's grid DBSCAN: time, peak traced memory, and the
   adjusted Rand index between the two labelings. Ratios are against the baseline measured in
   the same run (absolute times on shared machines move).
3. The whole `spotdiff caption` on a 720p pair (a fresh process: start-up included), and its
   stage timings.

Pairs are real frames from ../shared/media when present (motorway camera, 720p), else
synthetic scenes, so the script runs anywhere.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spotdiff_cli.analysis import analyse_pair, make_pair  # noqa: E402
from spotdiff_cli.analysis.cluster import grid_dbscan, sklearn_dbscan  # noqa: E402
from spotdiff_cli.config import AnalysisConfig  # noqa: E402
from spotdiff_cli.types import Frame  # noqa: E402

TRAFFIC = REPO.parent / "shared" / "media" / "dvrscan_traffic_camera.mp4"


def real_pair() -> tuple[np.ndarray, np.ndarray, str] | None:
    if not TRAFFIC.is_file():
        return None
    cap = cv2.VideoCapture(str(TRAFFIC))
    frames = []
    for index in (60, 100):  # cars move between these on the watched carriageway
        cap.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, frame = cap.read()
        if not ok:
            return None
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    return frames[0], frames[1], "motorway camera frames 60/100"


def synthetic_pair(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    base = cv2.GaussianBlur(rng.normal(110, 20, (height, width, 3)).astype(np.float32), (0, 0), 1.5)
    before = np.clip(base, 0, 255).astype(np.uint8)
    after = before.copy()
    s = height / 224
    for k in range(4):  # four objects of a few percent of the frame
        x, y = int((20 + 50 * k) * s), int((30 + 35 * k) * s)
        cv2.rectangle(after, (x, y), (x + int(28 * s), y + int(18 * s)), (200, 40 + 50 * k, 40), -1)
    return before, after


def pair_at(height: int, width: int, real: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    if real is None:
        return synthetic_pair(height, width)
    before, after, _ = real
    return (
        cv2.resize(before, (width, height), interpolation=cv2.INTER_AREA),
        cv2.resize(after, (width, height), interpolation=cv2.INTER_AREA),
    )


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


# sklearn's neighbour lists at 1080p can exceed this machine's memory: the child is capped so a
# blow-up is reported as such instead of taking the machine down.
MEMORY_CAP_GB = 16


def cluster_in_child(
    method: str, active: np.ndarray, eps: float, min_samples: int, repeat: int
) -> dict:
    """Run one clusterer in a fresh process (memory capped); return its median time, peak RSS
    and labels, or the reason it failed. A fresh process makes peak RSS a fair memory figure."""
    import json

    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/mask.npy", active)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            method,
            tmp,
            str(eps),
            str(min_samples),
            str(repeat),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["killed"])[-1]
            return {
                "error": "out of memory" if "MemoryError" in tail or done.returncode < 0 else tail
            }
        result = json.loads(done.stdout)
        result["labels"] = np.load(f"{tmp}/labels.npy")
        return result


def child(method: str, folder: str, eps: float, min_samples: int, repeat: int) -> None:
    import json
    import resource

    cap = MEMORY_CAP_GB * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    active = np.load(f"{folder}/mask.npy")
    fn = sklearn_dbscan if method == "sklearn" else grid_dbscan
    seconds, labels = timed(lambda: fn(active, eps, min_samples), repeat)
    np.save(f"{folder}/labels.npy", labels)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux)
    print(json.dumps({"seconds": seconds, "peak_mib": peak}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, method, folder, eps, min_samples, repeat = sys.argv
        child(method, folder, float(eps), int(min_samples), int(repeat))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    real = real_pair()
    print(f"pairs: {real[2] if real else 'synthetic scenes (../shared/media absent)'}\n")

    sizes = {"224x224": (224, 224), "720p": (720, 1280), "1080p": (1080, 1920)}
    print(f"1. analysis per pair (median of {args.repeat}), milliseconds")
    print(
        f"{'size':>8} {'work':>6} {'align':>7} {'mask':>7} {'cluster':>8} {'total':>7} {'clusters':>9}"
    )
    for name, (h, w) in sizes.items():
        before, after = pair_at(h, w, real) if name != "224x224" else pair_at(224, 224, real)
        pair = make_pair(Frame(before, "b"), Frame(after, "a"))
        for work in (0, 640):
            if work and max(h, w) <= work:
                continue
            config = AnalysisConfig(work_size=work)
            analyse_pair(pair, config)  # warm-up (OpenCV initialises lazily)
            total, result = timed(
                lambda pair=pair, config=config: analyse_pair(pair, config), args.repeat
            )
            t = result.timings
            print(
                f"{name:>8} {'full' if work == 0 else work:>6} {1000 * t['align']:7.1f} {1000 * t['mask']:7.1f} "
                f"{1000 * t['cluster']:8.1f} {1000 * total:7.1f} {len(result.clusters):9d}"
            )

    print("\n2. DBSCAN on every active pixel of the full-resolution mask: sklearn vs grid")
    from sklearn.metrics import adjusted_rand_score

    print(
        f"{'size':>8} {'active px':>10} {'eps':>5} {'minPts':>6} {'sklearn ms':>11} {'grid ms':>8} {'speed-up':>9} "
        f"{'sklearn MiB':>12} {'grid MiB':>9} {'ARI':>7}   (MiB = peak RSS of a fresh process)"
    )
    for name in ("720p", "1080p"):
        h, w = sizes[name]
        before, after = pair_at(h, w, real)
        config = AnalysisConfig(work_size=0)
        result = analyse_pair(make_pair(Frame(before, "b"), Frame(after, "a")), config)
        active = result.mask.active
        eps, min_samples = config.scaled_dbscan(h, w)
        sk = cluster_in_child("sklearn", active, eps, min_samples, 1)
        grid = cluster_in_child("grid", active, eps, min_samples, args.repeat)
        head = f"{name:>8} {int(active.sum()):10d} {eps:5.1f} {min_samples:6d}"
        if "error" in sk:
            print(
                f"{head} {'failed':>11} {1000 * grid['seconds']:8.1f} {'-':>9} {sk['error'] + f' (cap {MEMORY_CAP_GB} GB)':>12} "
                f"{grid['peak_mib']:9.0f} {'-':>7}"
            )
            continue
        ari = adjusted_rand_score(sk["labels"][active], grid["labels"][active])
        print(
            f"{head} {1000 * sk['seconds']:11.1f} {1000 * grid['seconds']:8.1f} {sk['seconds'] / grid['seconds']:8.1f}x "
            f"{sk['peak_mib']:12.0f} {grid['peak_mib']:9.0f} {ari:7.4f}"
        )

    print("\n3. `spotdiff caption` on a 720p pair in a fresh process (start-up included)")
    before, after = pair_at(720, 1280, real)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, image in (("before.png", before), ("after.png", after)):
            cv2.imwrite(f"{tmp}/{name}", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
            paths.append(f"{tmp}/{name}")
        exe = str(Path(sys.executable).with_name("spotdiff"))
        import_only, _ = timed(
            lambda: subprocess.run([sys.executable, "-c", "import spotdiff_cli.cli"], check=True), 3
        )
        help_time, _ = timed(
            lambda: subprocess.run([exe, "--help"], capture_output=True, check=True), 3
        )
        whole, out = timed(
            lambda: subprocess.run(
                [exe, "caption", *paths, "--json"], capture_output=True, text=True, check=True
            ),
            args.repeat,
        )
        import json

        data = json.loads(out.stdout)
        print(
            f"  wall time, whole command: {1000 * whole:.0f} ms   (`spotdiff --help`: {1000 * help_time:.0f} ms; "
            f"python + imports: {1000 * import_only:.0f} ms)"
        )
        print(
            "  inside the command: "
            + ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in data["timings"].items())
        )
        print("  sentences: " + " | ".join(s["text"] for s in data["sentences"]))


if __name__ == "__main__":
    main()
