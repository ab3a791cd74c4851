"""The shared training machinery the later families build on (issue 12): staged recipes with
objectives and frozen parameters, ``init_from`` (partial load with a report), ``val_metric``, the
contrastive batch sampler, multi-level and other-size feature caches in training batches.

On the tiny synthetic benchmark and the tiny contract model of test_train_loop.py (each run a few
seconds on 2 CPU cores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from test_train_loop import TinyCaptioner, make_tiny_bench, tiny_config, weights_of

from spotdiff_cli.captioners.learned import LearnedCaptioner
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.errors import UsageError


@pytest.fixture(scope="session")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bench(tmp_path_factory)


def _named_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny model also reports named losses: ``main`` (its loss) and ``double`` (twice it)."""
    real = TinyCaptioner.loss

    def loss(self: TinyCaptioner, batch: dict[str, Any]) -> dict[str, Any]:
        out = real(self, batch)
        return {**out, "losses": {"main": out["loss"], "double": 2 * out["loss"]}}

    monkeypatch.setattr(TinyCaptioner, "loss", loss)


# --------------------------------------------------------------------------------------------------
# init_from and freeze


def test_partial_load_reports_and_loads_exactly_the_matching_tensors() -> None:
    from spotdiff_cli.train.init import partial_load

    model = torch.nn.ModuleDict(
        {
            "encoder": torch.nn.Linear(4, 3),
            "head": torch.nn.Linear(3, 2),
            "extra": torch.nn.Linear(2, 2),
        }
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    source = {
        "encoder.weight": torch.full((3, 4), 7.0),  # matches
        "encoder.bias": torch.full((3,), 7.0),  # matches
        "head.weight": torch.zeros(5, 3),  # same name, another shape
        "old.weight": torch.zeros(1),  # nothing of that name
    }
    report = partial_load(model, source, "src.pt")
    assert report.matched == ["encoder.bias", "encoder.weight"]
    assert report.mismatched == ["head.weight: (5, 3) -> (2, 3)"]
    assert report.unexpected == ["old.weight"]
    assert report.missing == ["extra.bias", "extra.weight", "head.bias", "head.weight"]
    state = model.state_dict()
    assert torch.equal(state["encoder.weight"], source["encoder.weight"])
    assert all(torch.equal(state[k], before[k]) for k in report.missing)
    assert "2 tensor(s) loaded" in report.summary() and "(5, 3)" in report.summary()
    # init_keys restricts what is taken, init_rename maps source prefixes onto the model's.
    fresh = torch.nn.ModuleDict({"pair_encoder": torch.nn.Linear(4, 3)})
    renamed = partial_load(
        fresh, source, keys=["pair_encoder.weight"], rename={"encoder.": "pair_encoder."}
    )
    assert renamed.matched == ["pair_encoder.weight"] and renamed.missing == []
    assert torch.equal(fresh.pair_encoder.weight, source["encoder.weight"])


def test_init_from_and_freeze_in_a_run(bench: Path, tmp_path: Path) -> None:
    """A run started from another's checkpoint loads its weights (config.json says what matched);
    frozen parameters are still exactly those weights after training, the others moved."""
    from spotdiff_cli.train.loop import train

    first = train(tiny_config(bench, epochs=1), tmp_path / "first")
    source = weights_of(first.best_path)
    config = tiny_config(
        bench, epochs=1, init_from=str(first.best_path), freeze=["embed.*", "init.*"]
    )
    lines: list[str] = []
    second = train(config, tmp_path / "second", log=lines.append)
    report = json.loads((tmp_path / "second" / "config.json").read_text())["init_from"]
    assert sorted(report["matched"]) == sorted(source) and not report["missing"]
    assert any("tensor(s) loaded" in line for line in lines)
    after = weights_of(second.last_path)
    for key in source:
        same = torch.equal(after[key], source[key])
        assert same == key.startswith(("embed.", "init.")), key
    with pytest.raises(UsageError, match="did you mean 'embed"):
        train(tiny_config(bench, epochs=1, freeze=["embedding.*"]), tmp_path / "typo")
    fixed = tiny_config(bench, epochs=1, freeze=["embed.*"])  # the same --out, typo fixed
    assert train(fixed, tmp_path / "typo").best_path.is_file()


# --------------------------------------------------------------------------------------------------
# val_metric


def test_val_metric_picks_the_best_checkpoint(bench: Path, tmp_path: Path) -> None:
    from spotdiff_cli.train.loop import train

    result = train(tiny_config(bench, epochs=3, val_metric="perplexity"), tmp_path / "ppl")
    perplexities = [h["perplexity"] for h in result.history]
    assert result.best_score == min(perplexities)  # lower is better for perplexity
    best = torch.load(result.best_path, weights_only=True)["extra"]
    assert best["epoch"] == result.history[perplexities.index(min(perplexities))]["epoch"]
    bleu = train(tiny_config(bench, epochs=2, val_metric="BLEU-2"), tmp_path / "bleu")
    assert "BLEU-2" in bleu.history[0] and bleu.best_score == max(h["BLEU-2"] for h in bleu.history)
    with pytest.raises(UsageError, match="did you mean 'CIDEr'"):
        train(tiny_config(bench, epochs=1, val_metric="cider"), tmp_path / "typo")
    assert not (tmp_path / "typo").exists()  # refused before its first file: no empty folder


def test_a_finished_run_or_a_users_file_in_out_is_never_overwritten(
    bench: Path, tmp_path: Path
) -> None:
    from spotdiff_cli.errors import OutputError
    from spotdiff_cli.train.loop import train

    first = train(tiny_config(bench, epochs=1), tmp_path / "run")
    before = first.best_path.read_bytes()
    with pytest.raises(OutputError, match="already holds files.*--resume"):
        train(tiny_config(bench, epochs=1), tmp_path / "run")
    assert first.best_path.read_bytes() == before
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "config.json").write_text("{}")  # a config.json that is not a run's
    with pytest.raises(OutputError, match="already holds files"):
        train(tiny_config(bench, epochs=1), mine)
    assert (mine / "config.json").read_text() == "{}"


class SaysNoChange(LearnedCaptioner):
    """Validation's view of a collapsed captioner: "there is no change" for every pair."""

    name = "says-no-change"

    def __init__(self) -> None:
        super().__init__({}, Vocabulary.build(["there is no change"], min_count=1))

    def generate(self, batch: dict[str, Any], **_: Any) -> list[list[str]]:
        return [["there is no change"] for _ in batch["pair_ids"]]


def _bench_with_distractors(root: Path, rate: float) -> Path:
    from spotdiff_cli.data.cache import prepare_dataset
    from spotdiff_cli.data.synth import synthesize

    synthesize(root, pairs=20, seed=0, size=64, distractor_rate=rate)
    prepare_dataset(root, ["train", "val"], backbone="efficientnet_lite0", device="cpu")
    return root


def test_changed_val_metric_sees_through_a_model_that_always_says_no_change(
    tmp_path: Path,
) -> None:
    """On a split with distractors, "no change" everywhere earns CIDEr; ``changed/CIDEr`` (the
    pairs that hold a change) gives it next to nothing, so best.pt is not the collapsed model."""
    from spotdiff_cli.captioners.vocab import Vocabulary
    from spotdiff_cli.train.batches import load_training_data, training_sentences
    from spotdiff_cli.train.validation import validate

    root = _bench_with_distractors(tmp_path / "half", 0.5)
    vocab = Vocabulary.build(training_sentences(root), min_count=1)
    data = load_training_data(root, "train", vocab)
    assert 0 < len(data.changed_ids) < len(data.pairs)
    config = tiny_config(root, val_metric="changed/CIDEr")
    record = validate(SaysNoChange(), data, config, "cpu", with_nll=False)
    assert record["CIDEr"] > 0.5
    assert record["changed/CIDEr"] < 0.1 * record["CIDEr"]  # only "there is" is ever right


class SaysTheSameChange(SaysNoChange):
    """The other collapse: one change sentence for every pair, distractors included."""

    def generate(self, batch: dict[str, Any], **_: Any) -> list[list[str]]:
        return [["the red cube has moved"] for _ in batch["pair_ids"]]


class Oracle(SaysNoChange):
    """Says what the first annotator said: right on both kinds of pair."""

    def generate(self, batch: dict[str, Any], **_: Any) -> list[list[str]]:
        return [[refs[0]] for refs in batch["references"]]


def test_balanced_val_metric_is_low_for_either_collapse(tmp_path: Path) -> None:
    """``balanced/CIDEr``, the harmonic mean of CIDEr on the pairs with and without a change,
    is near zero for "no change" everywhere and for one change sentence everywhere (which
    ``changed/CIDEr`` alone may prefer), and high for captions right on both."""
    from spotdiff_cli.captioners.vocab import Vocabulary
    from spotdiff_cli.train.batches import load_training_data, training_sentences
    from spotdiff_cli.train.validation import validate

    root = _bench_with_distractors(tmp_path / "half", 0.5)
    vocab = Vocabulary.build(training_sentences(root), min_count=1)
    data = load_training_data(root, "train", vocab)
    config = tiny_config(root, val_metric="balanced/CIDEr")
    scores = {
        m.__name__: validate(m(), data, config, "cpu", with_nll=False)
        for m in (SaysNoChange, SaysTheSameChange, Oracle)
    }
    right = scores["Oracle"]["balanced/CIDEr"]
    assert right > 1.0
    assert scores["Oracle"]["changed/CIDEr"] > 1.0 and scores["Oracle"]["unchanged/CIDEr"] > 1.0
    assert scores["SaysNoChange"]["unchanged/CIDEr"] > scores["SaysNoChange"]["changed/CIDEr"]
    for collapsed in ("SaysNoChange", "SaysTheSameChange"):
        assert scores[collapsed]["balanced/CIDEr"] < 0.2 * right, collapsed


def test_changed_val_metric_without_distractors_is_a_usage_error(tmp_path: Path) -> None:
    from spotdiff_cli.train.loop import train

    root = _bench_with_distractors(tmp_path / "none", 0.0)
    for metric in ("changed/CIDEr", "balanced/CIDEr"):
        with pytest.raises(UsageError, match="none without one: use 'CIDEr'"):
            train(tiny_config(root, epochs=1, val_metric=metric), tmp_path / "run")
    # Nothing written, not even the folder: the user fixes the recipe and reruns with the same
    # --out.
    assert not (tmp_path / "run").exists()
    assert train(tiny_config(root, epochs=1), tmp_path / "run").best_path.is_file()


# --------------------------------------------------------------------------------------------------
# stages and objectives


def test_stages_run_in_turn_with_their_settings(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.train.loop import train

    calls: list[tuple[str, dict, dict]] = []
    snapshots: dict[int, dict[str, torch.Tensor]] = {}

    def set_training_stage(self, name, objectives, options):  # type: ignore[no-untyped-def]
        calls.append((name, objectives, options))

    def begin_epoch(self, epoch):  # type: ignore[no-untyped-def]
        snapshots[epoch] = {k: v.detach().clone() for k, v in self.state_dict().items()}

    monkeypatch.setattr(TinyCaptioner, "set_training_stage", set_training_stage, raising=False)
    monkeypatch.setattr(TinyCaptioner, "begin_epoch", begin_epoch, raising=False)
    stages = [
        {"name": "warm", "epochs": 1, "freeze": ["rnn.*"], "model_options": {"candidates": "easy"}},
        {"name": "joint", "epochs": 2, "lr": 1e-3, "model_options": {"candidates": "all"}},
    ]
    lines: list[str] = []
    result = train(
        tiny_config(bench, stages=stages, log_every=6), tmp_path / "run", log=lines.append
    )
    assert result.epochs == 3 and [h["stage"] for h in result.history] == ["warm", "joint", "joint"]
    assert calls == [("warm", {}, {"candidates": "easy"}), ("joint", {}, {"candidates": "all"})]
    # Stage 1 froze the GRU: unchanged over epoch 0; stage 2 trains it again.
    assert all(
        torch.equal(snapshots[0][k], snapshots[1][k]) for k in snapshots[0] if k.startswith("rnn.")
    )
    assert not torch.equal(snapshots[0]["out.weight"], snapshots[1]["out.weight"])
    assert not torch.equal(snapshots[1]["rnn.weight_hh"], snapshots[2]["rnn.weight_hh"])
    # Each stage's learning rate (the log lines print it).
    assert any("lr 1.00e-02" in line for line in lines) and any(
        "lr 1.00e-03" in line for line in lines
    )
    assert any("stage 2/2 'joint'" in line for line in lines)


def test_a_stage_that_stops_improving_hands_over_to_the_next(bench: Path, tmp_path: Path) -> None:
    from spotdiff_cli.train.loop import train

    stages = [
        {"name": "stuck", "epochs": 5, "lr": 1e-12, "patience": 1},
        {"name": "learn", "epochs": 1},
    ]
    result = train(tiny_config(bench, stages=stages), tmp_path / "run")
    # "stuck" cannot change what greedy decoding says: it ends after 2 validations, not 5.
    assert [h["stage"] for h in result.history] == ["stuck", "stuck", "learn"]
    assert not result.stopped_early and result.epochs == 6


def test_resume_inside_a_later_stage_equals_an_uninterrupted_run(
    bench: Path, tmp_path: Path
) -> None:
    from spotdiff_cli.train.loop import train

    stages = [
        {"epochs": 1, "freeze": ["init.*"]},
        {"epochs": 1, "lr": 3e-3, "lr_schedule": "cosine"},
    ]
    config = tiny_config(bench, stages=stages, eval_every=2)
    straight = train(config, tmp_path / "straight")

    def ctrl_c(stage: str, done: int, total: int) -> None:
        if stage == "epoch 2/2" and done == 3:
            raise KeyboardInterrupt

    assert train(config, tmp_path / "cut", progress=ctrl_c).interrupted
    resumed = train(config, tmp_path / "cut", resume=True)
    a, b = weights_of(straight.last_path), weights_of(resumed.last_path)
    assert resumed.steps == straight.steps and all(torch.equal(a[k], b[k]) for k in a)


def test_objectives_weight_the_losses_a_model_reports(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spotdiff_cli.train.loop import train, weighted_objectives

    out = {"loss": torch.tensor(9.0), "losses": {"a": torch.tensor(2.0), "b": torch.tensor(3.0)}}
    assert float(weighted_objectives(out, {"a": 0.25, "b": 2.0}, "m")) == 6.5
    with pytest.raises(UsageError, match="reports: a, b"):
        weighted_objectives(out, {"c": 1.0}, "m")
    with pytest.raises(UsageError, match="no named losses"):
        train(tiny_config(bench, epochs=1, objectives={"main": 1.0}), tmp_path / "plain")
    _named_losses(monkeypatch)
    default = train(tiny_config(bench, epochs=1), tmp_path / "default")
    same = train(tiny_config(bench, epochs=1, objectives={"main": 1.0}), tmp_path / "main")
    off = train(
        tiny_config(bench, epochs=1, objectives={"main": 0.0, "double": 0.0}), tmp_path / "off"
    )
    start = weights_of(train(tiny_config(bench, epochs=1, lr=1e-30), tmp_path / "start").last_path)
    a, b, c = weights_of(default.last_path), weights_of(same.last_path), weights_of(off.last_path)
    assert all(torch.equal(a[k], b[k]) for k in a)  # {main: 1} is the model's own loss
    assert all(torch.allclose(c[k], start[k]) for k in c)  # zero weights: nothing moves


# --------------------------------------------------------------------------------------------------
# the contrastive sampler


def test_contrastive_batches_keep_pairs_and_identical_captions_apart() -> None:
    from spotdiff_cli.train.sampler import contrastive_batches

    # 12 examples: pairs 0-3 with 3 annotators each; captions repeat across pairs ("no change").
    pair_of = [i // 3 for i in range(12)]
    caption_of = [
        "no change" if p in (1, 2) else f"pair {p} annotator {i % 3}" for i, p in enumerate(pair_of)
    ]
    order = [0, 1, 3, 4, 6, 7, 2, 5, 8, 9, 10, 11]
    batches = contrastive_batches(order, pair_of, caption_of, batch_size=3)
    assert sorted(i for b in batches for i in b) == list(range(12))  # each example once
    for batch in batches:
        assert len({pair_of[i] for i in batch}) == len(batch)
        assert len({caption_of[i] for i in batch}) == len(batch)
    assert batches == contrastive_batches(order, pair_of, caption_of, batch_size=3)  # deterministic
    assert batches[0] == [0, 3, 9]  # in order, clashes wait for the next batch


def test_contrastive_sampler_in_training(bench: Path, tmp_path: Path) -> None:
    from spotdiff_cli.captioners.vocab import Vocabulary
    from spotdiff_cli.train.batches import load_training_data, training_sentences
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.sampler import contrastive_batches, epoch_order

    vocab = Vocabulary.build(training_sentences(bench), 1)
    data = load_training_data(bench, "train", vocab)
    pairs, captions = data.example_keys()
    batches = contrastive_batches(epoch_order(len(pairs), 0, 0), pairs, captions, 8)
    assert all(len({pairs[i] for i in b}) == len(b) for b in batches)
    batch = data.batch([data.examples[i] for i in batches[0]])
    assert batch["caption_groups"].tolist() == list(range(len(batches[0])))  # all captions differ
    twice = data.batch([data.examples[0], data.examples[0]])
    assert twice["caption_groups"].tolist() == [0, 0]
    result = train(tiny_config(bench, epochs=1, sampler="contrastive"), tmp_path / "run")
    assert result.steps == len(batches) >= len(pairs) // 8


# --------------------------------------------------------------------------------------------------
# feature caches in training: multi-level maps, another input size


def test_training_batches_carry_multi_level_features(bench: Path) -> None:
    from spotdiff_cli.captioners.vocab import Vocabulary
    from spotdiff_cli.data.cache import prepare_dataset
    from spotdiff_cli.train.batches import load_training_data, training_sentences

    prepare_dataset(bench, ["val"], backbone="efficientnet_lite0", device="cpu", levels=(8, 16, 32))
    vocab = Vocabulary.build(training_sentences(bench), 1)
    data = load_training_data(bench, "val", vocab, levels=(8, 16, 32))
    batch = data.batch(data.examples[:2])
    assert batch["before"].shape == (2, 1280, 7, 7)
    assert batch["before_s8"].shape == batch["after_s8"].shape == (2, 40, 28, 28)
    assert batch["before_s16"].shape == (2, 112, 14, 14) and batch["after_s32"].shape == (
        2,
        320,
        7,
        7,
    )
    assert "before_s8" not in load_training_data(bench, "val", vocab).batch(data.examples[:1])


def test_a_model_trained_at_another_input_size_is_fed_that_size(write_png) -> None:
    """input_size in a model's config reaches the backbone at inference: a capt built for the
    5 x 5 grid of 160 px describes a pair (at 224 px its batch would not fit: 7 x 7)."""
    from conftest import draw_box, textured_background

    from spotdiff_cli.analysis import analyse_pair, make_pair
    from spotdiff_cli.captioners.base import DescribeOptions
    from spotdiff_cli.captioners.registry import create_model
    from spotdiff_cli.captioners.vocab import Vocabulary
    from spotdiff_cli.types import Frame

    before = textured_background(224, 224)
    after = draw_box(before, 120, 120, 50, 40, (200, 30, 30))
    analysis = analyse_pair(make_pair(Frame(before, "a"), Frame(after, "b")))
    vocab = Vocabulary.build(["a red car appeared"], 1)
    model = create_model("capt", vocab=vocab, channels=1280, grid=(5, 5), tiny=True, input_size=160)
    assert model.analysis_batch(analysis)["before"].shape == (1, 1280, 5, 5)
    assert len(model.describe(analysis, DescribeOptions(max_sentences=1))) == 1


def test_a_run_at_another_input_size_prepares_and_uses_that_cache(
    bench: Path, tmp_path: Path
) -> None:
    from spotdiff_cli.train.loop import train

    lines: list[str] = []
    train(tiny_config(bench, epochs=1, input_size=160), tmp_path / "run", log=lines.append)
    assert (bench / "cache" / "features-efficientnet_lite0-160px" / "train.npz").is_file()
    assert any("features (1280, 5, 5)" in line for line in lines)
    assert (
        json.loads((tmp_path / "run" / "config.json").read_text())["model_config"]["input_size"]
        == 160
    )


def test_every_shipped_recipe_loads() -> None:
    """Each training/*.yaml resolves (its keys and stages are known, its values of the right type)."""
    from spotdiff_cli.train.recipes import RECIPES_DIR, load_recipe

    recipes = sorted(RECIPES_DIR.glob("*.yaml"))
    assert recipes
    for path in recipes:
        assert load_recipe(path).total_epochs >= 1, path.name


def _staged_worker(rank: int, world: int, port: int, bench: str, out: str) -> None:
    """A torchrun process training the staged recipe of the test below."""
    from test_distributed import enter_torchrun_process, leave_like_the_console_script

    enter_torchrun_process(rank, world, port)
    from spotdiff_cli.train.loop import train

    train(tiny_config(Path(bench), stages=_STAGES), out)
    leave_like_the_console_script()


_STAGES = [{"epochs": 1, "freeze": ["rnn.*", "embed.*"]}, {"epochs": 1, "lr": 3e-3}]


@pytest.mark.slow  # two spawned processes: ~15 s on 2 busy cores
def test_two_processes_follow_the_stages_as_one(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under DDP, a stage that freezes parameters re-wraps the model: two gloo processes train
    the same staged run as one process."""
    from test_distributed import spawn_like_torchrun

    from spotdiff_cli.train.loop import train

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    single = train(tiny_config(bench, stages=_STAGES), tmp_path / "one")
    spawn_like_torchrun(_staged_worker, (str(bench), str(tmp_path / "two")))
    one, two = weights_of(single.last_path), weights_of(tmp_path / "two" / "last.pt")
    for key in one:
        assert torch.allclose(one[key], two[key], atol=1e-5, rtol=1e-4), key
