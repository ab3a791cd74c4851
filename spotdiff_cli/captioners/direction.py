"""Arrival vs departure for the learned captioners (issue 24), the parts every family shares.

A family that learns it has a head that reads its pair features (``direction_weight`` > 0,
trained by :func:`direction_cross_entropy` on the pairs whose change types say the direction:
``features.change_direction``, batch ``direction``, -1 where unknown), may hand the head's
answer (P(departure), P(arrival)) to its caption decoder at every word
(``direction_to_speaker``), and may, in training, hand the known direction instead
(``direction_teacher``: :func:`taught`). Which features the head reads is the family's own.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor

from ..errors import ModelError


def check_direction_settings(has_head: bool, to_speaker: bool) -> None:
    """Refuse ``direction_to_speaker`` without a head: only the direction objective trains it."""
    if to_speaker and not has_head:
        raise ModelError(
            "direction_to_speaker hands the caption decoder the direction head's answer, which "
            "only the direction objective trains: set direction_weight > 0 too"
        )


def direction_cross_entropy(
    direction: Tensor, logits_for: Callable[[Tensor], Tensor], like: Tensor
) -> Tensor:
    """Cross-entropy of arrival (1) vs departure (0) over the rows whose ``direction`` (B,) is
    known (>= 0); ``logits_for(known)`` gives those rows' (N, 2) logits from the (B,) bool
    mask. 0 (on ``like``'s device) when no row's direction is known."""
    direction = direction.to(like.device)
    known = direction >= 0
    if not bool(known.any()):
        return like.new_zeros(())
    return F.cross_entropy(logits_for(known), direction[known])


def taught(probs: Tensor, known: Tensor | None) -> Tensor:
    """The head's answer (B, 2), with the known direction one-hot in its place where ``known``
    (B,) says it (>= 0): teacher forcing of the answer, as it hands the gold word."""
    if known is None:
        return probs
    known = known.to(probs.device)
    truth = F.one_hot(known.clamp_min(0), 2).to(probs.dtype)
    return probs.where((known < 0)[:, None], truth)
