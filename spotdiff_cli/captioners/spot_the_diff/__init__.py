"""The Spot-the-diff model family (Jhamtani & Berg-Kirkpatrick, EMNLP 2018;
``papers/spot-the-diff-ddla-2018.txt``): the nearest-neighbour, attention (CAPT) and latent
alignment (DDLA) models of its §4, named in :data:`MODELS`.

This package registers the family's names and factories and holds their configs; it imports no
torch. Modules, imported when a model is built: ``common`` (pair encoder, soft-attention LSTM
decoder, base class), ``neighbours`` (nn baselines), ``capt`` (attention baselines), ``ddla``
(latent alignment model).

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

from ..configured import check_settings, feature_config, lazy_classes, register_family

# The family's one list of names: name -> (module, class, what `spotdiff models` says). Importing
# this package registers them without importing torch; a model's module is imported when it is
# built. Each class states the same name in its ``name`` attribute (what checkpoints record).
MODELS: dict[str, tuple[str, str, str]] = {
    "nn": (
        "neighbours",
        "NearestNeighbourCaptioner",
        "nearest training pair by pooled before/after/difference features; copies a random sentence of its annotation",
    ),
    "nn-multi": (
        "neighbours",
        "NearestNeighbourMultiCaptioner",
        "nearest training pair by pooled before/after/difference features; copies its whole description",
    ),
    "capt": (
        "capt",
        "AttentionCaptioner",
        "LSTM with soft attention over both images' feature grids; one sentence",
    ),
    "capt-masked": (
        "capt",
        "MaskedAttentionCaptioner",
        "capt with attention multiplied by the union of the cluster masks",
    ),
    "capt-multi": (
        "capt",
        "MultiAttentionCaptioner",
        "capt trained on the whole description (sentences joined by <sep>)",
    ),
    "ddla-uniform": (
        "ddla",
        "UniformDDLACaptioner",
        "latent cluster alignment per sentence with a uniform prior; a random cluster, or the largest boxes for several sentences",
    ),
    "ddla": (
        "ddla",
        "DDLACaptioner",
        "latent cluster alignment per sentence, learned log-linear prior, marginal likelihood (Spot-the-diff)",
    ),
}


model_class, __getattr__ = lazy_classes(__name__, MODELS)


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
    config = feature_config("Spot-the-diff", name, list(MODELS), channels, grid)
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


def check_config(name: str, config: dict[str, Any]) -> None:
    """Raise ``ModelError`` for the first setting of model ``name`` whose value is not of the kind
    :func:`default_config` gives it (a damaged or foreign checkpoint's stored config, a recipe's
    ``model_config``): an int where an int is expected (not a bool), a number for a float, a
    positive (h, w) pair for ``grid``, a string for a name. Missing keys are the class's to name."""
    check_settings(name, config, default_config(name, 1280, (7, 7)))


register_family("spot-the-diff", MODELS, default_config, model_class, check_config)

__all__ = [
    "MODELS",
    "MODEL_CLASSES",
    "check_config",
    "default_config",
    "model_class",
    *(cls_name for _, cls_name, _ in MODELS.values()),
]
