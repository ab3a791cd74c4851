"""IDC-PCL (Yao et al., "Image Difference Captioning with Pre-training and Contrastive Learning",
AAAI 2022; ``papers/idc-pcl-pretraining-slides.txt``): a shared single-image encoder, a pair-image
encoder and a BERT-shaped cross-modal transformer, pre-trained with MLM, masked visual contrastive
learning (MVCL) and fine-grained difference aligning (FDA, hard negatives rewritten from the gold
annotations), then fine-tuned as a captioner under a uni-directional mask. Registered below.

This package registers the name and holds its config; it imports no torch. The model lives in
``model.py`` (the stream and the BERT loader in ``cross_modal.py``, FDA's rewrites in
``rewrites.py``), imported when one is built::

    create_model("idc-pcl", vocab=vocab, channels=1280, grid=(7, 7))           # untrained
    create_model("idc-pcl", vocab=vocab, channels=16, grid=(4, 4), tiny=True)  # the test variant
    create_model("idc-pcl", vocab=vocab, channels=1280, grid=(7, 7), bert="/models/bert-base-uncased")
    create_model("idc-pcl", weights="run/best.pt")                             # trained

What runs here by default is not the published network: its BERT initialisation cannot be
downloaded on these machines, so the cross-modal transformer trains from scratch (``bert: ''``)
over the project's word vocabulary, and the images are the cached efficientnet-lite0 grid (the
paper's are ResNet-101 grid features). ``bert: PATH`` (a local Hugging Face BERT folder) gives the
stream BERT's shape and weights.
"""

from __future__ import annotations

from typing import Any

from ...errors import ModelError
from ..configured import LearnedFamily, check_multiples, check_settings, feature_config

# The paper's sizes: BERT-base (768 wide, 12 heads, 12 layers) for the stream. The defaults below
# train on two CPU cores; model.py says what each is.
_DEFAULTS: dict[str, Any] = {
    "width": 256,  # the single- and pair-image encoders' width
    "heads": 4,
    "single_layers": 2,  # layers of the shared single-image encoder
    "pair_layers": 1,  # layers of the pair-image (difference) encoder
    "bert": "",  # "" = the stream trained from scratch; a path = a local HF BERT (its sizes win)
    "cross_width": 256,  # the stream's width (BERT-base: 768)
    "cross_layers": 3,  # its layers (BERT-base: 12)
    "cross_heads": 4,  # its heads (BERT-base: 12)
    "text_max_len": 40,  # word positions of the stream: <bos> + caption + <eos>
    "mlm_prob": 0.15,  # MLM: share of words masked (BERT's)
    "mvcl_prob": 0.15,  # MVCL: share of one image's cells masked
    "temperature": 0.07,  # MVCL's and FDA's InfoNCE temperature
    "dropout": 0.1,
    "repetition_guard": 3,  # decoding: no word twice in a row, no 3-gram twice
    # Not in the paper (issue 24), as duda's and clip4idc's: a head on the pair's [IMG1] and
    # [IMG2] tokens learns arrival vs departure (loss 'direction', batch "direction"); 0 = off,
    # no extra parameters.
    "direction_weight": 0.0,
    # ... and its answer (P(departure), P(arrival)) added to every word's embedding in the
    # cross-modal stream when captioning.
    "direction_to_speaker": False,
    # ... and in training, the known direction (one-hot) handed to the words instead of the
    # head's answer (the head's answer where it is not known).
    "direction_teacher": False,
}
# Tiny variant for tests: a step on CPU in milliseconds.
_TINY: dict[str, Any] = {
    "width": 32,
    "heads": 2,
    "single_layers": 1,
    "pair_layers": 1,
    "cross_width": 32,
    "cross_layers": 1,
    "cross_heads": 2,
    "dropout": 0.0,
}


def default_config(
    name: str, channels: int, grid: tuple[int, int] | list[int], tiny: bool = False
) -> dict[str, Any]:
    """The resolved config of model ``name`` for backbone features (channels, h, w); ``tiny``
    gives small sizes (tests)."""
    config = {**feature_config("idc-pcl", name, FAMILY.names, channels, grid), **_DEFAULTS}
    if tiny:
        config.update(_TINY)
    return config


def check_config(name: str, config: dict[str, Any]) -> None:
    """Value kinds as :func:`check_settings`, plus the rules that tie settings together."""
    check_settings(name, config, default_config(name, 1280, (7, 7)))
    check_multiples(name, config, (("width", "heads"), ("cross_width", "cross_heads")))
    for share in ("mlm_prob", "mvcl_prob"):
        if not 0.0 < float(config[share]) <= 1.0:
            raise ModelError(f"'{name}' setting '{share}' must be in (0, 1], got {config[share]}")
    if float(config["temperature"]) <= 0:
        raise ModelError(f"'{name}' setting 'temperature' must be positive")
    if int(config["text_max_len"]) < 4:
        raise ModelError(f"'{name}' setting 'text_max_len' must be at least 4")
    if int(config["single_layers"]) + int(config["pair_layers"]) < 1:
        raise ModelError(f"'{name}' needs at least one image layer (single_layers + pair_layers)")


FAMILY = LearnedFamily(
    "idc-pcl",
    default_config,
    check_config,
    # Added after the first checkpoints; a config without it reads as the behaviour of that time.
    later=("repetition_guard", "direction_weight", "direction_to_speaker", "direction_teacher"),
)


@FAMILY.model(
    "idc-pcl",
    "shared single-image + pair-image encoders and a BERT-shaped cross-modal transformer, "
    "pre-trained with MLM, masked visual contrast and hard-negative difference aligning, then "
    "fine-tuned with a uni-directional mask; from scratch or a local BERT by path (IDC-PCL)",
)
def idc_pcl_class() -> type:
    from .model import IDCPCLCaptioner

    return IDCPCLCaptioner


__all__ = ["FAMILY", "check_config", "default_config"]
