"""The change gate (issue 24): with ``change_gate: true`` a learned model reads the after grid only
where the analysis found a change (``features.gate_by_clusters``), so a pair in which it found
nothing looks to the model like a pair of identical images, whatever the camera did."""

from __future__ import annotations

import pytest
import torch
from tiny_batches import one_sentence_batch

from spotdiff_cli.captioners.features import GATES, gate_by_clusters
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.errors import ModelError

SENTENCES = ["the red cube is gone", "there is a blue ball", "the scene is the same"]
C, H, W = 16, 4, 4
GRID_FAMILIES = ("duda", "duda-aux", "clip4idc", "idc-pcl", "onediff")


def _clusters(batch: dict, masks: torch.Tensor, valid: torch.Tensor) -> dict:
    return {**batch, "cluster_masks": masks, "cluster_valid": valid}


def test_the_gate_keeps_after_only_where_a_cluster_lies() -> None:
    torch.manual_seed(0)
    before, after = torch.randn(2, C, H, W), torch.randn(2, C, H, W)
    masks = torch.zeros(2, 2, H, W)
    masks[0, 0, 1, 2] = 1.0  # pair 0: one changed cell
    masks[0, 1, 3, 3] = 0.5  # a soft edge of a second cluster
    masks[1, 0, 0, 0] = 1.0  # pair 1: a cluster the batch marks invalid (padding)
    valid = torch.tensor([[True, True], [False, False]])
    gated = gate_by_clusters(_clusters({"before": before, "after": after}, masks, valid))

    assert torch.equal(gated["before"], before)
    assert torch.allclose(gated["after"][0, :, 1, 2], after[0, :, 1, 2])
    halfway = 0.5 * before[0, :, 3, 3] + 0.5 * after[0, :, 3, 3]
    assert torch.allclose(gated["after"][0, :, 3, 3], halfway, atol=1e-6)  # lerp's rounding
    untouched = torch.ones(H, W, dtype=torch.bool)
    untouched[1, 2] = untouched[3, 3] = False
    assert torch.equal(gated["after"][0][:, untouched], before[0][:, untouched])
    assert torch.equal(gated["after"][1], before[1]), "no valid cluster: after reads as before"


def test_focus_shows_both_grids_only_where_a_cluster_lies() -> None:
    torch.manual_seed(0)
    before, after = torch.randn(1, C, H, W), torch.randn(1, C, H, W)
    masks = torch.zeros(1, 1, H, W)
    masks[0, 0, 2, 1] = 1.0
    batch = _clusters({"before": before, "after": after}, masks, torch.ones(1, 1, dtype=bool))
    gated = gate_by_clusters(batch, "focus")
    for side, grid in (("before", before), ("after", after)):
        assert torch.equal(gated[side][0, :, 2, 1], grid[0, :, 2, 1])
        assert float(gated[side].abs().sum()) == pytest.approx(float(grid[0, :, 2, 1].abs().sum()))
    with pytest.raises(ModelError, match="change_gate"):
        gate_by_clusters(batch, "everywhere")


def test_the_gate_reaches_every_level_at_its_own_size() -> None:
    torch.manual_seed(0)
    b = {"before": torch.randn(1, C, H, W), "after": torch.randn(1, C, H, W)}
    b["before_s8"], b["after_s8"] = torch.randn(1, 3, 2 * H, 2 * W), torch.randn(1, 3, 2 * H, 2 * W)
    gated = gate_by_clusters(_clusters(b, torch.zeros(1, 1, H, W), torch.ones(1, 1, dtype=bool)))
    assert torch.equal(gated["after_s8"], b["before_s8"])
    masks = torch.ones(1, 1, H, W)
    gated = gate_by_clusters(_clusters(b, masks, torch.ones(1, 1, dtype=bool)))
    assert torch.allclose(gated["after_s8"], b["after_s8"])


@pytest.mark.parametrize("name", GRID_FAMILIES)
def test_a_gated_model_sees_nothing_where_the_analysis_found_nothing(name: str) -> None:
    """No clusters: the loss is that of the pair (before, before), whatever after holds; without
    the gate a different after gives a different loss."""
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    batch = one_sentence_batch(vocab, SENTENCES, (C, H, W), ["0", "1", "2"], 0)
    batch = {
        **batch,
        "caption_groups": torch.arange(3),
        "cluster_masks": torch.zeros(3, 1, H, W),
        "cluster_valid": torch.zeros(3, 1, dtype=torch.bool),
    }
    if name == "onediff":
        for stride in (8, 16):
            batch[f"before_s{stride}"] = torch.randn(3, C, H, W)
            batch[f"after_s{stride}"] = torch.randn(3, C, H, W)
    other = {**batch, "after": torch.randn(3, C, H, W)}
    same = {**batch, "after": batch["before"]}
    if name == "onediff":
        other.update({f"after_s{s}": torch.randn(3, C, H, W) for s in (8, 16)})
        same.update({f"after_s{s}": batch[f"before_s{s}"] for s in (8, 16)})

    def loss(gated: str, b: dict) -> float:
        torch.manual_seed(0)
        extra = {"level_channels": [C, C]} if name == "onediff" else {}
        model = create_model(
            name, vocab=vocab, channels=C, grid=(H, W), tiny=True, change_gate=gated, **extra
        )
        model.eval()
        with torch.no_grad():
            return float(model.loss(b)["loss"])

    for gate in GATES:
        assert loss(gate, batch) == pytest.approx(loss(gate, same), abs=1e-6)
        assert loss(gate, other) == pytest.approx(loss(gate, same), abs=1e-6)
    assert loss("", other) != pytest.approx(loss("", same), abs=1e-6)


@pytest.mark.parametrize("name", GRID_FAMILIES)
def test_a_gated_model_describes_an_analysed_pair(name: str) -> None:
    """`spotdiff caption`'s path: the one-pair batch of an analysed pair carries its clusters to
    the gate (onediff builds that batch itself, with its levels)."""
    from test_train_loop import _analysed_pair

    from spotdiff_cli.captioners.base import DescribeOptions
    from spotdiff_cli.captioners.features import cluster_tensors

    analysis = _analysed_pair()
    assert analysis.clusters, "the drawn box is a change"
    clusters = cluster_tensors(analysis, (7, 7))
    assert clusters["cluster_valid"].all() and float(clusters["cluster_masks"].max()) == 1.0
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    torch.manual_seed(0)
    model = create_model(
        name, vocab=vocab, channels=1280, grid=(7, 7), tiny=True, change_gate="focus"
    )
    model.eval()
    sentences = model.describe(analysis, DescribeOptions(max_sentences=1))
    assert len(sentences) == 1 and isinstance(sentences[0].text, str)
