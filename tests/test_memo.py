"""Per-frame memo: reused for the very same read-only memory, never for writable arrays."""

from __future__ import annotations

import numpy as np

from spotdiff_cli.analysis import memo


def test_a_read_only_frame_is_computed_once_and_a_writable_one_every_time():
    memo.clear()
    calls = []

    def compute(image: np.ndarray) -> float:
        calls.append(1)
        return float(image.sum())

    frame = np.ones((4, 4, 3), np.uint8)
    assert memo.memoised(frame, "sum", compute) == 48.0
    frame[0, 0, 0] = 5  # writable: may change, so never served from the memo
    assert memo.memoised(frame, "sum", compute) == 52.0
    assert len(calls) == 2
    frame.flags.writeable = False
    memo.memoised(frame, "sum", compute)
    memo.memoised(frame, "sum", compute)
    memo.memoised(frame[1:], "sum", compute)  # another view: other memory, other key
    assert len(calls) == 4


def test_the_memo_keeps_only_the_last_few_results():
    memo.clear()
    frames = [np.full((2, 2), i, np.uint8) for i in range(20)]
    for f in frames:
        f.flags.writeable = False
        memo.memoised(f, "id", lambda image: int(image[0, 0]))
    assert len(memo._entries) <= memo._SIZE
