"""Decoding floors: spotdiff's ffmpeg pipe against PyAV in-process and OpenCV (not a test).

    .venv/bin/python benchmarks/decode_floors.py [--repeat 5]

PyAV is not a dependency; to include it, put a wheel on the path for the run:

    pip install --target /tmp/avpkg av && PYTHONPATH=/tmp/avpkg .venv/bin/python benchmarks/decode_floors.py

Each row decodes one clip the way a video run samples it (every frame, or every 10th) and
brings each sampled frame to an RGB array at the analysis size (640 px long side), three ways
in turn, ``--repeat`` times; it prints the median seconds and each way's ratio to spotdiff's:

- spotdiff: ``open_source(path).sample(every, max_side=640)`` (an ffmpeg process, rawvideo
  over a pipe, scaled by ffmpeg; frames read on this process's side);
- pyav: the same file decoded in-process (``thread_type="AUTO"``), every frame decoded,
  the sampled ones converted (``to_ndarray`` at 640 px, swscale);
- opencv: ``cv2.VideoCapture`` ``grab`` for skipped frames, ``read`` + ``cv2.resize`` for the
  sampled ones.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import cv2

from spotdiff_cli.frames.sources import open_source

MEDIA = Path(__file__).resolve().parents[2] / "shared" / "media"
WORK = 640
ROWS = [
    ("motorway, every frame", "dvrscan_traffic_camera.mp4", 1),
    ("person clip, every 10th frame (1 s)", "intel_one-by-one-person-detection.mp4", 10),
]


def _size(width: int, height: int) -> tuple[int, int]:
    scale = min(1.0, WORK / max(width, height))
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)


def by_spotdiff(path: Path, step: int) -> int:
    source = open_source(str(path))
    try:
        return sum(1 for _ in source.sample(f"{step}f", max_side=WORK))
    finally:
        source.close()


def by_pyav(path: Path, step: int) -> int:
    import av

    n = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        width, height = _size(stream.codec_context.width, stream.codec_context.height)
        for k, frame in enumerate(container.decode(stream)):
            if k % step == 0:
                frame.to_ndarray(width=width, height=height, format="rgb24")
                n += 1
    return n


def by_opencv(path: Path, step: int) -> int:
    capture = cv2.VideoCapture(str(path))
    width, height = _size(
        int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    )
    n = k = 0
    try:
        while True:
            if k % step:
                if not capture.grab():
                    break
            else:
                ok, frame = capture.read()
                if not ok:
                    break
                cv2.cvtColor(
                    cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA),
                    cv2.COLOR_BGR2RGB,
                )
                n += 1
            k += 1
    finally:
        capture.release()
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ways: list[tuple[str, Callable[[Path, int], int]]] = [("spotdiff", by_spotdiff)]
    try:
        import av  # noqa: F401

        ways.append(("pyav", by_pyav))
    except ImportError:
        print("PyAV not importable: its column is skipped (see the docstring)")
    ways.append(("opencv", by_opencv))
    print(f"{'row':38} " + " ".join(f"{w + ' s':>11} {'frames':>6}" for w, _ in ways) + "   ratios")
    for name, clip, step in ROWS:
        path = MEDIA / clip
        if not path.is_file():
            print(f"{name}: {clip} not in ../shared/media, skipped")
            continue
        times: dict[str, list[float]] = {w: [] for w, _ in ways}
        frames: dict[str, int] = {}
        for _ in range(args.repeat):
            for way, fn in ways:  # interleaved: a busy moment slows all alike
                t0 = time.perf_counter()
                frames[way] = fn(path, step)
                times[way].append(time.perf_counter() - t0)
        median = {w: statistics.median(t) for w, t in times.items()}
        ratios = " ".join(f"{w}/spotdiff {median[w] / median['spotdiff']:.2f}" for w, _ in ways[1:])
        print(
            f"{name:38} "
            + " ".join(f"{median[w]:11.2f} {frames[w]:6d}" for w, _ in ways)
            + f"   {ratios}"
        )


if __name__ == "__main__":
    main()
