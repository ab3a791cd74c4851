"""The synthetic change benchmark: deterministic, readable by the Spot-the-diff reader, with gold
that matches the pixels and captions that vary."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.synth import SynthConfig, generate_pair, synthesize
from spotdiff_cli.errors import OutputError, UsageError


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


def _tiny_media(tmp_path: Path) -> tuple[Path, Path]:
    """A grey 160x120 camera ``cam`` and one red person cut-out: (backgrounds, sprites) folders."""
    bg = tmp_path / "bg"
    bg.mkdir()
    cv2.imwrite(str(bg / "cam.png"), np.full((120, 160, 3), 90, np.uint8))
    sprites = tmp_path / "sprites"
    sprites.mkdir()
    rgba = np.zeros((40, 16, 4), np.uint8)
    rgba[:, :, 2] = 200  # red (BGR)
    rgba[4:36, 3:13, 3] = 255
    cv2.imwrite(str(sprites / "person_0.png"), rgba)
    return bg, sprites


def test_real_backgrounds_and_sprites(tmp_path: Path) -> None:
    bg, sprites = _tiny_media(tmp_path)
    summary = synthesize(tmp_path / "out", pairs=8, seed=1, backgrounds=bg, sprites=sprites)
    assert summary.pairs == 8
    gold = json.loads((tmp_path / "out" / "annotations" / "train_gold.json").read_text())
    assert {g["ground"] for g in gold} == {"real"}


def test_real_share_mixes_composites_into_the_procedural_benchmark(tmp_path: Path) -> None:
    from spotdiff_cli.data.synth import load_backgrounds, load_sprites

    bg, sprites = _tiny_media(tmp_path)
    config = SynthConfig(
        pairs=40, seed=3, backgrounds=str(bg), sprites=str(sprites), real_share=0.5
    )
    backgrounds, cut = load_backgrounds(bg), load_sprites(sprites)
    pure = SynthConfig(pairs=40, seed=3)
    grounds = []
    for index in range(40):
        pair = generate_pair(index, config, backgrounds, cut, ["cam"])
        grounds.append(pair.gold["ground"])
        if pair.gold["ground"] != "real":
            # A procedural pair of a mixed set is the pure benchmark's pair of that index.
            same = generate_pair(index, pure)
            assert np.array_equal(pair.before, same.before) and pair.annotations == same.annotations
    assert 10 <= grounds.count("real") <= 30, grounds
    with pytest.raises(UsageError):
        SynthConfig(real_share=1.5).validate()


def _excerpt(tmp_path: Path) -> Path:
    """A 22-frame, half-size excerpt of the CC BY indoor clip: an empty room, a man standing at the
    table (a still person: the case the per-pixel median got wrong), the empty room again."""
    from conftest import media

    source = media("intel_one-by-one-person-detection.mp4")
    cap = cv2.VideoCapture(str(source))
    path = tmp_path / "room.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (384, 216))
    for index in [*range(0, 60, 10), *range(770, 870, 10), *range(880, 940, 10)]:
        cap.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, frame = cap.read()
        assert ok
        writer.write(cv2.resize(frame, (384, 216), interpolation=cv2.INTER_AREA))
    writer.release()
    cap.release()
    return path


def test_cut_sprites_from_a_real_clip_and_composite_them(tmp_path: Path) -> None:
    from spotdiff_cli.data.synth import cut_sprites, load_sprites

    clip = _excerpt(tmp_path)
    background, count = cut_sprites(clip, tmp_path / "cut", kind="person", every=1)
    # The background is a real empty frame (the first one), not a blend with the man in it.
    first = cv2.VideoCapture(str(clip)).read()[1]
    assert background == tmp_path / "cut" / "backgrounds" / "room.png"
    assert np.abs(cv2.imread(str(background)).astype(int) - first).mean() < 4
    # He stands still for frames 6-13, then turns and walks off: one sprite for the standing
    # stretch (not eight copies), whole and upright (not a head and a torso), plus his exit poses.
    meta = json.loads((tmp_path / "cut" / "sprites.json").read_text())
    frames = [r["frame"] for r in meta["sprites"].values()]
    assert 1 <= count <= 4 and sum(6 <= f <= 13 for f in frames) == 1
    for name in meta["sprites"]:
        sprite = cv2.imread(str(tmp_path / "cut" / name), cv2.IMREAD_UNCHANGED)
        h, w = sprite.shape[:2]
        assert sprite.shape[2] == 4 and h > 1.2 * w and h > 0.6 * 216
    h = cv2.imread(str(tmp_path / "cut" / "person_0000.png"), cv2.IMREAD_UNCHANGED).shape[0]
    assert meta["camera"] == "room" and meta["sprites"]["person_0000.png"]["bbox"][3] == h
    assert load_sprites(tmp_path / "cut")[0].camera == "room"

    # A frame range keeps the rest of the clip unseen: up to frame 6 there is only the empty room.
    _, early = cut_sprites(clip, tmp_path / "early", kind="person", every=1, stop=6)
    assert early == 0
    _, late = cut_sprites(clip, tmp_path / "late", kind="person", every=1, start=4)
    meta = json.loads((tmp_path / "late" / "sprites.json").read_text())
    assert late == count and meta["frames"] == [4, None]
    assert all(r["frame"] >= 6 for r in meta["sprites"].values())

    # Composites: the sprite goes into its own scene at its real scale, feet on the floor.
    synthesize(
        tmp_path / "bench",
        pairs=6,
        seed=0,
        sprites=tmp_path / "cut",
        backgrounds=background.parent,
        distractor_rate=0.0,
        train=1.0,
        val=0.0,
    )
    gold = json.loads((tmp_path / "bench" / "annotations" / "train_gold.json").read_text())
    boxes = [c["bbox_after"] or c["bbox_before"] for g in gold for c in g["changes"]]
    assert boxes, "no change could be placed"
    for _x, y, _bw, bh in boxes:
        assert bh > 0.4 * 224  # a person in that room is most of the frame tall, not a 20 px figure
        assert y + bh > 0.6 * 224  # standing on the floor, not on the wall


def test_empty_frame_is_the_state_that_recurs_not_the_longest_still_one() -> None:
    from spotdiff_cli.data.synth import find_empty_frame

    rng = np.random.default_rng(0)
    room = np.full((72, 128, 3), 200, np.uint8)
    standing = room.copy()
    standing[10:60, 50:70] = 30  # someone standing still, for longer than any empty stretch

    def shot(image: np.ndarray) -> np.ndarray:
        return np.clip(image + rng.normal(0, 1.0, image.shape), 0, 255).astype(np.uint8)

    states = [room] * 4 + [standing] * 12 + [room] * 4 + [standing[::-1]] * 3 + [room] * 3
    best, same = find_empty_frame([shot(s) for s in states])
    assert states[best] is room
    assert len(same) == 11
