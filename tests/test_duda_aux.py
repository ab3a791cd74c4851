"""``duda-aux`` (DUDA + the composed-query retrieval auxiliary task, CVPR 2021) beyond the shared
model test (tests/test_spot_the_diff_models.py builds, steps, saves, loads and decodes it):

* the auxiliary loss reaches the captioner through the soft word embeddings E = P W_emb (eq. 4);
* TIRG and eq. 6-10 on hand-made numbers: the in-batch loss, the hard set, the soft selection;
* the curriculum: the candidate set a stage asks for, switched at ξ in a real run;
* a tiny run through the recipe: loss falls, it decodes, saves, reloads, scores and gives R@1
  at validation and in ``spotdiff eval``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_spot_the_diff_models import C, H, W, build, make_batch, make_vocab
from test_train_loop import make_tiny_bench
from typer.testing import CliRunner

from spotdiff_cli.captioners.duda.aux import TIRG, DUDAAuxCaptioner, soft_selection, word_lengths
from spotdiff_cli.captioners.retrieval import recall_at_1
from spotdiff_cli.captioners.vocab import PAD_ID
from spotdiff_cli.errors import ModelError


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bench(tmp_path_factory)


def _aux_model(**overrides) -> tuple[DUDAAuxCaptioner, dict]:
    vocab = make_vocab()
    model = build(
        "duda-aux", vocab, dropout=0.0, attention_dropout=0.0, aux_dropout=0.0, **overrides
    )
    return model, make_batch(vocab)


# --------------------------------------------------------------------------------------------------
# (a) the auxiliary loss reaches the captioner


def test_aux_loss_reaches_the_captioner_through_the_soft_embeddings() -> None:
    model, batch = _aux_model()
    model.train()
    out = model.loss(batch)  # step 0: Primary -> Auxiliary
    out["losses"]["aux"].backward()
    speaker = model.speaker
    for name, param in (
        ("speaker output layer", speaker.out.weight),
        ("speaker word embeddings", speaker.embed.weight),
        ("caption LSTM", speaker.cap_lstm.weight_hh),
        ("dual attention", model.attention.score.weight),
        ("auxiliary W_emb", model.retrieval.embed.weight),
    ):
        assert param.grad is not None and float(param.grad.abs().sum()) > 0, name
    # Gold words as one-hot "distributions" give exactly the gold words' embeddings (eq. 4 vs 7).
    model.eval()
    rows, tokens = model._targets(model._prepare(batch))
    image = model.retrieval.image(model.grids(batch)[0])[rows]
    one_hot = F.one_hot(tokens[:, 1:], model.vocab_size).float()
    with torch.no_grad():
        assert torch.allclose(
            model.compose(image, tokens, one_hot), model.compose(image, tokens), atol=1e-5
        )


def test_the_other_direction_trains_the_retrieval_head_through_the_caption_loss() -> None:
    """Auxiliary -> Primary (eq. 7-10): L_pri of (A, B̂) has gradients in θ_A through ω."""
    model, batch = _aux_model()
    model.train()
    model.loss(batch)  # step 0 (Primary -> Auxiliary)
    model.zero_grad()
    out = model.loss(batch)  # step 1: Auxiliary -> Primary
    out["losses"]["caption"].backward()
    assert float(model.retrieval.text.out[1].weight.grad.abs().sum()) > 0
    assert float(model.retrieval.compose.a.grad.abs().sum()) > 0
    model.zero_grad()
    single = build("duda-aux", make_vocab(), alternate=False).train()
    single.loss(batch)
    single.loss(batch)["losses"]["caption"].backward()  # alternate: false: never this direction
    assert single.retrieval.text.out[1].weight.grad is None


# --------------------------------------------------------------------------------------------------
# (b) TIRG and eq. 6-10


def test_tirg_is_the_gated_residual_composition() -> None:
    torch.manual_seed(0)
    tirg = TIRG(4)
    image, text = torch.randn(3, 4), torch.randn(3, 4)
    both = torch.cat([image, text], -1)
    expected = 1.0 * torch.sigmoid(tirg.gate(both)) * image + 10.0 * tirg.residual(both)
    assert torch.allclose(tirg(image, text), expected)
    with torch.no_grad():
        tirg.a.copy_(torch.tensor([1.0, 0.0]))  # no residual: the image, gated per channel
    gated = tirg(image, text)
    assert bool(((gated / image) > 0).all()) and bool(((gated / image) < 1).all())


def test_in_batch_loss_is_eq_6_and_lower_when_queries_match_their_targets() -> None:
    model, _ = _aux_model()
    model.eval()
    torch.manual_seed(1)
    after = F.normalize(torch.randn(4, 8), dim=-1) * 2
    before = F.normalize(torch.randn(4, 8), dim=-1) * 2
    rows = torch.arange(4)
    ids = ["a", "b", "c", "d"]
    matching = model.candidate_logits(after.clone(), after, before, rows, ids)
    shuffled = model.candidate_logits(after[[1, 2, 3, 0]], after, before, rows, ids)
    assert matching.shape == (4, 4)  # easy: the batch's after images
    # eq. 6 by hand: -1/β Σ_i log(e^<q_i, g(B_i)> / Σ_j e^<q_i, g(B_j)>)
    q = after.clone()
    by_hand = (
        -sum(
            math.log(
                math.exp(float(q[i] @ after[i]))
                / sum(math.exp(float(q[i] @ after[j])) for j in range(4))
            )
            for i in range(4)
        )
        / 4
    )
    assert math.isclose(float(F.cross_entropy(matching, rows)), by_hand, rel_tol=1e-5)
    assert F.cross_entropy(matching, rows) < F.cross_entropy(shuffled, rows)
    # Another row of the same pair is not a negative: its after image is the target too.
    same = model.candidate_logits(after.clone(), after, before, rows, ["a", "a", "c", "d"])
    assert same[0, 1] == float("-inf") and same[1, 0] == float("-inf")
    assert bool(torch.isfinite(same[2:]).all())


def test_hard_set_adds_the_before_image_and_keeps_n() -> None:
    """Eq. 13 from ξ: S = {I_j}_{j=1}^{n-2} ∪ {A, B}."""
    model, _ = _aux_model()
    model.set_training_stage("hard", {}, {"candidates": "hard"})
    torch.manual_seed(2)
    after, before = torch.randn(5, 8), torch.randn(5, 8)
    queries, rows, ids = torch.randn(3, 8), torch.tensor([0, 2, 4]), list("abcde")
    model.eval()  # n = β + 1, deterministic
    logits = model.candidate_logits(queries, after, before, rows, ids)
    assert logits.shape == (3, 6)
    assert torch.allclose(logits[:, -1], (queries * before[rows]).sum(-1))  # <k(A_i, E_i), g(A_i)>
    assert torch.allclose(logits[:, :5], queries @ after.T)
    model.train()  # one random other after image leaves: n stays β
    logits = model.candidate_logits(queries, after, before, rows, ids)
    dropped = ~torch.isfinite(logits)
    assert dropped.sum(1).tolist() == [1, 1, 1]
    assert not bool(dropped[torch.arange(3), rows].any()) and not bool(dropped[:, -1].any())
    # A query equal to its own before image's embedding now has a near-duplicate to beat.
    close = model.candidate_logits(before[rows], after, before, rows, ids)
    assert bool((close.argmax(1) == 5).all())


def test_soft_selection_is_eq_10_over_the_candidate_grids() -> None:
    after = torch.randn(3, 2, 4, 4)
    before = torch.randn(2, 2, 4, 4)  # the before grid of each of 2 queries (hard set)
    omega = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.0, 0.5]])
    selected = soft_selection(omega, after, before)
    assert torch.allclose(selected[0], after[1])  # a one-hot ω picks that candidate's grid
    assert torch.allclose(selected[1], 0.25 * after[0] + 0.25 * after[1] + 0.5 * before[1])
    easy = soft_selection(omega[:, :3] / omega[:, :3].sum(1, keepdim=True), after, None)
    assert torch.allclose(easy[1], 0.5 * after[0] + 0.5 * after[1])


def test_word_lengths_and_recall_at_1() -> None:
    tokens = torch.tensor([[1, 7, 8, 2, 0], [1, 2, 0, 0, 0], [1, 5, 6, 9, 2]])
    assert word_lengths(tokens).tolist() == [2, 1, 3]
    after = torch.eye(3)
    before = torch.eye(3) * 0.5
    queries = torch.tensor([[1.0, 0, 0], [0, 0, 1.0], [0, 0, 1.0], [0.2, 0, 0]])
    recall = recall_at_1(queries, torch.tensor([0, 1, 2, 0]), after, before)
    assert recall.easy == 0.75  # query 1 retrieves pair 2's after image
    # query 3 prefers B_0 (0.2) to A_0 (0.1) too, query 0 as well: only query 1 misses.
    assert recall.hard == 0.75 and (recall.queries, recall.candidates) == (4, 3)
    ties = recall_at_1(torch.tensor([[1.0, 0, 0]]), torch.tensor([0]), after, torch.eye(3))
    assert ties.easy == 1.0 and ties.hard == 0.0  # a tie with A is a miss


def _retrieval_toy(vocab) -> dict:
    """8 pairs whose after grid adds a blob of one of 4 colours (channel groups) in a corner; the
    caption names the colour, so a query (A, caption) can tell B apart from A and the others."""
    g = torch.Generator().manual_seed(0)
    colours = ["red", "blue", "green", "white"]
    corners = [(0, 0), (0, W - 1), (H - 1, 0), (H - 1, W - 1)]
    before = torch.randn(8, C, H, W, generator=g)
    after = before.clone()
    tokens = torch.full((8, 1, 8), PAD_ID, dtype=torch.long)
    for i in range(8):
        colour, (y, x) = i % 4, corners[(i // 4 + i) % 4]
        after[i, colour * 4 : (colour + 1) * 4, y, x] += 3.0
        ids = vocab.encode(f"the {colours[colour]} car is gone")
        tokens[i, 0, : len(ids)] = torch.tensor(ids)
    return {
        "before": before,
        "after": after,
        "tokens": tokens,
        "sentence_valid": torch.ones(8, 1, dtype=torch.bool),
        "pair_ids": [f"p{i}" for i in range(8)],
    }


def test_the_auxiliary_network_learns_to_retrieve_and_the_hard_set_is_harder() -> None:
    """Joint training on a toy batch (~2 s): L_aux falls and R@1 rises on the easy set; at the
    switch to the hard set L_aux jumps (A is a near-duplicate of B, §4.2), then falls again."""
    model, _ = _aux_model()
    batch = _retrieval_toy(model.vocab)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)

    def steps(n: int) -> float:
        for _ in range(n):
            model.train()
            optimiser.zero_grad()
            model.loss(batch)["loss"].backward()
            optimiser.step()
        model.eval()
        with torch.no_grad():
            return float(model.loss(batch)["losses"]["aux"])

    start = steps(0)
    easy = steps(50)
    assert easy < start / 4 and model.validation_scores([batch])["R@1"] == 1.0
    model.set_training_stage("hard", {}, {"candidates": "hard"})
    switched = steps(0)
    assert switched > easy
    steps(60)
    assert model.validation_scores([batch])["R@1-hard"] >= 0.875


# --------------------------------------------------------------------------------------------------
# (c) the curriculum


def test_stage_options_choose_the_candidate_set() -> None:
    model, batch = _aux_model()
    assert model.candidates == "easy"
    model.set_training_stage("late", {}, {"candidates": "hard"})
    assert model.candidates == "hard"
    model.set_training_stage("plain", {}, {})  # a stage that does not say: the config's
    assert model.candidates == "easy"
    with pytest.raises(ModelError, match="options: candidates"):
        model.set_training_stage("x", {}, {"candidate": "hard"})
    with pytest.raises(ModelError, match="easy, hard"):
        model.set_training_stage("x", {}, {"candidates": "harder"})
    with pytest.raises(ModelError, match="candidates"):
        build("duda-aux", make_vocab(), candidates="medium")
    # The recipes: easy before ξ, hard from ξ on; the ablation easy throughout.
    from spotdiff_cli.train.recipes import load_recipe

    for name, sets in (
        ("duda-aux-tiny-cpu", ["easy", "hard"]),
        ("duda-aux-synth", ["easy", "hard"]),
        ("duda-aux-clevr", ["easy", "hard"]),
        ("duda-aux-clevr-easy", ["easy", "easy"]),  # the same stages, never the hard set
    ):
        plan = load_recipe(name).stage_plan()
        assert [s.model_options.get("candidates") for s in plan] == sets, name
        assert all(s.objectives["caption"] + s.objectives["aux"] == 1.0 for s in plan)
    clevr = load_recipe("duda-aux-clevr")
    assert clevr.stage_plan()[0].epochs == 30 and clevr.total_epochs == 60  # ξ = 30 of 60 (§5.3)
    assert load_recipe("duda-aux-clevr-easy").total_epochs == 60
    base = load_recipe("duda-clevr")  # the baseline at the same sizes
    for key in ("hidden_size", "embed_size", "fusion_size", "attention_size"):
        assert base.model_config[key] == clevr.model_config[key]
    assert (base.batch_size, base.backbone) == (clevr.batch_size, clevr.backbone)


# --------------------------------------------------------------------------------------------------
# (d) a tiny run


@pytest.mark.slow  # the tiny recipe end to end: ~20 s on 2 busy cores (the switch and R@1 are checked on a toy batch in the default run)
def test_tiny_run_switches_at_xi_learns_reloads_and_reports_r_at_1(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny recipe on the tiny benchmark (~20 s): ξ = 2 of 4 epochs."""
    from spotdiff_cli.captioners.checkpoint import load_checkpoint
    from spotdiff_cli.cli import app
    from spotdiff_cli.train.loop import train
    from spotdiff_cli.train.recipes import load_recipe

    seen: list[tuple[str, str]] = []
    real = DUDAAuxCaptioner.set_training_stage

    def record(self, name, objectives, options):  # type: ignore[no-untyped-def]
        real(self, name, objectives, options)
        seen.append((name, self.candidates))

    monkeypatch.setattr(DUDAAuxCaptioner, "set_training_stage", record)
    config = load_recipe(
        "duda-aux-tiny-cpu",
        data=str(bench),
        device="cpu",
        min_count=1,
        log_every=2,
        lr=1e-2,
    )
    result = train(config, tmp_path / "run")
    assert seen == [("easy", "easy"), ("hard", "hard")]
    records = [
        json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()
    ]
    val = [r["validation"] for r in records if "validation" in r]
    assert [v["stage"] for v in val] == ["easy", "easy", "hard", "hard"]  # switched at epoch ξ = 2
    assert all(0.0 <= v["R@1-hard"] <= v["R@1"] <= 1.0 for v in val)
    assert val[-1]["perplexity"] < val[0]["perplexity"]
    losses = [r["loss"] for r in records if "loss" in r]
    assert min(losses[-3:]) < losses[0]
    model, meta = load_checkpoint(result.best_path)
    assert meta["model"] == "duda-aux" and isinstance(model, DUDAAuxCaptioner)
    assert model.config["gamma"] == 0.3
    # spotdiff eval prints and writes the retrieval R@1.
    out = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            "duda-aux",
            "--weights",
            str(result.best_path),
            "--dataset",
            str(bench),
            "--split",
            "val",
            "--protocol",
            "single",
            "--tokenizer",
            "python",
            "--metrics",
            "BLEU-4,CIDEr",  # no METEOR: its Java start-up would be most of the test
            "--no-breakdown",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "eval"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "Retrieval R@1" in out.output and "among 2 after images" in out.output
    saved = json.loads((tmp_path / "eval" / "results.json").read_text())
    retrieval = saved["retrieval"]
    assert retrieval["candidates"] == 2 and 0 <= retrieval["reference R@1 hard"] <= 1
    assert retrieval["reference R@1 hard"] <= retrieval["reference R@1"]
    assert retrieval["reference queries"] >= 2 and retrieval["generated queries"] == 2
    assert "Retrieval R@1" in (tmp_path / "eval" / "results.md").read_text()
