"""What a training run is: the settings fixed while it trains (:class:`Run`, built by
:func:`make_run`), where it is (:class:`RunState`, what last.pt stores and ``--resume`` restores),
what it did (:class:`TrainResult`), and the pieces both the loop and a resumed run need: the loss
module DDP wraps, a checkpoint's ``extra`` and the RNG states."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..captioners.features import with_grids
from ..captioners.learned import LearnedCaptioner
from . import distributed as dist
from .batches import TrainingData
from .recipes import Stage, TrainConfig

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
    model: LearnedCaptioner
    train_data: TrainingData
    val_data: TrainingData
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    # What gradient clipping covers (the backbone's too when fine-tuning).
    params: list[torch.nn.Parameter]
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


def make_run(
    config: TrainConfig,
    model: LearnedCaptioner,
    *,
    info: dist.DistInfo,
    device: str,
    out: Path,
    train_data: TrainingData,
    val_data: TrainingData,
    say: Log,
    progress: Progress | None = None,
    backbone: tuple[Any, Any] | None = None,
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
        config=config,
        info=info,
        device=device,
        out=out,
        model=model,
        train_data=train_data,
        val_data=val_data,
        optimizer=optimizer,
        scaler=scaler,
        params=params,
        loss_module=loss_module,
        use_amp=use_amp,
        amp_dtype=amp_dtype,
        say=say,
        progress=progress,
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
        f"best {run.config.val_metric} {format_score(state.best_score)}"
    )
    return state


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


def format_score(value: float | None) -> str:
    """A score for a log line: 4 decimals, or n/a before the first validation."""
    return "n/a" if value is None else f"{value:.4f}"
