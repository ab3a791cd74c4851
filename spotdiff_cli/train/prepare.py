"""What :func:`~spotdiff_cli.train.loop.train` does before its first step, in order: processes
and devices (0), the checkpoint to resume or start from, the vocabulary and the data in memory
(1), the model, its partial initialisation and the run's config.json / vocab.json (2)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..atomic import atomic_write_text
from ..captioners.checkpoint import build_captioner, read_checkpoint
from ..captioners.learned import LearnedCaptioner
from ..captioners.registry import create_model, image_side
from ..captioners.vocab import Vocabulary
from ..errors import UsageError
from . import distributed as dist
from .batches import ImageInput, TrainingData, load_training_data, training_sentences
from .init import InitReport, partial_load
from .recipes import TrainConfig
from .run import Log, seed_everything


def start_processes(config: TrainConfig, say: Log) -> tuple[dist.DistInfo, str]:
    """0. Join torchrun's process group (or run alone), pick this process' device and thread
    count, seed every RNG; the global batch must split evenly over the processes."""
    from ..device import resolve_device

    info = dist.init_distributed(resolve_device(config.device))
    device = dist.process_device(resolve_device(config.device), info)
    if config.num_threads > 0:
        torch.set_num_threads(config.num_threads)
    elif info.enabled and device == "cpu":
        # N processes on one machine: share the cores instead of oversubscribing them N times.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // info.world_size))
    seed_everything(config.seed)
    if info.enabled:
        say(f"distributed: rank {info.rank} of {info.world_size} ({info.backend}) on {device}")
    if config.batch_size % info.world_size:
        raise UsageError(
            f"--batch-size {config.batch_size} must be a multiple of the {info.world_size} processes"
        )
    return info, device


def resume_checkpoint(path: Path, config: TrainConfig) -> dict[str, Any]:
    """1. The last.pt to continue, checked against the recipe: same model, same fine-tuning."""
    checkpoint = read_checkpoint(path)
    if checkpoint["model"] != config.model:
        raise UsageError(
            f"{path} is a '{checkpoint['model']}' run, not '{config.model}'; "
            f"resume it with --model {checkpoint['model']}"
        )
    if ("backbone_state_dict" in checkpoint) != config.finetune_backbone:
        raise UsageError(
            f"{path} was trained with finetune_backbone: "
            f"{str(not config.finetune_backbone).lower()}; resume it with the same setting"
        )
    return checkpoint


def init_checkpoint(config: TrainConfig) -> dict[str, Any] | None:
    """1. The checkpoint ``init_from`` names (a file, or a name ``resolve_checkpoint`` finds)."""
    if not config.init_from:
        return None
    from ..captioners.checkpoint import resolve_checkpoint

    data = read_checkpoint(resolve_checkpoint(config.init_from))
    data["path"] = config.init_from
    return data


def run_vocabulary(
    checkpoint: dict[str, Any] | None,
    root: Path,
    config: TrainConfig,
    say: Log,
    source: dict[str, Any] | None = None,
) -> Vocabulary:
    """1. The checkpoint's vocabulary when resuming; ``init_from``'s with ``init_vocab:
    checkpoint`` (its word embeddings keep their rows); else one built from the training split."""
    if checkpoint is not None:
        vocab = Vocabulary.from_dict(checkpoint["vocab"])
    elif source is not None and config.init_vocab == "checkpoint":
        vocab = Vocabulary.from_dict(source["vocab"])
    else:
        vocab = Vocabulary.build(
            training_sentences(root, config.train_split, config.format), config.min_count
        )
    say(f"data: {root} | vocabulary {len(vocab)} words (min_count {config.min_count})")
    return vocab


def trainable_backbone(config: TrainConfig, say: Log) -> tuple[Any, Any]:
    """1. ``finetune_backbone``: a private copy of the backbone the cache used, to be trained."""
    from ..captioners.backbones import create_backbone

    with torch.random.fork_rng(devices=[]):  # building it must not shift the captioner's init
        backbone = create_backbone(config.backbone)
    say(
        f"fine-tuning {config.backbone}: batches carry {backbone[1].input_size} images, "
        f"backbone lr {config.resolved_backbone_lr:.2e}"
    )
    return backbone


def load_splits(
    root: Path, config: TrainConfig, vocab: Vocabulary, backbone: tuple[Any, Any] | None, say: Log
) -> tuple[TrainingData, TrainingData]:
    """1. The training and validation splits in memory (images instead of grids when fine-tuning)."""
    data_args: dict[str, Any] = dict(
        backbone=config.backbone,
        format=config.format,
        max_clusters=config.max_clusters,
        max_len=config.max_len,
        max_description_len=config.max_description_len,
        input_size=config.input_size or None,
        levels=config.feature_levels,
    )
    side = image_side(config.model, config.model_config)
    if backbone is not None:
        if side is not None:
            raise UsageError(
                f"{config.model} reads images itself (vision: in model_config), so there is no "
                "backbone to fine-tune: set finetune_backbone: false"
            )
        data_args["images"] = backbone[1]
    elif side is not None:  # a model with its own vision tower (a local CLIP) reads pixels
        data_args["images"] = ImageInput((side, side))
        data_args["input_size"] = None
    train_data = load_training_data(root, config.train_split, vocab, **data_args)
    val_data = load_training_data(root, config.val_split, vocab, **data_args)
    inputs = f"{side} px images" if side else f"features {train_data.feature_shape}"
    say(
        f"data: {len(train_data.examples)} training examples ({len(train_data.pairs)} pairs), "
        f"{len(val_data.pairs)} validation pairs, {inputs}"
    )
    return train_data, val_data


def build_model(
    config: TrainConfig,
    checkpoint: dict[str, Any] | None,
    vocab: Vocabulary,
    train_data: TrainingData,
    backbone: tuple[Any, Any] | None,
    device: str,
) -> LearnedCaptioner:
    """2. The model on ``device``: rebuilt from the checkpoint's resolved config and weights when
    resuming, else the model's defaults for this feature shape with the recipe's model_config on
    top. A fine-tuned backbone rides along as ``model.finetuned_backbone``."""
    if checkpoint is not None:
        model = build_captioner(config.model, dict(checkpoint["config"]), vocab, device)
        model.load_state_dict(checkpoint["state_dict"])
    else:
        channels, grid_h, grid_w = train_data.feature_shape
        # The input size goes into the model's config (inference must feed the backbone the
        # same size); only when set, so models without the setting keep building.
        sized = {"input_size": config.input_size} if config.input_size else {}
        model = create_model(
            config.model,
            weights=None,
            device=device,
            vocab=vocab,
            channels=channels,
            grid=[grid_h, grid_w],
            backbone=config.backbone,
            **sized,
            **config.model_config,
        )
    model.to(device)
    if backbone is not None:
        if checkpoint is not None and "backbone_state_dict" in checkpoint:
            backbone[0].load_state_dict(checkpoint["backbone_state_dict"])
        # eval(): BatchNorm keeps its pretrained statistics (batches of 8 are too small to
        # re-estimate them); the weights still get gradients. save_checkpoint stores it from here.
        backbone[0].to(device).eval().requires_grad_(True)
        model.finetuned_backbone = backbone
    return model


def initialise(
    model: LearnedCaptioner,
    source: dict[str, Any],
    config: TrainConfig,
    backbone: tuple[Any, Any] | None,
    say: Log,
) -> InitReport:
    """2. ``init_from``: the matching tensors of the source checkpoint into the model (and its
    fine-tuned backbone into ours when both have one), with a report of what matched."""
    report = partial_load(
        model,
        source["state_dict"],
        str(source["path"]),
        keys=config.init_keys,
        rename=config.init_rename,
    )
    say(report.summary())
    if backbone is not None and "backbone_state_dict" in source:
        backbone_report = partial_load(
            backbone[0], source["backbone_state_dict"], f"{source['path']} (backbone)"
        )
        say(backbone_report.summary())
    if not report.matched:
        raise UsageError(
            f"init_from {source['path']}: no tensor matches model '{config.model}' by name and "
            f"shape ({len(report.unexpected)} unused, {len(report.mismatched)} of another shape); "
            "init_rename maps name prefixes"
        )
    return report


def write_run_files(
    out: Path,
    config: TrainConfig,
    model: LearnedCaptioner,
    vocab: Vocabulary,
    root: Path,
    info: dist.DistInfo,
    device: str,
    init_report: InitReport | None = None,
) -> None:
    """2. config.json (recipe, resolved model config, data, processes, what init_from loaded)
    and vocab.json; the run folder is made here, by its first file."""
    out.mkdir(parents=True, exist_ok=True)
    run_config = {
        "train": config.to_dict(),
        "model_config": dict(model.config),
        "data": str(root),
        "world_size": info.world_size,
        "device": device,
    }
    if init_report is not None:
        run_config["init_from"] = init_report.to_dict()
    atomic_write_text(out / "config.json", json.dumps(run_config, indent=2) + "\n")
    atomic_write_text(out / "vocab.json", json.dumps(vocab.to_dict()) + "\n")


def trained_by_gradient(
    model: LearnedCaptioner, config: TrainConfig, backbone: tuple[Any, Any] | None
) -> bool:
    """2. False for a model fitted once instead (``fit`` and no trainable parameters: nn)."""
    if not model.trained_by_gradient:
        if backbone is not None:
            raise UsageError(
                f"{config.model} is not trained by gradient steps: finetune_backbone needs a model "
                "that is; set finetune_backbone: false"
            )
        return False
    return True
