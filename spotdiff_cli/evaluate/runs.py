"""One evaluation as the CLI asks for it: one or several runs of a model (predictions files, or
checkpoints run over the split), and optionally a second model to compare with.

``evaluate_runs`` scores every run, scores the compared model's predictions on the same split,
and bootstraps the differences (``compare.py``); ``write_evaluation`` saves one run exactly as a
single evaluation always has (``results.json`` ... in ``out``), or several runs in
``out/run-<k>/`` with ``summary.json`` / ``summary.md`` (``output.py``).

``--compare`` takes predictions files or the folders an earlier ``spotdiff eval --out`` wrote
(``predictions.json``, or ``run-*/predictions.json`` for several runs): evaluate model B once,
then compare model A with it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from .compare import RESAMPLES, Difference, compare
from .output import write_results, write_summary
from .protocols import PROTOCOLS, EvalResult, evaluate_model, evaluate_predictions
from .tables import Model


@dataclass
class Evaluation:
    """Runs of model A (``name``), runs of the compared model B, and the differences."""

    name: str
    runs: list[EvalResult]
    compared_name: str | None = None
    compared: list[EvalResult] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def split(self) -> str:
        return self.runs[0].split

    def models(self) -> list[Model]:
        out: list[Model] = [(self.name, self.runs)]
        if self.compared:
            out.append((self.compared_name or "compared", self.compared))
        return out

    @property
    def single(self) -> bool:
        """One run and nothing compared: the files of a plain evaluation."""
        return len(self.runs) == 1 and not self.compared


def label(path: str | Path) -> str:
    """A short name for a predictions file or eval folder: ``ddla-s0.json`` -> "ddla-s0",
    ``eval/capt-test/predictions.json`` -> "capt-test"."""
    p = Path(path)
    if p.is_dir():
        return p.resolve().name
    if p.stem == "predictions" and p.parent.name.startswith("run-"):
        return p.parent.parent.resolve().name
    return p.parent.resolve().name if p.stem == "predictions" else p.stem


def common_label(paths: Sequence[str | Path]) -> str:
    """The name several runs share: "ddla-seed0", "ddla-seed1" -> "ddla"."""
    labels = [label(p) for p in paths]
    if len(set(labels)) == 1:
        return labels[0]
    prefix = re.sub(
        r"(?:[-_. ]*(?:seed|run)|[-_. ]+s)?[-_. ]*\d*$", "", os.path.commonprefix(labels)
    )
    return prefix or labels[0]


def predictions_files(path: str | Path) -> list[Path]:
    """The predictions files behind a ``--compare`` argument (module docstring)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        if (p / "predictions.json").is_file():
            return [p / "predictions.json"]
        runs = sorted(p.glob("run-*/predictions.json"), key=lambda f: _run_number(f.parent.name))
        if runs:
            return runs
        raise InputError(
            f"{p}: no predictions.json or run-*/predictions.json; give a predictions file or "
            "the --out folder of an earlier `spotdiff eval`"
        )
    raise InputError(f"{p}: not found (give a predictions file or an eval --out folder)")


def _run_number(name: str) -> int:
    digits = name.rpartition("-")[2]
    return int(digits) if digits.isdigit() else 0


def evaluate_runs(
    dataset: str | Path,
    split: str = "test",
    predictions: Sequence[str | Path] = (),
    model: str | None = None,
    weights: Sequence[str | None] = (),
    compare_with: Sequence[str | Path] = (),
    format: str = "auto",
    protocols: tuple[str, ...] = PROTOCOLS,
    metrics: tuple[str, ...] | None = None,
    tokenizer: str = "auto",
    breakdown: bool = True,
    allow_partial: bool = False,
    device: str = "auto",
    analysis: Any = None,
    max_sentences: int = 5,
    limit: int | None = None,
    resamples: int = RESAMPLES,
    progress: Callable[[str, int, int], None] | None = None,
    gold_count: bool = False,
) -> Evaluation:
    """Score every run of model A and, with ``compare_with``, model B; bootstrap A - B.

    A is ``predictions`` (one file per run) or ``model`` run once per checkpoint in ``weights``
    (once with its default weights when empty). progress: (stage, done, total) while a model
    runs over the split. gold_count: give the model each pair's gold sentence count
    (``protocols.evaluate_model``).
    """
    if bool(predictions) == bool(model):
        raise UsageError("give exactly one of --predictions FILE or --model NAME")
    if weights and not model:
        raise UsageError("--weights goes with --model (predictions files need none)")
    if gold_count and not model:
        raise UsageError("--gold-count goes with --model (it tells the model how many sentences)")
    compared_files = [f for path in compare_with for f in predictions_files(path)]  # fail early
    common = dict(protocols=protocols, metrics=metrics, tokenizer=tokenizer, breakdown=breakdown)
    runs: list[EvalResult] = []
    if predictions:
        for path in predictions:
            runs.append(
                evaluate_predictions(
                    path, dataset, split, format, allow_partial=allow_partial, **common
                )
            )
        name = common_label(predictions)
    else:
        assert model is not None
        chosen = list(weights) or [None]
        for k, w in enumerate(chosen, start=1):
            stage = f"{model} ({k}/{len(chosen)})" if len(chosen) > 1 else model

            def tick(done: int, total: int, stage: str = stage) -> None:
                if progress:
                    progress(stage, done, total)

            runs.append(
                evaluate_model(
                    model,
                    dataset,
                    split,
                    w,
                    device,
                    format,
                    analysis,
                    max_sentences,
                    limit,
                    progress=tick,
                    gold_count=gold_count,
                    **common,
                )
            )
        name = model
    evaluation = Evaluation(name, runs)
    if compared_files:
        evaluation.compared = [
            evaluate_predictions(f, dataset, split, format, allow_partial=True, **common)
            for f in compared_files
        ]
        evaluation.compared_name = common_label(compare_with)
        if evaluation.compared_name == name:
            evaluation.compared_name = f"{name} (compared)"
        evaluation.differences = compare(runs, evaluation.compared, resamples)
        scored = {p for r in runs for p in r.predictions}
        other = {p for r in evaluation.compared for p in r.predictions}
        if scored != other:
            evaluation.notes.append(
                f"compared on the {len(scored & other)} pairs both models predicted "
                f"({len(scored)} and {len(other)} predicted)"
            )
    return evaluation


def write_evaluation(evaluation: Evaluation, out_dir: str | Path) -> dict[str, Path]:
    """One run: its files in ``out_dir``. Several runs or a comparison: each run in
    ``out_dir/run-<k>/``, and ``summary.json`` / ``summary.md`` in ``out_dir``."""
    if evaluation.single:
        return write_results(evaluation.runs[0], out_dir)
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    for k, result in enumerate(evaluation.runs, start=1):
        folder = out / f"run-{k}" if len(evaluation.runs) > 1 else out
        written = write_results(result, folder)
        paths.setdefault("json", written["json"])
    paths.update(write_summary(evaluation.models(), out, evaluation.differences))
    return paths
