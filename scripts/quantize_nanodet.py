"""Re-create weights/nanodet_coco_int8.onnx: the shipped detector in 8-bit integers.

    pip install onnx==1.23.2 onnxruntime==1.32.0     # (any venv; the project's needs only onnx)
    python scripts/quantize_nanodet.py [--media ../shared/media] [--out weights/nanodet_coco_int8.onnx]

From weights/nanodet_coco.onnx (scripts/convert_nanodet.sh), two steps:

1. **Any canvas size.** The converted graph declares its input 1x3x416x416; the network is fully
   convolutional (its Reshapes are [1, C, -1], its Resizes scale by 2), and ``cv2.dnn`` ignores
   the declaration, but onnxruntime enforces it. The input's height and width and the outputs'
   cell counts become named dimensions, so the 416x256 canvas of a 16:9 frame and the 224
   square of a small region run as they do in ``cv2.dnn`` (checked here against the float graph).
2. **Static int8 quantisation, QDQ format** (onnxruntime.quantization: weights int8 per output
   channel, activations uint8, ranges from min/max over calibration inputs). Why: a pass costs
   about half (benchmarks/detector.py), which is most of a video run's time on a 2-core machine.
   ``cv2.dnn`` (4.x) cannot read this graph; spotdiff runs it with onnxruntime.

Calibration inputs are made exactly as spotdiff makes a pass's input (``detect.letterbox`` on
a frame scaled to the pipeline's 640 px work size, and 224 px squares of regions), from the
**training parts only** of the two CC BY 4.0 Intel clips (car-detection.mp4 frames < 290,
one-by-one-person-detection.mp4 frames < 900: the same cut as scripts/train_shipped_weights.sh),
so the held-out frames of benchmarks/real_pairs.py and benchmarks/visits.py's last visitors
never set a range. The DVR-Scan clips (no licence) and the GIF (held out) are not used.

Deterministic for given inputs (fixed frames and crops); prints the float-vs-int8 agreement on
the calibration frames and the sha256 to put in weights/manifest.json.
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

# The training parts of the CC BY clips (scripts/train_shipped_weights.sh holds out the rest).
CLIPS = {
    "intel_car-detection.mp4": (0, 290, 12),
    "intel_one-by-one-person-detection.mp4": (0, 900, 30),
}
WORK_SIDE = 640  # the video pipeline's work size (frames are scaled to this long side)


def blob(canvas_bgr: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 BGR canvas -> (1, 3, H, W) float32, as ObjectDetector feeds the net."""
    x = (canvas_bgr.astype(np.float32) - MEAN_BGR) / STD_BGR
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def calibration_inputs(media: Path) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    inputs = []
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
            frame = cv2.resize(frame, (round(w * scale), round(h * scale)), cv2.INTER_AREA)
            inputs.append(blob(letterbox(frame, INPUT_SIZE, square=False)[0]))
            # A watched region (--roi, or the tracker's look around a change): a 224 square.
            h, w = frame.shape[:2]
            side = int(rng.integers(100, 300))
            x, y = int(rng.integers(0, w - side)), int(rng.integers(0, h - min(side, h - 1)))
            region = frame[y : y + side, x : x + side]
            inputs.append(blob(letterbox(region, MIN_INPUT, square=True)[0]))
        cap.release()
    return inputs


def dynamic_copy(source: Path, target: Path) -> None:
    import onnx

    model = onnx.load(str(source))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for dim, name in ((dims[2], "height"), (dims[3], "width")):
        dim.ClearField("dim_value")
        dim.dim_param = name
    for output in model.graph.output:
        cells = output.type.tensor_type.shape.dim[1]
        cells.ClearField("dim_value")
        cells.dim_param = "cells_" + output.name.split("_")[1]
    del model.graph.value_info[:]  # shapes inferred at 416x416; recomputed by the runtime
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


def max_pooling(model_path: Path) -> list[str]:
    """The max-pool and the pad before it, which stay in float.

    TensorFlow padded the max-pool with -inf (PadV2): min/max calibration then gives that
    tensor an infinite range and a scale of inf, and every layer after it is garbage (class
    scores off by 0.87 here). In float the pool costs nothing worth saving."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path))
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    keep = []
    for node in model.graph.node:
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

    model = onnx.load(str(model_path))
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            scale = constants[node.input[1]]
            if not (np.isfinite(scale).all() and (scale > 0).all()):
                raise SystemExit(f"{model_path}: a bad scale {scale} on {node.input[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO / "weights" / "nanodet_coco.onnx")
    parser.add_argument("--media", type=Path, default=REPO.parent / "shared" / "media")
    parser.add_argument("--out", type=Path, default=REPO / "weights" / "nanodet_coco_int8.onnx")
    args = parser.parse_args()

    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    inputs = calibration_inputs(args.media)
    print(f"calibration: {len(inputs)} inputs from the training parts of {', '.join(CLIPS)}")

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._next = iter(inputs)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self._next, None)
            return None if x is None else {"input": x}

    with tempfile.TemporaryDirectory() as tmp:
        dynamic = Path(tmp) / "dynamic.onnx"
        prepared = Path(tmp) / "prepared.onnx"
        dynamic_copy(args.source, dynamic)
        # Check step 1 against OpenCV on the original graph: same outputs at both canvas shapes.
        net = cv2.dnn.readNetFromONNX(str(args.source))
        session = ort.InferenceSession(str(dynamic), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        for x in inputs[:2]:
            net.setInput(x, "input")
            worst = max(
                float(np.abs(a - b).max())
                for a, b in zip(session.run(names, {"input": x}), net.forward(names))
            )
            print(f"dynamic graph vs cv2.dnn on a {x.shape[2]}x{x.shape[3]} canvas: {worst:.1e}")
            assert worst < 1e-3, worst
        quant_pre_process(str(dynamic), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(args.out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=max_pooling(prepared),
        )
        check_scales(args.out)
        quantized = ort.InferenceSession(str(args.out), providers=["CPUExecutionProvider"])
        # How far the int8 class scores stray from the float ones (sigmoid outputs in [0, 1]).
        errors = []
        for x in inputs[::7]:
            a = session.run(names[:3], {"input": x})
            b = quantized.run(names[:3], {"input": x})
            errors.append(max(float(np.abs(p - q).max()) for p, q in zip(a, b)))
        print(f"int8 vs float class scores on {len(errors)} inputs: worst {max(errors):.3f}, "
              f"median {float(np.median(errors)):.3f}")  # fmt: skip
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"{args.out}: {args.out.stat().st_size} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
