"""The one-sentence-per-pair batch the transformer families' tests fit (clip4idc, onediff,
idc-pcl): random (B, C, h, w) grids and each sentence's ids, as ``train/batches.py`` collates
them, so a test can check what a model learns on data it can memorise."""

from __future__ import annotations

import torch

from spotdiff_cli.captioners.vocab import PAD_ID, Vocabulary


def one_sentence_batch(
    vocab: Vocabulary,
    sentences: list[str],
    grid: tuple[int, int, int],
    pair_ids: list[str],
    seed: int = 0,
    length: int = 8,
) -> dict:
    """B = len(sentences) pairs, sentence i the only caption of pair i (padded to ``length``
    tokens or the longest), grids of shape ``grid`` = (C, h, w) from a generator seeded ``seed``."""
    g = torch.Generator().manual_seed(seed)
    encoded = [vocab.encode(s) for s in sentences]
    tokens = torch.full((len(sentences), 1, max(length, *map(len, encoded))), PAD_ID)
    for i, ids in enumerate(encoded):
        tokens[i, 0, : len(ids)] = torch.tensor(ids)
    b = len(sentences)
    return {
        "before": torch.randn(b, *grid, generator=g),
        "after": torch.randn(b, *grid, generator=g),
        "tokens": tokens,
        "sentence_valid": torch.ones(b, 1, dtype=torch.bool),
        "pair_ids": list(pair_ids),
    }
