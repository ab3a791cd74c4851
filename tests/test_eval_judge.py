"""Evaluation that reads what captions say: the lexicon (change type, object, colour, place, "no
change", camera and lighting remarks), change detection and attribute accuracy against gold
labels, and how they appear in ``results.json`` / ``results.md`` next to the Table-2 (changed
only / distractor only) and Table-5 (per change type) score tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff_cli.data import DatasetPair, load_dataset
from spotdiff_cli.data.clevr_scene import ClevrConfig, sample_triplet
from spotdiff_cli.data.synth import synthesize
from spotdiff_cli.evaluate import evaluate_predictions, judge
from spotdiff_cli.evaluate.lexicon import gold_type, noun_matches, read
from spotdiff_cli.evaluate.output import write_results

FAST = ("BLEU-4", "CIDEr")


@pytest.fixture(scope="module")
def synth_split(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("judge-synth")
    synthesize(out, pairs=60, seed=4, train=0.0, val=0.0, distractor_rate=0.3)
    return out


# ----------------------------------------------------------------------------------------------
# the lexicon


def test_every_reference_of_the_synthetic_benchmark_reads_as_its_gold_change(
    synth_split: Path,
) -> None:
    """Sentence i of every annotation describes gold change i: the lexicon must read its type
    and object, and every distractor reference as "no change"."""
    data = load_dataset(synth_split, "test", require_images=False)
    checked = 0
    for pair in data.pairs:
        for annotation in pair.annotations:
            for sentence, change in zip(annotation, pair.gold):
                reading = read(sentence)
                assert reading.kind == "change", sentence
                assert reading.type == gold_type(change["type"]), (sentence, change["type"])
                assert noun_matches(reading.noun, change["kind"]), (sentence, change["kind"])
                checked += 1
            if pair.distractor:
                assert all(read(s).kind == "no_change" for s in annotation), annotation
    assert checked > 100


def test_every_clevr_caption_reads_as_its_change() -> None:
    config = ClevrConfig(pairs=40)
    for index in range(40):
        triplet = sample_triplet(index, config)
        subject = triplet.change.subject
        for sentence in triplet.captions:
            reading = read(sentence)
            assert reading.type == gold_type(triplet.change.type), sentence
            assert noun_matches(reading.noun, subject.shape), sentence
            assert {"grey" if subject.color == "gray" else subject.color} <= reading.colours
        assert all(read(s).kind == "no_change" for s in triplet.no_change_captions)


@pytest.mark.parametrize(
    ("sentence", "kind", "type_", "noun", "colours", "column", "row"),
    [
        ("there is no change", "no_change", None, None, set(), set(), set()),
        ("the two scenes seem identical", "no_change", None, None, set(), set(), set()),
        ("the camera moved slightly to the left", "camera", None, None, set(), set(), set()),
        ("the lighting changed", "light", None, None, set(), set(), set()),
        (
            "a light blue car appeared on the left",
            "change",
            "add",
            "car",
            {"blue"},
            {"left"},
            set(),
        ),
        ("the black car has left", "change", "drop", "car", {"black"}, set(), set()),
        ("the man walked in near the top", "change", "add", "person", set(), set(), {"top"}),
        (
            "the sedan that was at the bottom left of the image drove to the right",
            "change",
            "move",
            "car",
            set(),
            {"left", "right"},
            {"bottom"},
        ),
        (  # DUDA+Aux Figure 4: the relation's object is not the subject
            "the tiny green metal block that is behind the big purple matte thing is no longer there",
            "change",
            "drop",
            "cube",
            {"green"},
            set(),
            set(),
        ),
        (
            "the small red rubber sphere became metal",
            "change",
            "material",
            "sphere",
            {"red"},
            set(),
            set(),
        ),
        (
            "the big gray matte cylinder changed its color to brown",
            "change",
            "colour",
            "cylinder",
            {"grey", "brown"},
            set(),
            set(),
        ),
        (
            "something in the centre changed",
            "change",
            None,
            "object",
            set(),
            {"centre"},
            {"middle"},
        ),
        (
            "the large grey object in the upper right is gone",
            "change",
            "drop",
            "object",
            {"grey"},
            {"right"},
            {"top"},
        ),
    ],
)
def test_lexicon_reads_a_sentence(
    sentence: str,
    kind: str,
    type_: str | None,
    noun: str | None,
    colours: set[str],
    column: set[str],
    row: set[str],
) -> None:
    reading = read(sentence)
    assert (reading.kind, reading.type, reading.noun) == (kind, type_, noun)
    assert (set(reading.colours), set(reading.column), set(reading.row)) == (colours, column, row)


# ----------------------------------------------------------------------------------------------
# change detection and attribute accuracy


def _pairs() -> list[DatasetPair]:
    synth_car = {
        "type": "appear",
        "kind": "car",
        "colour": "red",
        "new_colour": None,
        "bbox_before": None,
        "bbox_after": [10, 100, 30, 20],  # centre x 25 of 224: left
        "sentence": 0,
    }
    clevr_cube = {
        "type": "color",
        "object": {"size": "large", "color": "gray", "material": "rubber", "shape": "cube"},
        "new": {"color": "blue"},
        "bbox_before": [250, 100, 40, 40],  # centre x 270 of 320: right
        "bbox_after": [252, 101, 40, 40],
    }
    return [
        DatasetPair(
            "a", None, None, (("a red car appeared",),), ("appear",), None, (synth_car,), (224, 224)
        ),
        DatasetPair(
            "b",
            None,
            None,
            (("the cube turned blue",),),
            ("color",),
            None,
            (clevr_cube,),
            (320, 240),
        ),
        DatasetPair("c", None, None, (("no change",),), ("distractor",), "lighting"),
        DatasetPair("d", None, None, (("no change",),), ("distractor",), "viewpoint"),
    ]


def test_detection_and_attributes_on_a_handmade_split() -> None:
    predictions = {
        "a": ["a red car appeared on the left"],  # everything right
        # k = 1 gold change: only the first sentence is judged, however right the second is
        "b": ["something on the left changed", "the gray cube on the right turned blue"],
        "c": ["there is no change"],
        "d": ["the camera moved", "a cube moved to the right"],  # an object change: wrong
    }
    judged = judge(_pairs(), predictions)
    d = judged.detection
    assert (d.true_positives, d.false_positives, d.false_negatives, d.true_negatives) == (
        2,
        1,
        0,
        1,
    )
    assert d.accuracy == 0.75 and d.precision == pytest.approx(2 / 3)
    assert d.recall == 1.0 and d.specificity == 0.5
    assert d.specificity_by_distractor == {"lighting": [1.0, 1], "viewpoint": [0.0, 1]}
    assert d.recall_by_type == {"color": [1.0, 1], "appear": [1.0, 1]}
    for attribute in ("type", "object", "colour", "place"):
        assert judged.attributes[attribute]["all"] == [1, 2], attribute
        assert judged.attributes[attribute]["appear"] == [1, 1]
        assert judged.attributes[attribute]["color"] == [0, 1]
    # The camera remark alone is not a change; the same pair said only that is right.
    only_camera = judge(_pairs(), {**predictions, "d": ["the camera moved"]})
    assert only_camera.detection.specificity == 1.0


def test_saying_nothing_on_a_changed_pair_is_wrong_on_every_attribute() -> None:
    judged = judge(_pairs()[:2], {"a": ["there is no change"], "b": []})
    assert judged.detection.recall == 0.0 and judged.detection.precision is None
    assert all(judged.attributes[a]["all"] == [0, 2] for a in ("type", "object", "colour", "place"))


def test_place_needs_the_image_size_and_a_box() -> None:
    pair = _pairs()[0]
    without_size = DatasetPair(
        pair.id, None, None, pair.annotations, pair.change_types, None, pair.gold
    )
    judged = judge([without_size], {"a": ["a red car appeared on the left"]})
    assert set(judged.attributes) == {"type", "object", "colour"}


# ----------------------------------------------------------------------------------------------
# in the evaluation's results


def test_results_hold_table2_table5_detection_and_attributes(
    synth_split: Path, tmp_path: Path
) -> None:
    """A model that always says "no change" wins on distractors and loses on changed pairs: the
    all-pairs score hides that, the changed-only / distractor-only scores and the detection
    table show it."""
    data = load_dataset(synth_split, "test", require_images=False)
    silent = {p.id: ["there is no change"] for p in data.pairs}
    result = evaluate_predictions(silent, synth_split, "test", metrics=FAST, tokenizer="python")
    changed = result.get("single", "changed").scores["CIDEr"]
    distractor = result.get("single", "distractor").scores["CIDEr"]
    assert distractor > 1.0 > 0.1 > changed
    d = result.detection
    assert d is not None and d.recall == 0.0 and d.specificity == 1.0
    assert d.changed + d.distractors == len(data.pairs) and d.distractors > 5
    assert result.attribute_accuracy("type") == 0.0

    paths = write_results(result, tmp_path / "out")
    saved = json.loads(paths["json"].read_text())
    assert saved["detection"]["specificity"] == 1.0 and saved["detection"]["recall"] == 0.0
    assert saved["attributes"]["type"]["all"][0] == 0
    assert "per_pair" not in saved["results"][0] and "judged" not in saved
    markdown = paths["markdown"].read_text()
    for heading in (
        "| changed only |",
        "| distractor only |",
        "## single-sentence scores per change type",
        "## change detection",
        "## attribute accuracy (gold labels)",
    ):
        assert heading in markdown, heading
    judgements = json.loads(paths["judgements"].read_text())
    assert len(judgements) == len(data.pairs)
    assert {j["said_change"] for j in judgements} == {False}
