"""The rendered CLEVR-Change-style benchmark: scenes that keep CLEVR's rules, captions in
CLEVR-Change's style, gold boxes where the pixels are, the real dataset's layout (read back by
our reader), byte-identical output per seed whatever the number of processes, and resuming.

Scene sampling and captions are pure Python and always tested; rendering needs Mitsuba 3
(``pip install 'spotdiff[render]'``) and skips without it. Renders are tiny (96x72, 2-4 samples
per pixel) so the whole file takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from spotdiff_cli.data import load_dataset
from spotdiff_cli.data.clevr_scene import (
    CAMERA_EYE,
    CHANGE_TYPES,
    LAMP_BACK,
    LAMP_FILL,
    LAMP_KEY,
    MIN_GAP,
    MIN_VISIBLE,
    MOVE_MIN,
    NO_CHANGE,
    PRESETS,
    Change,
    ClevrConfig,
    Lamps,
    Obj,
    View,
    box_of,
    change_captions,
    gold_record,
    image_name,
    no_change_captions,
    sample_triplet,
    visible_fractions,
)
from spotdiff_cli.errors import DataError, OutputError, UsageError

SMALL = {"width": 96, "height": 72, "spp": 2}


def _mitsuba() -> None:
    pytest.importorskip(
        "mitsuba", reason="rendering needs Mitsuba 3: pip install 'spotdiff[render]'"
    )


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            h.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# scenes (pure Python)


def test_sampling_is_deterministic_per_seed_and_index() -> None:
    config = ClevrConfig(pairs=20, seed=5)
    assert sample_triplet(7, config) == sample_triplet(7, config)
    # A scene does not depend on how many scenes there are, or on the caption count's draws.
    assert sample_triplet(7, replace(config, pairs=9)).default == sample_triplet(7, config).default
    assert sample_triplet(7, replace(config, seed=6)).default != sample_triplet(7, config).default
    # Every block of five scenes holds each change type once.
    for block in range(3):
        kinds = {sample_triplet(i, config).change.type for i in range(5 * block, 5 * block + 5)}
        assert kinds == set(CHANGE_TYPES)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_scenes_keep_clevr_rules_in_all_three_views(preset: str) -> None:
    config = ClevrConfig(pairs=40, seed=1, preset=preset, **SMALL)
    w, h = config.size
    for index in range(config.pairs):
        t = sample_triplet(index, config)
        assert config.min_objects <= len(t.default.objects) <= config.max_objects
        assert t.nonsemantic.objects == t.default.objects  # a distractor changes no object
        for name, view in t.views().items():
            objects = view.objects
            assert len({o.key() for o in objects}) == len(objects), "attributes name one object"
            for a, b in ((a, b) for i, a in enumerate(objects) for b in objects[i + 1 :]):
                assert math.hypot(a.x - b.x, a.y - b.y) >= a.radius + b.radius + MIN_GAP - 1e-3
            for obj, seen in zip(objects, visible_fractions(objects, view.camera, w, h)):
                x, y, bw, bh = box_of(obj, view.camera, w, h)
                assert x > 0 and y > 0 and x + bw < w and y + bh < h, (index, name)
                assert bw > 0 and bh > 0 and seen >= MIN_VISIBLE, (index, name, seen)
        before, after = t.default.objects, t.semantic.objects
        change = t.change
        if change.type == "add":
            assert len(after) == len(before) + 1 and change.after in after
        elif change.type == "drop":
            assert len(after) == len(before) - 1 and change.before not in after
        else:
            assert change.before in before and change.after in after
            assert set(before) - {change.before} == set(after) - {change.after}
            moved = math.hypot(change.before.x - change.after.x, change.before.y - change.after.y)
            if change.type == "move":
                assert moved >= MOVE_MIN and change.before.key() == change.after.key()
            else:
                assert moved == 0 and getattr(change.before, change.type) != getattr(
                    change.after, change.type
                )
        # The semantic view always has a moved camera; the distractor what its name says.
        assert t.semantic.camera != t.default.camera
        assert (t.nonsemantic.camera != t.default.camera) == ("viewpoint" in t.distractor)
        assert (t.nonsemantic.light != t.default.light) == ("lighting" in t.distractor)


def test_the_easy_preset_is_the_first_renderers_look() -> None:
    """``--preset easy`` draws exactly the scenes of ``spotdiff clevr v1`` (these numbers are
    that version's gold for seed 3, scene 0)."""
    config = ClevrConfig(pairs=30, seed=3, preset="easy")
    assert (config.width, config.height, config.min_objects, config.max_objects) == (320, 240, 3, 6)
    t = sample_triplet(0, config)
    assert t.default.camera.eye == (6.9456, -7.1932, 5.2613)
    assert t.default.camera.target == (0.0, 0.0, 0.0)
    assert t.semantic.camera.eye == (6.5699, -7.0276, 5.1607)
    assert (t.semantic.camera.roll, t.semantic.camera.fov) == (1.726, 51.7648)
    assert t.default.light.azimuth == -32.86 and t.change.type == "material"  # type: ignore[union-attr]


def _forward(camera) -> np.ndarray:
    d = np.subtract(camera.target, camera.eye)
    return d / np.linalg.norm(d)


@pytest.mark.parametrize(("preset", "shift", "turn"), [("clevr", 1.0, 0.0), ("wide", 1.5, 4.0)])
def test_clevr_changes_camera_and_lamps(preset: str, shift: float, turn: float) -> None:
    """CLEVR-Change's viewpoint change: the eye jittered (1.0 per axis around CLEVR's camera,
    then up to ``shift`` per axis for each other view) with CLEVR's camera orientation kept, or
    turned by at most a few degrees in the wide preset; CLEVR's three lamps jittered by up to
    1.0 (1.5) per axis, the same in all three views unless the light is the distractor."""
    config = ClevrConfig(pairs=30, seed=2, preset=preset)
    assert config.size == (480, 320) and (config.min_objects, config.max_objects) == (3, 10)
    nominal = _forward(type(sample_triplet(0, config).default.camera)(CAMERA_EYE, (0, 0, 0)))
    counts = set()
    jitter = PRESETS[preset].light_jitter
    for index in range(config.pairs):
        t = sample_triplet(index, config)
        counts.add(len(t.default.objects))
        base = t.default.camera
        assert np.abs(np.subtract(base.eye, CAMERA_EYE)).max() <= 1.0 + 1e-6
        assert np.allclose(_forward(base), nominal, atol=1e-3)  # CLEVR's camera does not turn
        for view in (t.semantic, t.nonsemantic):
            if view.camera == base:
                continue
            assert np.abs(np.subtract(view.camera.eye, base.eye)).max() <= shift + 1e-6
            angle = math.degrees(math.acos(min(1.0, float(_forward(view.camera) @ nominal))))
            assert angle <= 1e-2 if turn == 0 else angle <= 5.0
            assert abs(view.camera.roll) <= turn + 1e-6 and view.camera.fov == base.fov
        lamps = t.default.light
        assert isinstance(lamps, Lamps) and lamps.gain == 1.0
        for where, nominal_lamp in (
            (lamps.key, LAMP_KEY),
            (lamps.fill, LAMP_FILL),
            (lamps.back, LAMP_BACK),
        ):
            assert np.abs(np.subtract(where, nominal_lamp)).max() <= jitter + 1e-6
        assert t.semantic.light == lamps
    assert len(counts) >= 5  # CLEVR's 3-10 objects, not mostly small scenes


def test_invalid_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="--preset must be one of easy, clevr, wide"):
        ClevrConfig(preset="hard").validate()
    with pytest.raises(UsageError, match="--pairs"):
        ClevrConfig(pairs=0).validate()
    with pytest.raises(UsageError, match="min < max"):
        ClevrConfig(min_objects=4, max_objects=4).validate()


# ----------------------------------------------------------------------------------------------
# captions


def _cube(**kw: object) -> Obj:
    base = dict(
        shape="cube", size="small", color="red", material="metal", x=0.0, y=0.0, rotation=0.0
    )
    return Obj(**{**base, **kw})  # type: ignore[arg-type]


NAME = r"(small|tiny) red (metal|metallic|shiny) (cube|block)"


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            Change("color", _cube(), _cube(color="blue")),
            rf"the {NAME} (changed to blue|turned blue|changed its color to blue|became blue"
            rf"|is now blue|was painted blue|changed its color)",
        ),
        (
            Change("material", _cube(), _cube(material="rubber")),
            rf"the {NAME} (changed to|became|is now) (rubber|matte)|the {NAME} is now made of rubber"
            rf"|the {NAME} changed its (material|texture)",
        ),
        (
            Change("add", None, _cube()),
            rf"(a {NAME} has been added|someone added a {NAME}|there is a new {NAME}"
            rf"|a {NAME} has appeared|a {NAME} was added to the scene|a new {NAME} is in the scene)",
        ),
        (
            Change("drop", _cube(), None),
            rf"(the {NAME} (has disappeared|was removed|is missing|is no longer there"
            rf"|has been taken away)|someone removed the {NAME})",
        ),
        (
            Change("move", _cube(), _cube(x=2.0)),
            rf"(the {NAME} (changed its location|has been moved|moved|is in a different location"
            rf"|was moved to a new place)|someone moved the {NAME})",
        ),
    ],
)
def test_captions_name_the_object_and_the_change(change: Change, pattern: str) -> None:
    captions = change_captions(change, np.random.default_rng(0), 6)
    assert len(captions) == len(set(captions)) == 6  # six different phrasings
    for sentence in captions:
        assert re.fullmatch(pattern, sentence), sentence
        assert sentence == sentence.lower() and not sentence.endswith(".")


def test_caption_examples_from_clevr_change_are_produced() -> None:
    said: set[str] = set()
    for seed in range(30):
        rng = np.random.default_rng(seed)
        said |= set(change_captions(Change("color", _cube(), _cube(color="blue")), rng, 6))
        sphere = _cube(shape="sphere", size="large", color="gray", material="rubber")
        said |= set(change_captions(Change("drop", sphere, None), rng, 6))
    assert "the small red metal cube changed to blue" in said
    assert "the large gray rubber sphere has disappeared" in said
    none = no_change_captions(np.random.default_rng(0), 6)
    assert len(set(none)) == 6 and set(none) <= set(NO_CHANGE)
    assert {"no change was made", "the scene is the same as before"} <= set(NO_CHANGE)


def test_gold_records_type_attributes_and_boxes() -> None:
    config = ClevrConfig(pairs=10, **SMALL)
    for index in range(5):
        t = sample_triplet(index, config)
        gold = gold_record(t, config)
        assert gold["type"] == t.change.type and gold["split"] == t.split
        assert set(gold["object"]) == {"size", "color", "material", "shape"}
        assert (gold["bbox_before"] is None) == (t.change.type == "add")
        assert (gold["bbox_after"] is None) == (t.change.type == "drop")
        for box in (gold["bbox_before"], gold["bbox_after"]):
            if box is not None:
                x, y, w, h = box
                assert 0 <= x and 0 <= y and w > 0 and h > 0
                assert x + w <= config.width and y + h <= config.height
        assert len(gold["views"]["nonsemantic"]["objects"]) == len(t.default.objects)
        assert json.loads(json.dumps(gold)) == gold  # plain JSON values


# ----------------------------------------------------------------------------------------------
# rendering (Mitsuba)


@pytest.mark.parametrize(("preset", "margin"), [("easy", 1), ("clevr", 3)])
def test_boxes_cover_the_pixels_that_change(preset: str, margin: int) -> None:
    """Render a view twice with the changed object in two contrasting colours (same camera,
    light and samples): only the object's pixels differ, and its gold box must hold them.

    Every object is made rubber: a metal one also throws caustic speckles of the object's
    colour onto the floor around it, or mirrors it, which is real light but not the object.
    The lamps' denoiser (a 5x5 median of the colour) carries a new colour 2 px past an outline:
    the box holds the change within ``margin`` px; and their noise needs more samples than the
    sun's before a recoloured object's indirect light stops showing as speckles elsewhere."""
    _mitsuba()
    from spotdiff_cli.data.clevr_render import render_view

    spp = 4 if preset == "easy" else 16
    config = ClevrConfig(pairs=5, width=128, height=96, spp=spp, preset=preset)
    for index in range(config.pairs):  # one scene of each change type
        t = sample_triplet(index, config)
        gold = gold_record(t, config)
        for view, box, obj in (
            (t.default, gold["bbox_before"], t.change.before),
            (t.semantic, gold["bbox_after"], t.change.after),
        ):
            if obj is None:  # nothing before an add, nothing after a drop
                continue
            renders = []
            for colour in ("yellow", "blue"):
                painted = replace(obj, color=colour, material="rubber")
                objects = tuple(
                    painted if o == obj else replace(o, material="rubber") for o in view.objects
                )
                recoloured = View(objects, view.camera, view.light, view.render_seed)
                renders.append(render_view(recoloured, config.width, config.height, config.spp))
            diff = np.abs(renders[0].astype(int) - renders[1].astype(int)).max(axis=2)
            ys, xs = np.nonzero(diff > 40)
            x, y, w, h = box
            assert len(xs) > 20, f"scene {index}: the recoloured object is visible"
            inside = (xs >= x - margin) & (xs < x + w + margin)
            inside &= (ys >= y - margin) & (ys < y + h + margin)
            assert inside.mean() > 0.98, f"scene {index}: changed pixels outside the box {box}"
            # ... and the box is tight around them, not just large.
            assert xs.max() - xs.min() + 1 >= 0.6 * w and ys.max() - ys.min() + 1 >= 0.6 * h


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _mitsuba()
    from spotdiff_cli.data.clevr_render import render_clevr_change

    out = tmp_path_factory.mktemp("clevr") / "bench"
    summary = render_clevr_change(out, pairs=10, seed=3, jobs=1, **SMALL)
    assert summary.rendered == 10 and summary.skipped == 0
    return out


def test_layout_is_clevr_changes_and_the_reader_loads_it(rendered: Path) -> None:
    import cv2

    for view, folder in (
        ("default", "images"),
        ("semantic", "sc_images"),
        ("nonsemantic", "nsc_images"),
    ):
        names = sorted(p.name for p in (rendered / folder).iterdir())
        assert names == [image_name(view, i) for i in range(10)]
    image = cv2.imread(str(rendered / "images" / image_name("default", 0)))
    assert image.shape == (72, 96, 3)
    splits = json.loads((rendered / "splits.json").read_text())
    assert splits == {"train": list(range(8)), "val": [], "test": [8, 9]}  # 85/5/10 %, rounded
    types = json.loads((rendered / "type_mapping.json").read_text())
    assert sorted(types) == sorted(CHANGE_TYPES) and types["color"][0].endswith(".png")
    gold = json.loads((rendered / "gold.json").read_text())

    train = load_dataset(rendered, "train")
    assert train.format == "clevr-change" and len(train) == 16  # a change and a distractor each
    for pair in train.pairs:
        n = int(pair.id.split("_")[0])
        assert pair.before is not None and pair.before.name == image_name("default", n)
        record = gold[image_name("default", n)]
        assert pair.image_size == (96, 72)
        if pair.id.endswith("_nc"):
            # gold.json's kind (camera, light or both), not the real release's blanket "viewpoint"
            assert pair.change_types == ("distractor",) and pair.distractor == record["distractor"]
            assert pair.after is not None and pair.after.parent.name == "nsc_images"
            assert all(s in NO_CHANGE for s in pair.sentences) and not pair.gold
        else:
            assert pair.change_types == (record["type"],)
            assert pair.after is not None and pair.after.parent.name == "sc_images"
            assert len(pair.annotations) == 6 and pair.distractor is None
            (change,) = pair.gold
            assert change["object"] == record["object"] and change["type"] == record["type"]
            assert change["bbox_before"] == record["bbox_before"]
    kinds = {p.distractor for p in train.pairs if p.id.endswith("_nc")}
    assert kinds <= {"viewpoint", "lighting", "viewpoint+lighting"}


def test_same_seed_gives_the_same_bytes_whatever_the_process_count(
    rendered: Path, tmp_path: Path
) -> None:
    from spotdiff_cli.data.clevr_render import render_clevr_change

    render_clevr_change(tmp_path / "two", pairs=10, seed=3, jobs=2, **SMALL)
    assert _digest(tmp_path / "two") == _digest(rendered)
    render_clevr_change(tmp_path / "other", pairs=2, seed=4, jobs=1, **SMALL)
    a = (rendered / "images" / image_name("default", 0)).read_bytes()
    assert (tmp_path / "other" / "images" / image_name("default", 0)).read_bytes() != a


def test_resume_renders_only_what_is_missing(rendered: Path, tmp_path: Path) -> None:
    from spotdiff_cli.data.clevr_render import render_clevr_change

    out = tmp_path / "bench"
    shutil.copytree(rendered, out)
    (out / "sc_images" / image_name("semantic", 3)).unlink()  # cut off mid-scene
    for view, folder in (("default", "images"), ("nonsemantic", "nsc_images")):
        (out / folder / image_name(view, 7)).unlink()
    (out / "gold.json").unlink()  # annotations are written last: missing after a crash
    (out / "images" / f".{image_name('default', 7)}.abc123.tmp").write_bytes(b"half a png")
    seen: list[tuple[int, int]] = []
    summary = render_clevr_change(
        out, pairs=10, seed=3, jobs=1, progress=lambda d, t: seen.append((d, t)), **SMALL
    )
    assert (summary.rendered, summary.skipped) == (2, 8)
    assert seen[-1] == (10, 10) and len(seen) == 10
    assert not list(out.rglob("*.tmp"))
    assert _digest(out) == _digest(rendered)


def test_other_settings_or_foreign_files_are_refused(rendered: Path, tmp_path: Path) -> None:
    from spotdiff_cli.data.clevr_render import render_clevr_change

    out = tmp_path / "bench"
    shutil.copytree(rendered, out)
    with pytest.raises(OutputError, match="other settings: seed 3 \\(now 4\\)"):
        render_clevr_change(out, pairs=10, seed=4, jobs=1, **SMALL)
    render_clevr_change(out, pairs=2, seed=4, jobs=1, overwrite=True, **SMALL)
    assert len(list((out / "images").iterdir())) == 2  # the old run's images are gone
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match="not empty"):
        render_clevr_change(tmp_path / "mine", pairs=1, jobs=1, **SMALL)


def test_a_folder_from_before_presets_resumes_as_the_easy_preset(tmp_path: Path) -> None:
    _mitsuba()
    from spotdiff_cli.data.clevr_render import SETTINGS_FILE, render_clevr_change

    out = tmp_path / "v1"
    render_clevr_change(out, pairs=2, seed=3, jobs=1, preset="easy", **SMALL)
    settings = json.loads((out / SETTINGS_FILE).read_text())
    del settings["preset"]  # what the first renderer wrote
    (out / SETTINGS_FILE).write_text(json.dumps(settings))
    assert render_clevr_change(out, pairs=2, seed=3, jobs=1, preset="easy", **SMALL).skipped == 2
    with pytest.raises(OutputError, match="preset easy \\(now clevr\\)"):
        render_clevr_change(out, pairs=2, seed=3, jobs=1, **SMALL)


def test_missing_mitsuba_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from spotdiff_cli.data import clevr_render

    monkeypatch.setattr(clevr_render, "mitsuba_available", lambda: False)
    with pytest.raises(DataError, match=re.escape("pip install 'spotdiff[render]'")):
        clevr_render.render_clevr_change(tmp_path / "x", pairs=1)


def test_mitsuba_is_not_imported_by_the_cli_or_the_api() -> None:
    code = (
        "import sys, spotdiff_cli.cli, spotdiff_cli.api, spotdiff_cli.data.clevr_render; "
        "sys.exit('mitsuba' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ----------------------------------------------------------------------------------------------
# the command line (the installed console script)


def test_cli_renders_and_resumes(tmp_path: Path) -> None:
    _mitsuba()
    spotdiff = str(Path(sys.executable).parent / "spotdiff")
    args = [spotdiff, "data", "clevr", "--out", str(tmp_path / "b"), "--pairs", "3"]
    args += ["--size", "64x48", "--spp", "2", "--jobs", "2"]
    first = subprocess.run(args, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "rendered 3 scenes" in first.stdout
    assert len(load_dataset(tmp_path / "b", "train")) == 6  # 3 scenes, all in train
    again = subprocess.run(args, capture_output=True, text=True)
    assert again.returncode == 0 and "3 already there" in " ".join(again.stdout.split())
    bad = subprocess.run([*args[:-6], "--size", "64by48"], capture_output=True, text=True)
    assert bad.returncode == 2 and "WIDTHxHEIGHT" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    bad = subprocess.run([*args, "--preset", "hard"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--preset must be one of easy, clevr, wide" in bad.stderr
    # Another preset is other settings: refused, with what differs.
    easy = subprocess.run([*args, "--preset", "easy"], capture_output=True, text=True)
    assert easy.returncode == 1 and "preset clevr (now easy)" in " ".join(easy.stderr.split())
