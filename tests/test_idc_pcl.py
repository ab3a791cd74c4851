"""``idc-pcl``: FDA's rewrites are wrong in exactly one detail and never a reference; each
pre-training task (MLM, MVCL, FDA) learns a batch it can fit and only the stage's tasks run;
fine-tuning under the uni-directional mask learns every caption and decodes it after a
save/reload; the mask keeps the pair from reading the words and each word from reading later ones;
a local BERT gives the stream BERT's states; bad stage settings fail in one line; the tiny recipe
pre-trains, fine-tunes, captions and scores through the installed console script."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from console import caption_and_score, run_spotdiff
from tiny_batches import one_sentence_batch

from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.idc_pcl.rewrites import NO_CHANGE, rewrite_bank
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import PAD_ID, Vocabulary, tokenize
from spotdiff_cli.errors import DataError, ModelError, UsageError

SENTENCES = [
    "the big red metal cylinder turned yellow",
    "the small gray rubber sphere has disappeared",
    "a large blue metal cube has appeared",
    "the scene remains the same",
]
C, H, W = 16, 4, 4


def make_batch(vocab: Vocabulary, seed: int = 0) -> dict:
    """B=4 pairs, one sentence each, random grids; pair ids of the CLEVR fixture below."""
    return one_sentence_batch(vocab, SENTENCES, (C, H, W), ["0", "1", "2", "0_nc"], seed, 10)


def clevr_fixture(root: Path) -> Path:
    """A three-scene rendered-CLEVR-style dataset: gold.json and the caption files."""
    gold = {
        "CLEVR_default_000000.png": {
            "index": 0, "split": "train", "type": "color",
            "object": {"size": "large", "color": "red", "material": "metal", "shape": "cylinder"},
            "new": {"color": "yellow"},
        },
        "CLEVR_default_000001.png": {
            "index": 1, "split": "train", "type": "drop",
            "object": {"size": "small", "color": "gray", "material": "rubber", "shape": "sphere"},
            "new": {},
        },
        "CLEVR_default_000002.png": {
            "index": 2, "split": "train", "type": "add",
            "object": {"size": "large", "color": "blue", "material": "metal", "shape": "cube"},
            "new": {},
        },
    }  # fmt: skip
    changes = {
        "CLEVR_default_000000.png": [SENTENCES[0], "the large red shiny cylinder became yellow"],
        "CLEVR_default_000001.png": [SENTENCES[1], "the tiny gray matte ball was removed"],
        "CLEVR_default_000002.png": [SENTENCES[2], "there is a new big blue shiny block"],
    }
    still = {name: [SENTENCES[3], "there is no change"] for name in gold}
    root.mkdir(parents=True, exist_ok=True)
    for name, data in (
        ("gold.json", gold),
        ("change_captions.json", changes),
        ("no_change_captions.json", still),
    ):
        (root / name).write_text(json.dumps(data))
    return root


def build(vocab: Vocabulary, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(
        "idc-pcl", vocab=vocab, channels=C, grid=(H, W), tiny=True, device="cpu", **overrides
    )


def fit(model, batch: dict, losses: dict[str, float], options: dict, steps: int, lr: float):
    """Train a stage's objectives; (first, last) values of each named loss."""
    model.set_training_stage("stage", losses, options)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    seen: dict[str, list[float]] = {k: [] for k in losses}
    for _ in range(steps):
        out = model.loss(batch)
        assert set(out["losses"]) == set(losses)  # only the stage's tasks are computed
        opt.zero_grad()
        sum(w * out["losses"][k] for k, w in losses.items()).backward()
        opt.step()
        for k in losses:
            seen[k].append(float(out["losses"][k].detach()))
    return {k: (v[0], sum(v[-5:]) / 5) for k, v in seen.items()}


def test_fda_rewrites_are_wrong_in_one_detail_and_never_a_reference(tmp_path: Path) -> None:
    bank = rewrite_bank(clevr_fixture(tmp_path / "clevr"))
    rng = random.Random(0)
    colour = bank.replace("0", SENTENCES[0], rng)
    # The changed attribute's new value is what gets swapped: "turned yellow" -> another colour.
    words, swapped = tokenize(SENTENCES[0]), tokenize(colour)
    assert [i for i, (a, b) in enumerate(zip(words, swapped, strict=True)) if a != b] == [6]
    assert swapped[6] not in ("yellow", "red")
    for pid, sentence in (("0", SENTENCES[0]), ("1", SENTENCES[1]), ("2", SENTENCES[2])):
        fact = bank.fact_of(pid, sentence)
        for _ in range(10):
            confused = bank.confuse(pid, sentence, rng)
            # Another change type's template, carrying this pair's object.
            source = next(
                f for s, f, _ in bank.corpus if s == confused or _same_template(s, confused, bank)
            )
            assert source.kind != fact.kind
            named = {bank.lexicon.word[w] for w in tokenize(confused) if w in bank.lexicon.word}
            assert ("shape", fact.value("shape")) in named
            retrieved = bank.retrieve(pid, sentence, rng)
            assert retrieved in {s for s, f, _ in bank.corpus if f != fact}
            for negative in bank.negatives(pid, sentence, 3, rng):
                assert not bank.is_reference(pid, negative)
    # A "no change" caption has no attribute to replace; confusing it names a change.
    assert bank.replace("0_nc", SENTENCES[3], rng) is None
    confused = bank.confuse("0_nc", SENTENCES[3], rng)
    assert confused and any(f.kind != NO_CHANGE for s, f, _ in bank.corpus if s == confused)
    with pytest.raises(DataError, match="without the fda objective"):
        rewrite_bank(tmp_path)


def _same_template(source: str, rewritten: str, bank) -> bool:
    """Whether ``rewritten`` is ``source`` with some attribute words swapped."""
    a, b = tokenize(source), tokenize(rewritten)
    return len(a) == len(b) and all(
        x == y or (x in bank.lexicon.word and y in bank.lexicon.word)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.slow  # 150 steps per pretraining task: ~25 s on 2 busy cores (tests/test_every_model.py trains idc-pcl in the default run)
def test_each_pretraining_task_learns_and_only_the_stages_tasks_run(tmp_path: Path) -> None:
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    batch = make_batch(vocab)
    data = clevr_fixture(tmp_path / "clevr")
    model = build(vocab)
    result = fit(model, batch, {"mlm": 1.0}, {}, steps=150, lr=3e-3)
    assert result["mlm"][1] < result["mlm"][0] / 3
    # As in a real pair, most cells are the same in both images: a masked cell can be recovered
    # from the other image, and MVCL learns to pick it out of the batch's 128 cells.
    similar = dict(batch, after=batch["before"].clone())
    similar["after"][:, :, 1, 2] += 3.0
    result = fit(build(vocab), similar, {"mvcl": 1.0}, {}, steps=200, lr=3e-3)
    assert result["mvcl"][0] > 4.0 and result["mvcl"][1] < 1.5  # chance: ln 128 = 4.85
    options = {"fda_data": str(data), "fda_negatives": 3}
    fda = build(vocab)
    result = fit(fda, batch, {"fda": 1.0}, options, steps=60, lr=1e-3)
    assert result["fda"][1] < result["fda"][0] / 4
    # Trained with hard negatives, each caption's pair scores it above all three of its rewrites.
    fda.eval()
    with torch.no_grad():
        pair, ids = fda.rows(batch)
        v = fda.pair_embedding(fda.visual(batch["before"], batch["after"]))
        negatives = fda.hard_negatives(batch, pair, ids)
        for row in range(3):  # the changed pairs
            own = float(v[row] @ fda.text_embedding(ids[row : row + 1])[0])
            hard = fda.text_embedding(fda.encode_texts(negatives[row], ids)) @ v[row]
            assert len(negatives[row]) == 3 and own > float(hard.max())
    # All three at once share one joint pass for MLM and MVCL.
    result = fit(build(vocab), batch, {"mlm": 1.0, "mvcl": 1.0, "fda": 1.0}, options, 40, 1e-3)
    assert all(last < first for first, last in result.values())


def test_finetuning_learns_every_caption_and_decodes_it_after_reload(tmp_path: Path) -> None:
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    batch = make_batch(vocab)
    model = build(vocab)
    result = fit(model, batch, {"caption": 1.0}, {}, steps=80, lr=3e-3)
    assert result["caption"][1] < 0.1
    assert model.generate(batch, 1) == [[s] for s in SENTENCES]
    again, _ = load_checkpoint(save_checkpoint(tmp_path / "m.pt", model))
    assert again.generate(batch, 1) == [[s] for s in SENTENCES]
    # Evaluation computes the caption loss alone (what perplexity reads), whatever the stage.
    again.set_training_stage("pretrain", {"mlm": 1.0, "mvcl": 1.0}, {})
    again.eval()
    assert set(again.loss(batch)["losses"]) == {"caption"}


def test_the_uni_directional_mask_hides_words_from_the_pair_and_later_words() -> None:
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    batch = make_batch(vocab)
    model = build(vocab).eval()
    pair, ids = model.rows(batch)
    visual = model.visual(batch["before"], batch["after"])
    changed = ids.clone()
    changed[:, 4] = vocab.index["cube"]
    with torch.no_grad():
        pair_states, words = model.cross(visual, ids, "seq2seq")
        pair_again, words_again = model.cross(visual, changed, "seq2seq")
        joint, _ = model.cross(visual, ids, "joint")
        joint_again, _ = model.cross(visual, changed, "joint")
    torch.testing.assert_close(pair_states, pair_again)
    torch.testing.assert_close(words[:, :4], words_again[:, :4])
    assert not torch.allclose(words[:, 4:], words_again[:, 4:])
    assert not torch.allclose(joint, joint_again)  # pre-training's joint pass reads the words
    # Decoding computes the pair's states once and reuses them: the same word states.
    with torch.no_grad():
        cached = model.cross.words_given(model.cross.visual_states(visual), ids)
    real = ids != PAD_ID  # (padding after <eos> is never read by a real word)
    torch.testing.assert_close(cached[real], words[real], atol=1e-5, rtol=1e-4)


def test_a_local_bert_gives_the_stream_berts_states(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForMaskedLM

    words = sorted({w for s in SENTENCES for w in s.split()} - {"cylinder"})
    # "cylinder" only as WordPiece pieces: its embedding starts as their mean.
    bert_vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "cyl", "##inder"]
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(bert_vocab) + "\n")
    config = BertConfig(
        vocab_size=len(bert_vocab),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    bert = BertForMaskedLM(config).eval()
    bert.save_pretrained(folder)
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = build(vocab, bert=str(folder)).eval()
    assert model.cross.width == 24 and len(model.cross.layers.layers) == 2
    sentence = SENTENCES[2]  # no "cylinder": every word is one BERT row
    ours = torch.tensor([vocab.encode(sentence)])
    theirs = torch.tensor([[2, *(bert_vocab.index(w) for w in sentence.split()), 3]])
    with torch.no_grad():
        _, states = model.cross(None, ours, "text")
        expected = bert.bert(input_ids=theirs).last_hidden_state
        torch.testing.assert_close(states, expected, atol=1e-5, rtol=1e-4)
        # The MLM head scores a word as BERT's does (bias and transform carried over).
        ours_logits = model.cross.word_logits(states)[0, 1, vocab.index["large"]]
        bert_logits = bert.cls(expected)[0, 1, bert_vocab.index("large")]
        torch.testing.assert_close(ours_logits, bert_logits, atol=1e-4, rtol=1e-4)
    pieces = bert.bert.embeddings.word_embeddings.weight[
        [bert_vocab.index("cyl"), bert_vocab.index("##inder")]
    ]
    torch.testing.assert_close(model.cross.word.weight[vocab.index["cylinder"]], pieces.mean(0))
    result = fit(model, make_batch(vocab), {"caption": 1.0}, {}, steps=40, lr=3e-3)
    assert result["caption"][1] < result["caption"][0] / 3
    with pytest.raises(ModelError, match="no vocab.txt"):
        (folder / "vocab.txt").unlink()
        build(vocab, bert=str(folder))


def test_bad_stage_settings_fail_in_one_line() -> None:
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    model = build(vocab)
    with pytest.raises(UsageError, match="no loss 'itm'"):
        model.set_training_stage("pretrain", {"itm": 1.0}, {})
    with pytest.raises(UsageError, match="needs fda_data"):
        model.set_training_stage("pretrain", {"fda": 1.0}, {})
    with pytest.raises(UsageError, match="no model option 'fda_rate'"):
        model.set_training_stage("pretrain", {"fda": 1.0}, {"fda_rate": 1})
    with pytest.raises(ModelError, match="multiple of 'cross_heads'"):
        build(vocab, cross_width=30, cross_heads=4)


@pytest.mark.slow
def test_tiny_recipe_pretrains_finetunes_captions_and_scores_through_the_console_script(
    tmp_path: Path, write_png
) -> None:
    """`spotdiff train` (pre-training with MLM + MVCL + FDA, then fine-tuning), `spotdiff caption`
    and `spotdiff eval` as a user runs them, in a fresh cache."""
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "run"
    run_spotdiff(
        "train", "--model", "idc-pcl", "--recipe", "idc-pcl-tiny-cpu", "--out", out,
        "--device", "cpu", timeout=300, extra_env=cache,
    )  # fmt: skip
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    validations = [r["validation"] for r in log if "validation" in r]
    assert [v["stage"] for v in validations] == ["pretrain", "pretrain", "finetune", "finetune"]
    # Fine-tuning teaches the captioner: the validation perplexity falls below pre-training's.
    assert validations[-1]["perplexity"] < validations[1]["perplexity"] / 2
    caption_and_score("idc-pcl", out / "best.pt", tmp_path, write_png, cache)


def test_the_direction_head_learns_and_every_word_reads_its_answer(tmp_path: Path) -> None:
    """direction_weight adds a head on [IMG1] and [IMG2] and a 'direction' loss over the pairs
    whose direction is known; direction_to_speaker adds its answer to every word's embedding,
    so flipping it moves every position's next word; the teacher hands the known direction in
    training; off, nothing is added, and checkpoints carry it."""
    vocab = Vocabulary.build(SENTENCES, min_count=1)
    batch = {**make_batch(vocab), "direction": torch.tensor([-1, 0, 1, -1])}
    plain = build(vocab)
    assert plain.direction_head is None and plain.direction_in is None
    older = {k: v for k, v in plain.config.items() if not k.startswith("direction")}
    assert type(plain)(older, vocab).direction_head is None  # saved before the settings
    with pytest.raises(ModelError, match="direction_weight > 0"):
        build(vocab, direction_to_speaker=True)
    with pytest.raises(UsageError, match="direction_weight > 0"):
        plain.set_training_stage("finetune", {"caption": 1.0, "direction": 1.0}, {})

    model = build(vocab, direction_weight=0.5, direction_to_speaker=True, direction_teacher=True)
    model.set_training_stage("finetune", {"caption": 1.0, "direction": 1.0}, {})
    model.train()
    out = model.loss(batch)
    parts = out["losses"]
    assert torch.allclose(out["loss"], parts["caption"] + 0.5 * parts["direction"])
    seen = fit(model, batch, {"caption": 1.0, "direction": 1.0}, {}, steps=40, lr=3e-3)
    assert seen["direction"][1] < seen["direction"][0]  # the head learns the labels

    model.eval()
    with torch.no_grad():
        prepared = model._prepare(batch)
        visual = model.visual(prepared["before"], prepared["after"])
        probs = torch.softmax(model.direction_head(model.direction_features(visual)), -1)
        assert torch.allclose(model.word_extra(visual), model.direction_in(probs))
        taught = model.word_extra(visual, torch.tensor([1, 0, -1, -1]))
        assert torch.allclose(taught[0], model.direction_in(torch.tensor([0.0, 1.0])))
        assert torch.allclose(taught[1], model.direction_in(torch.tensor([1.0, 0.0])))
        assert torch.allclose(taught[2], model.word_extra(visual)[2])  # unknown: the answer
        states = model.cross.visual_states(visual)
        prefix = prepared["tokens"][:, 0, :3]
        said = model.cross.words_given(states, prefix, model.direction_in(probs))
        other = model.cross.words_given(states, prefix, model.direction_in(probs.flip(-1)))
        assert all(not torch.allclose(said[:, i], other[:, i]) for i in range(3))
        # the cached decoding states give the full pass's numbers, the extra input included
        _, full = model.cross(visual, prefix, "seq2seq", model.direction_in(probs))
        assert torch.allclose(said, full, atol=1e-5)

    greedy = model.generate(batch, 1)
    assert len(model.generate(batch, 1, beam=3)) == 4  # beam search reorders the extra input
    again, _ = load_checkpoint(save_checkpoint(tmp_path / "dir.pt", model))
    assert again.direction_head is not None and again.config["direction_teacher"]
    assert again.generate(batch, 1) == greedy
