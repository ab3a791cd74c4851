"""An evaluation's files: ``results.json`` / ``results.md`` per run, ``summary.json`` /
``summary.md`` over several runs (seeds) and a compared model.

One run (``write_results``), in ``out``:

* ``results.json`` - every score, change detection and attribute accuracy, notes;
* ``results.md`` - the tables of ``tables.py`` and the notes, in Markdown;
* ``predictions.json`` - COCO style, one entry per sentence (what ``--compare`` can read back);
* ``predictions-single.json`` - only when the single-sentence protocol decoded its own sentence
  (ddla-uniform's random cluster, §4): what that protocol scored;
* ``judgements.json`` - per pair: the truth, whether the prediction reported a change, and per
  attribute [right, judged];
* ``config.json`` - the resolved settings.

Several runs or a comparison (``write_summary``): each run in ``out/run-<k>/`` as above, and
``summary.json`` (per model: mean, std and values per number; the bootstrap differences) with
``summary.md`` (the same tables, cells "mean ± std").
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .compare import Difference, comparison_dict, summarise
from .protocols import PROTOCOLS, SINGLE_PREDICTIONS, EvalResult
from .tables import Model, tables


def run_name(result: EvalResult) -> str:
    """What a run is called in tables: its model, or its predictions file's name."""
    if result.model:
        return result.model
    return Path(result.predictions_file).stem if result.predictions_file else "predictions"


def protocols_of(result: EvalResult) -> tuple[str, ...]:
    return tuple(p for p in PROTOCOLS if any(r.protocol == p for r in result.results))


def _footer(result: EvalResult) -> list[str]:
    lines: list[str] = []
    if result.perplexity is not None:
        groups = ", ".join(f"{k} {v:.3f}" for k, v in result.perplexity_groups.items())
        lines.append(f"Perplexity: {result.perplexity:.3f}" + (f" ({groups})" if groups else ""))
    elif result.perplexity_note:
        lines.append(f"Perplexity: n/a ({result.perplexity_note})")
    if result.alignment_precision is not None:
        lines.append(
            f"Alignment precision: {result.alignment_precision:.3f} over "
            f"{result.alignment_count} alignments"
        )
    if result.retrieval:
        lines.append(retrieval_line(result.retrieval))
    skipped = {k: v for r in result.results for k, v in r.skipped.items()}
    if skipped:
        lines += ["", "Not computed:"] + [f"- {k}: {v}" for k, v in skipped.items()]
    if result.notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in result.notes]
    return lines


def retrieval_line(retrieval: dict[str, float]) -> str:
    """One line for a retrieval head's R@1 (protocols.py: RetrievalTally)."""
    n = int(retrieval.get("candidates", 0))
    # duda-aux's candidates are after images, the hard one the query's before image; clip4idc's
    # are pairs, the hard one the query's pair with nothing changed.
    pairs = bool(retrieval.get("pair candidates"))
    among, hard = (
        ("pairs", "the unchanged pair (A, A)")
        if pairs
        else ("after images", "the query's before image")
    )
    return (
        f"Retrieval R@1: {retrieval['reference R@1']:.3f} among {n} {among}, "
        f"{retrieval['reference R@1 hard']:.3f} with {hard} added (hard), "
        f"reference captions; {retrieval['generated R@1']:.3f} / "
        f"{retrieval['generated R@1 hard']:.3f} with the model's own sentence"
    )


def results_markdown(result: EvalResult) -> str:
    """``results.md`` of one run."""
    name = run_name(result)
    head = f"# Evaluation: {result.model or result.predictions_file} on {result.dataset} ({result.split})"
    body = [t.to_markdown() for t in tables([(name, [result])], result.split, protocols_of(result))]
    return "\n".join([head, "", *body, *_footer(result)]) + "\n"


def write_results(result: EvalResult, out_dir: str | Path) -> dict[str, Path]:
    """Save one run's files (module docstring) in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "results.json",
        "markdown": out / "results.md",
        "predictions": out / "predictions.json",
        "judgements": out / "judgements.json",
        "config": out / "config.json",
    }
    paths["json"].write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    paths["markdown"].write_text(results_markdown(result))
    coco = [{"image_id": k, "caption": s} for k, sents in result.predictions.items() for s in sents]
    paths["predictions"].write_text(json.dumps(coco, indent=1) + "\n")
    if result.single_predictions:  # the single protocol's own sentences (protocols.py)
        paths["single_predictions"] = out / SINGLE_PREDICTIONS
        single = [
            {"image_id": k, "caption": s}
            for k, sents in result.single_predictions.items()
            for s in sents
        ]
        paths["single_predictions"].write_text(json.dumps(single, indent=1) + "\n")
    # One pair per line: thousands of pairs stay readable and greppable.
    lines = ",\n".join(json.dumps(asdict(j)) for j in result.judged)
    paths["judgements"].write_text(f"[\n{lines}\n]\n")
    paths["config"].write_text(json.dumps(result.settings, indent=2) + "\n")
    return paths


def summary_dict(
    models: list[Model], differences: list[Difference] | None = None
) -> dict[str, Any]:
    """Per model its runs and every number as {mean, std, values}; the comparison, if any."""
    return {
        "models": [
            {
                "name": name,
                "runs": [
                    r.predictions_file or (r.settings.get("weights") or r.model) for r in runs
                ],
                "n_pairs": runs[0].n_pairs,
                "measures": {k: asdict(v) for k, v in summarise(runs).items()},
            }
            for name, runs in models
        ],
        "comparison": comparison_dict(differences or []),
    }


def summary_markdown(
    models: list[Model], split: str, differences: list[Difference] | None = None
) -> str:
    names = " vs ".join(f"{n} ({len(runs)} run{'s' * (len(runs) > 1)})" for n, runs in models)
    head = f"# Evaluation summary: {names} on {models[0][1][0].dataset} ({split})"
    body = [
        t.to_markdown() for t in tables(models, split, protocols_of(models[0][1][0]), differences)
    ]
    return "\n".join([head, "", *body]) + "\n"


def write_summary(
    models: list[Model], out_dir: str | Path, differences: list[Difference] | None = None
) -> dict[str, Path]:
    """Save ``summary.json`` and ``summary.md`` (the runs' own files are ``write_results``')."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"summary_json": out / "summary.json", "summary_markdown": out / "summary.md"}
    split = models[0][1][0].split
    paths["summary_json"].write_text(json.dumps(summary_dict(models, differences), indent=2) + "\n")
    paths["summary_markdown"].write_text(summary_markdown(models, split, differences))
    return paths
