"""``spotdiff eval --model``: run a captioner over a split and score it, end to end through the CLI.

The split is 8 synthetic pairs made in tmp_path (no shared data, no downloads). The Java-backed
metrics (PTB tokenizer, METEOR) start once per evaluation, not once per breakdown group (before
that change the whole `eval --model grounded` on these 8 pairs took ~2 min here, after ~25 s).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from spotdiff_cli.captioners.base import Captioner
from spotdiff_cli.cli import app
from spotdiff_cli.data.synth import synthesize
from spotdiff_cli.evaluate import java_available

needs_java = pytest.mark.skipif(
    not java_available(), reason="java not installed (PTB tokenizer, METEOR)"
)


@pytest.fixture(scope="module")
def split8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval-model")
    # Everything in "test"; 25 % distractors so the changed/distractor breakdown has both groups.
    synthesize(out, pairs=8, seed=3, train=0.0, val=0.0, distractor_rate=0.25)
    return out


def _run(args: list[str]) -> Any:
    # A wide console: Rich would otherwise wrap titles and cut column names at 80 columns.
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def test_eval_grounded_model_writes_table_json_and_markdown(split8: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    result = _run(
        [
            "eval",
            "--model",
            "grounded",
            "--dataset",
            str(split8),
            "--split",
            "test",
            "--metrics",
            "BLEU-4,ROUGE-L,CIDEr",
            "--tokenizer",
            "python",
            "--out",
            str(out),
        ]
    )
    # The table a user reads: both protocols, the 8 pairs, alignment precision, perplexity n/a.
    # (Rich wraps a title at its table's width: compare with whitespace collapsed.)
    shown = " ".join(result.output.split())
    assert "single-sentence protocol: grounded on test (8 pairs)" in shown
    assert "multi-sentence protocol" in shown and "LenRatio" in shown and "BLEU-4" in shown
    assert "alignment precision:" in shown
    assert "perplexity: n/a (model 'grounded' has no log_likelihood" in shown

    saved = json.loads((out / "results.json").read_text())
    assert saved["model"] == "grounded" and saved["n_pairs"] == 8
    single = next(r for r in saved["results"] if r["protocol"] == "single" and r["group"] == "all")
    assert set(single["scores"]) == {"BLEU-4", "ROUGE-L", "CIDEr"}
    assert all(0.0 <= v for v in single["scores"].values())
    # The grounded captioner points every sentence at a cluster: precision is a real share.
    assert saved["alignment_count"] > 0 and 0.0 <= saved["alignment_precision"] <= 1.0
    assert saved["perplexity"] is None and "log_likelihood" in saved["perplexity_note"]

    markdown = (out / "results.md").read_text()
    assert markdown.startswith("# Evaluation: grounded on")
    assert "## single-sentence protocol" in markdown and "| all | 8 |" in markdown
    assert "Alignment precision:" in markdown and "Perplexity: n/a" in markdown

    predictions = json.loads((out / "predictions.json").read_text())
    assert {p["image_id"] for p in predictions} == {str(i) for i in range(8)}
    assert json.loads((out / "config.json").read_text())["model"] == "grounded"


def _register(monkeypatch: pytest.MonkeyPatch, name: str, model: Any) -> None:
    """Make the registry build ``model`` for ``name`` during one test."""
    from spotdiff_cli.captioners import registry

    monkeypatch.setitem(registry._FACTORIES, name, lambda **_: model)
    monkeypatch.setitem(registry._INFO, name, registry.ModelInfo(name, "test", "", False, False))


class _CountingGrounded(Captioner):
    """The grounded captioner plus a ``log_likelihood`` (as trainable models have; overriding it
    makes ``scores_sentences`` true): a uniform model over a 20-word vocabulary, so the expected
    perplexity is exactly 20."""

    def __init__(self) -> None:
        from spotdiff_cli.captioners.grounded import GroundedCaptioner

        self.inner = GroundedCaptioner()
        self.calls = 0

    def warm_up(self, options: Any) -> None:
        self.inner.warm_up(options)

    def describe(self, analysis: Any, options: Any) -> Any:
        return self.inner.describe(analysis, options)

    def log_likelihood(self, analysis: Any, sentence: str) -> tuple[float, int]:
        import math

        self.calls += 1
        n = len(sentence.split()) + 1  # + <eos>
        return n * math.log(20.0), n


def test_perplexity_reported_for_a_model_with_log_likelihood(
    split8: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _CountingGrounded()
    _register(monkeypatch, "test-ll", model)
    out = tmp_path / "ll"
    result = _run(
        [
            "eval",
            "--model",
            "test-ll",
            "--dataset",
            str(split8),
            "--metrics",
            "BLEU-4",
            "--tokenizer",
            "python",
            "--no-breakdown",
            "--out",
            str(out),
        ]
    )
    assert "perplexity: 20.000" in " ".join(result.output.split())
    saved = json.loads((out / "results.json").read_text())
    assert saved["perplexity"] == pytest.approx(20.0) and saved["perplexity_note"] is None
    # Changed and distractor pairs each get their own line (their references differ in kind).
    assert saved["perplexity_groups"] == {
        "changed": pytest.approx(20.0),
        "distractor": pytest.approx(20.0),
    }
    assert "changed pairs: 20.000" in result.output
    assert model.calls >= 8  # every reference sentence of every pair was scored
    assert "Perplexity: 20.000" in (out / "results.md").read_text()


@pytest.mark.slow  # two JVM starts for METEOR (paraphrase tables) + PTB: ~10-20 s on 2 busy cores
@needs_java
def test_java_metrics_start_java_once_per_metric(
    split8: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both protocols x (all + every breakdown group) with PTB + METEOR: still one tokenizer run
    and one METEOR process, and the scores match scoring each group on its own."""
    starts: list[str] = []
    real_popen = subprocess.Popen

    def popen(cmd: Any, *a: Any, **k: Any) -> Any:
        # subprocess.run goes through Popen too, so this sees every process started.
        line = " ".join(map(str, cmd))
        starts.append(
            "ptb" if "PTBTokenizer" in line else "meteor" if "meteor" in line.lower() else line
        )
        return real_popen(cmd, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", popen)
    out = tmp_path / "java"
    _run(
        [
            "eval",
            "--model",
            "grounded",
            "--dataset",
            str(split8),
            "--metrics",
            "BLEU-4,METEOR,CIDEr",
            "--tokenizer",
            "ptb",
            "--out",
            str(out),
        ]
    )
    monkeypatch.undo()
    assert starts.count("ptb") == 1 and starts.count("meteor") == 1, starts

    saved = json.loads((out / "results.json").read_text())
    groups = [r for r in saved["results"] if r["protocol"] == "single"]
    assert len(groups) >= 3  # all + at least changed/distractor or a change type
    # Sharing the processes must not change a number: rescore one group alone and compare.
    from spotdiff_cli.data import load_dataset
    from spotdiff_cli.evaluate.protocols import single_sentence

    data = load_dataset(split8, "test")
    predictions = saved_predictions(out)
    group = next(r for r in groups if r["group"] != "all")
    members = [
        p
        for p in data.pairs
        if group["group"] in p.change_types
        or (group["group"] == "changed" and "distractor" not in p.change_types)
    ]
    alone = single_sentence(
        members, predictions, ("BLEU-4", "METEOR", "CIDEr"), "ptb", group["group"]
    )
    assert alone.scores == pytest.approx(group["scores"], abs=1e-9)


def saved_predictions(out: Path) -> dict[str, list[str]]:
    predictions: dict[str, list[str]] = {}
    for item in json.loads((out / "predictions.json").read_text()):
        predictions.setdefault(item["image_id"], []).append(item["caption"])
    return predictions


class _CountingSentences(Captioner):
    """A captioner that takes a sentence count: it records what it was told and writes that many
    sentences (one when told nothing)."""

    name = "test-count"
    trainable = False
    takes_sentence_count = True

    def __init__(self) -> None:
        self.told: list[int | None] = []

    def warm_up(self, options: Any) -> None:
        pass

    def describe(self, analysis: Any, options: Any) -> Any:
        from spotdiff_cli.types import Sentence

        self.told.append(options.num_sentences)
        n = options.num_sentences or 1
        return [Sentence(text=f"a car appeared {i}") for i in range(n)]


def test_eval_gold_count_gives_each_pair_its_gold_sentence_count(
    split8: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.data import load_dataset
    from spotdiff_cli.evaluate.protocols import gold_sentence_count

    model = _CountingSentences()
    _register(monkeypatch, "test-count", model)
    args = ["eval", "--model", "test-count", "--dataset", str(split8), "--protocol", "multi"]
    args += ["--metrics", "BLEU-4", "--tokenizer", "python", "--no-breakdown"]
    _run([*args, "--out", str(tmp_path / "plain")])
    assert model.told == [None] * 8
    model.told.clear()
    _run([*args, "--gold-count", "--out", str(tmp_path / "gold")])
    pairs = load_dataset(split8, "test", require_images=False).pairs
    gold = [gold_sentence_count(p) for p in pairs]
    # Each pair is told the number of sentences its annotators wrote (1-4 changes per pair).
    assert model.told == gold and max(gold) > 1
    assert gold == [len([s for s in p.annotations[0] if s.strip()]) for p in pairs]
    saved = json.loads((tmp_path / "gold" / "results.json").read_text())
    assert saved["settings"]["gold_count"] is True
    written: dict[str, int] = {}
    for item in json.loads((tmp_path / "gold" / "predictions.json").read_text()):
        written[str(item["image_id"])] = written.get(str(item["image_id"]), 0) + 1
    assert [written[p.id] for p in pairs] == gold


def test_gold_sentence_count_is_the_median_over_annotators() -> None:
    from spotdiff_cli.data.readers import DatasetPair
    from spotdiff_cli.evaluate.protocols import gold_sentence_count

    def pair(*counts: int) -> DatasetPair:
        return DatasetPair("p", None, None, tuple(("s",) * c + ("",) for c in counts))

    assert gold_sentence_count(pair(2, 2, 3)) == 2
    assert gold_sentence_count(pair(1, 2)) == 2  # halves round up
    assert gold_sentence_count(pair(0)) == 1 and gold_sentence_count(pair()) == 1


class _OneOrTwo(Captioner):
    """A captioner whose one-sentence description is not the first of its longer one (as
    ddla-uniform's random cluster under the paper's rule)."""

    name = "test-one-or-two"
    trainable = False
    single_sentence_differs = True

    def warm_up(self, options: Any) -> None:
        pass

    def describe(self, analysis: Any, options: Any) -> Any:
        from spotdiff_cli.types import Sentence

        if options.max_sentences == 1:
            return [Sentence(text="a red car appeared")]
        return [Sentence(text="nothing"), Sentence(text="a blue van is gone")]


def test_single_protocol_decodes_its_own_sentence_when_the_model_says_it_differs(
    split8: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.evaluate.protocols import evaluate_predictions

    _register(monkeypatch, "test-one-or-two", _OneOrTwo())
    out = tmp_path / "apart"
    args = ["eval", "--model", "test-one-or-two", "--dataset", str(split8), "--metrics", "BLEU-1"]
    _run([*args, "--tokenizer", "python", "--no-breakdown", "--out", str(out)])
    single = json.loads((out / "predictions-single.json").read_text())
    multi = json.loads((out / "predictions.json").read_text())
    assert {p["caption"] for p in single} == {"a red car appeared"} and len(single) == 8
    assert {p["caption"] for p in multi} == {"nothing", "a blue van is gone"}
    saved = json.loads((out / "results.json").read_text())
    scores = {r["protocol"]: r["scores"]["BLEU-1"] for r in saved["results"]}
    # Scoring the written files again gives the same numbers: the single file is read back.
    again = evaluate_predictions(
        out / "predictions.json", split8, metrics=("BLEU-1",), tokenizer="python", breakdown=False
    )
    assert again.get("single").scores["BLEU-1"] == pytest.approx(scores["single"])
    assert again.get("multi").scores["BLEU-1"] == pytest.approx(scores["multi"])
    assert any("decoded one sentence per pair on its own" in n for n in saved["notes"])
