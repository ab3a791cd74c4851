"""The training loop end to end on a tiny synthetic benchmark, with a tiny model that follows
docs/training-interfaces.md (the real models are tested in their own files): it learns, writes
best/last checkpoints atomically, resumes, refuses to overwrite a run, stops early and is
deterministic under a seed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn as nn

from spotdiff_cli.captioners import registry
from spotdiff_cli.captioners.decoding import decode
from spotdiff_cli.captioners.learned import LearnedCaptioner
from spotdiff_cli.captioners.vocab import PAD_ID, Vocabulary
from spotdiff_cli.errors import OutputError, UsageError

TINY = "tiny-test"


class TinyCaptioner(LearnedCaptioner):
    """Mean-pooled before/after/difference features -> GRU decoder. Loss: summed token NLL per
    *pair*, averaged over the batch, so equal shares of a global batch average to the global loss
    (what the distributed equivalence test relies on). No dropout: runs are exactly repeatable.
    Every other hook keeps the base class's default."""

    name = TINY

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c, hidden = int(config["channels"]), int(config.get("hidden", 32))
        self.init = nn.Linear(3 * c, hidden)
        self.embed = nn.Embedding(len(vocab), hidden, padding_idx=PAD_ID)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, len(vocab))

    def _h0(self, batch: dict[str, Any]) -> torch.Tensor:
        before, after = batch["before"].mean(dim=(2, 3)), batch["after"].mean(dim=(2, 3))
        return torch.tanh(self.init(torch.cat([before, after, after - before], dim=1)))

    def _step(self, tokens: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.rnn(self.embed(tokens[:, -1]), h)
        return torch.log_softmax(self.out(h), dim=-1), h

    def loss(self, batch: dict[str, Any]) -> dict[str, Any]:
        tokens, valid = batch["tokens"], batch["sentence_valid"]  # (B, S, T), (B, S)
        b, s, t = tokens.shape
        h = self._h0(batch).repeat_interleave(s, dim=0)
        flat = tokens.view(b * s, t)
        nll = torch.zeros(b * s)
        for i in range(t - 1):
            log_probs, h = self._step(flat[:, : i + 1], h)
            target = flat[:, i + 1]
            nll = nll + torch.where(
                target != PAD_ID, -log_probs.gather(1, target[:, None])[:, 0], torch.zeros(())
            )
        nll = (nll.view(b, s) * valid).sum(dim=1)
        n_tokens = int(((tokens[:, :, 1:] != PAD_ID) & valid[:, :, None]).sum())
        return {"loss": nll.mean(), "nll": nll.sum().detach(), "n_tokens": n_tokens}

    def generate(
        self, batch: dict[str, Any], max_sentences: int = 1, beam: int = 1, max_len: int = 25
    ) -> list[list[str]]:
        hyps = decode(
            self._step, self._h0(batch), batch["before"].shape[0], beam=beam, max_len=max_len
        )
        return [[self.vocab.decode(h.tokens)] for h in hyps]


@registry.register_model(
    TINY, family="test", summary="tiny contract model for tests", trainable=True
)
def _tiny_factory(
    weights: str | None = None,
    device: str = "cpu",
    config: dict | None = None,
    vocab: Vocabulary | None = None,
    **overrides: Any,
) -> TinyCaptioner:
    """The registry convention of the real models: weights= a checkpoint, or config= a resolved
    config, or the feature shape (channels=, grid=) plus overrides."""
    if weights is not None:
        from spotdiff_cli.captioners.checkpoint import load_checkpoint
        from spotdiff_cli.weights import resolve_weights

        return load_checkpoint(resolve_weights(weights, kind=TINY), device)[0]
    assert vocab is not None, "the tiny test model needs a vocabulary"
    config = dict(config or {"hidden": 32, "backbone": "efficientnet_lite0"})
    config.update(overrides)
    return TinyCaptioner(config, vocab).to(device)


def use_tiny_model() -> None:
    """The tiny model registers itself when this module is imported (the decorator above), in
    this process or a spawned one; the registry then finds it by name like any other model."""
    assert TINY in registry.available_models()


def make_tiny_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 synthetic pairs at 64 px (16 train, 2 val, 2 test), analysed, with efficientnet_lite0
    grids: made once per test session (~5 s) and shared by every test file that asks."""
    from spotdiff_cli.data.cache import prepare_dataset
    from spotdiff_cli.data.synth import synthesize

    root = tmp_path_factory.getbasetemp() / "tiny-bench"
    if not (root / "cache" / "features-efficientnet_lite0" / "val.npz").is_file():
        synthesize(root, pairs=20, seed=0, size=64, overwrite=True)
        prepare_dataset(root, ["train", "val"], backbone="efficientnet_lite0", device="cpu")
    return root


@pytest.fixture(scope="session")
def tiny_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bench(tmp_path_factory)


def tiny_config(bench: Path, **overrides: Any):
    from spotdiff_cli.train.recipes import load_recipe

    use_tiny_model()
    values = dict(
        model=TINY,
        data=str(bench),
        epochs=3,
        batch_size=8,
        min_count=1,
        lr=0.01,
        log_every=4,
        val_tokenizer="python",
        patience=0,
        device="cpu",
        model_config={"hidden": 32},
    )
    values.update(overrides)
    return load_recipe(None, **values)


def weights_of(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["state_dict"]


# --------------------------------------------------------------------------------------------------
# masks and batches


def test_project_masks_puts_a_cluster_in_its_grid_cell() -> None:
    from spotdiff_cli.captioners.masks import project_masks

    masks = np.zeros((2, 224, 224), bool)
    masks[0, 180:220, 0:40] = True  # bottom-left corner
    out = project_masks(masks, (7, 7))
    assert out.shape == (2, 7, 7) and out.dtype == np.float32
    assert out[0].max() == pytest.approx(1.0) and np.unravel_index(out[0].argmax(), (7, 7)) == (
        6,
        0,
    )
    assert out[0, 0, 6] < 0.01  # the opposite corner stays empty
    assert not out[1].any()  # an empty (padded) cluster stays all-zero
    assert project_masks(np.zeros((0, 64, 64), bool), (7, 7)).shape == (0, 7, 7)


def test_batches_follow_the_contract(tiny_bench: Path) -> None:
    from spotdiff_cli.train.batches import load_training_data, training_sentences

    vocab = Vocabulary.build(training_sentences(tiny_bench), 1)
    data = load_training_data(tiny_bench, "train", vocab)
    assert len(data.examples) == 3 * len(data.pairs)  # one example per annotator
    batch = data.batch(data.examples[:8])
    b, k = batch["cluster_valid"].shape
    c, h, w = data.feature_shape
    assert (
        batch["before"].shape == batch["after"].shape == (8, c, h, w)
        and batch["before"].dtype == torch.float32
    )
    assert (
        batch["cluster_masks"].shape == (8, k, h, w) and float(batch["cluster_masks"].max()) <= 1.0
    )
    assert batch["cluster_feats"].shape == (8, k, 4)
    # padded clusters are all-zero
    assert float(batch["cluster_masks"][~batch["cluster_valid"]].abs().sum()) == 0.0
    s = batch["sentence_valid"].shape[1]
    assert batch["tokens"].shape[:2] == (8, s) and batch["gold_alignment"].shape == (8, s)
    assert (
        batch["tokens"][batch["sentence_valid"]][:, 0] == 1
    ).all()  # every real sentence starts with <bos>
    assert (batch["gold_alignment"][~batch["sentence_valid"]] == -1).all()
    assert (batch["gold_alignment"] < k).all()
    assert (
        batch["multi_tokens"].shape[0] == 8
        and len(batch["pair_ids"]) == len(batch["references"]) == 8
    )
    # The synthetic benchmark knows which cluster each sentence is about: most get one.
    all_gold = torch.cat([data.batch([e]).get("gold_alignment").flatten() for e in data.examples])
    assert (all_gold >= 0).float().mean() > 0.5


def test_batch_from_analysis_makes_a_one_pair_batch(write_png) -> None:
    from conftest import draw_box, textured_background

    from spotdiff_cli.analysis import analyse_pair, make_pair
    from spotdiff_cli.config import AnalysisConfig
    from spotdiff_cli.train.batches import batch_from_analysis, get_backbone
    from spotdiff_cli.types import Frame

    before = textured_background(224, 224)
    after = draw_box(before, 150, 150, 50, 40, (200, 30, 30))
    analysis = analyse_pair(make_pair(Frame(before, "a"), Frame(after, "b")), AnalysisConfig())
    vocab = Vocabulary.build(["a red box appeared"], 1)
    batch = batch_from_analysis(analysis, get_backbone("efficientnet_lite0", "cpu"), vocab)
    assert batch["before"].shape == (1, 1280, 7, 7)
    assert batch["cluster_valid"].sum() == len(analysis.clusters) >= 1
    assert not batch["sentence_valid"].any() and batch["references"] == [[]]
    # The cluster's projected mask peaks in the bottom-right of the grid, where the box is.
    peak = np.unravel_index(int(batch["cluster_masks"][0, 0].argmax()), (7, 7))
    assert peak[0] >= 4 and peak[1] >= 4
    assert batch["cluster_ids"] == [
        [c.id for c in sorted(analysis.clusters, key=lambda c: -c.salience)]
    ]


# --------------------------------------------------------------------------------------------------
# the loop


def test_training_learns_and_writes_loadable_checkpoints(tiny_bench: Path, tmp_path: Path) -> None:
    from spotdiff_cli.captioners.checkpoint import load_checkpoint
    from spotdiff_cli.train.loop import train

    lines: list[str] = []
    events: list[tuple[str, int, int]] = []
    result = train(
        tiny_config(tiny_bench, epochs=2),
        tmp_path / "run",
        log=lines.append,
        progress=lambda *e: events.append(e),
    )
    assert result.epochs == 2 and result.steps == 2 * 6 and not result.interrupted
    assert {p.name for p in (tmp_path / "run").iterdir()} >= {
        "best.pt",
        "last.pt",
        "config.json",
        "vocab.json",
        "log.jsonl",
    }
    first, last = result.history[0], result.history[-1]
    assert last["perplexity"] < first["perplexity"]  # it learns
    assert result.best_score == max(h["CIDEr"] for h in result.history)
    assert any("validation: CIDEr" in line for line in lines) and any(
        "samples/s" in line for line in lines
    )
    assert events[-1][0] == "validation" or events[-1][0].startswith("epoch")
    model, meta = load_checkpoint(result.best_path, "cpu")
    assert meta["model"] == TINY and meta["extra"]["best_score"] == result.best_score
    assert "optimizer" not in meta["extra"]  # best.pt is for use, last.pt for resuming
    assert "optimizer" in torch.load(result.last_path, weights_only=True)["extra"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["train"]["seed"] == 0 and config["model_config"]["channels"] == 1280


def test_interrupt_then_resume_equals_an_uninterrupted_run(
    tiny_bench: Path, tmp_path: Path
) -> None:
    """Deterministic under a seed, Ctrl-C leaves a valid last.pt, and --resume continues exactly."""
    from spotdiff_cli.train.loop import train

    config = tiny_config(tiny_bench, epochs=2, eval_every=2)
    straight = train(config, tmp_path / "straight")

    def ctrl_c_at_step_8(stage: str, done: int, total: int) -> None:
        if stage == "epoch 2/2" and done == 2:  # global step 8: mid-epoch
            raise KeyboardInterrupt

    stopped = train(config, tmp_path / "cut", progress=ctrl_c_at_step_8)
    assert stopped.interrupted and stopped.steps == 8
    assert (
        torch.load(tmp_path / "cut" / "last.pt", weights_only=True)["extra"]["batch_in_epoch"] == 2
    )
    resumed = train(config, tmp_path / "cut", resume=True)
    assert resumed.steps == straight.steps == 12
    a, b = weights_of(straight.last_path), weights_of(resumed.last_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_previous_run_is_never_overwritten(tiny_bench: Path, tmp_path: Path, monkeypatch) -> None:
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.out_dir import prepare_out_dir

    config = tiny_config(tiny_bench, epochs=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "best.pt").write_bytes(b"earlier")
    with pytest.raises(OutputError, match="--resume"):
        train(config, tmp_path / "run")
    assert (tmp_path / "run" / "best.pt").read_bytes() == b"earlier"
    with pytest.raises(UsageError, match="last.pt"):
        train(config, tmp_path / "new", resume=True)
    monkeypatch.chdir(tmp_path)
    first = prepare_out_dir(None, False, config, tiny_bench)
    assert not first.exists()  # chosen, not made: the run's first file makes it
    first.mkdir(parents=True)
    (first / "last.pt").write_bytes(b"x")
    second = prepare_out_dir(None, False, config, tiny_bench)
    assert first.name == f"{TINY}-tiny-bench" and second.name == f"{TINY}-tiny-bench-2"
    assert prepare_out_dir(None, True, config, tiny_bench) == first


def test_early_stopping_on_validation_cider(tiny_bench: Path, tmp_path: Path) -> None:
    from spotdiff_cli.train.loop import train

    # A learning rate this small cannot change what greedy decoding says: CIDEr never improves.
    result = train(tiny_config(tiny_bench, epochs=10, lr=1e-12, patience=1), tmp_path / "run")
    assert result.stopped_early and result.epochs == 2 and len(result.history) == 2


def test_recipe_values_are_checked_and_coerced(tmp_path: Path) -> None:
    from spotdiff_cli.train.recipes import load_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: capt\nlr: 1e-3\nbatch_size: 8\n")
    config = load_recipe(recipe, epochs=2)
    assert config.lr == 0.001 and isinstance(config.lr, float) and config.epochs == 2
    recipe.write_text("lr: fast\n")
    with pytest.raises(UsageError, match="lr"):
        load_recipe(recipe)
    recipe.write_text("epoch: 3\n")
    with pytest.raises(UsageError, match="did you mean 'epochs'"):
        load_recipe(recipe)
    with pytest.raises(UsageError, match="not found"):
        load_recipe(tmp_path / "missing.yaml")


def test_nn_is_fitted_once_not_stepped(tiny_bench: Path, tmp_path: Path) -> None:
    pytest.importorskip("spotdiff_cli.captioners.spot_the_diff")
    from spotdiff_cli.captioners.checkpoint import load_checkpoint
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.recipes import load_recipe

    config = load_recipe(
        None, model="nn", data=str(tiny_bench), min_count=1, val_tokenizer="python", device="cpu"
    )
    result = train(config, tmp_path / "nn")
    assert result.steps == 0 and result.best_score is not None and result.best_score > 0
    model, meta = load_checkpoint(result.best_path)
    assert meta["model"] == "nn" and len(model.descriptions) == 16


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        n
        for n in registry.available_models()
        if registry.model_info(n).family == "spot-the-diff"
        and registry.model_class(n).trained_by_gradient
    ],
)  # fitted models: nn
def test_every_gradient_model_trains_through_the_loop(
    name: str, tiny_bench: Path, tmp_path: Path
) -> None:
    pytest.importorskip("spotdiff_cli.captioners.spot_the_diff")
    from spotdiff_cli.captioners.checkpoint import load_checkpoint
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.recipes import load_recipe

    config = load_recipe(
        None,
        model=name,
        data=str(tiny_bench),
        min_count=1,
        epochs=2,
        lr=3e-3,
        val_tokenizer="python",
        device="cpu",
        model_config={"tiny": True},
    )
    result = train(config, tmp_path / name)
    assert result.history[-1]["perplexity"] < result.history[0]["perplexity"] * 1.05
    model, _ = load_checkpoint(result.best_path)
    assert model.name == name


@pytest.mark.parametrize("name", ["clip4idc", "onediff"])
def test_a_model_with_its_own_clip_trains_on_images_through_the_loop(
    name: str, tiny_bench: Path, tmp_path: Path
) -> None:
    """``vision: PATH`` (a local CLIP) makes ``spotdiff train`` load each pair's images at the
    CLIP's input size instead of cached grids; the run trains, validates and saves a checkpoint
    that captions an image pair."""
    from test_clip4idc import tiny_clip

    from spotdiff_cli.captioners.checkpoint import load_checkpoint
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.recipes import load_recipe

    folder = tmp_path / "clip"
    tiny_clip(folder, ["a", "car", "the"])  # a 32-px, 3-layer CLIP
    extra = {"text": "scratch", "inter_layers": 1} if name == "clip4idc" else {}
    config = load_recipe(
        None,
        model=name,
        data=str(tiny_bench),
        min_count=1,
        epochs=2,
        lr=3e-3,
        val_tokenizer="python",
        device="cpu",
        model_config={"tiny": True, "vision": str(folder), **extra},
    )
    lines: list[str] = []
    result = train(config, tmp_path / "run", log=lines.append)
    assert any("32 px images" in line for line in lines), lines
    assert result.history[-1]["perplexity"] < result.history[0]["perplexity"] * 1.05
    model, _ = load_checkpoint(result.best_path)
    batch = model.analysis_batch(_analysed_pair())
    assert tuple(batch["before_images"].shape) == (1, 3, 32, 32)
    assert isinstance(model.generate(batch, 1)[0][0], str)
    with pytest.raises(UsageError, match="no backbone to fine-tune"):
        train(dataclasses.replace(config, finetune_backbone=True), tmp_path / "ft")


def _analysed_pair():
    """One analysed pair with a drawn change (``spotdiff caption``'s input to a model)."""
    from conftest import draw_box, textured_background

    from spotdiff_cli.analysis import analyse_pair, make_pair
    from spotdiff_cli.config import AnalysisConfig
    from spotdiff_cli.types import Frame

    before = textured_background(96, 96)
    after = draw_box(before, 20, 30, 25, 15, (200, 30, 30))
    return analyse_pair(make_pair(Frame(before, "a"), Frame(after, "b")), AnalysisConfig())
