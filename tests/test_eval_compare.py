"""Several runs (seeds) per model and two models compared: the paired bootstrap (the procedure
docs/results.md used, now ``evaluate.paired_bootstrap``), mean ± std over runs, and
``spotdiff eval -p A1 -p A2 --compare B`` in-process and as the installed console script."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from console import run_spotdiff
from typer.testing import CliRunner

from spotdiff_cli.cli import app
from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.synth import synthesize
from spotdiff_cli.errors import UsageError
from spotdiff_cli.evaluate import evaluate_predictions, paired_bootstrap, summarise
from spotdiff_cli.evaluate.runs import common_label

FAST = ("BLEU-4", "CIDEr")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compare")
    synthesize(out, pairs=40, seed=8, train=0.0, val=0.0, distractor_rate=0.3)
    return out


@pytest.fixture(scope="module")
def runs(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model "human-seed<k>": annotator k's description; model "silent": always "no change"."""
    folder = tmp_path_factory.mktemp("predictions")
    data = load_dataset(bench, "test", require_images=False)
    files = {}
    for k in range(3):
        files[f"human-seed{k}"] = folder / f"human-seed{k}.json"
        entries = [{"image_id": p.id, "caption": s} for p in data.pairs for s in p.annotations[k]]
        files[f"human-seed{k}"].write_text(json.dumps(entries))
    files["silent"] = folder / "silent.json"
    files["silent"].write_text(
        json.dumps([{"image_id": p.id, "caption": "there is no change"} for p in data.pairs])
    )
    return files


def test_paired_bootstrap_is_the_published_procedure() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random(100), rng.random(100)
    boot = paired_bootstrap(a, b)
    # scripts/reproduce_results.sh before the move: one (10000, n) draw from default_rng(0).
    index = np.random.default_rng(0).integers(0, 100, (10000, 100))
    means = (a - b)[index].mean(axis=1)
    assert boot.low == pytest.approx(np.percentile(means, 2.5))
    assert boot.high == pytest.approx(np.percentile(means, 97.5))
    assert boot.share_a_greater == pytest.approx(np.mean(means > 0))
    assert boot.difference == pytest.approx(a.mean() - b.mean()) and boot.n == 100


def test_bootstrap_separates_a_real_difference_and_not_noise() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(200)
    noise = paired_bootstrap(base + rng.normal(0, 0.05, 200), base)
    assert noise.low < 0 < noise.high
    better = paired_bootstrap(base + 0.1, base)
    assert better.low > 0 and better.share_a_greater == 1.0
    # Weighted: a pair with 3 changes, 2 named, weighs 3 (micro accuracy over changes).
    weighted = paired_bootstrap([2 / 3, 1.0], [0.0, 0.0], weights=[3, 1], resamples=200)
    assert weighted.a == pytest.approx(3 / 4)
    with pytest.raises(UsageError, match="equal-length"):
        paired_bootstrap([1.0, 2.0], [1.0])


def test_seeds_give_mean_and_sample_std(bench: Path, runs: dict[str, Path]) -> None:
    results = [
        evaluate_predictions(runs[f"human-seed{k}"], bench, metrics=FAST, tokenizer="python")
        for k in range(3)
    ]
    summary = summarise(results)
    values = [r.get("single", "changed").scores["CIDEr"] for r in results]
    cider = summary["single/changed/CIDEr"]
    assert cider.mean == pytest.approx(np.mean(values))
    assert cider.std == pytest.approx(np.std(values, ddof=1)) and cider.std > 0
    assert summary["detection/accuracy"].mean == 1.0
    assert summary["attributes/type/all"].values == (1.0, 1.0, 1.0)
    assert common_label([runs["human-seed0"], runs["human-seed1"]]) == "human"


def test_eval_cli_several_seeds_then_compare_with_an_earlier_eval(
    bench: Path, runs: dict[str, Path], tmp_path: Path
) -> None:
    common = ["--dataset", str(bench), "--metrics", "BLEU-4,CIDEr", "--tokenizer", "python"]
    silent = CliRunner().invoke(
        app, ["eval", *common, "-p", str(runs["silent"]), "--out", str(tmp_path / "silent")]
    )
    assert silent.exit_code == 0, silent.output
    out = tmp_path / "human"
    seeds = [x for k in range(3) for x in ("-p", str(runs[f"human-seed{k}"]))]
    args = ["eval", *common, *seeds, "--compare", str(tmp_path / "silent"), "--out", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())
    assert "human vs silent on test" in shown and "±" in shown
    assert "paired bootstrap" in shown and "change detection" in shown
    assert [p.name for p in sorted(out.glob("run-*"))] == ["run-1", "run-2", "run-3"]
    summary = json.loads((out / "summary.json").read_text())
    human, other = summary["models"]
    assert (human["name"], other["name"], len(human["runs"])) == ("human", "silent", 3)
    assert human["measures"]["single/changed/CIDEr"]["std"] > 0
    assert other["measures"]["detection/specificity"]["mean"] == 1.0
    rows = {row["measure"]: row for row in summary["comparison"]}
    changed = rows["single-sentence CIDEr, changed pairs only"]
    assert changed["low"] > 0 and changed["share_a_greater"] == 1.0  # human >> silent there
    distractors = rows["single-sentence CIDEr, distractors only"]
    data = load_dataset(bench, "test", require_images=False)
    assert distractors["n"] == sum(p.distractor is not None for p in data.pairs) > 0
    assert rows["change detection accuracy"]["difference"] > 0
    markdown = (out / "summary.md").read_text()
    assert "| changed only | human |" in markdown and "share A > B" in markdown
    # The first run's files are the usual ones; the default layout of one run is unchanged.
    assert (out / "run-1" / "results.json").is_file() and (
        tmp_path / "silent" / "results.json"
    ).is_file()


def test_usage_errors_name_the_fix(bench: Path, runs: dict[str, Path]) -> None:
    both = CliRunner().invoke(
        app, ["eval", "-d", str(bench), "-p", str(runs["silent"]), "--model", "grounded"]
    )
    assert both.exit_code == 2 and "exactly one of --predictions" in both.output
    weights = CliRunner().invoke(
        app, ["eval", "-d", str(bench), "-p", str(runs["silent"]), "--weights", "x.pt"]
    )
    assert weights.exit_code == 2 and "--weights goes with --model" in weights.output
    missing = CliRunner().invoke(
        app, ["eval", "-d", str(bench), "-p", str(runs["silent"]), "--compare", str(bench)]
    )
    assert missing.exit_code == 1 and "no predictions.json" in missing.output


def test_console_script_compares_two_models(
    bench: Path, runs: dict[str, Path], tmp_path: Path
) -> None:
    proc = run_spotdiff(
        "eval",
        "--dataset",
        bench,
        "-p",
        runs["human-seed0"],
        "-p",
        runs["human-seed1"],
        "--compare",
        runs["silent"],
        "--protocol",
        "single",
        "--metrics",
        "CIDEr",
        "--tokenizer",
        "python",
        "--out",
        tmp_path / "cmp",
    )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "human vs silent: paired bootstrap (10,000 resamples of the pairs)" in out
    assert "distractor only" in out and "attribute accuracy" in out
    assert (tmp_path / "cmp" / "summary.md").is_file()
