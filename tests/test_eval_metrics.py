"""Metrics and protocols: the Spot-the-diff regression anchor, CIDEr-D, human agreement on the
synthetic benchmark, predictions files and ``spotdiff eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.synth import synthesize
from spotdiff_cli.errors import DataError, InputError
from spotdiff_cli.evaluate import (
    evaluate_predictions,
    java_available,
    load_predictions,
    score_captions,
)
from spotdiff_cli.evaluate.metrics import python_tokenize
from spotdiff_cli.evaluate.protocols import alignment_hit

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "spot-the-diff"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/data/spot-the-diff not present"
)
needs_java = pytest.mark.skipif(
    not java_available(), reason="java not installed (PTB tokenizer, METEOR)"
)
FAST = ("BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr", "CIDEr-D")


def _authors_ddla_scores(metrics: tuple[str, ...]):
    result = evaluate_predictions(
        SHARED / "predictions" / "ddla_rerun_predfile.json",
        SHARED / "annotations",
        "test",
        protocols=("single",),
        metrics=metrics,
    )
    assert result.n_pairs == 1270
    return result.get("single")


@needs_shared
@needs_java
def test_ddla_regression_anchor() -> None:
    """The authors' DDLA test predictions score exactly what their notebook printed (METEOR,
    whose Java run over 1,270 pairs is most of this anchor's time, in the slow test below)."""
    single = _authors_ddla_scores(("BLEU-4", "ROUGE-L", "CIDEr"))
    assert {k: round(v, 4) for k, v in single.scores.items()} == {
        "BLEU-4": 0.0757,
        "ROUGE-L": 0.2797,
        "CIDEr": 0.3506,
    }
    assert "SPICE" in single.skipped


@pytest.mark.slow  # METEOR's paraphrase tables over 1,270 pairs: ~25 s on 2 busy cores
@needs_shared
@needs_java
def test_ddla_regression_anchor_meteor() -> None:
    single = _authors_ddla_scores(("METEOR",))
    assert round(single.scores["METEOR"], 4) == 0.1091


@needs_shared
def test_merged_test_split_equals_the_authors_gtfile() -> None:
    """annotations/test.json merged per img_id holds exactly the references of ddla_rerun_gtfile."""
    gt = json.loads((SHARED / "predictions" / "ddla_rerun_gtfile.json").read_text())
    refs: dict[str, list[str]] = {}
    for a in gt["annotations"]:
        refs.setdefault(str(a["image_id"]), []).append(a["caption"])
    data = load_dataset(SHARED / "annotations", "test", require_images=False)
    assert {p.id: list(p.sentences) for p in data.pairs} == refs
    assert sum(len(v) for v in refs.values()) == 2107 and len(refs) == 1270


@needs_shared
def test_python_tokenizer_stays_close_to_the_anchor() -> None:
    """Without java: same BLEU/ROUGE/CIDEr to about 2 decimals, and the result says so."""
    result = evaluate_predictions(
        SHARED / "predictions" / "ddla_rerun_predfile.json",
        SHARED / "annotations",
        "test",
        protocols=("single",),
        metrics=("BLEU-4", "ROUGE-L", "CIDEr"),
        tokenizer="python",
        breakdown=False,
    )
    scores = result.get("single").scores
    assert scores["BLEU-4"] == pytest.approx(0.0757, abs=0.005)
    assert scores["ROUGE-L"] == pytest.approx(0.2797, abs=0.005)
    assert scores["CIDEr"] == pytest.approx(0.3506, abs=0.02)
    assert any("Python tokenizer" in n for n in result.notes)


def test_cider_d_matches_pycocoevalcap_and_ignores_repetition() -> None:
    refs = {
        "1": ["the red car is gone", "the red car left"],
        "2": ["a person appeared", "someone walked in"],
        "3": ["there is no change"],
    }
    hyps = {"1": "the red car is gone", "2": "a person is here", "3": "nothing changed"}
    result = score_captions(refs, hyps, ("CIDEr", "CIDEr-D"), tokenizer="python")
    assert result.scores["CIDEr-D"] == pytest.approx(result.scores["CIDEr"], abs=1e-9)
    assert result.per_item["CIDEr-D"] == pytest.approx(result.per_item["CIDEr"])
    # Clipping: saying "red car" three times earns no more than saying it once.
    repeated = score_captions(
        refs, {**hyps, "1": "the red car red car red car is gone"}, ("CIDEr-D",), "python"
    )
    assert repeated.per_item["CIDEr-D"][0] < result.per_item["CIDEr-D"][0]


def test_cider_refused_for_a_single_pair_and_unknown_metric() -> None:
    result = score_captions(
        {"1": ["a car left"]}, {"1": "a car left"}, ("BLEU-1", "CIDEr"), "python"
    )
    assert "CIDEr" not in result.scores and "corpus statistic" in result.skipped["CIDEr"]
    assert result.scores["BLEU-1"] == pytest.approx(1.0)
    with pytest.raises(DataError, match="unknown metric"):
        score_captions({"1": ["x"]}, {"1": "x"}, ("BLEU-9",))


def test_python_tokenizer_drops_punctuation_like_ptb() -> None:
    out = python_tokenize({"1": ["The car, isn't there."]})
    assert out["1"] == ["the car is n't there"]


@pytest.fixture(scope="module")
def synth_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth-eval")
    synthesize(out, pairs=150, seed=11, train=0.0, val=0.0)  # everything in test
    return out


def test_human_agreement_on_synthetic_references(synth_test: Path) -> None:
    """One annotator scored against the other two: sane, non-trivial numbers (Spot-the-diff
    Table 2 style); a perfect prediction scores highest; a constant answer scores low."""
    data = load_dataset(synth_test, "test", require_images=False)
    held = {p.id: " ".join(p.annotations[0]) for p in data.pairs}
    others = {p.id: [" ".join(a) for a in p.annotations[1:]] for p in data.pairs}
    agreement = score_captions(others, held, FAST, "python").scores
    perfect = score_captions(others, {k: v[0] for k, v in others.items()}, FAST, "python").scores
    constant = score_captions(
        others, {k: "there is no change" for k in others}, FAST, "python"
    ).scores
    assert 0.1 < agreement["BLEU-4"] < 0.9 and 0.3 < agreement["ROUGE-L"] < 0.95
    assert 0.3 < agreement["CIDEr"] < perfect["CIDEr"]
    for metric in FAST:
        assert perfect[metric] > agreement[metric] > constant[metric], metric


def test_breakdown_by_change_type_and_distractors(synth_test: Path) -> None:
    data = load_dataset(synth_test, "test", require_images=False)
    predictions = {p.id: list(p.annotations[0]) for p in data.pairs}
    result = evaluate_predictions(
        predictions, synth_test, "test", metrics=("BLEU-4", "CIDEr"), tokenizer="python"
    )
    groups = {r.group for r in result.results if r.protocol == "single"}
    assert {"all", "appear", "disappear", "move", "colour", "changed", "distractor"} <= groups
    assert result.get("multi").len_ratio == pytest.approx(1.0, abs=0.15)
    # Distractor pairs answered "no change"-style by the held-out annotator score well.
    assert result.get("single", "distractor").scores["BLEU-4"] > 0.0


def test_missing_predictions_are_an_error_unless_partial(synth_test: Path) -> None:
    data = load_dataset(synth_test, "test", require_images=False)
    some = {p.id: [p.sentences[0]] for p in data.pairs[:10]}
    with pytest.raises(DataError, match="have no prediction .* --allow-partial"):
        evaluate_predictions(some, synth_test, "test", metrics=("BLEU-4",), tokenizer="python")
    result = evaluate_predictions(
        some, synth_test, "test", metrics=("BLEU-4",), tokenizer="python", allow_partial=True
    )
    assert result.n_pairs == 10 and any("scored 10 of 150" in n for n in result.notes)


def test_load_predictions_formats(tmp_path: Path) -> None:
    coco = tmp_path / "coco.json"
    coco.write_text(
        json.dumps(
            [
                {"image_id": 5, "caption": "a car left", "id": 5},
                {"image_id": 5, "caption": "a van came"},
            ]
        )
    )
    assert load_predictions(coco) == {"5": ["a car left", "a van came"]}
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "inputs": {"before": {"path": "/x/12.png"}},
                "sentences": [{"text": "a person appeared"}],
            }
        )
    )
    assert load_predictions(report) == {"12": ["a person appeared"]}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"caption": "no id"}]))
    with pytest.raises(InputError, match="entry 0: no image_id"):
        load_predictions(bad)


def test_alignment_hit_uses_before_after_and_union() -> None:
    move = {"bbox_before": [10, 10, 20, 10], "bbox_after": [60, 10, 20, 10]}
    assert alignment_hit((60, 10, 20, 10), move)
    assert alignment_hit((10, 10, 70, 10), move)  # one cluster covering both places
    assert not alignment_hit((150, 150, 20, 20), move)


def test_eval_cli_scores_a_file_and_writes_json_and_markdown(
    synth_test: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from spotdiff_cli.cli import app

    data = load_dataset(synth_test, "test", require_images=False)
    preds = tmp_path / "preds.json"
    preds.write_text(
        json.dumps([{"image_id": p.id, "caption": p.annotations[0][0]} for p in data.pairs])
    )
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--predictions",
            str(preds),
            "--dataset",
            str(synth_test / "annotations"),
            "--metrics",
            "BLEU-4,CIDEr",
            "--tokenizer",
            "python",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "single-sentence protocol" in result.output and "CIDEr" in result.output
    saved = json.loads((out / "results.json").read_text())
    assert saved["n_pairs"] == 150 and (out / "results.md").read_text().startswith("# Evaluation")
    assert json.loads((out / "config.json").read_text())["split"] == "test"
    bad = CliRunner().invoke(app, ["eval", "--dataset", str(synth_test)])
    assert bad.exit_code == 2 and "exactly one of --predictions" in bad.output


def test_empty_reference_sentences_do_not_break_scoring() -> None:
    # Real Spot-the-diff has empty reference sentences (53 in train); scoring must not trip on
    # them with either tokenizer path (the python one once raised KeyError: '').
    from spotdiff_cli.evaluate.metrics import ScoringSession

    session = ScoringSession("python")
    tokens = session.tokenize({"1": ["the car is gone", ""], "2": ["", "a person appeared"]})
    assert tokens == {"1": ["the car is gone", ""], "2": ["", "a person appeared"]}
    session.close()
