"""Dataset readers: one small fixture per format, written here; the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from spotdiff_cli.data import detect_format, load_dataset
from spotdiff_cli.errors import DataError


def _png(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.zeros((8, 8, 3), np.uint8))


@pytest.fixture()
def spot(tmp_path: Path) -> Path:
    (tmp_path / "annotations").mkdir()
    items = [
        {"img_id": "1", "sentences": ["the car is gone", "a person appeared"]},
        {"img_id": "2", "sentences": ["there is no change"]},
        {"img_id": "1", "sentences": ["the red car left"]},  # a second annotator of pair 1
    ]
    (tmp_path / "annotations" / "test.json").write_text(json.dumps(items))
    for i in ("1", "2"):
        _png(tmp_path / "images" / f"{i}.png")
        _png(tmp_path / "images" / f"{i}_2.png")
    return tmp_path


def test_spot_the_diff_merges_annotators(spot: Path) -> None:
    data = load_dataset(spot, "test")
    assert data.format == "spot-the-diff" and len(data) == 2 and data.n_annotations == 3
    pair = data.by_id()["1"]
    assert pair.sentences == ("the car is gone", "a person appeared", "the red car left")
    assert pair.descriptions == ("the car is gone a person appeared", "the red car left")
    assert pair.before == spot / "images" / "1.png" and pair.after == spot / "images" / "1_2.png"


def test_annotations_folder_alone_is_enough_without_images(spot: Path) -> None:
    data = load_dataset(spot / "annotations", "test", require_images=False)
    assert [p.id for p in data.pairs] == ["1", "2"]


def test_missing_image_names_file_and_entry(spot: Path) -> None:
    (spot / "images" / "2_2.png").unlink()
    with pytest.raises(DataError, match=r"test\.json: entry 2: after image .*2_2\.png not found"):
        load_dataset(spot, "test")


def test_malformed_json_names_file_and_line(spot: Path) -> None:
    (spot / "annotations" / "test.json").write_text('[{"img_id": "1",\n "sentences": [}]')
    with pytest.raises(DataError, match=r"test\.json: malformed JSON at line 2"):
        load_dataset(spot, "test", format="spot-the-diff")


def test_bad_entry_and_empty_split(spot: Path) -> None:
    (spot / "annotations" / "val.json").write_text("[]")
    with pytest.raises(DataError, match="split 'val' has no pairs"):
        load_dataset(spot, "val")
    (spot / "annotations" / "val.json").write_text('[{"img_id": "3"}]')
    with pytest.raises(DataError, match="entry 0 must be an object with 'img_id' and 'sentences'"):
        load_dataset(spot, "val")
    with pytest.raises(DataError, match="annotation file not found"):
        load_dataset(spot, "train", format="spot-the-diff")


def test_clevr_change_gives_change_and_distractor_pairs(tmp_path: Path) -> None:
    for n in (0, 1):
        _png(tmp_path / "images" / f"CLEVR_default_{n:06d}.png")
        _png(tmp_path / "sc_images" / f"CLEVR_semantic_{n:06d}.png")
        _png(tmp_path / "nsc_images" / f"CLEVR_nonsemantic_{n:06d}.png")
    (tmp_path / "change_captions.json").write_text(
        json.dumps(
            {
                "CLEVR_default_000000.png": [
                    "the red cube is gone",
                    "the red cube has disappeared",
                ],
                "CLEVR_default_000001.png": ["a blue sphere was added"],
            }
        )
    )
    (tmp_path / "no_change_captions.json").write_text(
        json.dumps(
            {
                "CLEVR_default_000000.png": ["no change was made"],
                "CLEVR_default_000001.png": ["nothing has changed"],
            }
        )
    )
    (tmp_path / "splits.json").write_text(json.dumps({"train": [0], "val": [], "test": [1]}))
    (tmp_path / "type_mapping.json").write_text(json.dumps({"CLEVR_default_000000.png": "drop"}))
    assert detect_format(tmp_path) == "clevr-change"
    train = load_dataset(tmp_path, "train")
    change, distractor = train.pairs
    assert change.change_types == ("drop",) and change.after.name == "CLEVR_semantic_000000.png"
    assert len(change.annotations) == 2
    assert distractor.id == "0_nc" and distractor.distractor == "viewpoint"
    assert distractor.change_types == ("distractor",) and distractor.sentences == (
        "no change was made",
    )
    with pytest.raises(DataError, match="split 'val' has no pairs"):
        load_dataset(tmp_path, "val")


def test_rendered_clevr_gold_gives_changes_distractor_kinds_and_image_size(
    tmp_path: Path,
) -> None:
    """Our renderer's gold.json and clevr.json (data/clevr_render.py) are read when present:
    the change pair gets its gold change, the distractor its kind instead of "viewpoint"."""
    names = [f"CLEVR_default_{n:06d}.png" for n in (0, 1)]
    (tmp_path / "change_captions.json").write_text(
        json.dumps({names[0]: ["the red cube turned blue"], names[1]: ["a ball was added"]})
    )
    (tmp_path / "no_change_captions.json").write_text(
        json.dumps({name: ["no change was made"] for name in names})
    )
    (tmp_path / "splits.json").write_text(json.dumps({"train": [], "val": [], "test": [0, 1]}))
    cube = {"size": "large", "color": "red", "material": "rubber", "shape": "cube"}
    gold = {
        names[0]: {
            "type": "color",
            "object": cube,
            "new": {"color": "blue"},
            "bbox_before": [1, 2, 3, 4],
            "bbox_after": [2, 2, 3, 4],
            "distractor": "viewpoint+lighting",
            "views": {"default": {"objects": []}},  # per-view truth stays in the file
        },
        names[1]: {
            "type": "add",
            "object": cube,
            "new": {},
            "bbox_before": None,
            "bbox_after": [5, 5, 3, 3],
            "distractor": "lighting",
        },
    }
    (tmp_path / "gold.json").write_text(json.dumps(gold))
    (tmp_path / "clevr.json").write_text(json.dumps({"width": 96, "height": 72, "seed": 0}))
    test = load_dataset(tmp_path, "test", require_images=False)
    color, color_nc, add, add_nc = test.pairs
    assert color.change_types == ("color",)  # no type_mapping.json: the gold's type
    assert color.gold == (
        {k: gold[names[0]][k] for k in ("type", "object", "new", "bbox_before", "bbox_after")},
    )
    assert color_nc.distractor == "viewpoint+lighting" and add_nc.distractor == "lighting"
    assert add.gold[0]["bbox_before"] is None and color.image_size == (96, 72)
    (tmp_path / "gold.json").unlink()  # the real release: every distractor moved the camera
    plain = load_dataset(tmp_path, "test", require_images=False)
    assert plain.pairs[1].distractor == "viewpoint" and plain.pairs[0].gold == ()


def test_synthetic_benchmark_pairs_know_their_image_size(tmp_path: Path) -> None:
    from spotdiff_cli.data.synth import synthesize

    synthesize(tmp_path, pairs=6, seed=1, size=96, train=0.0, val=0.0)
    for root in (tmp_path, tmp_path / "annotations"):
        pairs = load_dataset(root, "test", require_images=False).pairs
        assert {p.image_size for p in pairs} == {(96, 96)}


def test_image_editing_request(tmp_path: Path) -> None:
    _png(tmp_path / "images" / "a.jpg")
    _png(tmp_path / "images" / "b.jpg")
    (tmp_path / "valid.json").write_text(
        json.dumps(
            [
                {
                    "img0": "a.jpg",
                    "img1": "b.jpg",
                    "sents": ["Brighten the sky", "make it brighter"],
                    "uid": 7,
                }
            ]
        )
    )
    assert detect_format(tmp_path, "val") == "image-editing-request"
    data = load_dataset(tmp_path, "val")
    pair = data.pairs[0]
    assert pair.id == "7" and pair.sentences == ("brighten the sky", "make it brighter")
    assert pair.before == tmp_path / "images" / "a.jpg"


def test_jsonl_user_data_and_bad_line(tmp_path: Path) -> None:
    _png(tmp_path / "x" / "b.png")
    _png(tmp_path / "x" / "a.png")
    lines = [json.dumps({"before": "x/b.png", "after": "x/a.png", "sentences": ["A van arrived"]})]
    (tmp_path / "test.jsonl").write_text("\n".join(lines) + "\n")
    data = load_dataset(tmp_path, "test")
    assert data.format == "jsonl" and data.pairs[0].sentences == ("a van arrived",)
    (tmp_path / "test.jsonl").write_text(lines[0] + "\n{oops\n")
    with pytest.raises(DataError, match=r"test\.jsonl: line 2: malformed JSON"):
        load_dataset(tmp_path, "test")


def test_unknown_layout_says_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(DataError, match="cannot tell the dataset format"):
        load_dataset(tmp_path, "test")
