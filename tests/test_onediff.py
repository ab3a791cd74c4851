"""``onediff``: the Visual Delta Module reads the three levels in order, the model learns a fake
batch with and without the VDM, Coupled Sample Training couples images of different scenes with
their descriptions in order, the published-architecture loaders take local Hugging Face folders
(a tiny random Llama-shaped LM with its tokenizer, a tiny random CLIP vision tower), and the tiny
recipe trains, captions and scores through the installed console script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from console import caption_and_score, run_spotdiff
from tiny_batches import one_sentence_batch

from spotdiff_cli.captioners.checkpoint import load_checkpoint, save_checkpoint
from spotdiff_cli.captioners.onediff.cst import clevr_descriptions, scene_descriptions
from spotdiff_cli.captioners.onediff.lm import decoding_permutation
from spotdiff_cli.captioners.onediff.vdm import VisualDeltaModule, cross_levels
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import EOS_ID, Vocabulary
from spotdiff_cli.errors import DataError, ModelError, UsageError

SENTENCES = ["the red car is gone", "there is a blue car", "someone moved the van", "no change"]
C, H, W = 16, 4, 4
LEVELS = {"s8": (8, 16), "s16": (12, 8)}  # name -> (channels, side)


def make_vocab() -> Vocabulary:
    return Vocabulary.build(SENTENCES + ["there is a red van"], min_count=1)


def make_batch(vocab: Vocabulary, seed: int = 0, ids: list[str] | None = None) -> dict:
    """B=4 pairs, one sentence each, grids and the two lower levels of random features."""
    batch = one_sentence_batch(vocab, SENTENCES, (C, H, W), ids or ["0", "1", "2", "2_nc"], seed)
    g = torch.Generator().manual_seed(seed + 1)
    b = len(SENTENCES)
    for name, (ch, side) in LEVELS.items():
        for which in ("before", "after"):
            batch[f"{which}_{name}"] = torch.randn(b, ch, side, side, generator=g)
    return batch


def build(vocab: Vocabulary, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model(
        "onediff",
        vocab=vocab,
        channels=C,
        grid=(H, W),
        tiny=True,
        level_channels=[8, 12],
        device="cpu",
        **overrides,
    )


def fit(model, batch: dict, steps: int = 25, lr: float = 1e-2) -> tuple[float, float]:
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    first = last = 0.0
    for step in range(steps):
        out = model.loss(batch)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        first = float(out["loss"].detach()) if step == 0 else first
        last = float(out["loss"].detach())
    return first, last


def test_six_layers_cross_attend_to_the_three_levels_low_to_high() -> None:
    assert cross_levels(6, 3) == [0, None, 1, None, 2, None]
    assert cross_levels(2, 3) == [2, None]  # one cross-attention layer reads the top level
    vdm = VisualDeltaModule([8, 12, 16], width=16, tokens=5, layers=6, heads=2, dropout=0.0)
    assert abs(float(vdm.delta.detach().std()) - 0.02) < 0.01  # §5.1: N(0, 0.02)
    levels = [(torch.randn(2, n, c), (s, s)) for c, n, s in ((8, 16, 4), (12, 9, 3), (16, 4, 2))]
    same = vdm(levels, levels)
    assert same.shape == (2, 5, 16)
    changed = [(t.clone(), hw) for t, hw in levels]
    changed[0][0][:, 3, :4] += 5.0  # one cell of the lowest level of the after image changes
    assert not torch.allclose(vdm(levels, changed), same)  # the delta tokens see it


@pytest.mark.parametrize("vdm", [True, False])
def test_the_model_learns_a_batch_and_decodes_it(vdm: bool, tmp_path: Path) -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(vocab, vdm=vdm)
    before, after = model.encode(model._prepare(batch))
    prefix = model.prefix(before, after)
    # [before (H*W); after (H*W); delta tokens] with the VDM, the two images alone without it.
    assert prefix.shape[1] == 2 * H * W + (4 if vdm else 0)
    assert (model.vdm is not None) == vdm
    first, last = fit(model, batch)
    assert last < first / 4
    assert [s[0] for s in model.generate(batch, 1)] == SENTENCES
    again, meta = load_checkpoint(save_checkpoint(tmp_path / "od.pt", model))
    assert meta["config"]["vdm"] is vdm
    assert [s[0] for s in again.generate(batch, 1)] == SENTENCES
    # A missing lower level is a one-line error naming the recipe setting.
    with pytest.raises(ModelError, match=r"feature_levels: \[8, 16\]"):
        model.loss({k: v for k, v in batch.items() if k != "after_s16"})
    with pytest.raises(ModelError, match="set level_channels"):
        model.loss({**batch, "before_s8": batch["before_s8"][:, :4]})


def test_coupled_samples_pair_two_scenes_and_concatenate_their_descriptions() -> None:
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(vocab).train()
    bank = {
        "0": (("there is a red car",), ()),
        "1": ((), ("there is a blue van",)),
        "2": (("there is a red van",), ("there is a blue car",)),
        "2_nc": (("there is a red van",), ()),
    }
    model.cst_ratio, model.cst_bank, model.cst_source = 1.0, bank, "bank"
    torch.manual_seed(1)
    before, after, coupled = model.couple(batch)
    assert set(coupled) == {0, 1, 2, 3}  # ratio 1: every row with a described image
    ids = batch["pair_ids"]
    for row, target in coupled.items():
        (r1, s1), (r2, s2) = before[row], after[row]
        assert r1 == row and ids[r2].split("_")[0] != ids[row].split("_")[0]  # another scene
        assert target == [*bank[ids[r1]][s1], *bank[ids[r2]][s2]]  # first image, then second
    out = model.loss(batch)
    assert set(out["losses"]) == {"caption", "cst"} or set(out["losses"]) == {"cst"}
    # Descriptions of another benchmark are refused, not silently used.
    model.cst_bank = {"99": (("there is a red car",), ())}
    with pytest.raises(UsageError, match="does not describe the pairs"):
        model.couple(batch)
    model.eval()  # never in evaluation: validation scores difference captions only
    assert model.couple(batch)[2] == {}
    with pytest.raises(UsageError, match="no model option 'cst_rate'"):
        model.set_training_stage("cst", {}, {"cst_rate": 0.5})
    with pytest.raises(UsageError, match="needs cst_data"):
        model.set_training_stage("cst", {}, {"cst_ratio": 0.5})


def test_single_image_descriptions_come_from_the_scene_annotations(tmp_path: Path) -> None:
    def obj(size, color, material, shape, area, visible=1.0):
        return dict(
            size=size,
            color=color,
            material=material,
            shape=shape,
            bbox=[0, 0, area, 1],
            visible=visible,
        )

    views = {
        "default": {
            "objects": [
                obj("small", "red", "metal", "cube", 5),
                obj("large", "gray", "rubber", "sphere", 9),
                obj("small", "cyan", "rubber", "cylinder", 30, visible=0.2),
            ]
        },
        "semantic": {"objects": [obj("small", "blue", "metal", "cube", 5)]},
        "nonsemantic": {"objects": []},
    }
    (tmp_path / "gold.json").write_text(
        json.dumps({"CLEVR_default_000007.png": {"index": 7, "type": "color", "views": views}})
    )
    got = clevr_descriptions(tmp_path)
    assert got["7"] == (
        ("there is a large gray rubber sphere", "there is a small red metal cube"),  # largest first
        ("there is a small blue metal cube",),
    )
    assert got["7_nc"] == (got["7"][0], ())  # the half-hidden cylinder is never named
    empty = tmp_path / "plain"
    empty.mkdir()
    with pytest.raises(DataError, match="no scene annotations"):
        scene_descriptions(empty)


def tiny_llama(folder: Path, words: list[str]) -> Path:
    """A random Llama-shaped causal LM with a word-level tokenizer, saved like a downloaded one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *sorted(set(words))])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_local_hugging_face_lm_by_path(tmp_path: Path) -> None:
    words = [w for s in SENTENCES for w in s.split()]
    folder = tiny_llama(tmp_path / "llama", words)
    vocab = make_vocab()
    batch = make_batch(vocab)
    model = build(vocab, lm=str(folder))
    assert model.lm.kind == "huggingface" and model.lm.width == 32
    # Its end token sits where the shared decoding stops (id 2), its begin token at 1.
    assert model.lm.perm[EOS_ID] == model.lm.tokenizer.eos_token_id
    first, last = fit(model, batch, steps=30)
    assert last < first / 4
    assert [s[0] for s in model.generate(batch, 1)] == SENTENCES
    path = save_checkpoint(tmp_path / "od.pt", model)  # fine-tuned LM weights go in
    again, meta = load_checkpoint(path)
    assert meta["config"]["lm"] == str(folder)
    assert [s[0] for s in again.generate(batch, 1)] == SENTENCES
    with pytest.raises(ModelError, match="lm folder .* not found"):
        build(vocab, lm=str(tmp_path / "nowhere"))
    assert decoding_permutation(6, eos=5, bos=5, pad=None) == [0, 1, 5, 3, 4, 2]


@pytest.mark.slow  # trains a prefix through a bfloat16 LM on the CPU: ~22 s on 2 busy cores
def test_a_frozen_half_precision_lm_stays_out_of_checkpoints(tmp_path: Path) -> None:
    """``lm_dtype: bfloat16`` holds a local LM in half precision (a 7B LM: 14 GB, not 28); kept
    frozen, the prefix still learns to steer it, and a checkpoint leaves the LM out (its folder
    gives it back); a half-precision LM that would train is refused in one line."""
    from spotdiff_cli.train.loop import _check_half_precision_is_frozen

    words = [w for s in SENTENCES for w in s.split()]
    vocab = make_vocab()
    batch = make_batch(vocab)
    # An LM that knows the sentences (a published LM knows language): fine-tuned here in
    # float32 with a prefix, then saved like a downloaded one.
    tuned = build(vocab, lm=str(tiny_llama(tmp_path / "random", words)))
    fit(tuned, batch, steps=30)
    folder = tmp_path / "llama"
    tuned.lm.model.save_pretrained(folder)
    tuned.lm.tokenizer.save_pretrained(folder)
    model = build(vocab, lm=str(folder), lm_dtype="bfloat16")
    assert {p.dtype for p in model.lm.model.parameters()} == {torch.bfloat16}
    with pytest.raises(UsageError, match=r"freeze: \['lm\.\*'\]"):
        _check_half_precision_is_frozen(list(model.named_parameters()), "idc")
    model.lm.requires_grad_(False)
    _check_half_precision_is_frozen(list(model.named_parameters()), "idc")  # frozen: fine
    lm_before = [p.clone() for p in model.lm.model.parameters()]
    first, last = fit(model, batch, steps=40)
    assert last < first * 0.5, (first, last)  # a new prefix alone steers the frozen LM
    assert all(torch.equal(a, b) for a, b in zip(lm_before, model.lm.model.parameters()))
    model.eval()
    said = model.generate(batch, 1)

    path = save_checkpoint(tmp_path / "od.pt", model)
    data = torch.load(path, weights_only=False)
    assert not [k for k in data["state_dict"] if k.startswith("lm.")]
    assert data["from_folders"] == {"lm.model.": str(folder)}
    again, _ = load_checkpoint(path)
    assert {p.dtype for p in again.lm.model.parameters()} == {torch.bfloat16}
    assert again.generate(batch, 1) == said
    # Only the parts the checkpoint names may be missing.
    del data["state_dict"]["projector.0.weight"]
    torch.save(data, tmp_path / "broken.pt")
    with pytest.raises(ModelError, match="does not fit"):
        load_checkpoint(tmp_path / "broken.pt")
    with pytest.raises(ModelError, match="lm_dtype 'int4'"):
        build(vocab, lm=str(folder), lm_dtype="int4")


def tiny_clip(folder: Path, layers: int = 6) -> Path:
    """A random CLIP vision tower (32 px images, 8 px patches), saved like a downloaded one."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    torch.manual_seed(0)
    CLIPVisionModel(config).save_pretrained(folder)
    return folder


def test_a_local_clip_vision_tower_by_path(tmp_path: Path) -> None:
    tiny_clip(tmp_path / "clip")
    vocab = make_vocab()
    model = build(vocab, vision=str(tmp_path / "clip"))
    assert model.clip.level_layers == [2, 4, 6]  # L/3, 2L/3, L: 8, 16, 24 for ViT-L/14
    g = torch.Generator().manual_seed(0)
    batch = make_batch(vocab)
    for which in ("before", "after"):
        batch[f"{which}_images"] = torch.randint(0, 256, (4, 3, 32, 32), generator=g).to(
            torch.uint8
        )
    before, after = model.encode(model._prepare(batch))
    assert before.tokens.shape == (4, 16, 16)  # 4 x 4 patches, the class token dropped
    assert [lvl.shape for lvl, _ in before.levels] == [(4, 16, 16)] * 3
    first, last = fit(model, batch, steps=30)
    assert last < first / 4
    # The frozen tower is not in the state dict: checkpoints name the folder instead.
    assert not any(k.startswith("clip") for k in model.state_dict())
    with pytest.raises(ModelError, match="reads images"):
        model.loss({k: v for k, v in batch.items() if not k.endswith("_images")})


@pytest.mark.slow
def test_tiny_recipe_trains_captions_and_scores_through_the_console_script(
    tmp_path: Path, write_png
) -> None:
    """`spotdiff train` (both stages), `spotdiff caption` and `spotdiff eval` as a user runs them
    (about 45 s on 2 idle cores: three interpreter starts with torch and transformers)."""
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "run"
    run_spotdiff(
        "train",
        "--model",
        "onediff",
        "--recipe",
        "onediff-tiny-cpu",
        "--out",
        out,
        "--device",
        "cpu",
        timeout=300,
        extra_env=cache,
    )
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    validations = [r["validation"] for r in log if "validation" in r]
    assert [v["stage"] for v in validations] == ["cst", "idc", "idc", "idc"]
    assert validations[-1]["perplexity"] < validations[0]["perplexity"]
    caption_and_score("onediff", out / "best.pt", tmp_path, write_png, cache)


@pytest.mark.slow
def test_the_published_parts_recipe_trains_and_captions_with_local_folders(
    tmp_path: Path, write_png
) -> None:
    """training/onediff-clevr-published.yaml's path (a local CLIP tower, a local causal LM in
    bfloat16 frozen in both stages) through the console script, with tiny random stand-ins for
    CLIP-L/14 and Vicuna-7B on the tiny recipe's data: it trains, its checkpoint leaves the LM
    out and names the folder, and `spotdiff caption` loads it back from there (~1 min)."""
    import yaml
    from conftest import REPO, draw_box, textured_background

    published = yaml.safe_load((REPO / "training/onediff-clevr-published.yaml").read_text())
    torch.manual_seed(0)
    tiny_clip(tmp_path / "clip", layers=3)
    words = "the a is was car van red blue green there gone moved appeared has changed no change"
    lm = tiny_llama(tmp_path / "llama", words.split())
    recipe = {
        "defaults": "onediff-tiny-cpu",
        # The published recipe's freezing, on the tiny recipe's two stages.
        "stages": [
            {**stage, "freeze": published["stages"][i]["freeze"]}
            for i, stage in enumerate(
                yaml.safe_load((REPO / "training/onediff-tiny-cpu.yaml").read_text())["stages"]
            )
        ],
        "model_config": {
            "vision": str(tmp_path / "clip"),
            "lm": str(lm),
            "lm_dtype": published["model_config"]["lm_dtype"],
        },
    }
    (tmp_path / "published-tiny.yaml").write_text(yaml.safe_dump(recipe))
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "run"
    trained = run_spotdiff(
        "train", "--model", "onediff", "--recipe", tmp_path / "published-tiny.yaml",
        "--out", out, "--device", "cpu", "--epochs", "2", timeout=600, extra_env=cache,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    data = torch.load(out / "best.pt", weights_only=False)
    assert data["from_folders"] == {"lm.model.": str(lm)}
    assert not [k for k in data["state_dict"] if k.startswith("lm.")]
    assert (out / "best.pt").stat().st_size < 2_000_000

    before = textured_background(224, 224)
    a = write_png("a.png", before)
    b = write_png("b.png", draw_box(before, 40, 60, 50, 30, (200, 30, 30)))
    said = run_spotdiff(
        "caption", a, b, "--model", "onediff", "--weights", out / "best.pt", extra_env=cache
    )
    assert said.returncode == 0 and "1." in said.stdout, said.stderr
