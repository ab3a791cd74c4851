"""The robust-change tables of docs/results.md from a `scripts/robust_results.sh` work folder.

    python scripts/robust_tables.py WORK RUN...

Reads ``WORK/eval/RUN-sSEED/results.json`` (one `spotdiff eval --protocol single` per run and
seed) and ``WORK/runs/RUN-sSEED/`` (training logs), and prints Markdown:

* Table 1/2 of the DUDA+AUX paper: BLEU-4, METEOR, ROUGE-L, CIDEr-D on all test pairs, on the
  changed pairs only and on the distractor pairs only (mean ± std over seeds; SPICE needs
  Stanford CoreNLP models that cannot be downloaded here);
* Table 5: CIDEr-D per change type and on distractors;
* change detection and attribute accuracy against the benchmark's gold labels;
* the perplexity of the test references, all and on changed / distractor pairs;
* the auxiliary network's retrieval R@1 (runs whose results carry ``retrieval``);
* the paired bootstraps ``spotdiff eval --compare`` wrote to ``WORK/compare/A-vs-B/`` (per-pair
  CIDEr-D averaged over seeds) for the comparisons the paper makes: duda-aux vs duda, easy+hard
  vs easy-only, duda vs capt;
* training wall time, the validation number that picked best.pt (``val_metric``) and its best
  value per run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spotdiff_cli.evaluate.compare import spread

METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
TYPES = ("color", "material", "add", "drop", "move")
COMPARISONS = (("duda-aux", "duda"), ("duda-aux", "duda-aux-easy"), ("duda", "capt"))


def seeds_of(work: Path, run: str) -> list[Path]:
    """The eval folders of one run, one per seed, in seed order."""
    folders = [p for p in (work / "eval").glob(f"{run}-s*") if (p / "results.json").is_file()]
    return sorted(folders, key=lambda p: int(p.name.rsplit("-s", 1)[1]))


def fmt(values: Iterable[float], digits: int = 3) -> str:
    """``mean ± std`` over seeds (``spotdiff eval``'s spread), or the value alone for one seed."""
    s = spread(list(values))
    if s is None:
        return "–"
    if s.std is None:
        return f"{s.mean:.{digits}f}"
    return f"{s.mean:.{digits}f} ± {s.std:.{digits}f}"


def group_scores(result: dict[str, Any], group: str) -> dict[str, float] | None:
    for entry in result["results"]:
        if entry["protocol"] == "single" and entry["group"] == group:
            return entry["scores"]
    return None


def score_table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    head = "| Run | seeds | " + " | ".join(
        f"{g} {m.replace('CIDEr', 'CIDEr-D')}"
        for g in ("total", "changed", "distractor")
        for m in METRICS
    )
    lines = [head + " |", "|---|---:|" + "---:|" * (3 * len(METRICS))]
    for run, seeds in results.items():
        cells = []
        for group in ("all", "changed", "distractor"):
            per_seed = [group_scores(r, group) for r in seeds]
            for metric in METRICS:
                cells.append(fmt(s[metric] for s in per_seed if s))
        lines.append(f"| {run} | {len(seeds)} | " + " | ".join(cells) + " |")
    return lines


def type_table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        "| Run | " + " | ".join(TYPES) + " | distractor |",
        "|---|" + "---:|" * (len(TYPES) + 1),
    ]
    for run, seeds in results.items():
        cells = []
        for group in (*TYPES, "distractor"):
            per_seed = [group_scores(r, group) for r in seeds]
            cells.append(fmt(s["CIDEr"] for s in per_seed if s))
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    return lines


def detection_table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        "| Run | accuracy | changes reported | distractors → no change | type named | object named | colour named |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run, seeds in results.items():
        det = [r["detection"] for r in seeds if r.get("detection")]
        att = [r["attributes"] for r in seeds if r.get("attributes")]

        def share(key: str, att: list[dict[str, Any]] = att) -> str:
            """Share of gold changes whose ``key`` the first sentences name."""
            return fmt(a[key]["all"][0] / max(1, a[key]["all"][1]) for a in att)

        lines.append(
            f"| {run} | {fmt(d['accuracy'] for d in det)} | {fmt(d['recall'] for d in det)} | "
            f"{fmt(d['specificity'] for d in det)} | {share('type')} | {share('object')} | "
            f"{share('colour')} |"
        )
    return lines


def retrieval_lines(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    rows = {
        run: [r["retrieval"] for r in seeds if r.get("retrieval")] for run, seeds in results.items()
    }
    rows = {run: v for run, v in rows.items() if v}
    if not rows:
        return []
    keys = sorted({k for v in rows.values() for r in v for k in r if "R@1" in k})
    lines = ["| Run | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for run, v in rows.items():
        lines.append(
            f"| {run} | " + " | ".join(fmt(r[k] for r in v if k in r) for k in keys) + " |"
        )
    return lines


def perplexity_lines(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Perplexity of the test references, all and per group (``spotdiff eval`` of a model with
    ``log_likelihood``; the group split needs results written since it was added)."""
    rows = {run: [r for r in seeds if r.get("perplexity")] for run, seeds in results.items()}
    rows = {run: v for run, v in rows.items() if v}
    if not rows:
        return []
    lines = ["| Run | seeds | all | changed | distractor |", "|---|---:|---:|---:|---:|"]
    for run, v in rows.items():
        groups = [
            fmt(r["perplexity_groups"][g] for r in v if g in r.get("perplexity_groups", {}))
            for g in ("changed", "distractor")
        ]
        lines.append(
            f"| {run} | {len(v)} | {fmt(r['perplexity'] for r in v)} | {groups[0]} | {groups[1]} |"
        )
    return lines


def bootstrap_lines(work: Path) -> list[str]:
    """The paired bootstraps `spotdiff eval --compare` wrote to ``WORK/compare/A-vs-B/``."""
    lines = [
        "| pairs | A | B | CIDEr-D A − B | 95 % interval | share of resamples with A > B |",
        "|---|---|---|---:|---|---:|",
    ]
    for a, b in COMPARISONS:
        summary = work / "compare" / f"{a}-vs-{b}" / "summary.json"
        if not summary.is_file():
            continue
        for d in json.loads(summary.read_text(encoding="utf-8"))["comparison"]:
            key = d["key"].split("/")  # "single/changed/CIDEr", "detection/accuracy", ...
            if key[0] == "single" and key[-1] == "CIDEr":
                group = key[1]
                lines.append(
                    f"| {group} | {a} | {b} | {d['difference']:+.3f} | [{d['low']:+.3f}, "
                    f"{d['high']:+.3f}] | {d['share_a_greater']:.2f} |"
                )
    return lines if len(lines) > 2 else []


def training_lines(work: Path, runs: list[str]) -> list[str]:
    lines = [
        "| Run | seeds | wall s | validations | best.pt picked by | its best validation score |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for run in runs:
        walls, counts, best, metrics = [], [], [], []
        for folder in sorted((work / "runs").glob(f"{run}-s*")):
            if not folder.is_dir():
                continue
            seconds = folder.with_name(folder.name + ".seconds")
            if seconds.is_file():
                walls.append(float(seconds.read_text()))
            config = folder / "config.json"
            metric = (
                json.loads(config.read_text())["train"].get("val_metric", "CIDEr")
                if config.is_file()
                else "CIDEr"
            )
            log = folder / "log.jsonl"
            hist = (
                [
                    json.loads(line)["validation"]
                    for line in log.read_text().splitlines()
                    if '"validation"' in line
                ]
                if log.is_file()
                else []
            )
            counts.append(len(hist))
            scores = [h[metric] for h in hist if h.get(metric) is not None]
            if scores:
                metrics.append(metric)
                best.append(min(scores) if metric == "perplexity" else max(scores))
        picked = ", ".join(dict.fromkeys(metrics)) or "–"
        lines.append(
            f"| {run} | {len(walls)} | {fmt(walls, 0)} | {fmt(counts, 1)} | {picked} | {fmt(best)} |"
        )
    return lines


def main(argv: list[str]) -> None:
    work, runs = Path(argv[0]), argv[1:]
    results = {
        run: [json.loads((p / "results.json").read_text()) for p in seeds_of(work, run)]
        for run in runs
    }
    results = {run: seeds for run, seeds in results.items() if seeds}
    if not results:
        sys.exit(f"no results under {work}/eval: run scripts/robust_results.sh first")
    dataset = next(iter(results.values()))[0]["dataset"]
    test_pairs = next(iter(results.values()))[0]["n_pairs"]
    blocks = [
        f"Test split of {dataset}: {test_pairs} pairs (changed + distractor), mean ± std over seeds.\n",
        "Table 1/2 (total, changed only, distractor only)\n",
        *score_table(results),
        "\nTable 5 (CIDEr-D per change type)\n",
        *type_table(results),
        "\nChange detection and attributes named (gold labels)\n",
        *detection_table(results),
    ]
    if perplexities := perplexity_lines(results):
        blocks += ["\nPerplexity of the reference captions (test split)\n", *perplexities]
    if retrieval := retrieval_lines(results):
        blocks += ["\nRetrieval by the auxiliary network (test split)\n", *retrieval]
    if boots := bootstrap_lines(work):
        blocks += ["\nPaired bootstrap of per-pair CIDEr-D (averaged over seeds)\n", *boots]
    blocks += ["\nTraining\n", *training_lines(work, list(results))]
    print("\n".join(blocks))


if __name__ == "__main__":
    main(sys.argv[1:])
