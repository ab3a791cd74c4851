"""``spotdiff data mix``: one dataset listing the pairs of several, images left in place, every
annotator, change type and gold record kept, ids kept apart, nothing overwritten unasked."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from console import run_spotdiff

from spotdiff_cli.data.mix import mix_datasets
from spotdiff_cli.data.readers import load_dataset
from spotdiff_cli.errors import UsageError


def _jsonl_dataset(root: Path, lines: dict[str, list[dict]]) -> Path:
    (root / "img").mkdir(parents=True)
    for split, items in lines.items():
        for item in items:
            for side in ("before", "after"):
                path = root / item[side]
                if not path.exists():
                    cv2.imwrite(str(path), np.full((8, 8, 3), len(item[side]), np.uint8))
        (root / f"{split}.jsonl").write_text("\n".join(json.dumps(i) for i in items) + "\n")
    return root


@pytest.fixture()
def two_sources(tmp_path: Path) -> tuple[Path, Path]:
    a = _jsonl_dataset(
        tmp_path / "renders",
        {
            "train": [
                {
                    "id": "1",
                    "before": "img/a.png",
                    "after": "img/b.png",
                    "annotations": [["the cube is gone"], ["a cube went away"]],
                    "change_types": ["drop"],
                    "gold": [{"type": "drop", "object": {"shape": "cube"}}],
                },
                {
                    "id": "1_nc",
                    "before": "img/a.png",
                    "after": "img/c.png",
                    "sentences": ["no change"],
                    "change_types": ["distractor"],
                    "distractor": "viewpoint",
                },
            ],
            "test": [{"id": "9", "before": "img/a.png", "after": "img/b.png", "sentences": ["x"]}],
        },
    )
    b = _jsonl_dataset(
        tmp_path / "footage",
        {
            "train": [
                {"id": "1", "before": "img/p.png", "after": "img/q.png", "sentences": ["a car"]}
            ]
        },
    )
    return a, b


def test_mix_lists_every_pair_with_what_its_reader_knew(
    tmp_path: Path, two_sources: tuple[Path, Path]
) -> None:
    a, b = two_sources
    out = tmp_path / "deep" / "mix"
    summary = mix_datasets(out, [a, b])
    assert summary.counts == {"train": {"renders": 2, "footage": 1}, "test": {"renders": 1}}

    train = load_dataset(out, "train")
    assert train.format == "jsonl"
    pairs = train.by_id()
    assert set(pairs) == {"renders-1", "renders-1_nc", "footage-1"}, "ids kept apart"
    drop = pairs["renders-1"]
    assert drop.annotations == (("the cube is gone",), ("a cube went away",))
    assert drop.change_types == ("drop",) and drop.gold[0]["type"] == "drop"
    assert drop.before.resolve() == (a / "img/a.png").resolve()
    assert pairs["renders-1_nc"].distractor == "viewpoint"
    assert pairs["footage-1"].after.resolve() == (b / "img/q.png").resolve()


def test_mix_refuses_to_replace_a_split_file_unasked(
    tmp_path: Path, two_sources: tuple[Path, Path]
) -> None:
    out = tmp_path / "mix"
    mix_datasets(out, two_sources)
    before = (out / "train.jsonl").read_text()
    with pytest.raises(UsageError, match="--overwrite"):
        mix_datasets(out, two_sources)
    assert (out / "train.jsonl").read_text() == before
    mix_datasets(out, two_sources, overwrite=True)


def test_data_mix_console_script(tmp_path: Path, two_sources: tuple[Path, Path]) -> None:
    out = tmp_path / "mix"
    proc = run_spotdiff("data", "mix", out, *two_sources)
    assert proc.returncode == 0, proc.stderr
    assert "train: 3 pairs" in proc.stdout
    again = run_spotdiff("data", "mix", out, *two_sources)
    assert again.returncode != 0
    assert (
        "exists; pass --overwrite" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    )
    banana = run_spotdiff("data", "mix", tmp_path / "m3", *two_sources, "--split", "banana")
    assert banana.returncode != 0 and "no source has a 'banana' split" in banana.stderr
    assert not (tmp_path / "m3").exists()
    lonely = run_spotdiff("data", "mix", tmp_path / "m2", two_sources[0])
    assert lonely.returncode != 0 and "at least two" in lonely.stderr
