"""Training settings (``TrainConfig``) and the YAML recipes in ``training/``.

One override rule, as everywhere in spotdiff (config.py): dataclass defaults < recipe YAML <
command-line flags (``None`` = not given). A recipe is a flat mapping of ``TrainConfig`` fields;
``model_config`` is handed to the model's ``__init__(config, vocab)`` untouched (plus the feature
shape the loop reads from the cache). The resolved config is written next to every run and into
every checkpoint.

Defaults are the paper's where it gives them (Spot-the-diff §4: Adam, mini-batches of 8, early
stopping on validation CIDEr) and chosen otherwise; ``training/*.yaml`` says why, line by line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import resolve, to_dict
from ..errors import UsageError

# The repository's recipe folder (a source checkout); an installed wheel falls back to defaults.
RECIPES_DIR = Path(__file__).resolve().parents[2] / "training"
# What `spotdiff train --model M` trains on when no --data is given (see loop.dataset_root).
DEFAULT_DATASET = "synth"
# Names --data accepts for a benchmark made once into the user cache instead of a folder:
# "synth" (the 2-D synthetic benchmark, seconds) and "clevr" (the rendered 3-D one, hours).
CACHED_DATASETS = ("synth", "clevr")


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

    def validate(self) -> TrainConfig:
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
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        return self

    @property
    def resolved_backbone_lr(self) -> float:
        """The backbone's learning rate when fine-tuning: ``backbone_lr``, or lr / 10 when 0."""
        return self.backbone_lr or self.lr / 10

    def to_dict(self) -> dict[str, Any]:
        data = to_dict(self)
        data["betas"] = list(self.betas)
        return data


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


def load_recipe(recipe: str | Path | None = None, **flags: Any) -> TrainConfig:
    """TrainConfig from defaults < ``recipe`` YAML < ``flags`` (None = not given), validated.

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
    config = resolve(TrainConfig(), path, **flags)
    return _coerce(config, str(path) if path else "the command line").validate()


def _coerce(config: TrainConfig, where: str) -> TrainConfig:
    """Give every field its default's type. YAML reads ``1e-3`` as a *string* (YAML 1.1 wants
    ``1.0e-3``) and ``8`` as an int where a float is meant; fix that here, with a clear error for
    a value that is not a number at all."""
    import dataclasses

    changes: dict[str, Any] = {}
    defaults = TrainConfig()
    for f in dataclasses.fields(config):
        value, default = getattr(config, f.name), getattr(defaults, f.name)
        try:
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError
            elif isinstance(default, int) and not isinstance(value, bool):
                if float(value) != int(float(value)):
                    raise ValueError
                changes[f.name] = int(float(value))
            elif isinstance(default, float):
                changes[f.name] = float(value)
            elif isinstance(default, tuple):
                changes[f.name] = tuple(float(v) for v in value)
            elif isinstance(default, str):
                changes[f.name] = str(value)
        except (TypeError, ValueError):
            example = str(default).lower() if isinstance(default, bool) else default
            raise UsageError(
                f"setting '{f.name}' in {where} is {value!r}; expected a {type(default).__name__}, "
                f"e.g. {f.name}: {example}"
            ) from None
    return dataclasses.replace(config, **changes)
