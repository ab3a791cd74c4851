"""The Spot-the-diff model family (Jhamtani & Berg-Kirkpatrick, EMNLP 2018;
``papers/spot-the-diff-ddla-2018.txt``): the nearest-neighbour, attention (CAPT) and latent
alignment (DDLA) models of its §4, each registered below by the function that gives its class.

This package registers the family's names and holds their configs; it imports no torch. Modules,
imported when a model is built: ``common`` (pair encoder, soft-attention LSTM decoder),
``neighbours`` (nn baselines), ``capt`` (attention baselines), ``ddla`` (latent alignment model);
their base class is ``captioners/learned.py``'s.

Every model is ``cls(config, vocab)`` with ``config`` from :func:`default_config` (plain types, so
it goes into a checkpoint as is). Through the registry::

    create_model("ddla", vocab=vocab, channels=1280, grid=(7, 7))          # untrained
    create_model("ddla", vocab=vocab, config=resolved_config)              # rebuild from a checkpoint's config
    create_model("ddla", vocab=vocab, channels=16, grid=(4, 4), tiny=True)  # the test variant
    create_model("ddla", weights="run/best.pt")                            # trained (captioners/checkpoint.py)

Other keyword overrides replace config values (``hidden_size=256``); unknown keys are an error.
"""

from __future__ import annotations

from typing import Any

from ..configured import LearnedFamily, feature_config

# The paper gives no sizes beyond the 14x14 ResNet grid and Adam with batches of 8 (§3.2, §4); these
# are the usual show-attend-tell values, small enough to train on one GPU in an hour.
_DECODER_DEFAULTS: dict[str, Any] = {
    "feature_size": 512,  # per-cell projection of [F1, F2, F2 - F1]
    "embed_size": 256,  # word embeddings (vocabulary ~1000 words, Table 1)
    "hidden_size": 512,  # LSTM state
    "attention_size": 256,  # additive attention (Xu et al. 2015)
    "dropout": 0.3,  # on embeddings, features and before the output layer
}
# Tiny variant for tests: a step on CPU in milliseconds.
_TINY = {
    "feature_size": 16,
    "embed_size": 16,
    "hidden_size": 32,
    "attention_size": 16,
    "dropout": 0.1,
}
# Options of every decoding model. A checkpoint's config saved before a key existed reads as the
# behaviour of that time (no key = lstm, with the difference channel, no repetition guard).
_DECODER_OPTIONS: dict[str, Any] = {
    "pair_difference": True,  # the F2 - F1 channel (not in the paper: false gives its [F1, F2])
    "decoder": "lstm",  # lstm (the paper's) | transformer (captioners/transformer.py)
    "decoder_layers": 2,  # transformer only: depth
    "decoder_heads": 4,  # transformer only: attention heads (hidden_size must divide by it)
    "repetition_guard": 3,  # decoding: no word twice in a row, no 3-gram twice in a sentence
    # Not in the paper (issue 24), as duda's: a head on the pooled pair features learns arrival
    # vs departure (batch "direction"); 0 = off, no extra parameters.
    "direction_weight": 0.0,
    # ... and its answer (P(departure), P(arrival)) an input of the decoder at every word.
    "direction_to_speaker": False,
}
_DDLA_DEFAULTS: dict[str, Any] = {
    "max_count": 5,  # Spot-the-diff descriptions: 1.86 sentences on average, rarely more than 5
    "count_weight": 0.1,  # the count head must not pull the encoder away from describing
    "nms_iou": 0.3,  # grid masks of distinct DBSCAN clusters overlap only through smoothing
}


def default_config(
    name: str, channels: int, grid: tuple[int, int] | list[int], tiny: bool = False
) -> dict[str, Any]:
    """The resolved config of model ``name`` for backbone features (channels, h, w).

    ``tiny`` gives small hidden sizes (tests). The backbone name defaults to the embedded
    ``efficientnet_lite0``; set ``backbone`` to match the cached features you train on.
    """
    config = feature_config("Spot-the-diff", name, FAMILY.names, channels, grid)
    if name.startswith("nn"):
        config["n_neighbors"] = 1  # the paper's single nearest pair
        config["pair_difference"] = True  # |F2 - F1| in the pair feature (the paper: [F1, F2])
        if name == "nn":
            config.update(selection="paper", selection_seed=0)  # §4: a random sentence
        return config
    config.update(_TINY if tiny else _DECODER_DEFAULTS)
    config.update(_DECODER_OPTIONS)
    if name.startswith("ddla"):
        config.update(_DDLA_DEFAULTS)
    if name == "ddla-uniform":
        config.update(selection="paper", selection_seed=0)  # §4: a random cluster
    return config


# A config's values must be of the kinds default_config gives (configured.check_settings).
FAMILY = LearnedFamily(
    "spot-the-diff",
    default_config,
    # Added after the first checkpoints; a config without them reads as the behaviour of that time.
    later=(*_DECODER_OPTIONS, "selection", "selection_seed"),
)


# The family's names, each registered by the function that gives its class (importing torch only
# when a model is built). Each class states the same name in its ``name`` (what checkpoints record).
@FAMILY.model(
    "nn",
    "nearest training pair by pooled before/after/difference features; copies a random "
    "sentence of its annotation",
)
def nn_class() -> type:
    from .neighbours import NearestNeighbourCaptioner

    return NearestNeighbourCaptioner


@FAMILY.model(
    "nn-multi",
    "nearest training pair by pooled before/after/difference features; copies its whole "
    "description",
)
def nn_multi_class() -> type:
    from .neighbours import NearestNeighbourMultiCaptioner

    return NearestNeighbourMultiCaptioner


@FAMILY.model("capt", "LSTM with soft attention over both images' feature grids; one sentence")
def capt_class() -> type:
    from .capt import AttentionCaptioner

    return AttentionCaptioner


@FAMILY.model("capt-masked", "capt with attention multiplied by the union of the cluster masks")
def capt_masked_class() -> type:
    from .capt import MaskedAttentionCaptioner

    return MaskedAttentionCaptioner


@FAMILY.model("capt-multi", "capt trained on the whole description (sentences joined by <sep>)")
def capt_multi_class() -> type:
    from .capt import MultiAttentionCaptioner

    return MultiAttentionCaptioner


@FAMILY.model(
    "ddla-uniform",
    "latent cluster alignment per sentence with a uniform prior; a random cluster, or the "
    "largest boxes for several sentences",
)
def ddla_uniform_class() -> type:
    from .ddla import UniformDDLACaptioner

    return UniformDDLACaptioner


@FAMILY.model(
    "ddla",
    "latent cluster alignment per sentence, learned log-linear prior, marginal likelihood "
    "(Spot-the-diff)",
)
def ddla_class() -> type:
    from .ddla import DDLACaptioner

    return DDLACaptioner


__all__ = ["FAMILY", "default_config"]
