"""The Spot-the-diff family (nn, nn-multi, capt, capt-masked, capt-multi, ddla-uniform, ddla), and
the robust-change family built the same way (duda), on a fake batch that follows
docs/training-interfaces.md: every model builds, learns, saves and loads, and decodes vocabulary
words; DDLA's marginal likelihood, prior and cluster choice are checked against hand computations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import draw_box, textured_background

from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.registry import (
    available_models,
    create_model,
    model_class,
    model_info,
)
from spotdiff_cli.captioners.spot_the_diff import default_config
from spotdiff_cli.captioners.spot_the_diff.ddla import ClusterView
from spotdiff_cli.captioners.vocab import PAD_ID, SEP_ID, Vocabulary

# The config-built learned families of the LSTM kind; each has tiny variants.
FAMILIES = ("spot-the-diff", "duda")
NAMES = [name for name in available_models() if model_info(name).family in FAMILIES]
MODEL_CLASSES = {name: model_class(name) for name in NAMES}
C, H, W, T = 16, 4, 4, 8

SENTENCES = [
    ["the red car is gone", "a person appeared near tree"],
    ["the blue truck moved left", "a white van parked on road"],
    ["there is no black bike"],
]
EXTRA_WORDS = "building street now new spot green bus right the"  # ~30 words in all


def make_vocab() -> Vocabulary:
    return Vocabulary.build([s for pair in SENTENCES for s in pair] + [EXTRA_WORDS], min_count=1)


def block(y0: int, x0: int, y1: int, x1: int) -> torch.Tensor:
    mask = torch.zeros(H, W)
    mask[y0:y1, x0:x1] = 1.0
    return mask


def make_batch(vocab: Vocabulary, seed: int = 0) -> dict:
    """B=3 pairs with 3, 2 and 1 clusters (K=3) and 2, 2 and 1 sentences (S=2), T=8."""
    g = torch.Generator().manual_seed(seed)
    b, k, s = 3, 3, 2
    masks = torch.zeros(b, k, H, W)
    valid = torch.zeros(b, k, dtype=torch.bool)
    layout = [
        [block(0, 0, 2, 2), block(2, 2, 4, 4), block(0, 2, 1, 4)],
        [block(0, 0, 4, 1), block(1, 2, 3, 4)],
        [block(1, 1, 3, 3)],
    ]
    for i, blocks in enumerate(layout):
        for j, m in enumerate(blocks):
            masks[i, j] = m
            valid[i, j] = True
    tokens = torch.full((b, s, T), PAD_ID, dtype=torch.long)
    sentence_valid = torch.zeros(b, s, dtype=torch.bool)
    multi = torch.full((b, 2 * T), PAD_ID, dtype=torch.long)
    for i, pair in enumerate(SENTENCES):
        for j, text in enumerate(pair):
            ids = vocab.encode(text)
            tokens[i, j, : len(ids)] = torch.tensor(ids)
            sentence_valid[i, j] = True
        ids = vocab.encode_many(pair)
        multi[i, : len(ids)] = torch.tensor(ids)
    feats = torch.rand(b, k, 4, generator=g) * valid[..., None]
    return {
        "before": torch.randn(b, C, H, W, generator=g),
        "after": torch.randn(b, C, H, W, generator=g),
        "cluster_masks": masks,
        "cluster_valid": valid,
        "cluster_feats": feats,
        "tokens": tokens,
        "sentence_valid": sentence_valid,
        "multi_tokens": multi,
        "gold_alignment": torch.tensor([[0, 1], [0, -1], [0, -1]]),
        "pair_ids": ["p0", "p1", "p2"],
        "references": [list(p) for p in SENTENCES],
        "cluster_ids": [[10, 11, 12], [20, 21], [30]],
    }


def build(name: str, vocab: Vocabulary, **overrides):
    torch.manual_seed(0)
    return create_model(
        name, device="cpu", vocab=vocab, channels=C, grid=(H, W), tiny=True, **overrides
    )


def in_vocab(sentences: list[list[str]], vocab: Vocabulary) -> bool:
    return all(w in vocab for pair in sentences for s in pair for w in s.split())


@pytest.mark.parametrize("name", NAMES)
def test_every_model_builds_learns_saves_and_decodes(name: str, tmp_path: Path) -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(name, vocab)
    assert isinstance(model, MODEL_CLASSES[name]) and model.name == name
    assert model_info(name).family in FAMILIES and model_info(name).trainable

    if name.startswith("nn"):
        with pytest.raises(Exception, match="fit"):
            model.loss(batch)
        model.fit([batch])
        out = model.generate(batch, max_sentences=3)
        # Queried with its own training pairs, the nearest neighbour is the pair itself.
        for pair, refs in zip(out, SENTENCES):
            assert pair and all(s in refs for s in pair)
            assert len(pair) == (len(refs) if name == "nn-multi" else 1)
    else:
        model.eval()
        before = model.loss(batch)
        # Targets: every token after <bos> (the words and <eos>), of each sentence or each description.
        targets = (
            [vocab.encode_many(p) for p in SENTENCES]
            if name == "capt-multi"
            else [vocab.encode(s) for p in SENTENCES for s in p]
        )
        assert before["n_tokens"] == sum(len(ids) - 1 for ids in targets)
        assert torch.isfinite(before["loss"]) and before["nll"] > 0
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        optimiser.zero_grad()
        model.loss(batch)["loss"].backward()
        optimiser.step()
        model.eval()
        after = model.loss(batch)
        assert after["loss"] < before["loss"], (name, float(before["loss"]), float(after["loss"]))
        out = model.generate(batch, max_sentences=2, max_len=T)
        assert len(out) == 3 and all(1 <= len(p) <= 2 for p in out)

    assert in_vocab(out, vocab)

    path = save_checkpoint(tmp_path / f"{name}.pt", model, {"epoch": 1})
    loaded, meta = load_checkpoint(path)
    assert type(loaded) is type(model) and meta["model"] == name and loaded.config == model.config
    for beam in (1, 3):
        assert loaded.generate(batch, 2, beam=beam, max_len=T) == model.generate(
            batch, 2, beam=beam, max_len=T
        )
    if not name.startswith("nn"):
        model.eval()
        assert torch.allclose(loaded.loss(batch)["loss"], model.loss(batch)["loss"])


def test_default_config_keys_and_overrides() -> None:
    cfg = default_config("ddla", 1280, (7, 7))
    assert cfg["grid"] == [7, 7] and cfg["channels"] == 1280 and cfg["hidden_size"] == 512
    assert {
        "max_count",
        "count_weight",
        "nms_iou",
        "attention_size",
        "embed_size",
        "dropout",
    } <= set(cfg)
    assert "hidden_size" not in default_config("nn", 16, (4, 4))
    model = build("capt", make_vocab(), hidden_size=24)
    assert model.config["hidden_size"] == 24
    with pytest.raises(Exception, match="hiden_size|did you mean"):
        build("capt", make_vocab(), hiden_size=24)


def test_ddla_loss_is_the_marginal_over_clusters() -> None:
    """nll == -Σ_sentences log Σ_k P(z=k|X) P(S|z=k,X), with P(S|z=k,X) computed one sentence and
    one cluster at a time through the decoding step function, and the prior by hand."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("ddla", vocab, count_weight=0.0)
    with torch.no_grad():
        model.prior.weight.copy_(torch.tensor([[0.5, -1.0, 2.0, 0.3]]))
    model.eval()
    with torch.no_grad():
        nll = model.loss(batch)["nll"]
        feats, pooled = model.encoder(batch["before"], batch["after"])
        clusters = ClusterView(batch)
        expected = 0.0
        for b in range(3):
            ks = [k for k in range(3) if batch["cluster_valid"][b, k]]
            w = model.prior.weight[0]
            logits = torch.stack([w @ batch["cluster_feats"][b, k] for k in ks])
            log_prior = logits - torch.logsumexp(logits, 0)
            for s in range(2):
                if not batch["sentence_valid"][b, s]:
                    continue
                ids = [i for i in batch["tokens"][b, s].tolist() if i != PAD_ID]
                per_cluster = []
                for k in ks:
                    state = model.start_rows(
                        feats, pooled, clusters, torch.tensor([b]), torch.tensor([k])
                    )
                    ll = 0.0
                    for t in range(len(ids) - 1):
                        log_probs, state = model.decoder.step(torch.tensor([ids[t]]), state)
                        ll += float(log_probs[0, ids[t + 1]])
                    per_cluster.append(ll)
                expected += -float(torch.logsumexp(log_prior + torch.tensor(per_cluster), 0))
    assert math.isclose(float(nll), expected, rel_tol=1e-4)


def test_ddla_uniform_prior_and_padded_clusters() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    uniform = build("ddla-uniform", vocab)
    prior = uniform.log_prior(ClusterView(batch)).exp()
    assert torch.allclose(prior[0], torch.full((3,), 1 / 3))
    assert torch.allclose(prior[1], torch.tensor([0.5, 0.5, 0.0]))
    assert torch.allclose(prior[2], torch.tensor([1.0, 0.0, 0.0]))
    learned = build("ddla", vocab)
    with torch.no_grad():
        learned.prior.weight.normal_()
    batch["cluster_feats"][~batch["cluster_valid"]] = (
        50.0  # padding that would dominate if it counted
    )
    prior = learned.log_prior(ClusterView(batch)).exp()
    assert (prior[~batch["cluster_valid"]] == 0).all()
    assert torch.allclose(prior.sum(1), torch.ones(3))
    # The alignment read-out never points at a padded cluster, and is -1 for padded sentences.
    aligned = learned.align(batch)
    assert aligned.shape == (3, 2) and aligned.dtype == torch.int64
    assert aligned[2, 1] == -1 and aligned[2, 0] == 0  # pair 2: one sentence, one cluster
    assert all(
        batch["cluster_valid"][b, k] for b in range(3) for k in aligned[b].tolist() if k >= 0
    )


def test_multi_sentence_decoding_skips_overlapping_clusters() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    # Pair 0: clusters 0 and 1 cover almost the same cells, cluster 2 is elsewhere.
    batch["cluster_masks"][0] = torch.stack(
        [block(0, 0, 3, 3), block(0, 0, 3, 2), block(3, 3, 4, 4)]
    )
    batch["cluster_feats"][0] = torch.tensor([[0, 0, 3.0, 0], [0, 0, 2.0, 0], [0, 0, 1.0, 0]])
    for name in ("ddla", "ddla-uniform"):
        model = build(name, vocab)
        if model.prior is not None:
            with torch.no_grad():
                model.prior.weight.copy_(
                    torch.tensor([[0.0, 0.0, 1.0, 0.0]])
                )  # prior order 0 > 1 > 2
        chosen = model.select_clusters(batch, max_sentences=3, num_sentences=[2, 2, 1])
        assert chosen[0] == [0, 2], name
        assert chosen[2] == [0]
        # Without the suppression rule (threshold 1), the top two by prior are taken.
        model.config["nms_iou"] = 1.0
        assert model.select_clusters(batch, max_sentences=3, num_sentences=[2, 2, 1])[0] == [0, 1]


def test_ddla_describes_chosen_clusters_and_handles_pairs_without_clusters() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build("ddla", vocab)
    items = model.generate_items(batch, max_sentences=1)
    assert all(len(p) == 1 and len(p[0].clusters) == 1 for p in items)
    assert 0 < items[0][0].confidence <= 1
    # Predicted count (no num_sentences): between 1 and max_sentences, one sentence per cluster at most.
    for pair in model.generate_items(batch, max_sentences=2):
        assert 1 <= len(pair) <= 2 and len({g.clusters for g in pair}) == len(pair)
    # A "no change" pair: no clusters at all. The loss stays finite, the pseudo-cluster is never reported.
    batch["cluster_valid"][2] = False
    batch["cluster_masks"][2] = 0
    out = model.loss(batch)
    assert torch.isfinite(out["loss"])
    out["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert model.generate_items(batch, max_sentences=1)[2][0].clusters == ()
    assert model.align(batch)[2, 0] == -1


def test_capt_multi_splits_the_description_at_sep() -> None:
    vocab = make_vocab()
    model = build("capt-multi", vocab)
    assert vocab.decode_sentences([1, 10, 11, SEP_ID, 12, 2]) == [
        vocab.words[10] + " " + vocab.words[11],
        vocab.words[12],
    ]
    out = model.generate(make_batch(vocab), max_sentences=1)
    assert all(len(p) <= 1 for p in out)


@pytest.mark.parametrize("name", ["ddla", "capt"])
def test_describe_an_analysed_pair_with_the_embedded_backbone(name: str) -> None:
    """describe(): analysis -> backbone grid (efficientnet_lite0, offline) -> batch -> sentences
    whose cluster ids are the analysis' own."""
    from spotdiff_cli.analysis import analyse_pair
    from spotdiff_cli.captioners.base import DescribeOptions
    from spotdiff_cli.types import Frame, Pair

    scene = textured_background()
    after = draw_box(
        draw_box(scene, 40, 60, 50, 40, (200, 30, 30)), 220, 150, 40, 60, (30, 30, 220)
    )
    analysis = analyse_pair(Pair(Frame(scene, "before.png"), Frame(after, "after.png")))
    assert len(analysis.clusters) >= 2
    model = create_model(name, vocab=make_vocab(), channels=1280, grid=(7, 7), tiny=True)
    sentences = model.describe(analysis, DescribeOptions(max_sentences=2))
    assert 1 <= len(sentences) <= 2 and all(s.kind == "generated" for s in sentences)
    ids = {c.id for c in analysis.clusters}
    for s in sentences:
        assert all(w in model.vocab for w in s.text.split())
        assert set(s.cluster_ids) <= ids and (len(s.cluster_ids) == 1) == (name == "ddla")


COLOURS = ["red", "blue", "green", "white"]


def toy_alignment_batch(vocab: Vocabulary, n: int, g: torch.Generator) -> dict:
    """Pairs with 3 clusters in distinct 2x2 quadrants; inside cluster k the after features carry
    the pattern of its colour. The two clusters with the largest box area are described ("the
    <colour> car is gone"), in random order: the gold alignment is known, the prior should learn
    area and the decoder should learn to read the colour under the cluster mask."""
    patterns = torch.randn(len(COLOURS), C, generator=torch.Generator().manual_seed(99)) * 2
    quadrants = [(0, 0), (0, 2), (2, 0), (2, 2)]
    before = torch.randn(n, C, H, W, generator=g)
    after = before + 0.3 * torch.randn(n, C, H, W, generator=g)
    masks, feats = torch.zeros(n, 3, H, W), torch.zeros(n, 3, 4)
    tokens, gold = torch.full((n, 2, T), PAD_ID), torch.zeros(n, 2, dtype=torch.long)
    for i in range(n):
        quads, colours, areas = (
            torch.randperm(4, generator=g)[:3],
            torch.randint(0, 4, (3,), generator=g),
            torch.rand(3, generator=g),
        )
        for k in range(3):
            y, x = quadrants[int(quads[k])]
            masks[i, k, y : y + 2, x : x + 2] = 1
            after[i, :, y : y + 2, x : x + 2] += patterns[colours[k]][:, None, None]
            feats[i, k] = torch.tensor([areas[k], areas[k], 2 * areas[k], areas[k]])
        described = torch.argsort(areas, descending=True)[:2][torch.randperm(2, generator=g)]
        for s, k in enumerate(described.tolist()):
            ids = vocab.encode(f"the {COLOURS[colours[k]]} car is gone")
            tokens[i, s, : len(ids)] = torch.tensor(ids)
            gold[i, s] = k
    return {
        "before": before,
        "after": after,
        "cluster_masks": masks,
        "cluster_valid": torch.ones(n, 3, dtype=torch.bool),
        "cluster_feats": feats,
        "tokens": tokens,
        "sentence_valid": torch.ones(n, 2, dtype=torch.bool),
        "multi_tokens": tokens[:, 0],
        "gold_alignment": gold,
    }


@pytest.mark.slow
def test_ddla_learns_alignments_and_a_salience_prior() -> None:
    """Marginal-likelihood training alone (no gold alignments) recovers which cluster each
    sentence talks about far above the 1/3 chance (§5 reports 54.6 % vs 27.4 % on real data), and
    the learned prior picks the described clusters for multi-sentence decoding."""
    vocab = Vocabulary.build([f"the {c} car is gone" for c in COLOURS], min_count=1)
    model = build("ddla", vocab)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(80):
        model.train()
        optimiser.zero_grad()
        model.loss(toy_alignment_batch(vocab, 16, g))["loss"].backward()
        optimiser.step()
    test = toy_alignment_batch(vocab, 200, torch.Generator().manual_seed(2))
    accuracy = float((model.align(test) == test["gold_alignment"]).float().mean())
    assert accuracy > 0.75, (
        accuracy
    )  # ~0.88: the misses are pairs where two clusters share a colour
    assert float(model.prior.weight.detach()[0, 2]) > 0  # larger boxes are more salient here
    chosen = model.select_clusters(test, max_sentences=2, num_sentences=[2] * 200)
    described = [set(test["gold_alignment"][i].tolist()) for i in range(200)]
    assert sum(set(c) == d for c, d in zip(chosen, described)) / 200 > 0.9


def test_log_likelihood_of_a_reference_for_perplexity() -> None:
    """evaluate/protocols.py's perplexity hook: (nll, n_tokens) of one sentence for an analysed pair."""
    from spotdiff_cli.analysis import analyse_pair
    from spotdiff_cli.types import Frame, Pair

    scene = textured_background()
    analysis = analyse_pair(
        Pair(Frame(scene, "b.png"), Frame(draw_box(scene, 40, 60, 50, 40, (200, 30, 30)), "a.png"))
    )
    for name in ("ddla", "capt-multi"):
        model = create_model(name, vocab=make_vocab(), channels=1280, grid=(7, 7), tiny=True)
        nll, n_tokens = model.log_likelihood(analysis, "The red car is gone.")
        assert n_tokens == 6 and 0 < nll < 6 * math.log(len(model.vocab)) * 2
    nn_model = create_model("nn", vocab=make_vocab(), channels=1280, grid=(7, 7), tiny=True)
    assert model.scores_sentences and not nn_model.scores_sentences


@pytest.mark.parametrize("name", ["capt", "ddla"])
@pytest.mark.parametrize("decoder", ["lstm", "transformer"])
def test_the_direction_head_learns_and_every_word_reads_its_answer(
    name: str, decoder: str, tmp_path: Path
) -> None:
    """direction_weight adds a head on the pooled pair features and a 'direction' loss over the
    pairs whose direction is known; direction_to_speaker hands its answer to the decoder as an
    input of every word, so flipping it moves each word's distribution; off, nothing is built
    and the state is the decoder's own. Beam search and a saved checkpoint carry it."""
    from spotdiff_cli.errors import ModelError

    vocab = make_vocab()
    batch = {**make_batch(vocab), "direction": torch.tensor([1, 0, -1])}
    plain = build(name, vocab, decoder=decoder)
    assert plain.direction is None and "direction" not in plain.eval().loss(batch)["losses"]
    with pytest.raises(ModelError, match="direction_weight > 0"):
        build(name, vocab, decoder=decoder, direction_to_speaker=True)
    model = build(name, vocab, decoder=decoder, direction_weight=0.5, direction_to_speaker=True)
    model.eval()
    out = model.loss(batch)
    parts = out["losses"]
    assert float(parts["direction"].detach()) > 0
    others = sum(v for k, v in parts.items() if k not in ("direction", "count"))
    count = float(model.config.get("count_weight", 0)) * parts.get("count", 0)
    assert torch.allclose(out["loss"], others + count + 0.5 * parts["direction"])
    head = model.direction
    optimiser = torch.optim.Adam(head.head.parameters(), lr=0.05)
    feats, pooled = model.encoder(batch["before"], batch["after"])
    first = float(head.loss(pooled.detach(), batch["direction"]).detach())
    for _ in range(30):
        optimiser.zero_grad()
        head.loss(pooled.detach(), batch["direction"]).backward()
        optimiser.step()
    assert float(head.loss(pooled.detach(), batch["direction"]).detach()) < first
    with torch.no_grad():
        probs = torch.softmax(head.head(pooled), -1)
        words, flipped = head.speaker(probs), head.speaker(probs.flip(-1))
        prefix = batch["tokens"][:, 0, :3]
        said = model.decoder.start(feats, pooled, None, words)
        other = model.decoder.start(feats, pooled, None, flipped)
        for t in range(3):
            a, said = model.decoder.decode_step(prefix[:, : t + 1], said)
            b, other = model.decoder.decode_step(prefix[:, : t + 1], other)
            assert not torch.allclose(a, b), t
    path = save_checkpoint(tmp_path / "d.pt", model, {"epoch": 1})
    loaded, _ = load_checkpoint(path)
    for beam in (1, 3):
        assert loaded.generate(batch, 1, beam=beam, max_len=T) == model.generate(
            batch, 1, beam=beam, max_len=T
        )
