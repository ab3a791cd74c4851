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
                                or contrastive; ``balance_changes``: changed and unchanged pairs
                                take turns); global batch of 8 (§4) split over processes;
                                AMP on CUDA; gradient clipping; one log line per interval
                                (``finetune_backbone``: batches carry images, the backbone runs in
                                the step with gradients, at ``backbone_lr``, and is checkpointed)
    5. validate and checkpoint  ``val_metric`` on the validation split (CIDEr, §4's early-stopping
                                criterion); best.pt when it improves, last.pt every epoch; a stage
                                ends after its ``patience`` validations without improvement

What stays fixed during a run is a :class:`~.run.Run`; where the run is (what last.pt stores and
``--resume`` restores) is a :class:`~.run.RunState` (both in ``train/run.py``). Steps 0-2 live in
``train/prepare.py``, the dataset folder and its default benchmarks in ``train/datasets.py``, the
run folder's rules in ``train/out_dir.py``, validation in ``train/validation.py``: this module is
the loop and what only the loop needs. Ctrl-C saves last.pt (atomically, at the exact
batch) before returning, so ``--resume`` continues where it stopped. Rank 0 writes every file;
nothing here prints: progress and log lines go through callbacks (the CLI renders them with Rich).
Non-gradient models (``nn``, ``nn-multi``) get one ``fit(train_batches)`` call instead of steps.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..captioners.checkpoint import save_checkpoint
from ..captioners.features import move_batch
from ..captioners.learned import Batch, LearnedCaptioner
from ..errors import UsageError
from . import distributed as dist
from .batches import TrainingData
from .datasets import dataset_root
from .init import freeze_parameters
from .out_dir import prepare_out_dir
from .prepare import (
    build_model,
    init_checkpoint,
    initialise,
    load_splits,
    resume_checkpoint,
    run_vocabulary,
    start_processes,
    trainable_backbone,
    trained_by_gradient,
    write_run_files,
)
from .recipes import Stage, TrainConfig, check_trainable
from .run import (
    Log,
    LossForward,
    Progress,
    Run,
    RunState,
    TrainResult,
    checkpoint_extra,
    format_score,
    make_run,
    named_parameters,
    resume_state,
    seed_everything,
)
from .sampler import balanced_order, contrastive_batches, epoch_order, shuffled_batches
from .validation import check_val_metric, validate


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
    check_trainable(config.model)  # a typo in the name fails now, not after the data work
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
    run = make_run(
        config,
        model,
        info=info,
        device=device,
        out=out,
        train_data=train_data,
        val_data=val_data,
        say=say,
        progress=progress,
        backbone=backbone,
    )
    state = resume_state(run, checkpoint) if checkpoint is not None else RunState()  # 3

    stopped_early = interrupted = finished = False  # 4
    samples_done, interval = 0, Interval()
    total_epochs = sum(stage.epochs for stage in run.plan)
    try:
        while state.epoch < total_epochs and not stopped_early:
            enter_stage(run, state)
            batches = epoch_batches(run, state.epoch)
            stage_steps = run.steps_per_epoch * run.stage.epochs
            model.train()
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
        finished = True
    except KeyboardInterrupt:
        interrupted = True
        save_interrupted(run, state)
    finally:
        dist.cleanup(info, finished)
    result = run_result(out, state, stopped_early, interrupted, notes, started, samples_done)
    result.val_metric = config.val_metric
    return result


# ------------------------------------------------------------------------------------------------
# the steps of the loop (4, 5), in the order train() takes them


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
    _check_half_precision_is_frozen(named, stage.name)
    run.objectives = dict(stage.objectives)
    run.model.set_training_stage(stage.name, dict(stage.objectives), dict(stage.model_options))
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
    if run.config.balance_changes:  # changed and unchanged pairs take turns
        order = balanced_order(order, data.example_changed())
    if run.stage.sampler == "contrastive":
        pairs, captions = data.example_keys()
        return contrastive_batches(order, pairs, captions, size)
    return shuffled_batches(order, size)


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
            f"BLEU-4 {record.get('BLEU-4', 0.0):.4f} ppl {format_score(record.get('perplexity'))}"
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
# non-gradient models, and small helpers


def _check_half_precision_is_frozen(
    named: list[tuple[str, torch.nn.Parameter]], stage: str
) -> None:
    """Weights held in float16/bfloat16 (OneDiff's ``lm_dtype``) are for a frozen part: Adam's
    updates are mostly below a half-precision weight's resolution, so they would not train."""
    half = [n for n, p in named if p.requires_grad and p.dtype in (torch.float16, torch.bfloat16)]
    if half:
        first = half[0].split(".")[0]
        raise UsageError(
            f"stage '{stage}' would train {len(half)} half-precision parameter tensor(s) "
            f"({half[0]}, ...): freeze them in every stage (freeze: ['{first}.*']) or load them "
            "in float32 (lm_dtype: float32)"
        )


def _fit_once(
    model: LearnedCaptioner,
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
    record = validate(model, val_data, config, str(model.device), with_nll=False)
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
    dist.cleanup(info, finished=True)
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


def _append_log(out: Path, record: dict[str, Any]) -> None:
    with (out / "log.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


__all__ = ["train"]
