"""onnxruntime sessions and the optimised graphs kept in the user's cache: the second session of a
network loads the graph the first one optimised, answers the same, and a damaged, unwritable or
switched-off cache costs nothing but the time it would have saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spotdiff_cli.analysis import onnx_runtime
from spotdiff_cli.analysis.detect import WEIGHTS_KIND, WEIGHTS_NAME_INT8
from spotdiff_cli.errors import ModelError
from spotdiff_cli.weights import resolve_weights

pytest.importorskip("onnxruntime")


@pytest.fixture
def detector_graph() -> Path:
    return resolve_weights(WEIGHTS_NAME_INT8, kind=WEIGHTS_KIND)


def _answer(session) -> np.ndarray:
    """The session's outputs for one fixed 256x256 input, as one vector."""
    blob = np.random.default_rng(0).random((1, 3, 256, 256), dtype=np.float32)
    name = session.get_inputs()[0].name
    return np.concatenate([out.ravel() for out in session.run(None, {name: blob})])


def _copies(cache: Path) -> list[Path]:
    return sorted((cache / "spotdiff" / "onnxruntime").glob("*"))


def test_the_second_session_loads_the_kept_graph_and_answers_the_same(
    tmp_path, monkeypatch, detector_graph
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPOTDIFF_ORT_CACHE", raising=False)
    first = onnx_runtime.ort_session(detector_graph, 1, "detector", "x")
    [copy] = _copies(tmp_path)  # no temporary file left beside it
    assert copy.name.startswith("nanodet_coco_int8-") and copy.suffix == ".ort"
    assert copy == onnx_runtime.optimised_copy(detector_graph, _version())
    made = copy.stat().st_mtime_ns
    second = onnx_runtime.ort_session(detector_graph, 2, "detector", "x")
    assert copy.stat().st_mtime_ns == made  # read, not written again
    assert np.array_equal(_answer(first), _answer(second))


def test_a_damaged_copy_is_made_again(tmp_path, monkeypatch, detector_graph):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPOTDIFF_ORT_CACHE", raising=False)
    fresh = _answer(onnx_runtime.ort_session(detector_graph, 1, "detector", "x"))
    [copy] = _copies(tmp_path)
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 3])  # cut short
    again = onnx_runtime.ort_session(detector_graph, 1, "detector", "x")
    assert np.array_equal(_answer(again), fresh)
    [copy] = _copies(tmp_path)
    assert np.array_equal(_answer(onnx_runtime.ort_session(copy, 1, "detector", "x")), fresh)


def test_no_copy_where_switched_off_or_unwritable(tmp_path, monkeypatch, detector_graph):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SPOTDIFF_ORT_CACHE", "0")
    onnx_runtime.ort_session(detector_graph, 1, "detector", "x")
    assert _copies(tmp_path) == []
    monkeypatch.delenv("SPOTDIFF_ORT_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert _answer(onnx_runtime.ort_session(detector_graph, 1, "detector", "x")).size


def test_a_corrupt_graph_is_still_one_clear_error_and_leaves_no_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SPOTDIFF_ORT_CACHE", raising=False)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07 not a graph")
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        onnx_runtime.ort_session(bad, 1, "detector", "scripts/quantize_nanodet.py")
    assert _copies(tmp_path / "cache") == []


def test_another_cpu_or_version_or_file_is_another_copy(tmp_path, detector_graph, monkeypatch):
    here = onnx_runtime.optimised_copy(detector_graph, "1.0")
    assert here != onnx_runtime.optimised_copy(detector_graph, "1.1")
    monkeypatch.setattr(onnx_runtime, "_cpu", lambda: "another cpu")
    assert here != onnx_runtime.optimised_copy(detector_graph, "1.0")
    other = tmp_path / detector_graph.name
    other.write_bytes(detector_graph.read_bytes())
    assert onnx_runtime.optimised_copy(other, "1.0") != onnx_runtime.optimised_copy(
        detector_graph, "1.0"
    )


def _version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def test_old_copies_and_abandoned_files_are_removed(tmp_path, monkeypatch, detector_graph):
    """Each checkout or install makes its own copy: only the newest few of a network stay, and
    a temporary file a killed process left goes once it is an hour old."""
    import os
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPOTDIFF_ORT_CACHE", raising=False)
    folder = tmp_path / "spotdiff" / "onnxruntime"
    folder.mkdir(parents=True)
    old = time.time() - 7200
    stale = [folder / f"nanodet_coco_int8-{i:020d}.ort" for i in range(5)]
    for i, path in enumerate(stale):
        path.write_bytes(b"an older copy")
        os.utime(path, (old + i, old + i))
    other = folder / f"efficientnet_lite0_imagenet-{0:020d}.ort"  # another network: kept
    other.write_bytes(b"x")
    os.utime(other, (old, old))
    abandoned = folder / ".nanodet_coco_int8-x.ort.123.456"
    abandoned.write_bytes(b"half")
    os.utime(abandoned, (old, old))
    recent = folder / ".nanodet_coco_int8-y.ort.124.457"  # maybe still being written
    recent.write_bytes(b"half")

    onnx_runtime.ort_session(detector_graph, 1, "detector", "x")
    made = onnx_runtime.optimised_copy(detector_graph, _version())
    left = set(_copies(tmp_path))
    assert made in left and other in left and recent in left
    assert abandoned not in left
    assert left & set(stale) == {stale[4], stale[3]}  # the two newest old ones, with the new
