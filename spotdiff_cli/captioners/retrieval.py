"""Recall@1 of a composed-query retrieval head, over a whole split (DUDA+AUX's auxiliary network;
``papers/duda-aux-composed-retrieval-2021.txt`` §4).

A query q_i (the composition of a pair's before image and a caption) should retrieve its pair's
after image among the candidates. Two candidate sets, after eq. 13 of the paper:

* **easy**: the after images of every pair of the split (n = N; the same scene's distractor or
  change image is among them when the split has one, as in CLEVR-Change);
* **hard**: the same plus the query's own before image A (n = N + 1), the near-duplicate the
  paper adds from epoch ξ on: the caption must say what differs for B to beat A.

Plain tensors in, plain numbers out: the training loop's validation and ``spotdiff eval`` both
call :func:`recall_at_1`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Recall:
    """R@1 of ``queries`` queries among ``candidates`` after images (easy) and with each query's
    own before image added (hard)."""

    easy: float
    hard: float
    queries: int
    candidates: int


def recall_at_1(queries: Tensor, pair_of: Tensor, after: Tensor, before: Tensor) -> Recall:
    """R@1 of composed queries by dot product (the similarity of eq. 6).

    queries: (Q, d) composed queries; pair_of: (Q,) int64, the row of ``after`` each query should
    retrieve; after: (N, d) the candidates' target embeddings g(B_j); before: (N, d) g(A_j), of
    which the hard set adds ``before[pair_of[i]]`` to query i's candidates. A tie with the target
    counts as a miss (the argmax must be the target alone)."""
    if queries.shape[0] == 0:
        return Recall(0.0, 0.0, 0, int(after.shape[0]))
    queries, after, before = queries.float(), after.float(), before.float()
    scores = queries @ after.T  # (Q, N)
    rows = torch.arange(queries.shape[0], device=queries.device)
    target = scores[rows, pair_of]
    others = scores.clone()
    others[rows, pair_of] = float("-inf")
    easy = target > others.max(dim=1).values
    own_before = (queries * before[pair_of]).sum(-1)  # (Q,)
    hard = easy & (target > own_before)
    return Recall(
        float(easy.float().mean()),
        float(hard.float().mean()),
        int(queries.shape[0]),
        int(after.shape[0]),
    )


__all__ = ["Recall", "recall_at_1"]
