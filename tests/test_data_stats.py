"""``spotdiff data stats``: Table 1 of the Spot-the-diff paper, for real and synthetic data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff_cli.data.stats import dataset_stats
from spotdiff_cli.data.synth import synthesize

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "spot-the-diff"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/spot-the-diff not present")
def test_real_annotations_reproduce_table_1() -> None:
    """Published: 1.86 (1.01) sentences per annotation, 10.96 (4.97) words per sentence, 5% long.
    The released files hold 12,562 of the 13,192 annotations; the train split matches the
    sentence count exactly and words per sentence within 0.3 (see docs/data.md)."""
    train = dataset_stats(SHARED / "annotations", ["train"])
    assert round(train.sentences_per_annotation, 2) == 1.86
    assert round(train.sentences_per_annotation_std, 1) == 1.0
    assert train.words_per_sentence == pytest.approx(10.96, abs=0.35)
    assert round(train.words_per_sentence_std, 2) == 4.97
    assert round(train.long_sentence_share * 100) == 5
    every = dataset_stats(SHARED / "annotations")
    assert every.splits == ["train", "val", "test"]
    assert (every.annotations, every.pairs, every.sentences) == (12562, 11329, 23093)
    assert every.vocabulary == 2295  # SOURCES.md: whitespace vocabulary of all splits
    assert every.per_split["test"]["sentences"] == 2107


def test_synthetic_stats_and_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from spotdiff_cli.cli import app

    synthesize(tmp_path / "s", pairs=40, seed=2)
    stats = dataset_stats(tmp_path / "s")
    assert stats.pairs == 40 and stats.annotations == 120
    assert 1.0 < stats.sentences_per_annotation < 3.0 and 6 < stats.words_per_sentence < 16
    assert set(stats.change_types) <= {"appear", "disappear", "move", "colour", "distractor"}
    result = CliRunner().invoke(app, ["data", "stats", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pairs"] == 40
    table = CliRunner().invoke(app, ["data", "stats", str(tmp_path / "s"), "--split", "test"])
    assert "Words per sentence" in table.output
    missing = CliRunner().invoke(app, ["data", "stats", str(tmp_path / "nothing")])
    assert missing.exit_code == 1 and "not found" in missing.output
