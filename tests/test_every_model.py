"""Every model ``spotdiff models`` lists goes through the same steps, on the tiny synthetic
benchmark of test_train_loop.py: a few training steps through the real loop (train/loop.py, its
tiny variant: ``model_config: {tiny: true}``), reload of what it saved, decoding, a second
save and reload that decodes the same, describing an analysed pair through the registry, and
scoring what it wrote (caption metrics; perplexity where the model scores sentences). The
untrained ``grounded`` captioner only describes and is scored. A few seconds per model.

The families' own tests check what each model computes; this one checks that the contract of
``captioners/learned.py`` holds for every one of them, so a new model is covered by registering it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import draw_box, textured_background
from test_train_loop import make_tiny_bench

from spotdiff_cli.captioners import registry
from spotdiff_cli.captioners.base import DescribeOptions
from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.learned import LearnedCaptioner
from spotdiff_cli.evaluate.metrics import score_captions

# What the shipped families register (not the models tests register for themselves).
SHIPPED = [
    name
    for name in registry.available_models()
    if registry._FACTORIES[name].__module__.startswith(registry.FAMILY_MODULES)
]
LEVELS = (8, 16)  # onediff reads the backbone's stride-8 and -16 maps too


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny benchmark, with the multi-level maps onediff reads cached beside the grids."""
    from spotdiff_cli.data.cache import prepare_dataset

    root = make_tiny_bench(tmp_path_factory)
    if not any((root / "cache").glob("*8-16*/val.npz")):
        prepare_dataset(
            root, ["train", "val"], backbone="efficientnet_lite0", device="cpu", levels=LEVELS
        )
    return root


@pytest.fixture(scope="module")
def analysis():
    """One analysed pair with a red box that appeared (what `spotdiff caption` describes)."""
    from spotdiff_cli.analysis import analyse_pair
    from spotdiff_cli.types import Frame, Pair

    scene = textured_background(96, 128, seed=3)
    after = draw_box(scene, 40, 30, 30, 24, (200, 30, 30))
    return analyse_pair(Pair(Frame(scene, "before.png"), Frame(after, "after.png")))


def _score(references: dict[str, list[str]], hypotheses: dict[str, str]) -> dict[str, float]:
    """BLEU-4 and CIDEr (a corpus statistic: two pairs at least) of one sentence per pair."""
    scores = score_captions(references, hypotheses, ("BLEU-4", "CIDEr"), tokenizer="python")
    assert set(scores.scores) == {"BLEU-4", "CIDEr"}, scores.skipped
    assert all(math.isfinite(v) and v >= 0 for v in scores.scores.values()), scores.scores
    return scores.scores


def test_every_registered_model_is_covered() -> None:
    assert {"grounded", "ddla", "duda", "onediff", "clip4idc", "idc-pcl", "nn"} <= set(SHIPPED)
    assert len(SHIPPED) >= 13


@pytest.mark.parametrize("name", SHIPPED)
def test_every_model_trains_decodes_saves_reloads_and_scores(
    name: str, bench: Path, analysis, tmp_path: Path
) -> None:
    info = registry.model_info(name)
    if not info.trainable:  # grounded: nothing to train or save; it describes and is scored
        model = registry.create_model(name, device="cpu")
        sentences = model.describe(analysis, DescribeOptions(max_sentences=2))
        assert sentences and all(s.text for s in sentences)
        refs = ["a red box appeared", "there is a red box now"]
        _score({"p0": refs, "p1": refs[::-1]}, {"p0": sentences[0].text, "p1": sentences[-1].text})
        return

    from spotdiff_cli.train.batches import load_training_data
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.recipes import load_recipe

    # 1. a few training steps (or nn's fit) through the loop; it saves best.pt and last.pt
    levels = LEVELS if name == "onediff" else ()
    config = load_recipe(
        None,
        model=name,
        data=str(bench),
        epochs=1,
        min_count=1,
        lr=1e-3,
        val_tokenizer="python",
        device="cpu",
        log_every=1,
        patience=0,
        feature_levels=levels,
        model_config={"tiny": True},
    )
    result = train(config, tmp_path / "run")
    assert result.last_path is not None and result.best_path is not None
    record = result.history[-1]
    assert math.isfinite(record["CIDEr"]) and record["pairs"] >= 1

    # 2. reload what the loop saved: the same model, by name, from the file alone
    model, meta = load_checkpoint(result.last_path)
    assert isinstance(model, LearnedCaptioner) and model.name == name == meta["model"]
    if model.trained_by_gradient:
        assert result.steps >= 1 and record["perplexity"] is not None

    # 3. decode validation pairs
    val = load_training_data(bench, "val", model.vocab, levels=levels)
    batch = next(iter(val.pair_batches(8)))
    decoded = model.generate(batch, max_sentences=2, max_len=12)
    assert len(decoded) == len(batch["pair_ids"])
    assert all(w in model.vocab for pair in decoded for s in pair for w in s.split())

    # 4. save and reload again: the same decoding (greedy and beam) and the same loss
    again, _ = load_checkpoint(save_checkpoint(tmp_path / "again.pt", model, meta["extra"]))
    assert again.config == model.config
    for beam in (1, 3):
        assert again.generate(batch, 2, beam=beam, max_len=12) == model.generate(
            batch, 2, beam=beam, max_len=12
        )
    if model.trained_by_gradient:
        with torch.no_grad():
            assert torch.allclose(again.loss(batch)["loss"], model.loss(batch)["loss"])

    # 5. describe an analysed pair (the inference path: backbone on pixels) and score it all
    sentences = model.describe(analysis, DescribeOptions(max_sentences=2))
    assert len(sentences) <= 2 and all(s.kind == "generated" for s in sentences)
    _score(
        {pid: refs or [""] for pid, refs in zip(batch["pair_ids"], batch["references"])},
        {pid: pair[0] if pair else "" for pid, pair in zip(batch["pair_ids"], decoded)},
    )
    if model.scores_sentences:
        nll, n_tokens = model.log_likelihood(analysis, "a red box appeared")
        assert n_tokens > 0 and math.isfinite(nll) and nll > 0
