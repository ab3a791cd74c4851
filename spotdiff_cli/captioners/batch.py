"""The batch a learned model reads: every key, its shape and what it means, written once
(docs/training-interfaces.md has the same table for readers of the contract).

``captioners/features.py: collate`` builds it for training (``train/batches.py``) and for
inference (``batch_from_analysis``), so a model sees the same keys in both. It is a plain dict at
run time (``TypedDict``): models index it by these names, a batch may lack the optional ones
(``total=False``), and nothing here imports torch, so the feature code can name it cheaply.

Shapes: B pairs, K cluster slots, S sentence slots, T tokens per sentence, T2 tokens per whole
description, C channels of an h x w backbone grid, H x W images.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    from torch import Tensor
else:
    Tensor = Any


class Batch(TypedDict, total=False):
    """One batch (module docstring). Besides these keys, a recipe with ``feature_levels`` adds
    the backbone's maps at those strides as ``before_s8``, ``after_s8``, ``before_s16``, ...
    ((B, C_s, H/s, W/s) float32; onediff reads them), which a ``TypedDict`` cannot list."""

    before: Tensor  # (B, C, h, w) float32: backbone grid features of the before image
    after: Tensor  # (B, C, h, w) float32: ... of the after image
    # (B, 3, H, W) uint8 RGB *instead of* before/after when fine-tuning the backbone
    # (``features.with_grids`` turns them into grids inside the step), or when the model reads
    # pixels itself (a local CLIP: ``vision: PATH``).
    before_images: Tensor
    after_images: Tensor
    cluster_masks: Tensor  # (B, K, h, w) float32 in [0, 1]: cluster masks C_k on the grid
    cluster_valid: Tensor  # (B, K) bool: real clusters (the rest is padding)
    cluster_feats: Tensor  # (B, K, 4) float32: prior features g(z) of each cluster
    tokens: Tensor  # (B, S, T) int64: gold sentences, <bos> w1 ... wn <eos>, <pad>-padded
    sentence_valid: Tensor  # (B, S) bool: real sentences
    multi_tokens: Tensor  # (B, T2) int64: the whole description, sentences joined by <sep>
    gold_alignment: Tensor  # (B, S) int64: each sentence's gold cluster slot, -1 = unknown
    caption_groups: Tensor  # (B,) int64: rows with identical captions share an id
    pair_ids: list[str]  # dataset ids
    references: list[list[str]]  # each pair's raw reference sentences (for scoring)
    descriptions: list[list[str]]  # each annotator's whole description (multi-sentence refs)
    cluster_ids: list[list[int]]  # the analysis' Cluster.id of each cluster slot


__all__ = ["Batch"]
