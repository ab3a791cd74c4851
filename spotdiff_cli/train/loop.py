"""The training loop: one function, ``train(config)``, to be read top to bottom.

    0. processes and devices    torchrun -> DDP (gloo on CPU, NCCL on CUDA), or one process
    1. data                     the dataset (default: a synthetic benchmark made once), its cache,
                                the vocabulary from the training split
    2. model and optimizer      built by name through the registry; Adam (Spot-the-diff §4) or AdamW
    3. resume                   --resume continues from last.pt: weights, optimizer, RNG, position
    4. epochs of steps          shuffle by (seed, epoch); global batch of 8 (§4) split over processes;
                                AMP on CUDA; gradient clipping; one log line per interval
                                (``finetune_backbone``: batches carry images, the backbone runs in
                                the step with gradients, at ``backbone_lr``, and is checkpointed)
    5. validate and checkpoint  CIDEr on the validation split (§4's early-stopping criterion);
                                best.pt when it improves, last.pt every epoch; stop after
                                ``patience`` validations without improvement

Ctrl-C saves last.pt (atomically, at the exact batch) before returning, so ``--resume`` continues
where it stopped. Rank 0 writes every file; nothing here prints: progress and log lines go through
callbacks (the CLI renders them with Rich). Non-gradient models (``nn``, ``nn-multi``) get one
``fit(train_batches)`` call instead of steps.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..captioners.checkpoint import build_captioner, read_checkpoint, save_checkpoint
from ..captioners.registry import create_captioner
from ..captioners.vocab import Vocabulary
from ..errors import OutputError, UsageError
from ..report.atomic import atomic_write_text
from . import distributed as dist
from .batches import TrainingData, load_training_data, move_batch, training_sentences, with_grids
from .recipes import DEFAULT_DATASET, TrainConfig

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


def train(config: TrainConfig, out_dir: str | Path | None = None, resume: bool = False,
          progress: Progress | None = None, log: Log | None = None) -> TrainResult:
    """Train ``config.model`` as ``config`` says; files go to ``out_dir`` (see ``prepare_out_dir``)."""
    from ..device import resolve_device

    say = log or (lambda line: None)
    started = time.perf_counter()

    # 0. processes and devices ------------------------------------------------------------------
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
        raise UsageError(f"--batch-size {config.batch_size} must be a multiple of the {info.world_size} processes")

    # 1. data ---------------------------------------------------------------------------------
    notes: list[str] = []
    root = dataset_root(config, info, say, notes)
    out = prepare_out_dir(out_dir, resume, config, root) if info.is_main else Path(str(out_dir or ""))
    out = Path(dist.broadcast_object(str(out), info))
    checkpoint = read_checkpoint(out / "last.pt") if resume else None
    if checkpoint is not None and checkpoint["model"] != config.model:
        raise UsageError(f"{out / 'last.pt'} is a '{checkpoint['model']}' run, not '{config.model}'; "
                         f"resume it with --model {checkpoint['model']}")
    if checkpoint is not None and ("backbone_state_dict" in checkpoint) != config.finetune_backbone:
        raise UsageError(f"{out / 'last.pt'} was trained with finetune_backbone: "
                         f"{str(not config.finetune_backbone).lower()}; resume it with the same setting")
    if checkpoint is not None:
        vocab = Vocabulary.from_dict(checkpoint["vocab"])
    else:
        vocab = Vocabulary.build(training_sentences(root, config.train_split, config.format), config.min_count)
    say(f"data: {root} | vocabulary {len(vocab)} words (min_count {config.min_count})")
    data_args = dict(backbone=config.backbone, format=config.format, max_clusters=config.max_clusters,
                     max_len=config.max_len, max_description_len=config.max_description_len)
    backbone = None
    if config.finetune_backbone:  # a private copy of the backbone the cache used, to be trained
        from ..captioners.backbones import create_backbone

        with torch.random.fork_rng(devices=[]):  # building it must not shift the captioner's init
            backbone = create_backbone(config.backbone)
        data_args["images"] = backbone[1]
        say(f"fine-tuning {config.backbone}: batches carry {backbone[1].input_size} images, "
            f"backbone lr {config.resolved_backbone_lr:.2e}")
    train_data = load_training_data(root, config.train_split, vocab, **data_args)  # type: ignore[arg-type]
    val_data = load_training_data(root, config.val_split, vocab, **data_args)  # type: ignore[arg-type]
    say(f"data: {len(train_data.examples)} training examples ({len(train_data.pairs)} pairs), "
        f"{len(val_data.pairs)} validation pairs, features {train_data.feature_shape}")

    # 2. model and optimizer --------------------------------------------------------------------
    if checkpoint is not None:  # the checkpoint's resolved config rebuilds exactly that model
        model = build_captioner(config.model, dict(checkpoint["config"]), vocab, device)
        model.load_state_dict(checkpoint["state_dict"])
    else:  # the model's defaults for this feature shape, with the recipe's model_config on top
        channels, grid_h, grid_w = train_data.feature_shape
        model = create_captioner(config.model, weights=None, device=device, vocab=vocab, channels=channels,
                                 grid=[grid_h, grid_w], backbone=config.backbone, **config.model_config)
    model.to(device)
    if backbone is not None:
        if checkpoint is not None and "backbone_state_dict" in checkpoint:
            backbone[0].load_state_dict(checkpoint["backbone_state_dict"])
        # eval(): BatchNorm keeps its pretrained statistics (batches of 8 are too small to
        # re-estimate them); the weights still get gradients. save_checkpoint stores it from here.
        backbone[0].to(device).eval().requires_grad_(True)
        model.finetuned_backbone = backbone
    model_config = dict(model.config)
    seed_everything(config.seed + info.rank)  # same init everywhere, different dropout per process
    if info.is_main:
        atomic_write_text(out / "config.json", json.dumps(
            {"train": config.to_dict(), "model_config": model_config, "data": str(root),
             "world_size": info.world_size, "device": device}, indent=2) + "\n")
        atomic_write_text(out / "vocab.json", json.dumps(vocab.to_dict()) + "\n")
    if callable(getattr(model, "fit", None)) and not any(p.requires_grad for p in _parameters(model)):
        if backbone is not None:
            raise UsageError(f"{config.model} is not trained by gradient steps: finetune_backbone needs a model "
                             "that is; set finetune_backbone: false")
        return _fit_once(model, config, train_data, val_data, out, info, say, notes, started)

    params = [p for p in model.parameters() if p.requires_grad]
    Optim = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    groups: list[Any] = params
    if backbone is not None:  # its own group; lr_scale keeps its lr in proportion through the schedule
        backbone_params = list(backbone[0].parameters())
        groups = [{"params": params}, {"params": backbone_params, "lr": config.resolved_backbone_lr,
                                       "lr_scale": config.resolved_backbone_lr / config.lr}]
        params = params + backbone_params  # gradient clipping covers both
    optimizer = Optim(groups, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay)
    use_amp = config.amp and device.startswith("cuda")
    amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    loss_module = dist.wrap_model(LossForward(model, backbone), info, device, config.ddp_find_unused)

    steps_per_epoch = math.ceil(len(train_data.examples) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    state = {"epoch": 0, "step": 0, "batch_in_epoch": 0, "best_score": None, "bad_evals": 0, "history": []}

    # 3. resume ---------------------------------------------------------------------------------
    if checkpoint is not None:
        extra = checkpoint.get("extra", {})
        for key in state:
            if key in extra:
                state[key] = extra[key]
        if "optimizer" in extra:
            optimizer.load_state_dict(extra["optimizer"])
        if "scaler" in extra and scaler.is_enabled():
            scaler.load_state_dict(extra["scaler"])
        restore_rng(extra.get("rng"))
        say(f"resumed {out / 'last.pt'}: epoch {state['epoch']}, step {state['step']}, "
            f"best CIDEr {_fmt(state['best_score'])}")

    def get_lr(step: int) -> float:
        # 1) linear warmup for warmup_steps steps
        if step < config.warmup_steps:
            return config.lr * (step + 1) / config.warmup_steps
        # 2) constant (Spot-the-diff: plain Adam, no schedule)
        if config.lr_schedule == "constant":
            return config.lr
        # 3) cosine decay from lr to min_lr over the remaining steps
        ratio = min(1.0, (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps))
        return config.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (config.lr - config.min_lr)

    def checkpoint_extra(position_in_epoch: int) -> dict[str, Any]:
        return {"epoch": state["epoch"], "step": state["step"], "batch_in_epoch": position_in_epoch,
                "best_score": state["best_score"], "bad_evals": state["bad_evals"], "history": state["history"],
                "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict() if scaler.is_enabled() else {},
                "rng": capture_rng(), "train_config": config.to_dict()}

    # 4. epochs of steps ------------------------------------------------------------------------
    stopped_early = interrupted = False
    samples_done, interval = 0, {"loss": 0.0, "nll": 0.0, "tokens": 0.0, "n": 0, "samples": 0, "t": time.perf_counter()}
    batch_index = int(state["batch_in_epoch"])
    try:
        while state["epoch"] < config.epochs and not stopped_early:
            epoch = int(state["epoch"])
            order = np.random.default_rng([config.seed, epoch]).permutation(len(train_data.examples))
            model.train()
            for batch_index in range(int(state["batch_in_epoch"]), steps_per_epoch):
                global_items = dist.usable_batch(order[batch_index * config.batch_size:(batch_index + 1) * config.batch_size], info)
                local_items = dist.shard_batch(list(global_items), info)
                if not local_items:  # a last batch shorter than the number of processes
                    continue
                batch = move_batch(train_data.batch([train_data.examples[i] for i in local_items]), device)
                lr = get_lr(int(state["step"]))
                for group in optimizer.param_groups:
                    group["lr"] = lr * group.get("lr_scale", 1.0)
                with torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=use_amp):
                    out_loss = loss_module(batch)
                scaler.scale(out_loss["loss"]).backward()
                if config.grad_clip > 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                state["step"] = int(state["step"]) + 1
                state["batch_in_epoch"] = batch_index + 1
                samples_done += len(global_items)
                interval["loss"] += float(out_loss["loss"].detach())
                interval["nll"] += float(out_loss["nll"].detach())
                interval["tokens"] += float(out_loss["n_tokens"])
                interval["n"] += 1
                interval["samples"] += len(global_items)
                if progress and info.is_main:
                    progress(f"epoch {epoch + 1}/{config.epochs}", batch_index + 1, steps_per_epoch)
                if state["step"] % config.log_every == 0:
                    loss_sum, nll_sum, tok_sum, n_sum = dist.all_reduce_sum(
                        [interval["loss"], interval["nll"], interval["tokens"], interval["n"]], info)
                    seconds = time.perf_counter() - interval["t"]
                    line = (f"epoch {epoch + 1} step {state['step']} loss {loss_sum / max(1, n_sum):.4f} "
                            f"ppl {math.exp(min(50.0, nll_sum / max(1.0, tok_sum))):.2f} lr {lr:.2e} "
                            f"{interval['samples'] / max(seconds, 1e-9):.1f} samples/s")
                    if info.is_main:
                        say(line)
                        _append_log(out, {"step": state["step"], "epoch": epoch + 1, "loss": loss_sum / max(1, n_sum),
                                          "lr": lr, "samples_per_s": interval["samples"] / max(seconds, 1e-9)})
                    interval = {"loss": 0.0, "nll": 0.0, "tokens": 0.0, "n": 0, "samples": 0, "t": time.perf_counter()}
            state["epoch"] = epoch + 1
            state["batch_in_epoch"] = 0

            # 5. validate and checkpoint -----------------------------------------------------------
            if (epoch + 1) % config.eval_every == 0 or state["epoch"] == config.epochs:
                record = validate(model, val_data, config, device, progress) if info.is_main else None
                record = dist.broadcast_object(record, info)
                record.update(epoch=epoch + 1, step=state["step"])
                state["history"] = [*state["history"], record]
                score = record["CIDEr"]
                improved = state["best_score"] is None or score > state["best_score"]
                if improved:
                    state["best_score"], state["bad_evals"] = score, 0
                else:
                    state["bad_evals"] = int(state["bad_evals"]) + 1
                if info.is_main:
                    if improved:
                        save_checkpoint(out / "best.pt", model, {k: v for k, v in checkpoint_extra(0).items()
                                                                 if k not in ("optimizer", "scaler", "rng")})
                    say(f"epoch {epoch + 1} validation: CIDEr {score:.4f} BLEU-4 {record.get('BLEU-4', 0.0):.4f} "
                        f"ppl {_fmt(record.get('perplexity'))}" + (" (best: saved best.pt)" if improved else
                        f" (best {state['best_score']:.4f}; {state['bad_evals']}/{config.patience or '∞'} without improvement)"))
                    _append_log(out, {"validation": record})
                if config.patience and int(state["bad_evals"]) >= config.patience:
                    stopped_early = True
                    say(f"early stop: no CIDEr improvement in {config.patience} validations")
            if info.is_main:
                save_checkpoint(out / "last.pt", model, checkpoint_extra(0))
            dist.barrier(info)
    except KeyboardInterrupt:
        interrupted = True
        if info.is_main:
            # The step counter says exactly which batches are done: resume starts at the next one.
            save_checkpoint(out / "last.pt", model, checkpoint_extra(int(state["batch_in_epoch"])))
            say(f"interrupted: saved {out / 'last.pt'} at epoch {int(state['epoch']) + 1}, "
                f"batch {state['batch_in_epoch']}/{steps_per_epoch}; continue with --resume")
    finally:
        dist.cleanup(info)

    seconds = time.perf_counter() - started
    return TrainResult(
        out_dir=out, best_path=(out / "best.pt") if (out / "best.pt").is_file() else None,
        last_path=(out / "last.pt") if (out / "last.pt").is_file() else None, best_score=state["best_score"],
        epochs=int(state["epoch"]), steps=int(state["step"]), stopped_early=stopped_early, interrupted=interrupted,
        history=list(state["history"]), notes=notes, seconds=seconds,
        samples_per_second=samples_done / seconds if seconds else 0.0,
    )


# ------------------------------------------------------------------------------------------------
# the pieces train() uses, in the order it uses them


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
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def default_dataset_dir(config: TrainConfig) -> Path:
    """Where the default synthetic benchmark lives: the user cache, keyed by its settings."""
    from ..weights import user_cache_dir

    return user_cache_dir() / "datasets" / f"synth-{config.synth_pairs}x{config.synth_size}-seed{config.synth_seed}"


def dataset_root(config: TrainConfig, info: dist.DistInfo, say: Log, notes: list[str]) -> Path:
    """The dataset folder, with its preprocessing cache ready.

    ``data == "synth"``: the default benchmark is generated once into the user cache
    (``data/synth.py``) and prepared (``data/cache.py``); later runs reuse it. A real dataset
    without a cache for the backbone is prepared in place (what ``spotdiff data prepare`` does).
    Under torchrun only rank 0 does this work; the others wait.
    """
    from ..data.cache import prepare_dataset
    from ..errors import DataError

    root = default_dataset_dir(config) if config.data == DEFAULT_DATASET else Path(config.data).expanduser()
    if config.data != DEFAULT_DATASET and not root.exists():
        raise DataError(f"dataset folder {root} not found; pass --data DIR (or leave it out for the synthetic benchmark)")
    splits = [config.train_split, config.val_split]
    ready = all((root / "cache" / f"features-{config.backbone}" / f"{s}.npz").is_file() for s in splits)
    if info.is_main and not ready:
        if config.data == DEFAULT_DATASET and not (root / "synth.json").is_file():
            from ..data.synth import synthesize

            message = (f"no --data given: generating the default synthetic benchmark ({config.synth_pairs} pairs, "
                       f"{config.synth_size} px) into {root} (once; later runs reuse it)")
            say(message)
            notes.append(message)
            synthesize(root, pairs=config.synth_pairs, seed=config.synth_seed, size=config.synth_size, overwrite=True)
        say(f"preparing {root}: cluster analysis and {config.backbone} features (once per dataset)")
        prepare_dataset(root, splits, backbone=config.backbone, device=config.device, format=config.format)
    elif config.data == DEFAULT_DATASET:
        notes.append(f"no --data given: using the default synthetic benchmark in {root}")
        say(notes[-1])
    dist.barrier(info)
    return root


def prepare_out_dir(out_dir: str | Path | None, resume: bool, config: TrainConfig, root: Path) -> Path:
    """The run folder. Never reuses a previous run's folder silently:

    * ``--out DIR`` with ``--resume``: DIR must hold ``last.pt``.
    * ``--out DIR`` without: DIR must be new or empty, else an error that says what to do.
    * no ``--out``: ``runs/<model>-<dataset>``; taken -> ``-2``, ``-3``, ... (``--resume`` picks the
      newest of those that holds ``last.pt``).
    """
    if out_dir is not None:
        out = Path(out_dir).expanduser()
        if resume:
            if not (out / "last.pt").is_file():
                raise UsageError(f"--resume: {out / 'last.pt'} not found; is --out the folder of the run to continue?")
            return out
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise OutputError(f"{out} already holds files (a previous run?); pass --resume to continue it, "
                              f"or choose a new --out")
        out.mkdir(parents=True, exist_ok=True)
        return out
    name = "synth" if config.data == DEFAULT_DATASET else (root.name or "data")
    base = Path("runs") / f"{config.model}-{name}"
    candidates = [base] + [base.with_name(f"{base.name}-{i}") for i in range(2, 1000)]
    if resume:
        existing = [c for c in candidates if (c / "last.pt").is_file()]
        if not existing:
            raise UsageError(f"--resume: no earlier run of {config.model} under {base}*; pass --out DIR of the run")
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


def validate(model: Any, data: TrainingData, config: TrainConfig, device: str,
             progress: Progress | None = None, with_nll: bool = True) -> dict[str, Any]:
    """Validation CIDEr (and BLEU-4, ROUGE-L) of generated text, and perplexity of the gold text.

    Single protocol: the first generated sentence against every reference sentence of the pair;
    multi protocol: the whole generated description against each annotator's description.
    ``with_nll=False`` skips perplexity (models without ``loss``: nn, nn-multi).
    """
    from ..evaluate.metrics import score_captions

    model.eval()
    references: dict[str, list[str]] = {}
    hypotheses: dict[str, str] = {}
    nll = tokens = 0.0
    batches = list(data.pair_batches(max(1, config.batch_size), config.val_limit))
    with torch.no_grad():
        for index, batch in enumerate(batches):
            batch = move_batch(batch, device)
            finetuned = getattr(model, "finetuned_backbone", None)
            if finetuned is not None:  # fine-tuning: images -> grids with the backbone being trained
                batch = with_grids(batch, finetuned)
            if with_nll:
                out = model.loss(batch)
                nll += float(out["nll"])
                tokens += float(out["n_tokens"])
            generated = model.generate(batch, max_sentences=config.max_sentences, beam=config.beam, max_len=config.max_len)
            for pair_id, refs, descs, sents in zip(batch["pair_ids"], batch["references"], batch["descriptions"], generated):
                if config.val_protocol == "multi":
                    references[pair_id] = descs or [""]
                    hypotheses[pair_id] = " ".join(s for s in sents if s.strip())
                else:
                    references[pair_id] = refs or [""]
                    hypotheses[pair_id] = sents[0] if sents else ""
            if progress:
                progress("validation", index + 1, len(batches))
    model.train()
    scores = score_captions(references, hypotheses, ("BLEU-4", "ROUGE-L", "CIDEr"), config.val_tokenizer)
    record: dict[str, Any] = {k: round(v, 6) for k, v in scores.scores.items()}
    record.setdefault("CIDEr", 0.0)
    record["perplexity"] = math.exp(min(50.0, nll / tokens)) if tokens else None
    record["pairs"] = len(hypotheses)
    record["example"] = {"id": next(iter(hypotheses)), "generated": next(iter(hypotheses.values()))} if hypotheses else {}
    return record


def _fit_once(model: Any, config: TrainConfig, train_data: TrainingData, val_data: TrainingData, out: Path,
              info: dist.DistInfo, say: Log, notes: list[str], started: float) -> TrainResult:
    """Non-gradient models (nn, nn-multi): one pass of fit(), one validation, one checkpoint."""
    say(f"{config.model} has no trainable parameters: fitting once on {len(train_data.examples)} examples")
    model.fit(train_data.example_batches(list(range(len(train_data.examples))), config.batch_size))
    record = validate(model, val_data, config, _device_of(model), with_nll=False)
    record.update(epoch=1, step=0)
    if info.is_main:
        extra = {"epoch": 1, "step": 0, "best_score": record["CIDEr"], "history": [record], "train_config": config.to_dict()}
        save_checkpoint(out / "best.pt", model, extra)
        save_checkpoint(out / "last.pt", model, extra)
        _append_log(out, {"validation": record})
        say(f"validation: CIDEr {record['CIDEr']:.4f}")
    dist.cleanup(info)
    seconds = time.perf_counter() - started
    return TrainResult(out, out / "best.pt", out / "last.pt", record["CIDEr"], 1, 0, history=[record], notes=notes,
                       seconds=seconds, samples_per_second=len(train_data.examples) / seconds if seconds else 0.0)


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


__all__ = ["TrainResult", "train", "validate", "prepare_out_dir", "default_dataset_dir", "dataset_root"]
