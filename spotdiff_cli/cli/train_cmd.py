"""``spotdiff train``: train a captioner of the suite (see training/README.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .root import app
from .state import errors_to_exit


@app.command("train")
@errors_to_exit
def train(
    model: Optional[str] = typer.Option(
        None,
        "--model",
        "-m",
        help="Captioner to train (see `spotdiff models`). \\[default: the recipe's]",
    ),
    data: Optional[str] = typer.Option(
        None,
        "--data",
        help="Dataset folder. \\[default: a synthetic benchmark generated once into ~/.cache/spotdiff]",
    ),
    recipe: Optional[str] = typer.Option(
        None,
        "--recipe",
        "-r",
        help="YAML recipe (a file, or a name in training/). \\[default: training/MODEL-synth.yaml]",
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        help="Run folder (checkpoints, log, config). \\[default: runs/MODEL-DATA, never reused]",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the run in --out (or the newest default run) from last.pt.",
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Random seed: the same seed gives the same model. \\[default: 0]"
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="auto, cpu or cuda. \\[default: auto]"
    ),
    epochs: Optional[int] = typer.Option(
        None, "--epochs", help="Epochs at most (early stopping may end sooner)."
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", "-b", help="Global batch size (Spot-the-diff: 8)."
    ),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate."),
    beam: Optional[int] = typer.Option(
        None, "--beam", help="Beam size for validation decoding. \\[default: 1, greedy]"
    ),
    finetune_backbone: Optional[bool] = typer.Option(
        None,
        "--finetune-backbone/--frozen-backbone",
        help="Train the backbone too (images in every batch; slower) instead of cached frozen features. \\[default: the recipe's, frozen]",
    ),
) -> None:
    """Train a captioner; the recipe's validation metric (CIDEr unless `val_metric` says otherwise)
    picks the best checkpoint and stops training early. Staged recipes, init_from, freeze and the
    other recipe settings: training/README.md."""
    from ..errors import UsageError
    from ..extras import require_training_extra
    from ..train.recipes import check_trainable, default_recipe_path, load_recipe
    from . import render

    if model is None and recipe is None:
        raise UsageError(
            "say which model to train: --model NAME (e.g. ddla; see `spotdiff models`) or --recipe FILE"
        )
    if model is not None:
        check_trainable(model)  # the recipe's own model is checked as it is read
    chosen = recipe if recipe is not None else default_recipe_path(model or "", data)
    config = load_recipe(
        chosen,
        model=model,
        data=data,
        seed=seed,
        device=device,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        beam=beam,
        finetune_backbone=finetune_backbone,
    )
    if chosen is not None:
        # After the recipe was read and checked: a refused recipe is one error line, alone.
        render.print_dim(f"recipe: {chosen}")
    # Named by the model, before the training loop's module imports torch.
    require_training_extra(f"model '{config.model}'")
    from ..api import train as run_training

    with render.stage_progress() as progress:
        result = run_training(
            config, out, resume=resume, progress=progress.update, log=progress.log
        )

    render.print_training_result(result, config.model)
    if result.interrupted:
        raise typer.Exit(130)
