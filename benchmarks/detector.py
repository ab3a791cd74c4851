"""One NanoDet pass, by canvas (not a test).

    .venv/bin/python benchmarks/detector.py [--repeat 20]

A real 1280x720 frame of the room clip at the analysis size (640x360) is looked at by both
backends, one thread each, interleaved ``--repeat`` times: the float graph on ``cv2.dnn``
(``weights/nanodet_coco.onnx``, what ran before the int8 graph, and what runs where onnxruntime
is absent) and the int8 graph on onnxruntime (``weights/nanodet_coco_int8.onnx``, the default).
Each on the 416 square (the converted graph's shape, 44 % black border for 16:9), on the
416x256 canvas a frame gets (the scaled frame and no more), and a 105x63 watched box (the
motorway ROI's size at 640 px) on the 224 square a small region gets. It prints the median
milliseconds of the forward pass and of the whole ``detect`` call (letterbox, pass, decoding),
and each one's ratio to the float 416x256 pass (the baseline).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import cv2
import numpy as np

from spotdiff_cli.analysis import detect as D

CLIP = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "media"
    / "intel_one-by-one-person-detection.mp4"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    capture = cv2.VideoCapture(str(CLIP))
    capture.set(cv2.CAP_PROP_POS_FRAMES, 300)
    ok, frame = capture.read()
    if not ok:
        raise SystemExit(f"cannot read {CLIP}")
    frame = cv2.resize(frame, (640, 360), interpolation=cv2.INTER_AREA)
    detectors = {
        "float, cv2.dnn": D.ObjectDetector(backend="opencv", threads=1),
        "int8, onnxruntime": D.ObjectDetector(backend="onnxruntime", threads=1),
    }

    def forward(detector: D.ObjectDetector, image: np.ndarray, size: int, square: bool) -> None:
        canvas, _ = D.letterbox(image, size, square=square)
        blob = ((canvas.astype(np.float32) - D.MEAN_BGR) / D.STD_BGR).transpose(2, 0, 1)[None]
        detector._forward(np.ascontiguousarray(blob))

    box = frame[150:213, 300:405]
    ways, calls = {}, {}
    for name, det in detectors.items():
        ways[f"{name}: frame, 416 square"] = lambda d=det: forward(d, frame, 416, True)
        ways[f"{name}: frame, 416x256"] = lambda d=det: forward(d, frame, 416, False)
        ways[f"{name}: box, 224 square"] = lambda d=det: forward(d, box, 224, True)
        calls[f"{name}: detect(frame)"] = lambda d=det: d._detect(frame, "bgr", 416, 0.3)
    times: dict[str, list[float]] = {name: [] for name in [*ways, *calls]}
    for fn in [*ways.values(), *calls.values()]:
        fn()  # the first pass allocates
    for _ in range(args.repeat):
        for name, fn in [*ways.items(), *calls.items()]:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["float, cv2.dnn: frame, 416x256"])
    print(f"{'way':46} {'ms':>7} {'ratio to float 416x256':>23}")
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"{name:46} {1000 * ms:7.1f} {ms / base:23.2f}")


if __name__ == "__main__":
    main()
