"""Convert NanoDet (TF.js graph model) to ONNX: the helper of ``scripts/convert_nanodet.sh``.

Runs inside the converter's own throwaway venv (TensorFlow, tfjs-graph-converter, tf2onnx,
onnxruntime), never in the project's ``.venv``; ``convert_nanodet.sh`` builds that venv with pinned
versions and calls this file. Steps:

1. ``tfjs_graph_converter`` turns ``nanodet.json`` + ``nanodet.bin`` into a TF SavedModel.
2. tf2onnx converts the SavedModel at opset 13. It refuses these graphs as they come: their nodes
   carry an ``_input_shapes`` attribute (a list of shapes, written by the ONNX -> TF -> TF.js chain
   the packager used) that ``onnx.helper.make_attribute`` cannot type, so it is added to tf2onnx's
   ignored attributes (it is an annotation, not part of any op's semantics).
3. Inputs and outputs get names that say what they are. The graph's own names are ``input_1`` and
   ``Identity`` ... ``Identity_5`` in no useful order; the outputs are identified by their shapes
   (N = (416 / stride)², last axis 80 = class scores, 44 = box distributions) and renamed
   ``cls_8``, ``cls_16``, ``cls_32``, ``dist_8``, ``dist_16``, ``dist_32``; the input is ``input``.
4. tf2onnx's generated constant names are replaced by canonical ones (``canonical_names``), so the
   output is byte-for-byte reproducible.
5. Checks, which fail the conversion: the I/O shapes are the expected ones; on a fixed pseudo-random
   image and on a smooth synthetic one, every ONNX output (onnxruntime) matches the SavedModel's to
   ``--tolerance``; the class scores lie in [0, 1] (the graph ends in a sigmoid). The largest
   difference and the sha256 of the written file are printed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

OPSET = 13
SIZE = 416
CLASSES = 80
BINS = 11  # reg_max 10 -> 11 bins per side, 4 sides
STRIDES = (8, 16, 32)


def to_saved_model(model_json: Path, out_dir: Path) -> None:
    import tfjs_graph_converter.api as tfjs_api

    tfjs_api.graph_model_to_saved_model(str(model_json), str(out_dir), ["serve"])


def expected_names() -> dict[tuple[int, int], str]:
    """(cells, channels) -> the name this conversion gives that output."""
    names = {}
    for stride in STRIDES:
        cells = (SIZE // stride) ** 2
        names[(cells, CLASSES)] = f"cls_{stride}"
        names[(cells, 4 * BINS)] = f"dist_{stride}"
    return names


def to_onnx(saved_model: Path, out_file: Path) -> tuple[dict[str, str], str]:
    """Convert; return ({graph output name -> our name}, graph input name)."""
    import tensorflow as tf
    import tf2onnx
    from tf2onnx import tf_loader, tf_utils

    tf_utils.TF_IGNORED_NODE_ATTRS.add("_input_shapes")

    sig = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    (_, in_specs) = sig.structured_input_signature
    if len(in_specs) != 1:
        raise SystemExit(f"expected one input, got {list(in_specs)}")
    in_name, in_spec = next(iter(in_specs.items()))
    if tuple(in_spec.shape) != (1, 3, SIZE, SIZE) or in_spec.dtype != tf.float32:
        raise SystemExit(f"unexpected input {in_name}: {in_spec}")
    by_shape = expected_names()
    rename: dict[str, str] = {}
    for key, tensor in sig.structured_outputs.items():
        shape = tuple(tensor.shape)
        if len(shape) != 3 or shape[0] != 1 or shape[1:] not in by_shape:
            raise SystemExit(f"unexpected output {key}: {shape}")
        rename[key] = by_shape.pop(shape[1:])
    if by_shape:
        raise SystemExit(f"outputs missing: {sorted(by_shape.values())}")

    graph_def, inputs, outputs, tensors_to_rename = tf_loader.from_saved_model(
        str(saved_model),
        None,
        None,
        tag="serve",
        signatures=["serving_default"],
        return_tensors_to_rename=True,
    )
    # tensors_to_rename: graph tensor -> signature key; compose with ours.
    final = {t: ("input" if k == in_name else rename[k]) for t, k in tensors_to_rename.items()}
    model_proto, _ = tf2onnx.convert.from_graph_def(
        graph_def,
        name="nanodet_coco",
        input_names=inputs,
        output_names=outputs,
        opset=OPSET,
        tensors_to_rename=final,
        output_path=str(out_file),
    )
    print("onnx inputs :", [(i.name, dims(i)) for i in model_proto.graph.input])
    print("onnx outputs:", [(o.name, dims(o)) for o in model_proto.graph.output])
    return rename, in_name


def canonical_names(onnx_file: Path) -> int:
    """Rename tf2onnx's generated constants (``pad_const__95``, ``split__143`` ...) by the order in
    which the nodes first use them, so that two conversions write the same bytes.

    tf2onnx numbers the constants it creates with a process-wide counter, and its pass that merges
    duplicate constants keeps whichever copy its set iteration meets first: the numbers change from
    run to run (PYTHONHASHSEED does not pin them) while the graph stays the same. Returns how many
    names changed."""
    import re

    import onnx

    model = onnx.load(str(onnx_file))
    graph = model.graph
    generated = re.compile(r"^(.*)__\d+$")
    names = {init.name for init in graph.initializer}
    order: list[str] = []
    for node in graph.node:
        order.extend(i for i in node.input if i in names and generated.match(i) and i not in order)
    new = {old: f"{generated.match(old).group(1)}__c{k}" for k, old in enumerate(order)}
    if len(set(new.values()) | (names - set(new))) != len(names):
        raise SystemExit("canonical constant names would collide")
    for init in graph.initializer:
        init.name = new.get(init.name, init.name)
    for node in graph.node:
        node.input[:] = [new.get(i, i) for i in node.input]
    onnx.checker.check_model(model)
    onnx.save(model, str(onnx_file))
    return len(new)


def dims(value_info) -> list[int | str]:
    return [d.dim_value or d.dim_param for d in value_info.type.tensor_type.shape.dim]


def test_inputs() -> list[np.ndarray]:
    """A pseudo-random image and a smooth gradient with a bright blob, already normalised the way
    NanoDet wants (BGR, (x - mean) / std), as 1×3×416×416 float32."""
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (SIZE, SIZE, 3)).astype(np.float32)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    smooth = np.stack(
        [xx * 0.6, yy * 0.6, 255 * np.exp(-((xx - 200) ** 2 + (yy - 180) ** 2) / 4000)], -1
    )
    mean = np.array([103.53, 116.28, 123.675], np.float32)
    std = np.array([57.375, 57.12, 58.395], np.float32)
    return [
        ((im - mean) / std).transpose(2, 0, 1)[None].astype(np.float32) for im in (noise, smooth)
    ]


def check(
    saved_model: Path, onnx_file: Path, rename: dict[str, str], in_name: str, tol: float
) -> float:
    import onnxruntime as ort
    import tensorflow as tf

    sig = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    sess = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    worst = 0.0
    for x in test_inputs():
        ref = {rename[k]: v.numpy() for k, v in sig(**{in_name: tf.constant(x)}).items()}
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": x})))
        for name, want in ref.items():
            have = got[name]
            if have.shape != want.shape:
                raise SystemExit(f"{name}: onnx shape {have.shape} != savedmodel {want.shape}")
            worst = max(worst, float(np.abs(have - want).max()))
            if name.startswith("cls_") and not (0.0 <= have.min() and have.max() <= 1.0):
                raise SystemExit(f"{name}: scores outside [0, 1]: {have.min()} .. {have.max()}")
    print(
        f"max |onnx - savedmodel| over all outputs and test images: {worst:.3g} (tolerance {tol:g})"
    )
    if worst > tol:
        raise SystemExit("ONNX output does not match the SavedModel")
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model-json", type=Path, required=True, help="nanodet.json (nanodet.bin beside it)"
    )
    ap.add_argument(
        "--work", type=Path, required=True, help="scratch folder (the SavedModel goes here)"
    )
    ap.add_argument("--out", type=Path, required=True, help="the .onnx file to write")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()

    saved = args.work / "saved_model"
    to_saved_model(args.model_json, saved)
    tmp = args.out.with_suffix(".onnx.tmp")
    rename, in_name = to_onnx(saved, tmp)
    print(f"renamed {canonical_names(tmp)} generated constants to canonical names")
    check(saved, tmp, rename, in_name, args.tolerance)
    tmp.replace(args.out)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    print(f"sha256 {digest}")


if __name__ == "__main__":
    sys.exit(main())
