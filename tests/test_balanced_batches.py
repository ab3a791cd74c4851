"""Training that does not reward "no change" by default (issue 24, item 2, in part): the recipes
of the families whose CPU runs collapsed pick best.pt on the pairs that hold a change and
balance changed and unchanged pairs in every batch (``balance_changes``). Seconds on 2 cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_train_loop import make_tiny_bench, tiny_config

from spotdiff_cli.train.sampler import balanced_order, contrastive_batches

COLLAPSING = ("duda", "duda-aux", "idc-pcl", "clip4idc", "onediff")


def test_balanced_order_alternates_and_keeps_every_example_once() -> None:
    changed = [True, True, True, True, True, False, False]
    order = [6, 0, 5, 3, 1, 2, 4]
    out = balanced_order(order, changed)
    assert out == [0, 6, 3, 5, 1, 2, 4]  # changed first, each group in the shuffle's order
    assert sorted(out) == sorted(order)
    assert balanced_order(order, [True] * 7) == order  # one group: the shuffle unchanged
    # under the contrastive sampler the turns survive: no pair or caption clashes here
    batches = contrastive_batches(out, list(range(7)), list(range(7)), 2)
    assert [sum(changed[i] for i in b) for b in batches[:2]] == [1, 1]


@pytest.mark.parametrize("model", COLLAPSING)
@pytest.mark.parametrize("data", ["synth", "clevr"])
def test_the_default_recipes_of_collapsing_families_pick_and_batch_by_changes(
    model: str, data: str
) -> None:
    from spotdiff_cli.train.recipes import default_recipe_path, load_recipe

    path = default_recipe_path(model, data)
    assert path is not None
    config = load_recipe(path)
    # The rendered benchmark's half of distractors needs both kinds of pair to count: picked by
    # changed/CIDEr alone, duda-aux kept an epoch that called every distractor changed.
    expected = "balanced/CIDEr" if data == "clevr" else "changed/CIDEr"
    assert config.val_metric == expected, path.name
    assert config.balance_changes, path.name


def test_the_change_gated_shipped_recipes_balance_and_gate() -> None:
    """The recipes of the change-gated shipped weights (weights/README.md) train as those were:
    the mix, balanced batches, best.pt by balanced/CIDEr, both grids through the change mask."""
    from spotdiff_cli.train.recipes import RECIPES_DIR, load_recipe

    for name in ("duda", "duda-aux", "onediff", "clip4idc", "idc-pcl"):
        config = load_recipe(RECIPES_DIR / f"{name}-real.yaml")
        assert config.data == "runs/mixed" and config.balance_changes, name
        assert config.val_metric == "balanced/CIDEr", name
        assert config.model_config["change_gate"] == "focus", name


def test_the_loop_balances_every_batch_while_both_kinds_last(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.train.batches import TrainingData
    from spotdiff_cli.train.loop import train

    bench = make_tiny_bench(tmp_path_factory)
    shares: list[tuple[int, int]] = []
    real = TrainingData.batch

    def batch(self: TrainingData, examples: Any) -> Any:
        if self.split == "train":  # a training step's batch (validation reads the val split)
            changed = sum(self.pairs[p].id in self.changed_ids for p, _ in examples)
            shares.append((changed, len(examples) - changed))
        return real(self, examples)

    monkeypatch.setattr(TrainingData, "batch", batch)
    config = tiny_config(bench, epochs=1, balance_changes=True, val_metric="changed/CIDEr")
    result = train(config, tmp_path / "run")
    assert result.best_path is not None and shares
    unchanged_total = sum(u for _, u in shares)
    assert unchanged_total > 0
    full = unchanged_total // 4  # batches of 8 that can hold 4 unchanged examples
    assert full >= 1 and all(s == (4, 4) for s in shares[:full]), shares
