"""``duda`` beyond the shared model test (tests/test_spot_the_diff_models.py builds, steps, saves,
loads and decodes it): the dynamic speaker's choice is a distribution over (l_bef, l_diff, l_aft)
at every word, the dual attention maps are per-cell gates in (0, 1) that pool the features as
the paper says, the loss is the sum of its named parts, and the tiny recipe trains it end to end
through the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from test_spot_the_diff_models import C, H, W, build, make_batch, make_vocab
from typer.testing import CliRunner

from spotdiff_cli.captioners.duda.model import with_coordinates
from spotdiff_cli.cli import app
from spotdiff_cli.errors import ModelError


def test_speaker_weights_are_a_distribution_over_the_three_features() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("duda", vocab)
    weights, mask = model.speaker_weights(batch)
    n_sentences = int(batch["sentence_valid"].sum())
    assert weights.shape == (n_sentences, batch["tokens"].shape[2] - 1, 3)
    assert mask.shape == weights.shape[:2] and bool(mask.any())
    assert bool((weights >= 0).all()) and bool((weights <= 1).all())
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2]), atol=1e-6)
    # The weighting changes from word to word (the attention LSTM reads the caption state).
    first = weights[0, mask[0]]
    assert float((first - first[0]).abs().max()) > 0


def assert_steps_are_plain_lstms(model, batch, direction=None, words=5) -> None:
    """The speaker's first ``words`` steps against nn.LSTMCell on [v; h_cap] and on
    [E w; Σ α_i l_i] (with the direction d appended when given, its weights W_d beside the
    caption LSTM's), computed the plain way."""
    sp = model.speaker
    attended = model.attend(batch)
    state = model.start_speaker(attended)
    features = torch.stack([attended.l_bef, attended.l_aft - attended.l_bef, attended.l_aft], 1)
    fused = torch.relu(sp.fuse(features.flatten(1)))
    extra = [] if direction is None else [direction]
    cap_lstm = torch.nn.LSTMCell(
        sp.cap_lstm.input_size + sum(d.shape[1] for d in extra), sp.hidden_size
    )
    weight_ih = [sp.cap_lstm.weight_ih] + ([] if direction is None else [sp.direction_in.weight])
    cap_lstm.weight_ih.data = torch.cat(weight_ih, 1)
    for name in ("weight_hh", "bias_ih", "bias_hh"):
        getattr(cap_lstm, name).data = getattr(sp.cap_lstm, name).data
    zeros = fused.new_zeros(fused.shape[0], sp.hidden_size)
    h_att, c_att, h_cap, c_cap = zeros, zeros, zeros, zeros
    for word_ids in batch["tokens"][:, 0, :words].T:
        log_probs, state, weights = sp.step(word_ids, state)
        h_att, c_att = sp.att_lstm(torch.cat([fused, h_cap], -1), (h_att, c_att))
        alpha = torch.softmax(sp.choose(h_att), -1)
        context = torch.bmm(alpha[:, None], features).squeeze(1)
        word = torch.relu(sp.embed(word_ids))
        h_cap, c_cap = cap_lstm(torch.cat([word, context, *extra], -1), (h_cap, c_cap))
        expected = torch.log_softmax(sp.out(h_cap), -1)
        assert torch.allclose(weights, alpha, atol=1e-6)
        assert torch.allclose(log_probs, expected, atol=1e-5)


def test_speaker_step_is_the_two_lstms_on_their_concatenated_inputs() -> None:
    """The speaker precomputes the input weights times what is fixed over a sentence; a step must
    equal nn.LSTMCell on [v; h_cap] and on [E w; Σ α_i l_i], computed the plain way."""
    vocab = make_vocab()
    model = build("duda", vocab).eval()
    with torch.no_grad():
        assert_steps_are_plain_lstms(model, make_batch(vocab))


def test_dual_attention_maps_are_gates_that_pool_the_features() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("duda", vocab).eval()
    with torch.no_grad():
        attended = model.attend(batch)
    b = batch["before"].shape[0]
    assert attended.att_bef.shape == attended.att_aft.shape == (b, H, W)
    for att in (attended.att_bef, attended.att_aft):
        assert bool((att > 0).all()) and bool((att < 1).all())
    # l = Σ a ⊙ X / (h w), X with the two coordinate channels appended (module docstring).
    x_bef = with_coordinates(batch["before"])
    assert x_bef.shape == (b, C + 2, H, W)
    expected = (x_bef * attended.att_bef[:, None]).sum((2, 3)) / (H * W)
    assert torch.allclose(attended.l_bef, expected, atol=1e-5)
    assert torch.allclose(x_bef[0, C, 0], torch.linspace(-1, 1, W))  # x runs along the width
    # Without coordinates the features are the backbone's channels alone.
    plain = build("duda", vocab, coordinates=False).eval()
    with torch.no_grad():
        assert plain.attend(batch).l_bef.shape == (b, C)


def test_loss_is_caption_plus_the_regularisers() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("duda", vocab, attention_l1=0.01, entropy_weight=0.1).eval()
    with torch.no_grad():
        out = model.loss(batch)
        parts = out["losses"]
        expected = parts["caption"] + 0.01 * parts["attention_l1"] + 0.1 * parts["negative_entropy"]
        assert torch.allclose(out["loss"], expected)
        assert math.isclose(
            float(parts["caption"]), float(out["nll"]) / out["n_tokens"], rel_tol=1e-6
        )
        # The L1 term: Σ over cells, mean over the two maps and the pairs.
        attended = model.attend(batch)
        l1 = (attended.att_bef.sum((1, 2)) + attended.att_aft.sum((1, 2))).mean() / 2
        assert torch.allclose(parts["attention_l1"], l1)
        # Entropy of a 3-way choice is at most log 3 per target token.
        weights, mask = model.speaker_weights(batch)
        bound = math.log(3) * float(mask.sum()) / mask.shape[0]
        assert 0 < -float(parts["negative_entropy"]) <= bound + 1e-5
    model = build("duda", vocab)  # gradients reach both parts of the model
    model.loss(batch)["loss"].backward()
    assert model.attention.score.weight.grad is not None
    assert model.speaker.choose.weight.grad is not None


def test_direction_labels_are_arrivals_departures_or_unknown() -> None:
    from spotdiff_cli.captioners.features import change_direction

    assert change_direction(["appear"]) == change_direction(("add", "appear")) == 1
    assert change_direction(["disappear", "drop"]) == 0
    for mixed in ([], ["move"], ["appear", "disappear"], ["distractor"], ["colour", "appear"]):
        assert change_direction(mixed) == -1, mixed


def test_the_direction_objective_reads_the_speakers_fused_feature() -> None:
    """direction_weight > 0 adds a linear head on v and a cross-entropy over the pairs whose
    direction is known; off (the default), the model has exactly the parameters it had."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    plain = build("duda", vocab)
    assert plain.direction_head is None and "direction" not in plain.loss(batch)["losses"]
    assert not any(k.startswith("direction") for k in plain.state_dict())
    model = build("duda", vocab, direction_weight=0.5, attention_l1=0.0, entropy_weight=0.0)
    b = batch["before"].shape[0]
    labels = torch.tensor([1, 0] + [-1] * (b - 2))
    out = model.eval().loss({**batch, "direction": labels})
    parts = out["losses"]
    assert torch.allclose(out["loss"], parts["caption"] + 0.5 * parts["direction"])
    with torch.no_grad():  # the same value by hand, on the first two pairs only
        attended = model.attend(model._prepare(batch))
        features = torch.stack([attended.l_bef, attended.l_aft - attended.l_bef, attended.l_aft], 1)
        logits = model.direction_head(torch.relu(model.speaker.fuse(features.flatten(1))))
        expected = torch.nn.functional.cross_entropy(logits[:2], labels[:2])
    assert torch.allclose(parts["direction"], expected, atol=1e-6)
    unknown = model.loss({**batch, "direction": torch.full((b,), -1)})["losses"]["direction"]
    assert float(unknown) == 0.0
    model.train().loss({**batch, "direction": labels})["loss"].backward()
    assert model.direction_head.weight.grad is not None
    assert model.speaker.fuse.weight.grad is not None  # the head shapes what the speaker reads
    # duda-aux adds it to eq. 14's sum, in both of its directions (alternate: odd steps run
    # Auxiliary -> Primary), always on the real pairs
    aux = build("duda-aux", vocab, direction_weight=0.5, attention_l1=0.0).train()
    for _ in range(2):
        out = aux.loss({**batch, "direction": labels})
        parts = out["losses"]
        expected = 0.7 * parts["caption"] + 0.3 * parts["aux"] + 0.5 * parts["direction"]
        assert float(parts["direction"].detach()) > 0 and torch.allclose(out["loss"], expected)


def test_the_speaker_can_read_the_direction_head_at_every_word() -> None:
    """direction_to_speaker hands the head's (P(departure), P(arrival)) to the caption LSTM: a
    step equals nn.LSTMCell on [E w; Σ α_i l_i] plus W_d d, the answer changes the words'
    distribution, the caption loss trains W_d and the head, and without direction_weight the
    setting is refused (nothing would train the head)."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(
        "duda", vocab, direction_weight=1.0, direction_to_speaker=True, attention_l1=0.0
    ).eval()
    sp = model.speaker
    with torch.no_grad():
        attended = model.attend(batch)
        probs = torch.softmax(model.direction_logits(attended), -1)
        assert_steps_are_plain_lstms(model, batch, direction=probs, words=4)
        # The other answer, the same pair: the first word's distribution moves.
        flipped = sp.start(attended.l_bef, attended.l_aft, probs.flip(-1))
        first = batch["tokens"][:, 0, 0]
        assert not torch.allclose(
            sp.step(first, flipped)[0], sp.step(first, model.start_speaker(attended))[0]
        )
    model.train().loss({**batch, "direction": torch.full((batch["before"].shape[0],), -1)})[
        "loss"
    ].backward()  # no pair's direction known: only the caption loss reaches the head
    assert sp.direction_in.weight.grad is not None and model.direction_head.weight.grad is not None
    with pytest.raises(ModelError, match="direction_weight > 0"):
        build("duda", vocab, direction_to_speaker=True)
    assert "direction_in.weight" not in {
        k.split("speaker.")[-1] for k in build("duda", vocab).state_dict()
    }


def test_settings_are_checked() -> None:
    vocab = make_vocab()
    with pytest.raises(ModelError, match="did you mean 'hidden_size'"):
        build("duda", vocab, hiden_size=8)
    with pytest.raises(ModelError, match="coordinates"):
        build("duda", vocab, coordinates="yes")
    model = build("duda", vocab, hidden_size=24)
    assert model.config["hidden_size"] == 24 and model.speaker.hidden_size == 24


def test_the_tiny_recipe_is_the_default_for_duda() -> None:
    from spotdiff_cli.train.recipes import default_recipe_path, load_recipe

    assert default_recipe_path("duda").name == "duda-synth.yaml"
    for name in ("duda-synth", "duda-tiny-cpu"):
        config = load_recipe(name)
        assert config.model == "duda" and config.model_config["coordinates"] is True


@pytest.mark.slow
def test_tiny_cpu_recipe_trains_duda_and_caption_uses_it(
    tmp_path: Path, write_png, monkeypatch
) -> None:
    """`spotdiff train --model duda --recipe duda-tiny-cpu` end to end (about 40 s on 2 cores),
    then `spotdiff caption --weights` with its checkpoint."""
    from conftest import draw_box, textured_background

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # never the user's cache
    runner = CliRunner()
    out = tmp_path / "duda"
    result = runner.invoke(
        app,
        [
            "train",
            "--model",
            "duda",
            "--recipe",
            "duda-tiny-cpu",
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    log = (out / "log.jsonl").read_text().splitlines()
    assert len([line for line in log if '"validation"' in line]) == 4
    before = textured_background(224, 224)
    a = write_png("a.png", before)
    b = write_png("b.png", draw_box(before, 40, 60, 50, 30, (200, 30, 30)))
    caption = runner.invoke(
        app, ["caption", str(a), str(b), "--model", "duda", "--weights", str(out / "best.pt")]
    )
    assert caption.exit_code == 0, caption.output
    assert "1." in caption.output


def test_direction_teacher_hands_the_speaker_the_known_direction() -> None:
    """direction_teacher: in training, where the data says the direction the speaker reads it
    one-hot (teacher forcing), elsewhere the head's answer; in evaluation always the answer."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(
        "duda",
        vocab,
        direction_weight=1.0,
        direction_to_speaker=True,
        direction_teacher=True,
        attention_l1=0.0,
    ).eval()
    n = batch["before"].shape[0]
    known = torch.tensor([1, 0, -1, 1][:n] + [-1] * max(0, n - 4))
    rows = torch.arange(n)
    assert model.taught_direction({**batch, "direction": known}, rows) is None  # evaluation
    model.train()
    assert torch.equal(model.taught_direction({**batch, "direction": known}, rows), known)
    model.eval()
    with torch.no_grad():
        attended = model.attend(batch)
        probs = torch.softmax(model.direction_logits(attended), -1)
        truth = torch.where(
            (known >= 0)[:, None], torch.nn.functional.one_hot(known.clamp_min(0), 2).float(), probs
        )
        taught = model.start_speaker(attended, None, known)
        expected = model.speaker.start(attended.l_bef, attended.l_aft, truth)
        first = batch["tokens"][:, 0, 0]
        assert torch.allclose(
            model.speaker.step(first, taught)[0], model.speaker.step(first, expected)[0]
        )
