"""Models loaded once per process: a thread that asks while another is still loading waits for
that load instead of starting its own (the recognisers' warm-up thread and the first caption
each built the classifier's onnxruntime session, ~100 ms of CPU twice)."""

from __future__ import annotations

import threading
import time

import pytest

from spotdiff_cli.analysis import detect, recognise
from spotdiff_cli.analysis.once import built_once


def test_callers_that_come_while_it_builds_wait_for_the_one_build():
    builds = []

    @built_once
    def slow() -> object:
        builds.append(threading.current_thread().name)
        time.sleep(0.2)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert len(results) == 4 and all(r is results[0] for r in results)
    slow.cache_clear()
    assert slow() is not results[0] and len(builds) == 2


def test_a_build_that_fails_is_tried_again_by_the_next_caller():
    tries = []

    @built_once
    def flaky() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("weights busy")
        return "loaded"

    with pytest.raises(OSError, match="weights busy"):
        flaky()
    assert flaky() == "loaded" and flaky() == "loaded"
    assert len(tries) == 2


def test_the_shipped_loaders_are_built_once():
    for loader in (detect.default_detector, recognise._classifier, recognise._hog):
        assert loader() is loader()
