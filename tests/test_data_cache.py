"""``spotdiff data prepare``: cluster cache per pair, reused, rebuilt when settings change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spotdiff_cli.config import AnalysisConfig
from spotdiff_cli.data.cache import cluster_masks, load_analysis, prepare_dataset
from spotdiff_cli.data.synth import synthesize
from spotdiff_cli.errors import DataError


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    synthesize(tmp_path / "s", pairs=10, seed=5, train=0.6, val=0.2, distractor_rate=0.0)
    return tmp_path / "s"


def test_prepare_caches_clusters_and_reuses_them(bench: Path) -> None:
    config = AnalysisConfig(work_size=224)
    first = prepare_dataset(bench, ["train"], config)
    assert first.computed == 6 and first.reused == 0
    entry = load_analysis(bench, "train", "0")
    assert entry["labels"].shape == (224, 224) and entry["labels"].dtype == np.uint16
    k = len(entry["ids"])
    assert k >= 1 and entry["bboxes"].shape == (k, 4) and entry["features"].shape == (k, 4)
    masks = cluster_masks(entry)
    assert masks.shape == (k, 224, 224)
    # Each cached mask is exactly its cluster's pixels - cluster 0 (the most salient) included,
    # which once came back as the whole background because 0 also meant "no cluster".
    assert masks.sum(axis=(1, 2)).tolist() == entry["n_active"].tolist()
    assert not (masks.sum(axis=0) > 1).any()
    again = prepare_dataset(bench, ["train"], config)
    assert again.computed == 0 and again.reused == 6 and not again.invalidated


def test_changed_settings_invalidate_the_cache(bench: Path) -> None:
    prepare_dataset(bench, ["val"], AnalysisConfig(work_size=224))
    changed = prepare_dataset(bench, ["val"], AnalysisConfig(work_size=224, delta=60.0))
    assert changed.invalidated == ["analysis"] and changed.computed == 2


def test_missing_entry_says_how_to_build_it(bench: Path) -> None:
    with pytest.raises(DataError, match="spotdiff data prepare"):
        load_analysis(bench, "test", "9")


# ----------------------------------------------------------------------------------------------
# backbone feature cache


@pytest.fixture()
def counted_backbone(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Wrap create_backbone so the test can count network builds and forward passes.
    Random weights (pretrained=False): what is cached matters here, not what the grids mean."""
    from spotdiff_cli.captioners import backbones

    real = backbones.create_backbone
    counts = {"builds": 0, "forwards": 0}

    def create(name: str = "efficientnet_lite0", weights: object = None, pretrained: bool = True):  # type: ignore[no-untyped-def]
        model, info = real(name, pretrained=False)
        counts["builds"] += 1
        model.register_forward_pre_hook(
            lambda *_: counts.__setitem__("forwards", counts["forwards"] + 1)
        )
        return model, info

    monkeypatch.setattr(backbones, "create_backbone", create)
    return counts


def test_backbone_features_are_cached_and_reused(
    bench: Path, counted_backbone: dict[str, int]
) -> None:
    from spotdiff_cli.data.cache import load_features

    config = AnalysisConfig(work_size=224)
    first = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0", batch_size=2)
    assert (
        counted_backbone["forwards"] == 2
        and first.features_computed == 2
        and first.features_reused == 0
    )
    grids = load_features(bench, "val")
    assert grids["before"].shape == (2, 1280, 7, 7) and grids["before"].dtype == np.float16
    assert grids["ids"].tolist() == ["6", "7"]

    counted_backbone.update(builds=0, forwards=0)
    again = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0", batch_size=2)
    # Nothing changed: the network is not even built, and the files are the same.
    assert counted_backbone == {"builds": 0, "forwards": 0}
    assert again.features_computed == 0 and again.features_reused == 2 and not again.invalidated
    assert np.array_equal(load_features(bench, "val")["after"], grids["after"])


def test_changed_feature_settings_invalidate_the_grids(
    bench: Path, counted_backbone: dict[str, int]
) -> None:
    import json

    from spotdiff_cli.data.cache import load_features

    config = AnalysisConfig(work_size=224)
    prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0")
    # A changed setting the grids depend on (here: made by another timm) invalidates them.
    settings = bench / "cache" / "features-efficientnet_lite0" / "settings.json"
    stored = json.loads(settings.read_text())
    settings.write_text(json.dumps({**stored, "timm": "0.0.1"}))
    again = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0")
    assert again.invalidated == ["features-efficientnet_lite0"] and again.features_computed == 2
    assert load_features(bench, "val")["before"].shape == (2, 1280, 7, 7)


def test_other_input_sizes_and_levels_are_cached_beside_the_default(
    bench: Path, counted_backbone: dict[str, int]
) -> None:
    """Another input size (448 px: lite0's 14 x 14 grid, the paper's ResNet grid) and multi-level
    maps (strides 8, 16, 32) each get their own folder: the default grids stay, and a second run
    computes nothing."""
    from spotdiff_cli.data.cache import feature_folder, load_features

    config = AnalysisConfig(work_size=224)
    prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0")
    default = load_features(bench, "val")
    # (448 px gives the 14 x 14 grid; 160 px keeps this test quick: 5 x 5.)
    small = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0", input_size=160)
    assert not small.invalidated and small.features_computed == 2
    assert load_features(bench, "val", input_size=160)["before"].shape == (2, 1280, 5, 5)
    assert np.array_equal(load_features(bench, "val")["before"], default["before"])

    levels = (8, 16, 32)
    made = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0", levels=levels)
    assert made.features_computed == 2
    assert (
        feature_folder("efficientnet_lite0", None, levels) == "features-efficientnet_lite0-s8-16-32"
    )
    cached = load_features(bench, "val", levels=levels)
    shapes = {k: v.shape for k, v in cached.items() if k != "ids"}
    assert shapes == {
        "before": (2, 1280, 7, 7),
        "after": (2, 1280, 7, 7),
        "before_s8": (2, 40, 28, 28),
        "after_s8": (2, 40, 28, 28),
        "before_s16": (2, 112, 14, 14),
        "after_s16": (2, 112, 14, 14),
        "before_s32": (2, 320, 7, 7),
        "after_s32": (2, 320, 7, 7),
    }
    assert all(v.dtype == np.float16 for k, v in cached.items() if k != "ids")
    builds = counted_backbone["builds"]
    again = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0", levels=levels)
    assert again.features_computed == 0 and again.features_reused == 2
    assert counted_backbone["builds"] == builds  # nothing to do: the network is never built
    with pytest.raises(DataError, match="--level 8 --level 16"):
        load_features(bench, "train", levels=levels)


def test_changed_image_recomputes_only_its_pair(
    bench: Path, counted_backbone: dict[str, int]
) -> None:
    import os

    from spotdiff_cli.data.cache import load_features

    config = AnalysisConfig(work_size=224)
    prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0")
    before = load_features(bench, "val")
    image = bench / "images" / "7_2.png"
    image.write_bytes(image.read_bytes())  # same pixels, new mtime: the rule is size + mtime
    os.utime(image, ns=(image.stat().st_atime_ns, image.stat().st_mtime_ns + 10**9))
    counted_backbone.update(builds=0, forwards=0)
    again = prepare_dataset(bench, ["val"], config, backbone="efficientnet_lite0")
    assert again.features_computed == 1 and again.features_reused == 1 and again.computed == 1
    assert any(
        "features val: 1 pair(s) recomputed because their images changed" in n for n in again.notes
    )
    assert any(n.startswith("analysis val: 1 pair") for n in again.notes)
    assert counted_backbone["forwards"] == 1
    after = load_features(bench, "val")
    assert after["ids"].tolist() == ["6", "7"] and np.array_equal(
        after["before"][0], before["before"][0]
    )


def test_limit_run_keeps_the_grids_of_other_pairs(
    bench: Path, counted_backbone: dict[str, int]
) -> None:
    from spotdiff_cli.data.cache import load_features

    config = AnalysisConfig(work_size=224)
    prepare_dataset(bench, ["train"], config, backbone="efficientnet_lite0", limit=2)
    assert load_features(bench, "train")["ids"].tolist() == ["0", "1"]
    full = prepare_dataset(bench, ["train"], config, backbone="efficientnet_lite0")
    assert full.features_computed == 4 and full.features_reused == 2
    quick = prepare_dataset(bench, ["train"], config, backbone="efficientnet_lite0", limit=2)
    assert quick.features_computed == 0
    assert load_features(bench, "train")["ids"].tolist() == [str(i) for i in range(6)]


def test_cached_masks_equal_the_analysis_masks(bench: Path) -> None:
    from spotdiff_cli.analysis import analyse_pair, make_pair
    from spotdiff_cli.data import load_dataset
    from spotdiff_cli.frames import load_image
    from spotdiff_cli.types import Frame

    config = AnalysisConfig(work_size=224)
    prepare_dataset(bench, ["train"], config)
    for pair in load_dataset(bench, "train").pairs[:3]:
        result = analyse_pair(
            make_pair(Frame(load_image(pair.before), "b"), Frame(load_image(pair.after), "a")),
            config,
        )
        entry = load_analysis(bench, "train", pair.id)
        cached = cluster_masks(entry)
        assert len(cached) == len(result.clusters)
        for mask, cluster in zip(cached, result.clusters):
            assert np.array_equal(mask, cluster.mask), f"pair {pair.id} cluster {cluster.id}"
