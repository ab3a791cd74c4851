"""Options of the Spot-the-diff models beyond their defaults of the first release: the transformer
decoder behind the step API, the paper's seeded random choices (ddla-uniform's cluster, nn's
sentence) with the earlier rules as named options, pair features without the explicit
difference, and old checkpoints (configs without the new keys) keeping their behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_spot_the_diff_models import SENTENCES, H, T, W, build, in_vocab, make_batch, make_vocab

from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.spot_the_diff.common import PairEncoder
from spotdiff_cli.captioners.spot_the_diff.neighbours import most_typical
from spotdiff_cli.captioners.transformer import TransformerDecoder
from spotdiff_cli.errors import ModelError

# --------------------------------------------------------------------------------------------------
# the transformer decoder


def test_transformer_step_equals_teacher_forcing() -> None:
    """decode_step on a growing prefix gives the log-probabilities score() computes in parallel:
    the causal mask, positions and the cell bias are the same in both paths."""
    torch.manual_seed(0)
    decoder = TransformerDecoder(12, 8, 16, cells=6, layers=2, heads=4, dropout=0.0).eval()
    feats, mask = torch.randn(3, 6, 8), torch.rand(3, 6)
    mask[1] = 0.0  # a row whose cells are all masked still has the pooled token
    state = decoder.start(feats, feats.mean(1), mask)
    tokens = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0], [1, 9, 9, 9, 2]])
    token_logp, target_mask = decoder.score(tokens, state)
    assert torch.isfinite(token_logp).all()
    for t in range(1, tokens.shape[1]):
        step_lp, _ = decoder.decode_step(tokens[:, :t], state)
        got = step_lp.gather(1, tokens[:, t : t + 1]).squeeze(1) * target_mask[:, t - 1]
        assert torch.allclose(got, token_logp[:, t - 1], atol=1e-5)


def test_transformer_cell_mask_restricts_cross_attention() -> None:
    """Only the cells a mask keeps (and the pooled token) can change what the decoder says."""
    torch.manual_seed(0)
    decoder = TransformerDecoder(12, 8, 16, cells=4, layers=1, heads=2, dropout=0.0).eval()
    feats = torch.randn(1, 4, 8)
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    other = feats.clone()
    other[0, 2:] = torch.randn(2, 8)  # change only the masked-out cells
    tokens = torch.tensor([[1, 5, 6]])
    a = decoder(tokens, decoder.start(feats, feats[:, :2].mean(1), mask))
    b = decoder(tokens, decoder.start(other, feats[:, :2].mean(1), mask))
    assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("name", ["capt", "ddla"])
def test_transformer_decoder_trains_decodes_and_reloads(name: str, tmp_path: Path) -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(name, vocab, decoder="transformer", decoder_layers=1, decoder_heads=4)
    assert isinstance(model.decoder, TransformerDecoder)
    model.eval()
    first = float(model.loss(batch)["loss"].detach())
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(25):  # a fixed batch: the loss must fall
        optimiser.zero_grad()
        model.loss(batch)["loss"].backward()
        optimiser.step()
    model.eval()
    assert float(model.loss(batch)["loss"].detach()) < 0.5 * first
    greedy = model.generate(batch, max_sentences=2, beam=1, max_len=T)
    beam = model.generate(batch, max_sentences=2, beam=3, max_len=T)
    assert len(greedy) == len(beam) == 3 and in_vocab(greedy, vocab) and in_vocab(beam, vocab)
    assert all(p and all(s for s in p) for p in greedy)
    loaded, meta = load_checkpoint(save_checkpoint(tmp_path / f"{name}.pt", model))
    assert meta["config"]["decoder"] == "transformer"
    for b in (1, 3):
        assert loaded.generate(batch, 2, beam=b, max_len=T) == model.generate(
            batch, 2, beam=b, max_len=T
        )
    assert torch.equal(loaded.loss(batch)["loss"], model.loss(batch)["loss"])


def test_unknown_decoder_is_refused() -> None:
    with pytest.raises(ModelError, match="available: lstm, transformer"):
        build("capt", make_vocab(), decoder="gru")


# --------------------------------------------------------------------------------------------------
# the paper's choices (seeded random) and the earlier rules as named options


def _uniform_batch(vocab, ids: list[str]) -> dict:
    """len(ids) copies of pair 0 (three clusters, areas 3 > 2 > 1) under different ids."""
    one = make_batch(vocab)
    n = len(ids)
    batch = {
        k: (v[:1].expand(n, *v.shape[1:]).clone() if isinstance(v, torch.Tensor) else v)
        for k, v in one.items()
    }
    batch["cluster_feats"][:, :, 2] = torch.tensor([3.0, 2.0, 1.0])
    batch["pair_ids"] = ids
    return batch


def test_ddla_uniform_paper_choice_is_seeded_random() -> None:
    vocab = make_vocab()
    ids = [f"pair{i}" for i in range(40)]
    batch = _uniform_batch(vocab, ids)
    model = build("ddla-uniform", vocab)
    assert model.config["selection"] == "paper"
    single = [c[0] for c in model.select_clusters(batch, max_sentences=1)]
    assert set(single) == {0, 1, 2}  # not always the largest box: a random cluster (§4)
    assert single == [c[0] for c in model.select_clusters(batch, max_sentences=1)]  # reproducible
    # The choice belongs to the pair, not to its place in a batch.
    reversed_batch = _uniform_batch(vocab, ids[::-1])
    again = [c[0] for c in model.select_clusters(reversed_batch, max_sentences=1)]
    assert again[::-1] == single
    # Another seed, other choices. The multi-sentence setting (more than one sentence allowed):
    # §4's decreasing box area, even for a pair told to write one sentence.
    reseeded = build("ddla-uniform", vocab, selection_seed=1)
    assert [c[0] for c in reseeded.select_clusters(batch, max_sentences=1)] != single
    assert model.select_clusters(batch, max_sentences=3, num_sentences=[3] * 40)[0] == [0, 1, 2]
    assert {c[0] for c in model.select_clusters(batch, 3, num_sentences=[1] * 40)} == {0}
    assert model.single_sentence_differs and not build("ddla", vocab).single_sentence_differs
    # The earlier rule, by name: the largest box, always.
    largest = build("ddla-uniform", vocab, selection="largest")
    assert {c[0] for c in largest.select_clusters(batch, max_sentences=1)} == {0}
    assert not largest.single_sentence_differs
    with pytest.raises(ModelError, match="paper, largest"):
        build("ddla-uniform", vocab, selection="smallest")


def test_nn_paper_choice_is_a_seeded_random_sentence_of_the_annotation() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("nn", vocab)
    assert model.config["selection"] == "paper"
    model.fit([batch])
    picks = []
    for i in range(30):
        query = dict(batch, pair_ids=[f"q{i}-{j}" for j in range(3)])
        out = model.generate(query, max_sentences=1)
        assert out == model.generate(query, max_sentences=1)  # seeded: reproducible
        assert all(s[0] in refs for s, refs in zip(out, SENTENCES))
        picks.append(out[0][0])
    assert set(picks) == set(SENTENCES[0])  # both sentences of pair 0's annotation get picked
    typical = build("nn", vocab, selection="typical")
    typical.fit([batch])
    assert typical.generate(batch, 1)[0] == [most_typical(SENTENCES[0])]


def test_configs_from_before_the_options_keep_their_rules(tmp_path: Path) -> None:
    """A checkpoint saved before `selection`, `repetition_guard`, `decoder` and `pair_difference`
    existed loads with the rules it was made with."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    for name, legacy in (("nn", "typical"), ("ddla-uniform", "largest"), ("capt", None)):
        model = build(name, vocab)
        if name == "nn":
            model.fit([batch])
        path = save_checkpoint(tmp_path / f"{name}.pt", model)
        data = torch.load(path, weights_only=True)
        for key in (
            "selection",
            "selection_seed",
            "repetition_guard",
            "decoder",
            "decoder_layers",
            "decoder_heads",
            "pair_difference",
            "input_size",
        ):
            data["config"].pop(key, None)
        torch.save(data, path)
        old, _ = load_checkpoint(path)
        assert old.repetition_guard == 0
        if legacy:
            assert old.selection == legacy
        if name == "capt":
            assert old.encoder.difference and type(old.decoder).__name__ == "AttentionDecoder"


def test_shipped_checkpoints_load_with_the_rules_they_were_trained_with() -> None:
    """The manifest's ddla/capt defaults (trained with the F2 - F1 channel, the attention decoder
    and the repetition guard on) load with exactly those settings; checkpoints from before the
    options existed keep the earlier rules (the test above)."""
    from spotdiff_cli.weights import shipped_default

    for name in ("ddla", "capt"):
        if shipped_default(name) is None:
            pytest.skip(f"no shipped weights for {name} in this checkout")
        model, _ = load_checkpoint(None, "cpu", model=name)
        assert model.repetition_guard == 3 and model.encoder.difference
        assert type(model.decoder).__name__ == "AttentionDecoder"


# --------------------------------------------------------------------------------------------------
# pair features without the explicit difference


def test_pair_features_without_the_difference() -> None:
    encoder = PairEncoder(5, 7, 0.0, difference=False)
    assert encoder.proj.in_features == 10  # [F1, F2]: the paper's pair
    before = torch.randn(2, 5, H, W)
    feats, pooled = encoder(before, before + 1)
    assert feats.shape == (2, H * W, 7) and pooled.shape == (2, 7)
    vocab = make_vocab()
    batch = make_batch(vocab)
    capt = build("capt", vocab, pair_difference=False)
    assert capt.encoder.proj.in_features == 2 * batch["before"].shape[1]
    capt.loss(batch)["loss"].backward()
    nn_model = build("nn", vocab, pair_difference=False)
    nn_model.fit([batch])
    assert nn_model.features.shape == (3, 2 * batch["before"].shape[1])
    assert len(nn_model.generate(batch, 1)) == 3
