"""Medians and distinct values that do not import ``numpy.ma``.

NumPy's ``np.median`` asks ``np.ma.isMaskedArray`` of every result, and ``np.unique`` asks
``np.ma.is_masked`` of its input; the first such question imports ``numpy.ma`` (18-22 ms of a
cold process, on the thread that asked). A caption or a video run asks within its first pair's
analysis, on the critical path: a ``numpy.ma`` made never to load took 28 ms off the bundled
caption's whole process (``benchmarks/caption.py``, 31 rounds). The functions here give the same
values, bit for bit, without the question.
"""

from __future__ import annotations

import numpy as np


def median(values: np.ndarray) -> np.floating | float:
    """``np.median(values)`` over all elements: the same value, to the bit (the middle one, or
    ``np.mean`` of the middle two as NumPy takes it, in the same dtype), NaN when any element
    is NaN; for an empty input, what ``np.median`` says (NaN and its warning)."""
    flat = np.asarray(values).reshape(-1)
    n = flat.size
    if n == 0:
        return np.median(flat)
    half = n // 2
    kth = [half - 1, half] if n % 2 == 0 else [half]
    can_be_nan = np.issubdtype(flat.dtype, np.inexact)
    if can_be_nan:
        kth.append(n - 1)  # NaNs sort last: the last element says whether there is one
    part = np.partition(flat, kth)
    if can_be_nan and np.isnan(part[-1]):
        return part[-1]
    middle = part[half - 1 : half + 1] if n % 2 == 0 else part[half : half + 1]
    return np.mean(middle)


def distinct_labels(labels: np.ndarray) -> np.ndarray:
    """``np.unique(labels)`` of non-negative integer labels (class ids, colour indices): the
    labels present, in increasing order, read off their counts."""
    flat = np.asarray(labels).reshape(-1)
    if flat.size == 0:
        return flat.astype(np.intp)
    return np.flatnonzero(np.bincount(flat)).astype(flat.dtype, copy=False)
