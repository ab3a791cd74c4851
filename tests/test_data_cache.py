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
    assert masks.sum(axis=(1, 2)).tolist() == entry["n_active"].tolist() or masks.any(axis=(1, 2)).all()
    again = prepare_dataset(bench, ["train"], config)
    assert again.computed == 0 and again.reused == 6 and not again.invalidated


def test_changed_settings_invalidate_the_cache(bench: Path) -> None:
    prepare_dataset(bench, ["val"], AnalysisConfig(work_size=224))
    changed = prepare_dataset(bench, ["val"], AnalysisConfig(work_size=224, delta=60.0))
    assert changed.invalidated == ["analysis"] and changed.computed == 2


def test_missing_entry_says_how_to_build_it(bench: Path) -> None:
    with pytest.raises(DataError, match="spotdiff data prepare"):
        load_analysis(bench, "test", "9")
