"""Per-frame results that the next pair of a sequence reuses.

In a sequence compared sample by sample, pair n's after frame is pair n+1's before frame: its
band-pass grey image (alignment) and its blurred colour image (the change mask) need computing
once, not twice. ``memoised(image, what, compute)`` keeps the last few results, keyed on the
array's memory (address, shape, strides).

Only read-only arrays are memoised: an array that can change in place could make a stale entry
look valid. The timeline marks its frames read-only; everything else (a user's arrays, an image
shifted by the alignment) is simply computed, exactly as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

# Two frames per pair, three kinds of result each (grey, blur, colour cast), with room for a
# pair in flight on another thread, and the first look's two blurred thumbnails.
_SIZE = 16
_entries: OrderedDict[tuple[Any, ...], tuple[np.ndarray, Any]] = OrderedDict()
_lock = threading.Lock()


def memoised(image: np.ndarray, what: str, compute: Callable[[np.ndarray], T]) -> T:
    """``compute(image)``, reused when this very (read-only) memory was seen with ``what``."""
    if image.flags.writeable:
        return compute(image)
    key = (image.__array_interface__["data"][0], image.shape, image.strides, image.dtype.str, what)
    with _lock:
        hit = _entries.get(key)
        if hit is not None:
            _entries.move_to_end(key)
            return hit[1]
    value = compute(image)
    with _lock:
        # The entry holds the array itself, so its memory cannot be freed and handed to another
        # array while the key is in the table.
        _entries[key] = (image, value)
        while len(_entries) > _SIZE:
            _entries.popitem(last=False)
    return value


def clear() -> None:
    """Forget everything (tests; a long-lived process switching to other work)."""
    with _lock:
        _entries.clear()
