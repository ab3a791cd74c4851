"""Training settings (``TrainConfig``) and the YAML recipes in ``training/``.

One override rule, as everywhere in spotdiff (config.py): dataclass defaults < recipe YAML <
command-line flags (``None`` = not given). A recipe is a flat mapping of ``TrainConfig`` fields;
``model_config`` is handed to the model's ``__init__(config, vocab)`` untouched (plus the feature
shape the loop reads from the cache). The resolved config is written next to every run and into
every checkpoint.

A recipe states only what differs from the recipe it builds on, named by ``defaults:`` (as
Hydra's defaults list): ``defaults: base/synth`` or ``defaults: ddla-synth`` (a recipe in the
same folder or in ``training/``; a list applies each in turn). The base is applied first, then
the recipe on top: every setting replaces the base's, except ``model_config``, whose keys
replace the base's one by one. ``training/base/`` holds the bases the recipes share.

Defaults are the paper's where it gives them (Spot-the-diff §4: Adam, mini-batches of 8, early
stopping on validation CIDEr) and chosen otherwise; ``training/*.yaml`` says why, line by line.

What the later families need (issue 12), all optional and off by default:

* ``stages``: a list of training stages run one after another (pre-training then fine-tuning,
  an easy-then-hard curriculum). Each stage is a mapping of :class:`Stage` fields; what a stage
  leaves out it takes from the top level (``epochs``, ``lr``, ``freeze``, ...). Without ``stages``
  the run is one stage made of the top-level values, exactly as before.
* ``objectives``: weights of the named losses a model reports (``loss(batch)["losses"]``, e.g.
  ``{caption: 0.7, aux: 0.3}`` for DUDA+AUX's (1 - γ) L_pri + γ L_aux); empty = the model's own
  ``loss``.
* ``freeze``: parameter-name patterns (``fnmatch``: ``encoder.*``) whose weights do not move.
* ``init_from``: a checkpoint to start from, loaded partially (what matches by name and shape),
  with a report of what matched (``train/init.py``).
* ``val_metric``: the validation number that picks ``best.pt`` and drives early stopping
  (CIDEr by default, §4; perplexity and others are lower-is-better); ``changed/<metric>``
  scores only the validation pairs that hold a change; ``balanced/<metric>`` is the harmonic
  mean of the metric on the pairs with a change and on those without (low for either collapse:
  "no change" everywhere, or one change sentence everywhere).
* ``sampler``: ``shuffle`` or ``contrastive`` (one example per pair, no identical captions in a
  batch: ``train/sampler.py``).
* ``balance_changes``: changed and unchanged pairs' examples take turns in each epoch's order, so
  every batch holds both in equal shares while both last (``train/sampler.py: balanced_order``).
* ``input_size`` / ``feature_levels``: which feature cache to train on (``data/cache.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import apply_mapping, load_yaml, resolve, to_dict
from ..errors import SpotdiffError, UsageError
from .sampler import SAMPLERS

# The repository's recipe folder (a source checkout); an installed wheel falls back to defaults.
RECIPES_DIR = Path(__file__).resolve().parents[2] / "training"
# What `spotdiff train --model M` trains on when no --data is given (see datasets.dataset_root).
DEFAULT_DATASET = "synth"
# Names --data accepts for a benchmark made once into the user cache instead of a folder:
# "synth" (the 2-D synthetic benchmark, seconds) and "clevr" (the rendered 3-D one, hours).
CACHED_DATASETS = ("synth", "clevr")


# Validation numbers where lower is better; every other one (BLEU, METEOR, ROUGE-L, CIDEr, a
# model's own retrieval recall) is higher-is-better.
LOWER_IS_BETTER = ("perplexity", "loss", "nll")


@dataclass(frozen=True)
class Stage:
    """One stage of a staged recipe (``stages:``). ``None`` = take the top-level value."""

    name: str = ""
    epochs: int | None = None
    lr: float | None = None
    warmup_steps: int | None = None
    lr_schedule: str | None = None
    min_lr: float | None = None
    patience: int | None = None  # validations without improvement before this stage ends early
    sampler: str | None = None
    freeze: tuple[str, ...] | None = None
    objectives: dict[str, float] | None = None
    # Handed to the model's set_training_stage(name, objectives, options) when the stage starts
    # (e.g. DUDA+AUX's candidate set: easy, then easy+hard).
    model_options: dict[str, Any] | None = None


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run. See training/README.md for each recipe."""

    model: str = "ddla"
    # Dataset folder, or "synth" / "clevr": a benchmark generated once into the user cache.
    data: str = DEFAULT_DATASET
    format: str = "auto"
    train_split: str = "train"
    val_split: str = "val"
    # The default benchmark's size when data == "synth" (generated once, then reused).
    synth_pairs: int = 1000
    synth_size: int = 224
    synth_seed: int = 0
    # The rendered CLEVR-Change-style benchmark when data == "clevr" (rendered once, resumable):
    # 3000 scenes = 6000 pairs (2550 / 150 / 300 scenes train / val / test), about 2.2 h on two
    # cores at the renderer's default quality (docs/data.md).
    clevr_pairs: int = 3000
    clevr_width: int = 320
    clevr_height: int = 240
    clevr_spp: int = 16
    clevr_seed: int = 0
    # Frozen backbone, features cached by `spotdiff data prepare` (as the papers do).
    backbone: str = "efficientnet_lite0"
    # true: batches carry images and the backbone is trained too (slower; its weights go into the
    # checkpoint). false (the papers' way): cached grids, backbone frozen.
    finetune_backbone: bool = False
    # Learning rate of the backbone's parameters when fine-tuning; 0 = lr / 10 (a pretrained
    # backbone needs smaller steps than the freshly initialised captioner). Follows lr's schedule.
    backbone_lr: float = 0.0
    # Vocabulary from the training split; Table 1: 1000 types with >= 5 occurrences cover 97 %.
    min_count: int = 5
    max_clusters: int = (
        10  # most salient clusters kept per pair (DDLA decodes once per cluster, §3.3)
    )
    max_len: int = 25  # words per sentence kept for training and produced when decoding
    max_description_len: int = 80  # words + separators of a whole description (multi targets)
    max_sentences: int = 1  # sentences generated per pair at validation (1 = single protocol)
    val_protocol: str = "single"  # "single" or "multi" (Spot-the-diff Tables 4 / 5)
    # Optimisation (§4: Adam, mini-batches of 8).
    optimizer: str = "adam"  # adam | adamw
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    batch_size: int = 8  # global batch: split over processes under torchrun
    epochs: int = 30
    warmup_steps: int = 0
    lr_schedule: str = "constant"  # constant | cosine
    min_lr: float = 0.0
    grad_clip: float = 5.0  # max global grad norm; 0 = off
    amp: bool = True  # mixed precision on CUDA only (bf16 where supported, else fp16 + scaler)
    # Early stopping on validation CIDEr (§4).
    eval_every: int = 1  # epochs between validations
    patience: int = 5  # validations without improvement before stopping; 0 = never stop early
    val_limit: int = 0  # score only the first N validation pairs (0 = all)
    val_tokenizer: str = "auto"  # auto | ptb | python (see evaluate/metrics.py)
    beam: int = 1  # beam size at validation (§3.3 decodes greedily)
    log_every: int = 20  # steps between log lines
    seed: int = 0
    device: str = "auto"
    num_threads: int = 0  # torch CPU threads per process (0 = torch's default)
    ddp_find_unused: bool = (
        True  # DDP: tolerate parameters a loss does not touch (ddla-uniform's prior)
    )
    model_config: dict[str, Any] = field(default_factory=dict)
    # Which feature cache: 0 = the backbone's own input size (448 gives efficientnet_lite0 a
    # 14 x 14 grid, the paper's ResNet grid); strides of multi-level maps to load (8, 16, 32).
    input_size: int = 0
    feature_levels: tuple[int, ...] = ()
    # Start from a checkpoint's weights: every tensor whose name (after init_rename's prefix
    # changes) and shape match; init_keys (fnmatch patterns) restrict which. init_vocab:
    # "checkpoint" keeps its vocabulary (word embeddings keep their meaning), "data" builds one
    # from the training split (word-indexed tensors then load only if the sizes agree).
    init_from: str = ""
    init_keys: tuple[str, ...] = ()
    init_rename: dict[str, str] = field(default_factory=dict)
    init_vocab: str = "checkpoint"
    freeze: tuple[str, ...] = ()  # parameter-name patterns kept fixed (fnmatch: "encoder.*")
    objectives: dict[str, float] = field(default_factory=dict)  # {} = the model's own loss
    val_metric: str = "CIDEr"  # picks best.pt and drives early stopping (§4: CIDEr)
    sampler: str = "shuffle"  # shuffle | contrastive (train/sampler.py)
    # Changed and unchanged pairs take turns in the epoch's order: equal shares in every batch
    # (train/sampler.py: balanced_order); for models whose cheapest answer is "no change".
    balance_changes: bool = False
    stages: tuple[dict[str, Any], ...] = ()  # see Stage; empty = one stage of the values above

    def validate(self) -> TrainConfig:
        check_trainable(self.model)
        checks = [
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.epochs >= 1, "--epochs must be at least 1"),
            (self.lr > 0, "lr must be positive"),
            (self.optimizer in ("adam", "adamw"), "optimizer must be adam or adamw"),
            (self.lr_schedule in ("constant", "cosine"), "lr_schedule must be constant or cosine"),
            (self.min_count >= 1, "min_count must be at least 1"),
            (self.max_len >= 1, "max_len must be at least 1"),
            (self.val_protocol in ("single", "multi"), "val_protocol must be single or multi"),
            (
                self.val_tokenizer in ("auto", "ptb", "python"),
                "val_tokenizer must be auto, ptb or python",
            ),
            (self.eval_every >= 1, "eval_every must be at least 1"),
            (self.patience >= 0, "patience must be 0 (off) or more"),
            (self.beam >= 1, "beam must be at least 1"),
            (self.grad_clip >= 0, "grad_clip must be 0 (off) or positive"),
            (self.log_every >= 1, "log_every must be at least 1"),
            (self.backbone_lr >= 0, "backbone_lr must be 0 (= lr / 10) or positive"),
            (isinstance(self.model_config, dict), "model_config must be a mapping"),
            (self.input_size == 0 or self.input_size >= 32, "input_size must be 0 or >= 32"),
            (all(s > 0 for s in self.feature_levels), "feature_levels are strides: 8, 16, 32"),
            (self.init_vocab in ("checkpoint", "data"), "init_vocab must be checkpoint or data"),
            (bool(self.val_metric), "val_metric must name a validation number, e.g. CIDEr"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        self.stage_plan()  # checks every stage
        return self

    def stage_plan(self) -> list[Stage]:
        """The stages to run, every field filled: ``stages`` over the top-level values, or one
        stage ("main") made of the top-level values alone."""
        raw = list(self.stages) or [{}]
        plan = []
        for index, values in enumerate(raw, start=1):
            where = f"stage {index} of the recipe"
            if not isinstance(values, dict):
                raise UsageError(f"{where} must be a mapping of settings, e.g. {{epochs: 5}}")
            stage = apply_mapping(Stage(), values, where)
            top = {
                "name": f"stage{index}" if self.stages else "main",
                "epochs": self.epochs,
                "lr": self.lr,
                "warmup_steps": self.warmup_steps,
                "lr_schedule": self.lr_schedule,
                "min_lr": self.min_lr,
                "patience": self.patience,
                "sampler": self.sampler,
                "freeze": self.freeze,
                "objectives": self.objectives,
                "model_options": {},
            }
            filled = {
                k: (v if getattr(stage, k) in (None, "") else getattr(stage, k))
                for k, v in top.items()
            }
            filled["freeze"] = tuple(filled["freeze"])
            filled["objectives"] = {str(k): float(v) for k, v in dict(filled["objectives"]).items()}
            stage = Stage(**filled)
            checks = [
                (stage.epochs >= 1, "epochs must be at least 1"),
                (stage.lr > 0, "lr must be positive"),
                (
                    stage.lr_schedule in ("constant", "cosine"),
                    "lr_schedule must be constant or cosine",
                ),
                (stage.warmup_steps >= 0, "warmup_steps must be 0 or more"),
                (stage.patience >= 0, "patience must be 0 (off) or more"),
                (stage.sampler in SAMPLERS, f"sampler must be one of {', '.join(SAMPLERS)}"),
                (all(w >= 0 for w in stage.objectives.values()), "objective weights must be >= 0"),
            ]
            for ok, message in checks:
                if not ok:
                    raise UsageError(message if not self.stages else f"{where}: {message}")
            plan.append(stage)
        names = [s.name for s in plan]
        if len(set(names)) != len(names):
            raise UsageError(f"stage names must differ: {', '.join(names)}")
        return plan

    @property
    def total_epochs(self) -> int:
        """Epochs over all stages (``epochs`` for a run without stages)."""
        return sum(s.epochs for s in self.stage_plan())

    @property
    def val_lower_is_better(self) -> bool:
        """Whether a smaller ``val_metric`` is better (perplexity, losses)."""
        name = self.val_metric.lower()
        return name in LOWER_IS_BETTER or name.endswith("loss")

    @property
    def resolved_backbone_lr(self) -> float:
        """The backbone's learning rate when fine-tuning: ``backbone_lr``, or lr / 10 when 0."""
        return self.backbone_lr or self.lr / 10

    def to_dict(self) -> dict[str, Any]:
        data = to_dict(self)
        data["betas"] = list(self.betas)
        return data


def check_trainable(model: str) -> None:
    """``model`` names a registered captioner with learned parts: an unknown name is a
    ModelError with the close match (``did you mean 'ddla'?``), a model with nothing to train
    a UsageError. Cheap (no torch, no data): run it before any dataset is generated or
    prepared, whether the name came from ``--model`` or from a recipe."""
    from ..captioners.registry import model_info

    if not model_info(model).trainable:
        raise UsageError(
            f"model '{model}' is not trainable (it has no learned parts); see `spotdiff models`"
        )


def default_recipe_path(model: str, data: str | None = None) -> Path | None:
    """The recipe `spotdiff train --model M` uses without ``--recipe``: ``training/M-synth.yaml``
    for a cached benchmark ("synth", and "clevr" unless ``M-clevr.yaml`` exists: both are
    templated captions over a small vocabulary), ``training/M-spot-the-diff.yaml`` for a real
    dataset; None when the file is not there (an installed wheel: the dataclass defaults apply)."""
    if data in (None, *CACHED_DATASETS):
        stems = [f"{model}-{data}", f"{model}-synth"] if data else [f"{model}-synth"]
    else:
        stems = [f"{model}-spot-the-diff"]
    return next((p for p in (RECIPES_DIR / f"{s}.yaml" for s in stems) if p.is_file()), None)


def recipe_chain(path: Path, _seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict[str, Any]]]:
    """The files recipe ``path`` resolves through, the deepest base first, each with its own
    settings (``defaults`` taken out): what :func:`load_recipe` applies in turn. A base is looked
    for beside the file that names it, then beside the recipe asked for (its folder is the
    recipes' root: ``base/common`` from ``base/synth.yaml``), then in ``training/``."""
    if path.resolve() in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, path.resolve()))
        raise UsageError(f"recipe {path} builds on itself: {chain}")
    values = dict(load_yaml(path))
    bases = values.pop("defaults", None) or []
    bases = [bases] if isinstance(bases, str) else bases
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        raise UsageError(
            f"setting 'defaults' in {path} must name the recipe it builds on, e.g. "
            "defaults: base/synth"
        )
    chain: list[tuple[Path, dict[str, Any]]] = []
    root = Path(_seen[0]).parent if _seen else path.resolve().parent
    for base in bases:
        stem = base if base.endswith((".yaml", ".yml")) else f"{base}.yaml"
        found = [f / stem for f in (path.parent, root, RECIPES_DIR) if (f / stem).is_file()]
        if not found:
            raise UsageError(
                f"recipe {path} builds on '{base}', which is neither beside it nor in {RECIPES_DIR}"
            )
        chain += recipe_chain(found[0], (*_seen, path.resolve()))
    return [*chain, (path, values)]


def load_recipe(recipe: str | Path | None = None, **flags: Any) -> TrainConfig:
    """TrainConfig from defaults < ``recipe`` YAML (after the recipes it builds on) < ``flags``
    (None = not given), validated.

    ``recipe`` may be a path or a recipe name in ``training/`` (``ddla-tiny-cpu``).
    """
    path: Path | None = None
    if recipe is not None:
        path = Path(recipe)
        if not path.is_file() and (RECIPES_DIR / f"{recipe}.yaml").is_file():
            path = RECIPES_DIR / f"{recipe}.yaml"
        if not path.is_file():
            known = (
                sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) if RECIPES_DIR.is_dir() else []
            )
            import difflib

            close = difflib.get_close_matches(str(recipe), known, n=1)
            hint = (
                f"; did you mean '{close[0]}'?"
                if close
                else (f" (recipes: {', '.join(known)})" if known else "")
            )
            raise UsageError(f"recipe '{recipe}' not found{hint}")
    config = TrainConfig()
    for file, values in recipe_chain(path) if path is not None else []:
        if isinstance(values.get("model_config"), dict):  # merged key by key with the base's
            values = {**values, "model_config": {**config.model_config, **values["model_config"]}}
        config = apply_mapping(config, values, str(file))
    config = resolve(config, None, **flags)
    if flags.get("model") is None and path is not None:
        # The recipe's model, checked now and said to be the recipe's: a typo there once cost
        # generating and preparing 1,000 pairs (> 3 min) before the name was refused.
        try:
            check_trainable(config.model)
        except SpotdiffError as exc:
            raise type(exc)(f"recipe {path}: {exc}") from None
    return config.validate()
