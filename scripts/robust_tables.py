"""The robust-change tables of docs/results.md from a `scripts/robust_results.sh` work folder.

    python scripts/robust_tables.py WORK RUN...

Reads ``WORK/eval/RUN-sSEED/results.json`` (one `spotdiff eval --protocol single` per run and
seed) and ``WORK/runs/RUN-sSEED/`` (training logs), and prints Markdown:

* Table 1/2 of the DUDA+AUX paper: BLEU-4, METEOR, ROUGE-L, CIDEr-D on all test pairs, on the
  changed pairs only and on the distractor pairs only (mean ± std over seeds; SPICE needs
  Stanford CoreNLP models that cannot be downloaded here);
* Table 5: CIDEr-D per change type and on distractors;
* change detection and attribute accuracy against the benchmark's gold labels;
* the auxiliary network's retrieval R@1 (runs whose results carry ``retrieval``);
* paired bootstraps of the per-pair CIDEr-D difference (each pair's score averaged over seeds)
  for the comparisons the paper makes: duda-aux vs duda, easy+hard vs easy-only, duda vs capt;
* training wall time and the best validation CIDEr per run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from statistics import mean, stdev
from typing import Any

import numpy as np

from spotdiff_cli.data import load_dataset
from spotdiff_cli.evaluate import paired_bootstrap
from spotdiff_cli.evaluate.metrics import score_captions

METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
TYPES = ("color", "material", "add", "drop", "move")
COMPARISONS = (("duda-aux", "duda"), ("duda-aux", "duda-aux-easy"), ("duda", "capt"))


def seeds_of(work: Path, run: str) -> list[Path]:
    """The eval folders of one run, one per seed, in seed order."""
    folders = [p for p in (work / "eval").glob(f"{run}-s*") if (p / "results.json").is_file()]
    return sorted(folders, key=lambda p: int(p.name.rsplit("-s", 1)[1]))


def fmt(values: Iterable[float], digits: int = 3) -> str:
    """``mean ± std`` (population of seeds: sample std), or the value alone for one seed."""
    v = list(values)
    if not v:
        return "–"
    if len(v) == 1:
        return f"{v[0]:.{digits}f}"
    return f"{mean(v):.{digits}f} ± {stdev(v):.{digits}f}"


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


def per_pair_cider(folders: list[Path], references: dict[str, list[str]]) -> np.ndarray:
    """Each test pair's CIDEr-D, averaged over the run's seeds (one sentence per pair)."""
    ids = sorted(references)
    total = np.zeros(len(ids))
    for folder in folders:
        first: dict[str, str] = {}
        for item in json.loads((folder / "predictions.json").read_text(encoding="utf-8")):
            first.setdefault(str(item["image_id"]), item["caption"])
        scores = score_captions(references, {i: first.get(i, "") for i in ids}, ("CIDEr",), "auto")
        per_item = scores.per_item["CIDEr"]
        total += np.array([per_item[i] for i in ids] if isinstance(per_item, dict) else per_item)
    return total / len(folders)


def bootstrap_lines(work: Path, runs: list[str], dataset: str) -> list[str]:
    """Paired bootstraps on all test pairs and on the changed pairs alone (Table 2's split)."""
    wanted = [(a, b) for a, b in COMPARISONS if a in runs and b in runs]
    if not wanted:
        return []
    test = load_dataset(dataset, "test", require_images=False)
    references = {p.id: [s for s in p.sentences if s.strip()] for p in test.pairs}
    ids = sorted(references)
    changed = np.array([next(p for p in test.pairs if p.id == i).distractor is None for i in ids])
    cache: dict[str, np.ndarray] = {}
    lines = [
        "| pairs | A | B | CIDEr-D A − B | 95 % interval | share of resamples with A > B |",
        "|---|---|---|---:|---|---:|",
    ]
    for a, b in wanted:
        for run in (a, b):
            if run not in cache:
                cache[run] = per_pair_cider(seeds_of(work, run), references)
        for group, keep in (("all", np.ones_like(changed)), ("changed", changed)):
            boot = paired_bootstrap(cache[a][keep], cache[b][keep], resamples=10000, seed=0)
            lines.append(
                f"| {group} | {a} | {b} | {boot.difference:+.3f} | [{boot.low:+.3f}, "
                f"{boot.high:+.3f}] | {boot.share_a_greater:.2f} |"
            )
    return lines


def training_lines(work: Path, runs: list[str]) -> list[str]:
    lines = ["| Run | seeds | wall s | validations | best val CIDEr |", "|---|---:|---:|---:|---:|"]
    for run in runs:
        walls, counts, best = [], [], []
        for folder in sorted((work / "runs").glob(f"{run}-s*")):
            if not folder.is_dir():
                continue
            seconds = folder.with_name(folder.name + ".seconds")
            if seconds.is_file():
                walls.append(float(seconds.read_text()))
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
            if hist:
                best.append(max(h["CIDEr"] for h in hist))
        lines.append(f"| {run} | {len(walls)} | {fmt(walls, 0)} | {fmt(counts, 1)} | {fmt(best)} |")
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
    if retrieval := retrieval_lines(results):
        blocks += ["\nRetrieval by the auxiliary network (test split)\n", *retrieval]
    if boots := bootstrap_lines(work, list(results), dataset):
        blocks += ["\nPaired bootstrap of per-pair CIDEr-D (averaged over seeds)\n", *boots]
    blocks += ["\nTraining\n", *training_lines(work, list(results))]
    print("\n".join(blocks))


if __name__ == "__main__":
    main(sys.argv[1:])
