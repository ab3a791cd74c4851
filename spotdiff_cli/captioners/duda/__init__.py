"""The robust-change-captioning family: ``duda`` (Dual Dynamic Attention, Park et al., ICCV 2019;
the primary network of ``papers/duda-aux-composed-retrieval-2021.txt``) and ``duda-aux`` (DUDA
trained with that paper's composed-query retrieval auxiliary task), each registered below by the
function that gives its class.

This package registers the family's names and holds their configs; it imports no torch. The
models live in ``model.py`` and ``aux.py`` (imported when one is built). Built like the Spot-the-diff family
(``spot_the_diff/__init__.py``): ``cls(config, vocab)`` with ``config`` from
:func:`default_config`, plain types only, so it goes into a checkpoint as is::

    create_model("duda", vocab=vocab, channels=1280, grid=(7, 7))           # untrained
    create_model("duda", vocab=vocab, channels=16, grid=(4, 4), tiny=True)  # the test variant
    create_model("duda", weights="run/best.pt")                             # trained

Other keyword overrides replace config values (``hidden_size=256``); unknown keys are an error
with a close match.
"""

from __future__ import annotations

from typing import Any

from ..configured import LearnedFamily, feature_config

# The released code's sizes (configs/config.py, dynamic.yaml; model.py's docstring says what
# each one is). The papers give none of them.
_DEFAULTS: dict[str, Any] = {
    "coordinates": True,  # x, y channels per cell (the released AddSpatialInfo)
    "attention_size": 128,  # hidden 1x1 conv of the dual attention
    "attention_dropout": 0.5,  # in the dual attention's conv net
    "embed_size": 300,  # word embeddings
    "fusion_size": 512,  # v = ReLU(W [l_bef; l_diff; l_aft])
    "hidden_size": 512,  # both LSTMs of the dynamic speaker
    "dropout": 0.5,  # embeddings, v, before the output layer
    "attention_l1": 2.5e-3,  # L1 on the attention maps (released train.py)
    "entropy_weight": 0.0,  # − weight × entropy of the speaker's α (released flag, default 0)
    "repetition_guard": 3,  # decoding: no word twice in a row, no 3-gram twice
    # Not in the paper (issue 24): weight of a cross-entropy that the fused feature v the speaker
    # reads tells an arrival from a departure (batch "direction"); 0 = off, no extra parameters.
    "direction_weight": 0.0,
    # Not in the paper (issue 24): the direction head's answer (P(departure), P(arrival)) as an
    # input of the caption LSTM at every word; needs direction_weight > 0 to mean anything.
    "direction_to_speaker": False,
    # Not in the paper (issue 24): in training, the known direction (one-hot) handed to the
    # speaker instead of the head's answer, as teacher forcing hands the gold word (the head's
    # answer where the data does not say it).
    "direction_teacher": False,
}
# duda-aux's auxiliary network and loss (aux.py's docstring says why each value).
_AUX_DEFAULTS: dict[str, Any] = {
    "gamma": 0.3,  # γ of eq. 14 (not given in the paper)
    "aux_embed_size": 512,  # d_e of W_emb (TIRG's 512)
    "aux_size": 512,  # d_r, the joint space and the text LSTM (TIRG's 512)
    "aux_dropout": 0.1,  # before the text feature's linear layer (TIRG's)
    "aux_scale": 4.0,  # initial scale of TIRG's normalisation (learned)
    "candidates": "easy",  # eq. 13's set when no recipe stage says (stages: easy, then hard)
    "alternate": True,  # §4.2: alternate Primary->Auxiliary / Auxiliary->Primary per batch
}
# Tiny variant for tests: a step on CPU in milliseconds.
_TINY: dict[str, Any] = {
    "attention_size": 16,
    "attention_dropout": 0.1,
    "embed_size": 16,
    "fusion_size": 16,
    "hidden_size": 32,
    "dropout": 0.1,
    "aux_embed_size": 16,
    "aux_size": 16,
    # Logits span ±scale² (TIRG's 4 gives ±16): one Adam step of 1e-2 on 16-wide layers overshoots.
    "aux_scale": 2.0,
}


def default_config(
    name: str, channels: int, grid: tuple[int, int] | list[int], tiny: bool = False
) -> dict[str, Any]:
    """The resolved config of model ``name`` for backbone features (channels, h, w); ``tiny``
    gives small sizes (tests). Set ``backbone`` to match the cached features you train on."""
    config = {**feature_config("robust-change", name, FAMILY.names, channels, grid), **_DEFAULTS}
    if name == "duda-aux":
        config.update(_AUX_DEFAULTS)
    if tiny:
        config.update({k: v for k, v in _TINY.items() if k in config})
    return config


FAMILY = LearnedFamily(
    "duda",
    default_config,
    # Added after the first checkpoints; a config without it reads as the behaviour of that time.
    later=("repetition_guard", "direction_weight", "direction_to_speaker", "direction_teacher"),
)


# The family's names, each registered by the function that gives its class (importing torch only
# when a model is built).
@FAMILY.model(
    "duda",
    "dual attention over before/after conditioned on their difference, and a dynamic speaker "
    "choosing among before, difference and after per word (Robust Change Captioning)",
)
def duda_class() -> type:
    from .model import DUDACaptioner

    return DUDACaptioner


@FAMILY.model(
    "duda-aux",
    "duda trained with an auxiliary composed-query retrieval task: TIRG retrieves the after "
    "image from the before image and the speaker's soft word embeddings, easy then hard "
    "candidates, (1-γ)L_pri + γL_aux (DUDA+AUX, CVPR 2021)",
)
def duda_aux_class() -> type:
    from .aux import DUDAAuxCaptioner

    return DUDAAuxCaptioner


__all__ = ["FAMILY", "default_config"]
