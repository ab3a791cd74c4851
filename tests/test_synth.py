"""The synthetic change benchmark: deterministic, readable by the Spot-the-diff reader, with gold
that matches the pixels and captions that vary."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.synth import SynthConfig, generate_pair, synthesize
from spotdiff_cli.errors import OutputError


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    synthesize(out, pairs=60, seed=7)
    return out


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "synth.json":
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def test_layout_splits_and_reader(bench: Path) -> None:
    assert (bench / "images" / "0.png").is_file() and (bench / "images" / "0_2.png").is_file()
    image = cv2.imread(str(bench / "images" / "0.png"))
    assert image.shape == (224, 224, 3)
    sizes = {s: len(load_dataset(bench, s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 48, "val": 6, "test": 6}
    pair = load_dataset(bench, "train").pairs[0]
    assert len(pair.annotations) == 3  # three independent annotators, merged by the reader


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    synthesize(tmp_path / "a", pairs=6, seed=3)
    synthesize(tmp_path / "b", pairs=6, seed=3)
    synthesize(tmp_path / "c", pairs=6, seed=4)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_refuses_to_overwrite(bench: Path) -> None:
    with pytest.raises(OutputError, match="not empty"):
        synthesize(bench, pairs=2)


def test_gold_boxes_are_where_the_pixels_changed(bench: Path) -> None:
    gold = json.loads((bench / "annotations" / "train_gold.json").read_text())
    checked = 0
    for record in gold:
        if record["distractor"]:
            continue
        before = cv2.imread(str(bench / "images" / f"{record['img_id']}.png")).astype(np.float32)
        after = cv2.imread(str(bench / "images" / f"{record['img_id']}_2.png")).astype(np.float32)
        dist = np.linalg.norm(cv2.GaussianBlur(before - after, (5, 5), 0), axis=2)
        for change in record["changes"]:
            box = change["bbox_after"] or change["bbox_before"]
            x, y, w, h = box
            inside = dist[y : y + h, x : x + w].mean()
            assert inside > 3 * np.median(dist) + 5, (record["img_id"], change)
            checked += 1
    assert checked > 20


def test_distractors_have_no_change_captions(bench: Path) -> None:
    data = load_dataset(bench, "train")
    distractors = [p for p in data.pairs if p.distractor]
    assert distractors, "60 pairs at 15% should hold distractor pairs"
    for pair in distractors:
        assert pair.change_types == ("distractor",) and pair.gold == ()
        assert all(len(a) == 1 for a in pair.annotations)
        assert all(("no" in s or "nothing" in s or "same" in s) for s in pair.sentences)
    assert {p.distractor for p in distractors} <= {"lighting", "shift", "noise"}


def test_one_sentence_per_change_and_phrasings_vary(bench: Path) -> None:
    data = load_dataset(bench, "train")
    changed = [p for p in data.pairs if p.gold]
    for pair in changed:
        assert all(len(a) == len(pair.gold) for a in pair.annotations)
        assert [c["sentence"] for c in pair.gold] == list(range(len(pair.gold)))
    # Three annotators rarely say it the same way: most pairs get >1 distinct wording.
    varied = sum(len(set(p.annotations)) > 1 for p in changed)
    assert varied / len(changed) > 0.7
    sentences = [s for p in data.pairs for s in p.sentences]
    assert all(s == s.lower() and "." not in s for s in sentences)
    types = {c["type"] for p in changed for c in p.gold}
    assert types == {"appear", "disappear", "move", "colour"}


def test_colour_change_sentence_names_both_colours() -> None:
    config = SynthConfig(distractor_rate=0.0, annotators=2)
    for index in range(200):
        pair = generate_pair(index, config)
        for change in pair.gold["changes"]:
            if change["type"] == "colour":
                for annotation in pair.annotations:
                    sentence = annotation[change["sentence"]]
                    assert change["new_colour"] in sentence and change["colour"] in sentence
                return
    pytest.fail("no colour change in 200 pairs")


def test_generation_is_fast() -> None:
    config = SynthConfig()
    start = time.perf_counter()
    for index in range(40):
        generate_pair(index, config)
    per_second = 40 / (time.perf_counter() - start)
    assert per_second > 20  # "thousands per minute"; ~100/s on one core here


def test_real_backgrounds_and_sprites(tmp_path: Path) -> None:
    bg = tmp_path / "bg"
    bg.mkdir()
    cv2.imwrite(str(bg / "cam.png"), np.full((120, 160, 3), 90, np.uint8))
    sprites = tmp_path / "sprites"
    sprites.mkdir()
    rgba = np.zeros((40, 16, 4), np.uint8)
    rgba[:, :, 2] = 200  # red (BGR)
    rgba[4:36, 3:13, 3] = 255
    cv2.imwrite(str(sprites / "person_0.png"), rgba)
    summary = synthesize(tmp_path / "out", pairs=8, seed=1, backgrounds=bg, sprites=sprites)
    assert summary.pairs == 8
    gold = json.loads((tmp_path / "out" / "annotations" / "train_gold.json").read_text())
    assert {g["ground"] for g in gold} == {"real"}
