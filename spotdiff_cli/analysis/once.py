"""Loaders that build their model once per process, however many threads ask at the same time.

``functools.lru_cache`` does not lock: a thread that asks while another is still building runs
the builder a second time. The recognisers are loaded on a background thread while the analysis
runs (``recognise.start_warm_up``), and the first caption or the video pipeline's threads ask for
them before that thread is done: each such overlap built another onnxruntime session (~100 ms of
CPU for the classifier, holding the GIL for much of it) instead of waiting for the one under way.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def built_once(build: Callable[[], T]) -> Callable[[], T]:
    """``build()`` run at most once (until ``cache_clear()``); a caller that comes while it runs
    waits for its result. A build that raises is not kept: the next caller tries again (and gets
    the error with its message)."""
    cached = functools.lru_cache(maxsize=1)(build)
    lock = threading.Lock()

    @functools.wraps(build)
    def built() -> T:
        with lock:
            return cached()

    built.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return built
