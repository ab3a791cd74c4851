"""How an epoch's training examples are grouped into batches (the recipe's ``sampler``).

``shuffle`` (the default, what Spot-the-diff §4 implies): the examples in a random order drawn
from (seed, epoch), cut into batches of ``batch_size``.

``contrastive``: the same order, but no batch holds two examples of one image pair, nor two
examples whose captions are identical. Objectives that treat the other items of a batch as
negatives (in-batch classification, composed-query retrieval: DUDA+AUX eq. 6) would otherwise
be asked to tell an item from itself: the same pair described by another annotator, or "nothing
has changed" written for two different distractor pairs. An example that clashes with the batch
being filled waits for the next batch (it goes first there), so every example is used exactly once
per epoch and the order stays as close to the shuffle as the constraints allow; batches at the
end of an epoch may be shorter when only clashing examples are left.

``balance_changes: true`` (with either sampler) reorders the shuffle first so that examples of
pairs that hold a change and of pairs that do not (distractors, "no change" references) take turns
(:func:`balanced_order`): each batch holds both in equal shares while both last. On the rendered
3-D benchmark, which has as many of each, every batch is then half and half; without it a batch's
share drifts with the shuffle, and a captioner whose cheapest answer is "no change" gets batches
that reward it more than half the time.

All are deterministic functions of (seed, epoch), so ``--resume`` finds the same batches and
every process of a distributed run draws the same ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

import numpy as np

from ..captioners.features import caption_groups, caption_key

SAMPLERS = ("shuffle", "contrastive")


def epoch_order(n_examples: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled example indices of ``epoch`` (the same for every process)."""
    return np.random.default_rng([seed, epoch]).permutation(n_examples)


def shuffled_batches(order: Sequence[int], batch_size: int) -> list[list[int]]:
    """``order`` cut into consecutive batches of ``batch_size`` (the last may be shorter)."""
    return [
        [int(i) for i in order[start : start + batch_size]]
        for start in range(0, len(order), batch_size)
    ]


def balanced_order(order: Sequence[int], changed: Sequence[bool]) -> list[int]:
    """``order`` with the examples of changed pairs and of unchanged ones taking turns, each group
    in its own order from ``order`` (a changed one first); the longer group's rest comes last.
    Every example stays exactly once, so an epoch has as many steps as before."""
    yes = [int(i) for i in order if changed[int(i)]]
    no = [int(i) for i in order if not changed[int(i)]]
    turns = [i for pair in zip(yes, no) for i in pair]
    n = min(len(yes), len(no))
    return turns + yes[n:] + no[n:]


def contrastive_batches(
    order: Sequence[int],
    pair_of: Sequence[Hashable],
    caption_of: Sequence[Hashable],
    batch_size: int,
) -> list[list[int]]:
    """Batches over ``order`` in which no two examples share a pair or a caption.

    pair_of[i], caption_of[i]: the pair and the (normalised) caption of example i. Examples that
    clash with the batch being filled keep their order and open the next batch.
    """
    pending = deque(int(i) for i in order)
    batches: list[list[int]] = []
    while pending:
        batch: list[int] = []
        pairs: set[Hashable] = set()
        captions: set[Hashable] = set()
        waiting: list[int] = []
        while pending and len(batch) < batch_size:
            i = pending.popleft()
            if pair_of[i] in pairs or caption_of[i] in captions:
                waiting.append(i)
                continue
            batch.append(i)
            pairs.add(pair_of[i])
            captions.add(caption_of[i])
        pending.extendleft(reversed(waiting))
        batches.append(batch)
    return batches


__all__ = [
    "SAMPLERS",
    "balanced_order",
    "caption_groups",
    "caption_key",
    "contrastive_batches",
    "epoch_order",
    "shuffled_batches",
]
