"""OneDiff (Hu et al., "OneDiff: A Generalist Model for Image Difference Captioning", 2024;
``papers/onediff-2024.txt``): a siamese image encoder, the Visual Delta Module, a projector and a
causal language model, trained with Coupled Sample Training. Registered below.

This package registers the name and holds its config; it imports no torch. The model lives in
``model.py`` (the Visual Delta Module in ``vdm.py``, the language models in ``lm.py``, the CLIP
vision loader in ``vision.py``, Coupled Sample Training's single-image descriptions in
``cst.py``), imported when one is built::

    create_model("onediff", vocab=vocab, channels=1280, grid=(7, 7))           # untrained
    create_model("onediff", vocab=vocab, channels=16, grid=(4, 4), tiny=True)  # the test variant
    create_model("onediff", vocab=vocab, channels=1280, grid=(7, 7), lm="/models/qwen2-0.5b")
    create_model("onediff", weights="run/best.pt")                             # trained

What runs here by default is not the published network: the paper's CLIP ViT-L/14 and Vicuna-7B
cannot be installed on these machines. The default encoder is the embedded efficientnet-lite0
(its stride-8, stride-16 and final maps stand for CLIP's layers 8, 16 and 24) and the default
language model is a small GPT-2-shaped transformer built from ``transformers.GPT2Config`` and
trained from scratch on the project's vocabulary. ``vision: PATH`` (a local Hugging Face CLIP
vision folder) and ``lm: PATH`` (any local Hugging Face causal LM with its tokenizer) give the
published architecture to a user who has those weights.
"""

from __future__ import annotations

from typing import Any

from ...errors import ModelError
from ..configured import LearnedFamily, check_multiples, check_settings, feature_config

# §5.1 gives the published sizes (CLIP-L/14, 6-layer BERT-base VDM with 32 delta tokens, a
# two-layer MLP, Vicuna-7B); the defaults below are what trains on two CPU cores with the
# embedded backbone. model.py's docstring says what each one is.
_DEFAULTS: dict[str, Any] = {
    "vision": "",  # "" = the cached backbone's levels; a path = a local HF CLIP vision model
    "levels": [8, 16],  # strides of the two lower levels (1/3, 2/3 depth); the final grid is 3/3
    "level_channels": [40, 112],  # their channels (efficientnet_lite0's stride-8 and -16 stages)
    "level_pool": 14,  # lower levels are average-pooled to at most this many cells a side
    "vdm": True,  # the Visual Delta Module (false: the paper's "VDM ×" row)
    "delta_tokens": 32,  # §5.4: "the 6-layer and 32-delta-token VDM"
    "vdm_layers": 6,  # §5.1: six layers, self-attention and cross-attention alternating
    "vdm_width": 256,  # BERT-base's 768 in the paper; a CPU budget here
    "vdm_heads": 4,
    "lm": "",  # "" = a GPT-2-shaped LM trained from scratch; a path = a local HF causal LM
    # How a local LM's weights are held: bfloat16 / float16 halve a 7B LM's 28 GB to 14 GB,
    # for an LM kept frozen (half-precision weights do not train well; the run refuses it).
    "lm_dtype": "float32",
    "lm_width": 256,  # the scratch LM's d_model
    "lm_layers": 4,
    "lm_heads": 4,
    "lm_positions": 512,  # prefix (2 x 49 image + 32 delta tokens) + the longest target
    "dropout": 0.1,
    "cst_max_len": 60,  # words of a coupled sample's concatenated description
    "repetition_guard": 3,  # decoding: no word twice in a row, no 3-gram twice
}
LM_DTYPES = ("float32", "bfloat16", "float16")

# Tiny variant for tests: a step on CPU in milliseconds.
_TINY: dict[str, Any] = {
    "level_pool": 4,
    "delta_tokens": 4,
    "vdm_layers": 2,
    "vdm_width": 16,
    "vdm_heads": 2,
    "lm_width": 32,
    "lm_layers": 1,
    "lm_heads": 2,
    "lm_positions": 256,
    "dropout": 0.0,
}


def default_config(
    name: str, channels: int, grid: tuple[int, int] | list[int], tiny: bool = False
) -> dict[str, Any]:
    """The resolved config of model ``name`` for backbone features (channels, h, w); ``tiny``
    gives small sizes (tests)."""
    config = {**feature_config("onediff", name, FAMILY.names, channels, grid), **_DEFAULTS}
    config["levels"] = list(_DEFAULTS["levels"])
    config["level_channels"] = list(_DEFAULTS["level_channels"])
    if tiny:
        config.update(_TINY)
    return config


def check_config(name: str, config: dict[str, Any]) -> None:
    """Value kinds as :func:`check_settings`, plus the rules that tie settings together."""
    check_settings(name, config, default_config(name, 1280, (7, 7)))
    if len(config.get("levels", [])) != len(config.get("level_channels", [])):
        raise ModelError(
            f"'{name}' lists {len(config['levels'])} levels but {len(config['level_channels'])} "
            "level_channels: give one channel count per level"
        )
    check_multiples(name, config, (("vdm_width", "vdm_heads"), ("lm_width", "lm_heads")))
    if str(config.get("lm_dtype", "float32")) not in LM_DTYPES:
        raise ModelError(
            f"'{name}': lm_dtype {config['lm_dtype']!r} is not one of {', '.join(LM_DTYPES)}"
        )
    if int(config["delta_tokens"]) < 1 or int(config["vdm_layers"]) < 1:
        raise ModelError(f"'{name}' needs at least one delta token and one VDM layer")


FAMILY = LearnedFamily(
    "onediff",
    default_config,
    check_config,
    # Added after the first checkpoints; a config without it reads as the behaviour of that time.
    later=("repetition_guard", "lm_dtype"),
)


@FAMILY.model(
    "onediff",
    "siamese encoder + Visual Delta Module (learnable delta tokens, alternating self/cross "
    "attention over 3 feature levels of both images) + MLP projector + causal LM (a small "
    "GPT-2 trained here, or a local Hugging Face LM by path); Coupled Sample Training (OneDiff)",
)
def onediff_class() -> type:
    from .model import OneDiffCaptioner

    return OneDiffCaptioner


__all__ = ["FAMILY", "check_config", "default_config"]
