"""The training loop: ``train(config)`` on one screen, then the named steps it calls, in order.

    0. processes and devices    torchrun -> DDP (gloo on CPU, NCCL on CUDA), or one process
    1. data                     the dataset (default: a synthetic benchmark made once), its cache,
                                the vocabulary from the training split (or ``init_from``'s)
    2. model and optimizer      built by name through the registry, ``init_from`` loaded partially
                                (train/init.py); Adam (Spot-the-diff §4) or AdamW over every
                                parameter (frozen ones simply get no gradient)
    3. resume                   --resume continues from last.pt: weights, optimizer, RNG, position
    4. stages of epochs         the recipe's stages in turn (one without ``stages``); entering a
                                stage sets its ``freeze``, ``objectives`` and model options; each
                                epoch's batches come from its ``sampler`` (shuffle by (seed, epoch),
                                or contrastive); global batch of 8 (§4) split over processes;
                                AMP on CUDA; gradient clipping; one log line per interval
                                (``finetune_backbone``: batches carry images, the backbone runs in
                                the step with gradients, at ``backbone_lr``, and is checkpointed)
    5. validate and checkpoint  ``val_metric`` on the validation split (CIDEr, §4's early-stopping
                                criterion); best.pt when it improves, last.pt every epoch; a stage
                                ends after its ``patience`` validations without improvement

What stays fixed during a run is a :class:`Run`; where the run is (what last.pt stores and
``--resume`` restores) is a :class:`RunState`. Ctrl-C saves last.pt (atomically, at the exact
batch) before returning, so ``--resume`` continues where it stopped. Rank 0 writes every file;
nothing here prints: progress and log lines go through callbacks (the CLI renders them with Rich).
Non-gradient models (``nn``, ``nn-multi``) get one ``fit(train_batches)`` call instead of steps.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_write_text
from ..captioners.checkpoint import build_captioner, read_checkpoint, save_checkpoint
from ..captioners.features import Batch, move_batch, with_grids
from ..captioners.registry import create_model, image_side
from ..captioners.vocab import Vocabulary
from ..errors import OutputError, UsageError
from . import distributed as dist
from .batches import ImageInput, TrainingData, load_training_data, training_sentences
from .init import InitReport, freeze_parameters, partial_load
from .recipes import CACHED_DATASETS, Stage, TrainConfig
from .sampler import contrastive_batches, epoch_order, shuffled_batches

Progress = Callable[[str, int, int], None]  # (stage, done, total)
Log = Callable[[str], None]  # one human-readable line


@dataclass
class TrainResult:
    """What a run did. ``history`` holds one dict per validation."""

    out_dir: Path
    best_path: Path | None
    last_path: Path | None
    best_score: float | None
    epochs: int
    steps: int
    stopped_early: bool = False
    interrupted: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    samples_per_second: float = 0.0
    val_metric: str = "CIDEr"  # what best_score measures


@dataclass
class RunState:
    """Where a run is: the fields a checkpoint's ``extra`` stores and ``--resume`` restores.
    ``batch_in_epoch`` batches of epoch ``epoch`` (0-based) are done; ``bad_evals`` counts
    validations since ``best_score`` last improved."""

    epoch: int = 0
    step: int = 0
    batch_in_epoch: int = 0
    best_score: float | None = None
    bad_evals: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    stage: int = 0  # index into the recipe's stage plan
    stage_step: int = 0  # steps done in the current stage (its learning-rate schedule's clock)

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> RunState:
        """The state saved in a checkpoint's ``extra`` (fields it lacks keep their defaults; a
        last.pt from before stages was one stage, so its stage clock is its step count)."""
        state = cls(**{f.name: extra[f.name] for f in fields(cls) if f.name in extra})
        state.history = list(state.history)
        if "stage_step" not in extra:
            state.stage_step = state.step
        return state


@dataclass
class Run:
    """What stays fixed while a run trains: set up once by :func:`train`, read by its steps."""

    config: TrainConfig
    info: dist.DistInfo
    device: str
    out: Path
    model: Any
    train_data: TrainingData
    val_data: TrainingData
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    params: list[
        torch.nn.Parameter
    ]  # what gradient clipping covers (the backbone's too when fine-tuning)
    loss_module: torch.nn.Module  # LossForward, DDP-wrapped under torchrun
    use_amp: bool
    amp_dtype: torch.dtype
    say: Log
    progress: Progress | None
    backbone: tuple[Any, Any] | None = None
    plan: list[Stage] = field(default_factory=list)
    # What the current stage set (enter_stage): its index, objective weights, frozen names.
    stage_index: int = -1
    objectives: dict[str, float] = field(default_factory=dict)
    trainable: set[str] = field(default_factory=set)  # what trains when nothing is frozen
    wrapped: set[str] = field(default_factory=set)  # what needed gradients when DDP wrapped

    @property
    def steps_per_epoch(self) -> int:
        """Batches of a shuffled epoch (a contrastive epoch may have a few more)."""
        return math.ceil(len(self.train_data.examples) / self.config.batch_size)

    @property
    def stage(self) -> Stage:
        return self.plan[self.stage_index]


@dataclass
class Interval:
    """Sums over the steps since the last log line (all processes add theirs when it is printed)."""

    loss: float = 0.0
    nll: float = 0.0
    tokens: float = 0.0
    steps: int = 0
    samples: int = 0
    started: float = field(default_factory=time.perf_counter)

    def add(self, out: dict[str, Any], samples: int) -> None:
        self.loss += float(out["loss"].detach())
        self.nll += float(out["nll"].detach())
        self.tokens += float(out["n_tokens"])
        self.steps += 1
        self.samples += samples


def train(
    config: TrainConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    log: Log | None = None,
) -> TrainResult:
    """Train ``config.model`` as ``config`` says; files go to ``out_dir`` (see ``prepare_out_dir``)."""
    say = log or (lambda line: None)
    started = time.perf_counter()
    info, device = start_processes(config, say)  # 0
    notes: list[str] = []  # 1
    root = dataset_root(config, info, say, notes, progress)
    out = (
        prepare_out_dir(out_dir, resume, config, root) if info.is_main else Path(str(out_dir or ""))
    )
    out = Path(dist.broadcast_object(str(out), info))
    checkpoint = resume_checkpoint(out / "last.pt", config) if resume else None
    source = init_checkpoint(config) if checkpoint is None else None
    vocab = run_vocabulary(checkpoint, root, config, say, source)
    backbone = trainable_backbone(config, say) if config.finetune_backbone else None
    train_data, val_data = load_splits(root, config, vocab, backbone, say)
    model = build_model(config, checkpoint, vocab, train_data, backbone, device)  # 2
    init_report = initialise(model, source, config, backbone, say) if source else None
    seed_everything(config.seed + info.rank)  # same init everywhere, different dropout per process
    check_val_metric(config, model, val_data)  # before any file: a typo must not claim --out
    if info.is_main:
        write_run_files(out, config, model, vocab, root, info, device, init_report)
    if not trained_by_gradient(model, config, backbone):
        return _fit_once(model, config, train_data, val_data, out, info, say, notes, started)
    run = make_run(config, info, device, out, model, backbone, train_data, val_data, say, progress)
    state = resume_state(run, checkpoint) if checkpoint is not None else RunState()  # 3

    stopped_early = interrupted = False  # 4
    samples_done, interval = 0, Interval()
    total_epochs = sum(stage.epochs for stage in run.plan)
    try:
        while state.epoch < total_epochs and not stopped_early:
            enter_stage(run, state)
            batches = epoch_batches(run, state.epoch)
            stage_steps = run.steps_per_epoch * run.stage.epochs
            model.train()
            if callable(getattr(model, "begin_epoch", None)):
                model.begin_epoch(state.epoch)  # curricula that switch at an epoch (DUDA+AUX ξ)
            for batch_index in range(state.batch_in_epoch, len(batches)):
                n_global, batch = get_batch(run, batches[batch_index])
                if batch is None:  # a last batch shorter than the number of processes
                    continue
                lr = get_lr(state.stage_step, run.stage, stage_steps)
                out_loss = train_step(run, batch, lr)
                state.step, state.batch_in_epoch = state.step + 1, batch_index + 1
                state.stage_step += 1
                samples_done += n_global
                interval.add(out_loss, n_global)
                if progress and info.is_main:
                    progress(
                        f"epoch {state.epoch + 1}/{total_epochs}", batch_index + 1, len(batches)
                    )
                if state.step % config.log_every == 0:
                    interval = log_interval(run, state, interval, lr)
            state.epoch, state.batch_in_epoch = state.epoch + 1, 0
            if state.epoch % config.eval_every == 0 or state.epoch == total_epochs:  # 5
                if validate_and_checkpoint(run, state):  # this stage has stopped improving
                    stopped_early = state.stage == len(run.plan) - 1
                    if not stopped_early:  # on to the next stage
                        state.epoch = max(state.epoch, stage_bounds(run.plan, state.stage)[1])
            if info.is_main:
                save_checkpoint(out / "last.pt", model, checkpoint_extra(run, state))
            dist.barrier(info)
    except KeyboardInterrupt:
        interrupted = True
        save_interrupted(run, state)
    finally:
        dist.cleanup(info)
    result = run_result(out, state, stopped_early, interrupted, notes, started, samples_done)
    result.val_metric = config.val_metric
    return result


# ------------------------------------------------------------------------------------------------
# the steps train() takes, in the order it takes them


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
) -> Any:
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
    model: Any,
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
    model: Any,
    vocab: Vocabulary,
    root: Path,
    info: dist.DistInfo,
    device: str,
    init_report: InitReport | None = None,
) -> None:
    """2. config.json (recipe, resolved model config, data, processes, what init_from loaded)
    and vocab.json."""
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


def trained_by_gradient(model: Any, config: TrainConfig, backbone: tuple[Any, Any] | None) -> bool:
    """2. False for a model fitted once instead (``fit`` and no trainable parameters: nn)."""
    if callable(getattr(model, "fit", None)) and not any(
        p.requires_grad for p in _parameters(model)
    ):
        if backbone is not None:
            raise UsageError(
                f"{config.model} is not trained by gradient steps: finetune_backbone needs a model "
                "that is; set finetune_backbone: false"
            )
        return False
    return True


def make_run(
    config: TrainConfig,
    info: dist.DistInfo,
    device: str,
    out: Path,
    model: Any,
    backbone: tuple[Any, Any] | None,
    train_data: TrainingData,
    val_data: TrainingData,
    say: Log,
    progress: Progress | None,
) -> Run:
    """2. The optimizer (Adam, §4, or AdamW; the backbone in its own group), AMP and the loss
    module every step calls. The optimizer holds every parameter, so a stage can freeze and
    unfreeze without a new one: a frozen parameter gets no gradient, and Adam(W) skips it."""
    params = list(model.parameters())
    Optim = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    groups: list[Any] = params
    if (
        backbone is not None
    ):  # its own group; lr_scale keeps its lr in proportion through the schedule
        backbone_params = list(backbone[0].parameters())
        groups = [
            {"params": params},
            {
                "params": backbone_params,
                "lr": config.resolved_backbone_lr,
                "lr_scale": config.resolved_backbone_lr / config.lr,
            },
        ]
        params = params + backbone_params  # gradient clipping covers both
    optimizer = Optim(
        groups, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay
    )
    use_amp = config.amp and device.startswith("cuda")
    amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    loss_module = dist.wrap_model(
        LossForward(model, backbone), info, device, config.ddp_find_unused
    )
    run = Run(
        config,
        info,
        device,
        out,
        model,
        train_data,
        val_data,
        optimizer,
        scaler,
        params,
        loss_module,
        use_amp,
        amp_dtype,
        say,
        progress,
        backbone=backbone,
        plan=config.stage_plan(),
        trainable={n for n, p in named_parameters(model, backbone) if p.requires_grad},
    )
    run.wrapped = set(run.trainable)
    return run


def named_parameters(model: Any, backbone: tuple[Any, Any] | None) -> list[tuple[str, Any]]:
    """The model's parameters by name, and a fine-tuned backbone's as ``backbone.<name>``: the
    names ``freeze`` patterns match."""
    named = list(model.named_parameters())
    if backbone is not None:
        named += [(f"backbone.{n}", p) for n, p in backbone[0].named_parameters()]
    return named


CHANGED = "changed/"  # val_metric prefix: the metric on the validation pairs that hold a change


def check_val_metric(config: TrainConfig, model: Any, val_data: TrainingData) -> None:
    """2. ``val_metric`` must be a number validation reports: a caption metric, one on the pairs
    that hold a change (``changed/CIDEr``), perplexity, or one the model adds
    (``validation_metrics``)."""
    from ..evaluate.metrics import ALL_METRICS

    known = [
        *ALL_METRICS,
        *(f"{CHANGED}{m}" for m in ALL_METRICS),
        "perplexity",
        *getattr(model, "validation_metrics", ()),
    ]
    if config.val_metric in known and config.val_metric.startswith(CHANGED):
        scored = val_data.pairs[: config.val_limit] if config.val_limit else val_data.pairs
        changed = sum(p.id in val_data.changed_ids for p in scored)
        if not 0 < changed < len(scored):
            raise UsageError(
                f"val_metric '{config.val_metric}' needs validation pairs with and without a "
                "change (labelled distractors or 'no change' references); the "
                f"{len(scored)} scored have "
                + ("none with one" if not changed else "none without one")
                + f": use '{config.val_metric[len(CHANGED) :]}'"
                + (" or a larger val_limit" if config.val_limit else "")
            )
    if config.val_metric not in known:
        import difflib

        lower = {k.lower(): k for k in known}  # "cider" is a typo of "CIDEr"
        close = [lower[c] for c in difflib.get_close_matches(config.val_metric.lower(), lower, n=1)]
        raise UsageError(
            f"val_metric '{config.val_metric}' is not a validation number"
            + (f"; did you mean '{close[0]}'?" if close else "")
            + f" (known: {', '.join(known)})"
        )


def stage_bounds(plan: list[Stage], index: int) -> tuple[int, int]:
    """(first epoch, first epoch after) of stage ``index``, 0-based over the whole run."""
    start = sum(s.epochs for s in plan[:index])
    return start, start + plan[index].epochs


def stage_of_epoch(plan: list[Stage], epoch: int) -> int:
    """The index of the stage epoch ``epoch`` (0-based) belongs to."""
    for index in range(len(plan)):
        if epoch < stage_bounds(plan, index)[1]:
            return index
    return len(plan) - 1


def enter_stage(run: Run, state: RunState) -> None:
    """4. Make the stage of ``state.epoch`` current: its frozen parameters, objective weights and
    model options. A new stage restarts the learning-rate clock and the patience count (not on a
    resume inside a stage: ``state.stage`` already says where it was)."""
    index = stage_of_epoch(run.plan, state.epoch)
    if index == run.stage_index:
        return
    if index != state.stage:
        state.stage, state.stage_step, state.bad_evals = index, 0, 0
    run.stage_index = index
    stage = run.stage
    named = named_parameters(run.model, run.backbone)
    frozen = freeze_parameters(named, stage.freeze, run.trainable)
    run.objectives = dict(stage.objectives)
    setter = getattr(run.model, "set_training_stage", None)
    if callable(setter):
        setter(stage.name, dict(stage.objectives), dict(stage.model_options))
    elif stage.model_options:
        raise UsageError(
            f"stage '{stage.name}' sets model_options, but model '{run.config.model}' has no "
            "set_training_stage(name, objectives, options) to take them"
        )
    needs_grad = {n for n, p in named if p.requires_grad}
    if run.info.enabled and needs_grad != run.wrapped:
        # DDP registers the parameters that need gradients when it wraps: wrap again.
        run.loss_module = dist.wrap_model(
            LossForward(run.model, run.backbone),
            run.info,
            run.device,
            run.config.ddp_find_unused,
        )
        run.wrapped = needs_grad
    if len(run.plan) > 1 or frozen or stage.objectives:
        run.say(
            f"stage {index + 1}/{len(run.plan)} '{stage.name}': {stage.epochs} epoch(s), lr "
            f"{stage.lr:.2e}, sampler {stage.sampler}"
            + (f", {len(frozen)} frozen parameter tensor(s)" if frozen else "")
            + (f", objectives {stage.objectives}" if stage.objectives else "")
        )


def epoch_batches(run: Run, epoch: int) -> list[list[int]]:
    """4. The example indices of every global batch of ``epoch``, from the stage's sampler."""
    data, size = run.train_data, run.config.batch_size
    order = epoch_order(len(data.examples), run.config.seed, epoch)
    if run.stage.sampler == "contrastive":
        pairs, captions = data.example_keys()
        return contrastive_batches(order, pairs, captions, size)
    return shuffled_batches(order, size)


def resume_state(run: Run, checkpoint: dict[str, Any]) -> RunState:
    """3. Position, optimizer, gradient scaler and RNG from last.pt, so the run goes on exactly
    as if it had never stopped."""
    extra = checkpoint.get("extra", {})
    state = RunState.from_extra(extra)
    if "optimizer" in extra:
        run.optimizer.load_state_dict(extra["optimizer"])
    if "scaler" in extra and run.scaler.is_enabled():
        run.scaler.load_state_dict(extra["scaler"])
    restore_rng(extra.get("rng"))
    run.say(
        f"resumed {run.out / 'last.pt'}: epoch {state.epoch}, step {state.step}, "
        f"best {run.config.val_metric} {_fmt(state.best_score)}"
    )
    return state


def get_batch(run: Run, items: list[int]) -> tuple[int, Batch | None]:
    """4. A global batch of example indices: (its size, this process' share on the device, or
    None when the share is empty)."""
    global_items = dist.usable_batch(items, run.info)
    local_items = dist.shard_batch(list(global_items), run.info)
    if not local_items:
        return len(global_items), None
    batch = run.train_data.batch([run.train_data.examples[i] for i in local_items])
    return len(global_items), move_batch(batch, run.device)


def get_lr(step: int, config: TrainConfig | Stage, total_steps: int) -> float:
    """4. The learning rate of ``step`` (0-based) of a stage of ``total_steps`` steps (``config``:
    the stage, or a TrainConfig: anything with lr, warmup_steps, lr_schedule, min_lr)."""
    # 1) linear warmup for warmup_steps steps
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    # 2) constant (Spot-the-diff: plain Adam, no schedule)
    if config.lr_schedule == "constant":
        return config.lr
    # 3) cosine decay from lr to min_lr over the remaining steps
    ratio = min(1.0, (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps))
    return config.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (config.lr - config.min_lr)


def train_step(run: Run, batch: Batch, lr: float) -> dict[str, Any]:
    """4. One optimisation step at ``lr``: loss (AMP on CUDA), backward, clip, update. Returns
    the model's loss dict (``loss``, ``nll``, ``n_tokens``)."""
    for group in run.optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    with torch.autocast(device_type="cuda", dtype=run.amp_dtype, enabled=run.use_amp):
        out = run.loss_module(batch)
    if run.objectives:
        out = dict(out, loss=weighted_objectives(out, run.objectives, run.config.model))
    run.scaler.scale(out["loss"]).backward()
    if run.config.grad_clip > 0:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.params, run.config.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    return out


def weighted_objectives(out: dict[str, Any], weights: dict[str, float], model: str) -> Any:
    """4. Σ weight × loss over the stage's ``objectives``, from the named losses the model reports
    (``out["losses"]``); a name the model does not report is an error that lists the ones it does."""
    losses = out.get("losses") or {}
    unknown = [name for name in weights if name not in losses]
    if unknown:
        raise UsageError(
            f"objective '{unknown[0]}' is not a loss model '{model}' reports"
            + (f" (it reports: {', '.join(losses)})" if losses else " (it reports no named losses)")
        )
    return sum(w * losses[name] for name, w in weights.items())


def log_interval(run: Run, state: RunState, interval: Interval, lr: float) -> Interval:
    """4. One log line (and a log.jsonl record) for the steps since the last; a fresh interval."""
    loss_sum, nll_sum, tok_sum, n_sum = dist.all_reduce_sum(
        [interval.loss, interval.nll, interval.tokens, interval.steps], run.info
    )
    seconds = time.perf_counter() - interval.started
    samples_per_s = interval.samples / max(seconds, 1e-9)
    if run.info.is_main:
        run.say(
            f"epoch {state.epoch + 1} step {state.step} loss {loss_sum / max(1, n_sum):.4f} "
            f"ppl {math.exp(min(50.0, nll_sum / max(1.0, tok_sum))):.2f} lr {lr:.2e} {samples_per_s:.1f} samples/s"
        )
        _append_log(
            run.out,
            {
                "step": state.step,
                "epoch": state.epoch + 1,
                "loss": loss_sum / max(1, n_sum),
                "lr": lr,
                "samples_per_s": samples_per_s,
            },
        )
    return Interval()


def validate_and_checkpoint(run: Run, state: RunState) -> bool:
    """5. Validate (rank 0; every rank gets the record), save best.pt when ``val_metric``
    improved, and say whether the stage should end early (its ``patience`` validations without
    improvement)."""
    config = run.config
    record = (
        validate(run.model, run.val_data, config, run.device, run.progress)
        if run.info.is_main
        else None
    )
    record = dist.broadcast_object(record, run.info)
    record.update(epoch=state.epoch, step=state.step, stage=run.stage.name)
    state.history.append(record)
    metric = config.val_metric
    score = record.get(metric)
    if score is None:  # perplexity of a model without loss(): never an improvement
        score = math.inf if config.val_lower_is_better else -math.inf
    improved = state.best_score is None or (
        score < state.best_score if config.val_lower_is_better else score > state.best_score
    )
    if improved:
        state.best_score, state.bad_evals = score, 0
    else:
        state.bad_evals += 1
    if run.info.is_main:
        if improved:  # best.pt is for use: no optimizer, scaler or RNG state
            save_checkpoint(
                run.out / "best.pt", run.model, checkpoint_extra(run, state, resumable=False)
            )
        shown = "" if metric in ("CIDEr", "BLEU-4", "perplexity") else f"{metric} {score:.4f} "
        patience = run.stage.patience
        run.say(
            f"epoch {state.epoch} validation: {shown}CIDEr {record['CIDEr']:.4f} "
            f"BLEU-4 {record.get('BLEU-4', 0.0):.4f} ppl {_fmt(record.get('perplexity'))}"
            + (
                " (best: saved best.pt)"
                if improved
                else f" (best {metric} {state.best_score:.4f}; {state.bad_evals}/{patience or '∞'} without improvement)"
            )
        )
        _append_log(run.out, {"validation": record})
    if run.stage.patience and state.bad_evals >= run.stage.patience:
        last = state.stage == len(run.plan) - 1
        run.say(
            f"early stop: no {metric} improvement in {run.stage.patience} validations"
            + ("" if last else f"; stage '{run.stage.name}' ends, the next begins")
        )
        return True
    return False


def checkpoint_extra(run: Run, state: RunState, resumable: bool = True) -> dict[str, Any]:
    """5. The checkpoint's ``extra``: the run state, plus (``resumable``, for last.pt) the
    optimizer, gradient scaler and RNG states that make ``--resume`` exact."""
    extra: dict[str, Any] = asdict(state)
    if resumable:
        extra.update(
            optimizer=run.optimizer.state_dict(),
            scaler=run.scaler.state_dict() if run.scaler.is_enabled() else {},
            rng=capture_rng(),
        )
    extra["train_config"] = run.config.to_dict()
    return extra


def save_interrupted(run: Run, state: RunState) -> None:
    """Ctrl-C: last.pt at the exact batch; the step counter says which batches are done, so
    ``--resume`` starts at the next one."""
    if run.info.is_main:
        save_checkpoint(run.out / "last.pt", run.model, checkpoint_extra(run, state))
        run.say(
            f"interrupted: saved {run.out / 'last.pt'} at epoch {state.epoch + 1}, "
            f"batch {state.batch_in_epoch}/{run.steps_per_epoch}; continue with --resume"
        )


def run_result(
    out: Path,
    state: RunState,
    stopped_early: bool,
    interrupted: bool,
    notes: list[str],
    started: float,
    samples_done: int,
) -> TrainResult:
    seconds = time.perf_counter() - started
    return TrainResult(
        out_dir=out,
        best_path=(out / "best.pt") if (out / "best.pt").is_file() else None,
        last_path=(out / "last.pt") if (out / "last.pt").is_file() else None,
        best_score=state.best_score,
        epochs=state.epoch,
        steps=state.step,
        stopped_early=stopped_early,
        interrupted=interrupted,
        history=list(state.history),
        notes=notes,
        seconds=seconds,
        samples_per_second=samples_done / seconds if seconds else 0.0,
    )


# ------------------------------------------------------------------------------------------------
# helpers: RNG, folders, the loss module, validation, non-gradient models


def seed_everything(seed: int) -> None:
    """Python, numpy's legacy global and torch (CPU and every GPU) from one seed."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def capture_rng() -> dict[str, Any]:
    """RNG states as plain types and tensors (checkpoints load with weights_only=True)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": _plain(random.getstate())}
    if torch.cuda.is_available():
        state["cuda"] = [s for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any] | None) -> None:
    if not state:
        return
    torch.set_rng_state(state["torch"])
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if (
        "cuda" in state
        and torch.cuda.is_available()
        and len(state["cuda"]) == torch.cuda.device_count()
    ):
        torch.cuda.set_rng_state_all(state["cuda"])


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def default_dataset_dir(config: TrainConfig) -> Path:
    """Where a cached benchmark ("synth" or "clevr") lives: the user cache, keyed by its settings."""
    from ..weights import user_cache_dir

    if config.data == "clevr":
        name = (
            f"clevr-{config.clevr_pairs}x{config.clevr_width}x{config.clevr_height}"
            f"-spp{config.clevr_spp}-seed{config.clevr_seed}"
        )
    else:
        name = f"synth-{config.synth_pairs}x{config.synth_size}-seed{config.synth_seed}"
    return user_cache_dir() / "datasets" / name


def dataset_root(
    config: TrainConfig,
    info: dist.DistInfo,
    say: Log,
    notes: list[str],
    progress: Progress | None = None,
) -> Path:
    """The dataset folder, with its preprocessing cache ready.

    ``data == "synth"`` (the default): the synthetic benchmark is generated once into the user
    cache (``data/synth.py``, seconds). ``data == "clevr"``: the rendered CLEVR-Change-style
    benchmark is rendered once into the user cache (``data/clevr_render.py``, hours: the
    estimate is said first; an interrupted render resumes on the next run). Either is then
    prepared (``data/cache.py``) and reused by later runs. A real dataset without a cache for
    the backbone is prepared in place (what ``spotdiff data prepare`` does). Under torchrun only
    rank 0 does this work; the others wait.
    """
    from ..data.cache import feature_folder, prepare_dataset
    from ..errors import DataError

    cached = config.data in CACHED_DATASETS
    root = default_dataset_dir(config) if cached else Path(config.data).expanduser()
    if not cached and not root.exists():
        raise DataError(
            f"dataset folder {root} not found; pass --data DIR (or leave it out for the synthetic benchmark)"
        )
    splits = [config.train_split, config.val_split]
    size = config.input_size or None
    folder = root / "cache" / feature_folder(config.backbone, size, config.feature_levels)
    ready = all((folder / f"{s}.npz").is_file() for s in splits)
    if info.is_main and not ready:
        if config.data == "synth" and not (root / "synth.json").is_file():
            from ..data.synth import synthesize

            message = (
                f"no --data given: generating the default synthetic benchmark ({config.synth_pairs} pairs, "
                f"{config.synth_size} px) into {root} (once; later runs reuse it)"
            )
            say(message)
            notes.append(message)
            synthesize(
                root,
                pairs=config.synth_pairs,
                seed=config.synth_seed,
                size=config.synth_size,
                overwrite=True,
            )
        if config.data == "clevr" and not (root / "gold.json").is_file():
            render_default_clevr(config, root, info, say, notes, progress)
        say(f"preparing {root}: cluster analysis and {folder.name} (once per dataset)")
        prepare_dataset(
            root,
            splits,
            backbone=config.backbone,
            device=config.device,
            format=config.format,
            input_size=size,
            levels=config.feature_levels,
        )
    elif cached:
        which = "the default synthetic" if config.data == "synth" else "the rendered CLEVR"
        notes.append(f"--data {config.data}: using {which} benchmark in {root}")
        say(notes[-1])
    dist.barrier(info)
    return root


def render_default_clevr(
    config: TrainConfig,
    root: Path,
    info: dist.DistInfo,
    say: Log,
    notes: list[str],
    progress: Progress | None,
) -> None:
    """1. Render the "clevr" benchmark into ``root``, saying first how long it will take."""
    from ..data.clevr_render import (
        default_jobs,
        estimate_seconds,
        format_duration,
        render_clevr_change,
        scenes_done,
    )

    size = dict(width=config.clevr_width, height=config.clevr_height, spp=config.clevr_spp)
    if info.enabled:
        # The other processes would wait at a barrier far longer than its timeout.
        raise UsageError(
            f"--data clevr is not rendered yet: render it once without torchrun (spotdiff train "
            f"--data clevr ..., or spotdiff data clevr --out {root} --pairs {config.clevr_pairs} "
            f"--seed {config.clevr_seed}), then start the distributed run"
        )
    jobs = default_jobs()
    done = scenes_done(root, config.clevr_pairs)
    left = config.clevr_pairs - done
    resumed = f", {done} already there" if done else ""
    message = (
        f"--data clevr: rendering the CLEVR benchmark ({config.clevr_pairs} scenes{resumed}, "
        f"{config.clevr_width}x{config.clevr_height}, {config.clevr_spp} spp) into {root} with "
        f"{jobs} processes: about {format_duration(estimate_seconds(left, jobs=jobs, **size))} "
        f"(once; later runs reuse it; if interrupted, the same command resumes it)"
    )
    say(message)
    notes.append(message)
    render_clevr_change(
        root,
        pairs=config.clevr_pairs,
        seed=config.clevr_seed,
        jobs=jobs,
        progress=(lambda d, t: progress("rendering CLEVR scenes", d, t)) if progress else None,
        **size,
    )


def only_a_refused_run(out: Path) -> bool:
    """Whether ``out`` is empty or holds only what a run refused before its first step wrote
    (a typo in a setting): its config.json and vocab.json. The user fixed the setting and runs
    again into the same folder; anything else in it (a user's file, a log, a checkpoint) keeps
    the folder from being reused."""
    names = {p.name for p in out.iterdir()}
    if not names <= {"config.json", "vocab.json"}:
        return False
    if "config.json" not in names:
        return not names
    try:
        written = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(written, dict) and {"train", "model_config"} <= set(written)


def prepare_out_dir(
    out_dir: str | Path | None, resume: bool, config: TrainConfig, root: Path
) -> Path:
    """The run folder. Never reuses a previous run's folder silently:

    * ``--out DIR`` with ``--resume``: DIR must hold ``last.pt``.
    * ``--out DIR`` without: DIR must be new or empty (or hold only the config.json and
      vocab.json of a run refused before its first step), else an error that says what to do.
    * no ``--out``: ``runs/<model>-<dataset>``; taken -> ``-2``, ``-3``, ... (``--resume`` picks the
      newest of those that holds ``last.pt``).
    """
    if out_dir is not None:
        out = Path(out_dir).expanduser()
        if resume:
            if not (out / "last.pt").is_file():
                raise UsageError(
                    f"--resume: {out / 'last.pt'} not found; is --out the folder of the run to continue?"
                )
            return out
        if out.exists() and (not out.is_dir() or not only_a_refused_run(out)):
            raise OutputError(
                f"{out} already holds files (a previous run?); pass --resume to continue it, "
                f"or choose a new --out"
            )
        out.mkdir(parents=True, exist_ok=True)
        return out
    name = config.data if config.data in CACHED_DATASETS else (root.name or "data")
    base = Path("runs") / f"{config.model}-{name}"
    candidates = [base] + [base.with_name(f"{base.name}-{i}") for i in range(2, 1000)]
    if resume:
        existing = [c for c in candidates if (c / "last.pt").is_file()]
        if not existing:
            raise UsageError(
                f"--resume: no earlier run of {config.model} under {base}*; pass --out DIR of the run"
            )
        return existing[-1]
    for candidate in candidates:
        if not candidate.exists() or (candidate.is_dir() and not any(candidate.iterdir())):
            candidate.mkdir(parents=True, exist_ok=True)
            return candidate
    raise OutputError(f"{base}-2 ... {base}-999 all exist; pass --out DIR")


class LossForward(torch.nn.Module):
    """``forward(batch) = model.loss(batch)``: DDP synchronises gradients only through a module's
    ``forward``, and the contract's entry point is ``loss``. With a ``backbone`` (fine-tuning) the
    batch's images go through it first, inside the step, so it gets gradients too."""

    def __init__(self, model: Any, backbone: tuple[Any, Any] | None = None) -> None:
        super().__init__()
        self.model = model
        if backbone is not None:
            self.backbone, self.backbone_info = backbone

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        if "backbone" in self._modules:
            batch = with_grids(batch, (self.backbone, self.backbone_info))
        return self.model.loss(batch)


def validate(
    model: Any,
    data: TrainingData,
    config: TrainConfig,
    device: str,
    progress: Progress | None = None,
    with_nll: bool = True,
) -> dict[str, Any]:
    """Validation CIDEr (BLEU-4, ROUGE-L, and ``val_metric`` when it is another caption metric)
    of generated text, perplexity of the gold text, and what the model adds
    (``validation_scores(batches) -> {name: value}``, for ``validation_metrics`` it names).
    ``val_metric`` ``changed/<metric>`` scores only the pairs that hold a change: a model that
    says "no change" to everything scores well on CIDEr over a split with many distractors, but
    not there.

    Single protocol: the first generated sentence against every reference sentence of the pair;
    multi protocol: the whole generated description against each annotator's description.
    ``with_nll=False`` skips perplexity (models without ``loss``: nn, nn-multi).
    """
    from ..evaluate.metrics import ScoringSession, score_captions

    model.eval()
    references: dict[str, list[str]] = {}
    hypotheses: dict[str, str] = {}
    nll = tokens = 0.0
    batches = list(data.pair_batches(max(1, config.batch_size), config.val_limit))
    with torch.no_grad():
        for index, batch in enumerate(batches):
            batch = move_batch(batch, device)
            finetuned = getattr(model, "finetuned_backbone", None)
            if (
                finetuned is not None
            ):  # fine-tuning: images -> grids with the backbone being trained
                batch = with_grids(batch, finetuned)
            if with_nll:
                out = model.loss(batch)
                nll += float(out["nll"])
                tokens += float(out["n_tokens"])
            generated = model.generate(
                batch, max_sentences=config.max_sentences, beam=config.beam, max_len=config.max_len
            )
            for pair_id, refs, descs, sents in zip(
                batch["pair_ids"], batch["references"], batch["descriptions"], generated
            ):
                if config.val_protocol == "multi":
                    references[pair_id] = descs or [""]
                    hypotheses[pair_id] = " ".join(s for s in sents if s.strip())
                else:
                    references[pair_id] = refs or [""]
                    hypotheses[pair_id] = sents[0] if sents else ""
            if progress:
                progress("validation", index + 1, len(batches))
    model.train()
    from ..evaluate.metrics import ALL_METRICS

    names = ["BLEU-4", "ROUGE-L", "CIDEr"]
    if config.val_metric in ALL_METRICS and config.val_metric not in names:
        names.append(config.val_metric)
    with ScoringSession(config.val_tokenizer) as session:  # one tokenizer for both scorings
        scores = score_captions(references, hypotheses, tuple(names), session=session)
        record: dict[str, Any] = {k: round(v, 6) for k, v in scores.scores.items()}
        record.setdefault("CIDEr", 0.0)
        if config.val_metric.startswith(CHANGED):
            changed = [i for i in hypotheses if i in data.changed_ids]
            metric = config.val_metric[len(CHANGED) :]
            if changed:  # CIDEr's document frequencies are the changed pairs' own, as in eval
                subset = score_captions(
                    {i: references[i] for i in changed},
                    {i: hypotheses[i] for i in changed},
                    (metric,),
                    session=session,
                )
                record[config.val_metric] = round(subset.scores.get(metric, 0.0), 6)
    extra_scores = getattr(model, "validation_scores", None)
    if callable(extra_scores):
        model.eval()
        with torch.no_grad():
            record.update(extra_scores([move_batch(b, device) for b in batches]))
        model.train()
    record["perplexity"] = math.exp(min(50.0, nll / tokens)) if tokens else None
    record["pairs"] = len(hypotheses)
    record["example"] = (
        {"id": next(iter(hypotheses)), "generated": next(iter(hypotheses.values()))}
        if hypotheses
        else {}
    )
    return record


def _fit_once(
    model: Any,
    config: TrainConfig,
    train_data: TrainingData,
    val_data: TrainingData,
    out: Path,
    info: dist.DistInfo,
    say: Log,
    notes: list[str],
    started: float,
) -> TrainResult:
    """Non-gradient models (nn, nn-multi): one pass of fit(), one validation, one checkpoint."""
    say(
        f"{config.model} has no trainable parameters: fitting once on {len(train_data.examples)} examples"
    )
    model.fit(train_data.example_batches(list(range(len(train_data.examples))), config.batch_size))
    record = validate(model, val_data, config, _device_of(model), with_nll=False)
    record.update(epoch=1, step=0)
    score = record.get(config.val_metric)
    if info.is_main:
        extra = {
            "epoch": 1,
            "step": 0,
            "best_score": score,
            "history": [record],
            "train_config": config.to_dict(),
        }
        save_checkpoint(out / "best.pt", model, extra)
        save_checkpoint(out / "last.pt", model, extra)
        _append_log(out, {"validation": record})
        say(f"validation: CIDEr {record['CIDEr']:.4f}")  # one validation: nothing to choose
    dist.cleanup(info)
    seconds = time.perf_counter() - started
    return TrainResult(
        out,
        out / "best.pt",
        out / "last.pt",
        score,
        1,
        0,
        history=[record],
        notes=notes,
        seconds=seconds,
        samples_per_second=len(train_data.examples) / seconds if seconds else 0.0,
        val_metric=config.val_metric,
    )


def _parameters(model: Any) -> list[Any]:
    return list(model.parameters()) if hasattr(model, "parameters") else []


def _device_of(model: Any) -> str:
    params = _parameters(model)
    return str(params[0].device) if params else "cpu"


def _append_log(out: Path, record: dict[str, Any]) -> None:
    with (out / "log.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


__all__ = [
    "TrainResult",
    "train",
    "validate",
    "prepare_out_dir",
    "default_dataset_dir",
    "render_default_clevr",
    "dataset_root",
]
