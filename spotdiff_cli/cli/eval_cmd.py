"""``spotdiff eval``: score a predictions file, or run a model over a split and score it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .root import app
from .state import errors_to_exit


@app.command("eval")
@errors_to_exit
def evaluate(
    dataset: Path = typer.Option(
        ...,
        "--dataset",
        "-d",
        help="Dataset folder; for --predictions its annotations/ folder is enough.",
    ),
    predictions: Optional[list[Path]] = typer.Option(
        None,
        "--predictions",
        "-p",
        help="COCO-style [{image_id, caption}] or report JSON to score; repeat for several runs (seeds) of one model.",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", "-m", help="Captioner to run over the split (see `spotdiff models`)."
    ),
    weights: Optional[list[str]] = typer.Option(
        None, "--weights", help="Checkpoint for --model; repeat for several runs (seeds)."
    ),
    compare: Optional[list[Path]] = typer.Option(
        None,
        "--compare",
        help="Model B: its predictions file(s), or the --out folder of its own `spotdiff eval`; "
        "adds a paired bootstrap of the differences.",
    ),
    split: str = typer.Option("test", "--split", help="train, val or test."),
    format: str = typer.Option(
        "auto", "--format", help="auto, spot-the-diff, clevr-change, image-editing-request, jsonl."
    ),
    protocol: str = typer.Option("both", "--protocol", help="single, multi or both."),
    metrics: Optional[str] = typer.Option(
        None,
        "--metrics",
        help="Comma list, e.g. BLEU-4,METEOR,ROUGE-L,CIDEr,CIDEr-D. \\[default: all but CIDEr-D]",
    ),
    tokenizer: str = typer.Option("auto", "--tokenizer", help="ptb (java), python, or auto."),
    breakdown: bool = typer.Option(
        True, "--breakdown/--no-breakdown", help="Scores per change type and for distractors."
    ),
    allow_partial: bool = typer.Option(
        False, "--allow-partial", help="Score only the pairs that have a prediction."
    ),
    limit: Optional[int] = typer.Option(None, "--limit", help="--model: only the first N pairs."),
    device: str = typer.Option("auto", "--device", help="--model: auto, cpu or cuda."),
    sentences: int = typer.Option(
        5, "--sentences", "-n", help="--model: at most this many sentences per pair."
    ),
    gold_count: bool = typer.Option(
        False,
        "--gold-count",
        help="--model: tell the model each pair's gold number of sentences (the paper's "
        "multi-sentence protocol; ddla, ddla-uniform, nn-multi use it).",
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", help="--model: YAML with an `analysis:` section."
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        help="Folder for results.json/md and config.json. \\[default: eval/<name>-<split>]",
    ),
) -> None:
    """Score captions: BLEU-1..4, METEOR, ROUGE-L, CIDEr (single- and multi-sentence protocols),
    changed-only and distractor-only scores, per change type, change detection and attribute
    accuracy; several runs as mean ± std, and --compare for a paired bootstrap."""
    from ..api import evaluate_runs, write_evaluation
    from ..errors import UsageError
    from . import render

    if bool(predictions) == (model is not None):
        raise UsageError("give exactly one of --predictions FILE or --model NAME")
    protocols = {"single": ("single",), "multi": ("multi",), "both": ("single", "multi")}.get(
        protocol
    )
    if protocols is None:
        raise UsageError(f"--protocol must be single, multi or both, not '{protocol}'")
    metric_list = tuple(m.strip() for m in metrics.split(",") if m.strip()) if metrics else None
    analysis = None
    if model is not None and config is not None:
        from ..config import AnalysisConfig, load_yaml, resolve

        analysis = resolve(AnalysisConfig(), None, **load_yaml(config).get("analysis", {}))
    with render.stage_progress() as progress:
        evaluation = evaluate_runs(
            dataset,
            split,
            predictions=predictions or (),
            model=model,
            weights=weights or (),
            compare_with=compare or (),
            format=format,
            protocols=protocols,
            metrics=metric_list,
            tokenizer=tokenizer,
            breakdown=breakdown,
            allow_partial=allow_partial,
            device=device,
            analysis=analysis,
            max_sentences=sentences,
            limit=limit,
            progress=progress.update,
            gold_count=gold_count,
        )
    folder = out or Path("eval") / f"{evaluation.name}-{split}"
    paths = write_evaluation(evaluation, folder)
    render.print_evaluation(evaluation, protocols, paths)
