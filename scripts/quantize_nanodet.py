"""Re-create weights/nanodet_coco_int8.onnx: the shipped detector in 8-bit integers.

    pip install '.[export]'            # onnx 1.23.2 here, with the project's onnxruntime 1.32.0
    python scripts/quantize_nanodet.py [--media ../shared/media] [--out weights/]

From weights/nanodet_coco.onnx (scripts/convert_nanodet.sh), two steps:

1. **Any canvas size.** The converted graph declares its input 1x3x416x416; the network is fully
   convolutional (its Reshapes are [1, C, -1], its Resizes scale by 2), and ``cv2.dnn`` ignores
   the declaration, but onnxruntime enforces it. The input's height and width and the outputs'
   cell counts become named dimensions, so the 416x256 canvas of a 16:9 frame and the 224
   square of a small region run as they do in ``cv2.dnn`` (checked here against the float graph).
2. **Static int8 quantisation, QDQ format** (onnxruntime.quantization: weights int8 per output
   channel in 7 bits (``reduce_range``), activations uint8, ranges from min/max over calibration
   inputs). Seven bits because onnxruntime's int8 convolution on a CPU without VNNI (AVX2: AMD
   Zen 3, older Intel) adds each pair of uint8 x int8 products in a saturating 16-bit sum: with
   8-bit weights those sums overflowed, and the same graph found other boxes there than on a
   VNNI CPU (class scores off the float graph's by up to 0.20 instead of 0.08; a car park's car
   became a kite). With 255 * 64 * 2 = 32640 < 2^15 every sum is exact, on every CPU. Why: a pass costs
   a quarter of the float graph's on ``cv2.dnn`` (benchmarks/detector.py), which was most of a
   video run's time on a 2-core machine. ``cv2.dnn`` (4.x) cannot read this graph; spotdiff runs
   it with onnxruntime.

Calibration inputs are made exactly as spotdiff makes a pass's input (``detect.letterbox`` on
a frame scaled to the pipeline's 640 px work size, and 224 px squares of regions), from the
**training parts only** of the two CC BY 4.0 Intel clips (car-detection.mp4 frames < 290,
one-by-one-person-detection.mp4 frames < 900: the same cut as scripts/train_shipped_weights.sh),
so the held-out frames of benchmarks/real_pairs.py and benchmarks/visits.py's last visitors
never set a range. The DVR-Scan clips (no licence) and the GIF (held out) are not used.

Deterministic for given inputs (fixed frames and crops; the shipped bytes came from the
project's venv: OpenCV 4.14, numpy 2.4, onnx 1.23.2, onnxruntime 1.32.0 - another OpenCV
decodes or scales the frames a little differently, and the ranges with them); prints the
float-vs-int8 agreement and the sha256 to put in weights/manifest.json.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spotdiff_cli.analysis.detect import (  # noqa: E402
    INPUT_SIZE,
    MEAN_BGR,
    MIN_INPUT,
    STD_BGR,
    letterbox,
)

WEIGHTS = REPO / "weights"
# The training parts of the CC BY clips (scripts/train_shipped_weights.sh holds out the rest):
# clip -> (first frame, frame to stop before, every n-th frame).
CLIPS = {
    "intel_car-detection.mp4": (0, 290, 12),
    "intel_one-by-one-person-detection.mp4": (0, 900, 30),
}
WORK_SIDE = 640  # the video pipeline's work size (frames are scaled to this long side)


def training_frames(media: Path) -> list[np.ndarray]:
    """BGR frames of the clips' training parts at the work size."""
    frames = []
    for clip, (start, stop, step) in CLIPS.items():
        cap = cv2.VideoCapture(str(media / clip))
        if not cap.isOpened():
            raise SystemExit(f"{media / clip}: cannot open; give --media the folder of the clips")
        for index in range(stop):
            ok, frame = cap.read()
            if not ok:
                break
            if index < start or (index - start) % step:
                continue
            h, w = frame.shape[:2]
            scale = WORK_SIDE / max(h, w)
            size = (round(w * scale), round(h * scale))
            frames.append(cv2.resize(frame, size, interpolation=cv2.INTER_AREA))
        cap.release()
    return frames


def detector_blob(canvas_bgr: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 BGR canvas -> (1, 3, H, W) float32, as ObjectDetector feeds the net."""
    x = (canvas_bgr.astype(np.float32) - MEAN_BGR) / STD_BGR
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def random_box(rng: np.random.Generator, width: int, height: int) -> tuple[int, int, int, int]:
    """A square of 100-300 px inside the frame (clipped at the bottom when taller than it)."""
    side = int(rng.integers(100, 300))
    x, y = int(rng.integers(0, width - side)), int(rng.integers(0, height - min(side, height - 1)))
    return x, y, side, min(side, height - y)


def detector_inputs(frames: list[np.ndarray]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    inputs = []
    for frame in frames:
        inputs.append(detector_blob(letterbox(frame, INPUT_SIZE, square=False)[0]))
        # A watched region (--roi, or a look around a change): a 224 square.
        x, y, w, h = random_box(rng, frame.shape[1], frame.shape[0])
        region = frame[y : y + h, x : x + w]
        inputs.append(detector_blob(letterbox(region, MIN_INPUT, square=True)[0]))
    return inputs


def free_dimensions(source: Path, target: Path) -> None:
    """Copy ``source`` with the input's height and width and the outputs' cell counts named."""
    import onnx

    graph = onnx.load(str(source))
    dims = graph.graph.input[0].type.tensor_type.shape.dim
    for index, name in ((2, "height"), (3, "width")):
        dims[index].ClearField("dim_value")
        dims[index].dim_param = name
    for output in graph.graph.output:
        cells = output.type.tensor_type.shape.dim[1]
        cells.ClearField("dim_value")
        cells.dim_param = f"cells_{output.name}"
    del graph.graph.value_info[:]  # shapes inferred at 416x416; recomputed at run time
    onnx.checker.check_model(graph)
    onnx.save(graph, str(target))


def kept_in_float(model_path: Path) -> list[str]:
    """Nodes that stay in float: a max-pool and a pad with -inf in it.

    TensorFlow padded NanoDet's max-pool with -inf (PadV2): min/max calibration then gives that
    tensor an infinite range and a scale of inf, and every layer after it is garbage (class
    scores off by 0.87 here). In float the pool costs nothing worth saving."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model_path)).graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute[0].HasField("t"):
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    keep = []
    for node in graph.node:
        if node.op_type == "MaxPool":
            keep.append(node.name)
        elif node.op_type == "Pad" and len(node.input) > 2:
            value = constants.get(node.input[2])
            if value is not None and np.isinf(value).any():
                keep.append(node.name)
    return keep


def check_scales(model_path: Path) -> None:
    """Every quantisation scale is finite and positive (an inf one silently ruins the net)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model_path)).graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            scale = constants[node.input[1]]
            if not (np.isfinite(scale).all() and (scale > 0).all()):
                raise SystemExit(f"{model_path}: a bad scale {scale} on {node.input[0]}")


def quantize(source: Path, out: Path, inputs: list[np.ndarray]) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._next = iter(inputs)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self._next, None)
            return None if x is None else {"input": x}

    print(f"{len(inputs)} calibration inputs from {', '.join(CLIPS)} (training parts)")
    with tempfile.TemporaryDirectory() as tmp:
        free, prepared = Path(tmp) / "free.onnx", Path(tmp) / "prepared.onnx"
        free_dimensions(source, free)
        floating = ort.InferenceSession(str(free), providers=["CPUExecutionProvider"])
        names = [o.name for o in floating.get_outputs()]
        net = cv2.dnn.readNetFromONNX(str(source))
        for x in inputs[:2]:
            net.setInput(x, "input")
            worst = max(
                float(np.abs(a - b).max())
                for a, b in zip(floating.run(names, {"input": x}), net.forward(names))
            )
            print(f"  free-size graph vs cv2.dnn, input {tuple(x.shape)}: {worst:.1e}")
            assert worst < 1e-3, worst
        quant_pre_process(str(free), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            nodes_to_exclude=kept_in_float(prepared),
        )
        check_scales(out)
        quantized = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        sample = inputs[::7]
        a = [floating.run(names, {"input": x}) for x in sample]
        b = [quantized.run(names, {"input": x}) for x in sample]
        print(f"  int8 vs float on {len(sample)} inputs: {agreement(a, b)}")
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"  {out}: {out.stat().st_size} bytes, sha256 {digest}")


def agreement(a: list[np.ndarray], b: list[np.ndarray]) -> str:
    """How far the int8 class scores (sigmoid outputs in [0, 1]) stray from the float ones."""
    errors = [max(float(np.abs(p - q).max()) for p, q in zip(x[:3], y[:3])) for x, y in zip(a, b)]
    return f"class scores differ by at most {max(errors):.3f} (median {np.median(errors):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--media", type=Path, default=REPO.parent / "shared" / "media")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="folder to write into")
    args = parser.parse_args()
    frames = training_frames(args.media)
    quantize(
        WEIGHTS / "nanodet_coco.onnx", args.out / "nanodet_coco_int8.onnx", detector_inputs(frames)
    )


if __name__ == "__main__":
    main()
