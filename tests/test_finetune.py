"""Backbone fine-tuning (``finetune_backbone: true``): batches carry images, the backbone gets
gradients and its own (smaller) learning rate, and its trained weights travel in the checkpoint
so ``load_checkpoint`` + ``describe`` use them. On a 12-pair, 64 px synthetic benchmark with a
tiny captioner (efficientnet_lite0 still sees 224 px); about 10 s on 2 CPU cores."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spotdiff_cli.captioners.backbones import create_backbone
from spotdiff_cli.captioners.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.errors import UsageError
from spotdiff_cli.train.batches import (
    backbone_grids,
    get_backbone,
    load_training_data,
    training_sentences,
)
from spotdiff_cli.train.loop import train
from spotdiff_cli.train.recipes import TrainConfig, load_recipe
from spotdiff_cli.train.run import LossForward

BACKBONE = "efficientnet_lite0"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from spotdiff_cli.data.cache import prepare_dataset
    from spotdiff_cli.data.synth import synthesize

    root = tmp_path_factory.mktemp("finetune") / "bench"
    synthesize(root, pairs=12, seed=0, size=64, annotators=1)
    prepare_dataset(
        root, ["train", "val"], device="cpu"
    )  # cluster analysis only: fine-tuning needs no grids
    return root


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_recipe_key_and_default() -> None:
    assert TrainConfig().finetune_backbone is False  # frozen, cached features stay the default
    config = load_recipe(None, finetune_backbone=True, lr=1e-3)
    assert config.finetune_backbone and config.resolved_backbone_lr == pytest.approx(1e-4)
    with pytest.raises(UsageError, match="backbone_lr"):
        load_recipe(None, backbone_lr=-1.0)


def _analysis(bench: Path):  # type: ignore[no-untyped-def]
    from spotdiff_cli.analysis import analyse_pair
    from spotdiff_cli.data import load_dataset
    from spotdiff_cli.frames.image import load_image
    from spotdiff_cli.types import Frame, Pair

    pair = load_dataset(bench, "val").pairs[0]
    return analyse_pair(
        Pair(
            Frame(load_image(pair.before), "before.png"), Frame(load_image(pair.after), "after.png")
        )
    )


def _describe_uses(model, module, info, bench: Path) -> None:  # type: ignore[no-untyped-def]
    """describe() on an analysed pair computes its grids with ``module``, not the shared pretrained backbone."""
    from spotdiff_cli.captioners.base import DescribeOptions

    analysis = _analysis(bench)
    images = [analysis.pair.before.pixels, analysis.pair.after.pixels]
    batch = model.analysis_batch(analysis)
    assert torch.allclose(batch["before"], backbone_grids(images, (module, info))[:1])
    assert not torch.allclose(batch["before"], backbone_grids(images, get_backbone(BACKBONE))[:1])
    sentences = model.describe(analysis, DescribeOptions(max_sentences=1))
    assert len(sentences) == 1 and sentences[0].kind == "generated"


def test_finetune_a_fixed_batch_then_save_load_describe(bench: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    vocab = Vocabulary.build(training_sentences(bench, "train"), 1)
    module, info = create_backbone(BACKBONE)
    data = load_training_data(bench, "train", vocab, backbone=BACKBONE, images=info)
    assert data.feature_shape == (info.channels, *info.grid)
    batch = data.batch(data.examples[:2])
    assert (
        "before_images" in batch
        and "before" not in batch
        and batch["before_images"].dtype == torch.uint8
    )
    model = create_model(
        "capt",
        weights=None,
        vocab=vocab,
        channels=info.channels,
        grid=list(info.grid),
        backbone=BACKBONE,
        tiny=True,
        dropout=0.0,
    )
    step = LossForward(model, (module.eval(), info))
    optimizer = torch.optim.Adam(
        [{"params": model.parameters()}, {"params": module.parameters(), "lr": 1e-4}], lr=3e-3
    )
    before = _state(module)
    losses = []
    for _ in range(4):
        loss = step(batch)["loss"]
        loss.backward()
        assert (
            module.conv_stem.weight.grad is not None
            and module.conv_stem.weight.grad.abs().sum() > 0
        )
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    print("fixed-batch loss", [round(x, 4) for x in losses])
    assert losses[-1] < losses[0]
    after = _state(module)
    assert any(
        not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point()
    )

    # save -> load (weights_only=True) -> describe: the checkpoint carries the fine-tuned backbone
    model.finetuned_backbone = (module, info)
    save_checkpoint(tmp_path / "ft.pt", model)
    loaded, meta = load_checkpoint(tmp_path / "ft.pt")
    assert meta["backbone"] == BACKBONE and "backbone_state_dict" not in meta
    loaded_module, loaded_info = loaded.finetuned_backbone
    assert loaded_module is not module and loaded_info.grid == info.grid
    assert all(torch.equal(v, after[k]) for k, v in loaded_module.state_dict().items())
    _describe_uses(loaded, loaded_module, loaded_info, bench)

    # a checkpoint without it loads as before: the shared pretrained backbone
    del model.finetuned_backbone
    save_checkpoint(tmp_path / "frozen.pt", model)
    assert "backbone_state_dict" not in read_checkpoint(tmp_path / "frozen.pt")
    plain, _ = load_checkpoint(tmp_path / "frozen.pt")
    assert getattr(plain, "finetuned_backbone", None) is None


def test_train_finetunes_and_checkpoints_the_backbone(bench: Path, tmp_path: Path) -> None:
    config = TrainConfig(
        model="capt",
        data=str(bench),
        finetune_backbone=True,
        epochs=1,
        batch_size=8,
        min_count=1,
        lr=3e-3,
        patience=0,
        val_tokenizer="python",
        device="cpu",
        model_config={"tiny": True},
    )
    result = train(config, tmp_path / "run")
    assert result.steps > 0 and result.best_path is not None

    last = read_checkpoint(result.last_path)
    trained = last["backbone_state_dict"]
    # the backbone lr is a tenth of the captioner's and follows it
    assert [g["lr"] for g in last["extra"]["optimizer"]["param_groups"]] == pytest.approx(
        [3e-3, 3e-4]
    )
    pretrained = create_backbone(BACKBONE)[0].state_dict()
    assert any(
        not torch.equal(trained[k], pretrained[k])
        for k in trained
        if trained[k].is_floating_point()
    )

    model, meta = load_checkpoint(result.best_path)
    assert "backbone_state_dict" not in meta
    module, info = model.finetuned_backbone
    loaded = module.state_dict()
    assert all(torch.equal(loaded[k], trained[k]) for k in trained)  # one epoch: best.pt == last.pt
    _describe_uses(model, module, info, bench)
