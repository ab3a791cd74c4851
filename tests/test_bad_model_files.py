"""Checkpoint and predictions files that are not what they claim to be (issue 8): each is one
``error:`` line that names the file and says what to do, in the library and through the installed
console script - never a traceback, never "this is a bug", never torch's own error text.

The damaged checkpoints are made from the shipped ``weights/ddla-real.pt``, so every case differs
from a real checkpoint in the one way its name says.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, draw_box, textured_background
from console import one_error_line, run_spotdiff

from spotdiff_cli.captioners.checkpoint import load_checkpoint, read_checkpoint
from spotdiff_cli.errors import InputError, ModelError
from spotdiff_cli.evaluate.protocols import load_predictions

SHIPPED = REPO / "weights" / "ddla-real.pt"
FIX = "spotdiff train"  # every refused checkpoint says where a good one comes from


def _shipped() -> dict:
    return torch.load(SHIPPED, map_location="cpu", weights_only=True)


def _save(path: Path, data: object) -> Path:
    torch.save(data, path)
    return path


def _with(section: str, **changes: object) -> Callable[[Path], Path]:
    """A builder: the shipped checkpoint with ``changes`` applied to one of its dict sections."""

    def build(path: Path) -> Path:
        data = _shipped()
        data[section] = {**data[section], **changes}
        return _save(path, data)

    return build


def _bytes(data: bytes) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return build


# name -> (builder(path) -> path, words the error line must hold). Each case was a traceback, a
# "this is a bug" line, a line without the file or the fix, or torch's text, before issue 8.
CHECKPOINTS: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "text file": (_bytes(b"hello, I am not a checkpoint\n"), ("text file", FIX)),
    "empty file": (_bytes(b""), ("empty", FIX)),
    "truncated": (
        lambda p: _bytes(SHIPPED.read_bytes()[: SHIPPED.stat().st_size // 2])(p),
        ("truncated", FIX),
    ),
    "random bytes": (
        _bytes(np.random.default_rng(3).bytes(4096)),
        ("not a spotdiff checkpoint", FIX),
    ),
    "pickle of a dict": (_bytes(pickle.dumps({"model": "ddla"}, protocol=4)), ("pickle", FIX)),
    "config a list": (
        lambda p: _save(p, {**_shipped(), "config": [1, 2]}),
        ("'config' is list", FIX),
    ),
    "config lacks keys": (
        lambda p: _save(p, {**_shipped(), "config": {}}),
        ("stored config", "lacks", FIX),
    ),
    "config value of the wrong type": (
        _with("config", hidden_size="big"),
        ("stored config", "hidden_size", FIX),
    ),
    "config grid not a pair": (_with("config", grid="abc"), ("stored config", "grid", FIX)),
    "vocabulary damaged": (_with("vocab", counts=["many"]), ("vocabulary", FIX)),
}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[Path, Path]:
    import cv2

    root = tmp_path_factory.mktemp("pair")
    scene = textured_background(120, 160, seed=5)
    paths = root / "before.png", root / "after.png"
    for path, image in zip(paths, (scene, draw_box(scene, 60, 40, 30, 24, (220, 40, 40)))):
        cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return paths


def _check_line(line: str, path: Path, words: tuple[str, ...]) -> None:
    assert "\n" not in line.strip() and path.name in line, line
    assert all(word in line for word in words), f"{line!r} lacks one of {words}"
    # Not a bug report, not torch's own explanation of its unpickler.
    assert "bug" not in line and "PyTorch" not in line and "Traceback" not in line, line


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_a_bad_checkpoint_is_one_model_error_naming_the_file(name: str, tmp_path: Path) -> None:
    build, words = CHECKPOINTS[name]
    path = build(tmp_path / "bad.pt")
    with pytest.raises(ModelError) as caught:
        load_checkpoint(path, "cpu", model="ddla")
    _check_line(str(caught.value), path, words)


@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_a_bad_checkpoint_through_the_console_script(name: str, tmp_path: Path, images) -> None:
    build, words = CHECKPOINTS[name]
    path = build(tmp_path / "bad.pt")
    proc = run_spotdiff("caption", *images, "--model", "ddla", "--weights", path)
    assert proc.returncode == 1, proc.stderr
    _check_line(one_error_line(proc), path, words)


def test_random_bytes_are_never_blamed_on_the_unpickler(tmp_path: Path) -> None:
    """Whatever the first byte, random data is "not a checkpoint", not a refused pickle."""
    for seed in range(8):
        path = _bytes(np.random.default_rng(seed).bytes(2048))(tmp_path / f"r{seed}.pt")
        with pytest.raises(ModelError) as caught:
            read_checkpoint(path)
        assert "weights_only" not in str(caught.value) or path.read_bytes()[:1] == b"\x80"


def test_an_unknown_model_in_a_checkpoint_is_named(tmp_path: Path) -> None:
    path = _save(tmp_path / "future.pt", {**_shipped(), "model": "gpt-9"})
    with pytest.raises(ModelError, match="'gpt-9' model, which this spotdiff does not know"):
        load_checkpoint(path)


def test_the_shipped_checkpoint_still_loads() -> None:
    model, meta = load_checkpoint(SHIPPED, "cpu", model="ddla")
    assert model.name == "ddla" and meta["model"] == "ddla"


# --------------------------------------------------------------------------------------------------
# eval --predictions


# name -> (file contents, words the error line must hold)
NOT_TEXT = "not a JSON text file"
PREDICTIONS: dict[str, tuple[Callable[[], bytes], str]] = {
    "a PNG": (
        lambda: (REPO / "examples" / "parking-lot" / "report" / "annotated.png").read_bytes(),
        NOT_TEXT,
    ),
    "a checkpoint": (lambda: SHIPPED.read_bytes()[:4096], NOT_TEXT),
    "latin-1 text": (
        lambda: '[{"image_id": "1", "caption": "caf\u00e9"}]'.encode("latin-1"),
        NOT_TEXT,
    ),
    "report with a string for its images": (
        lambda: b'[{"inputs": {"before": "a.png"}, "caption": "x"}]',
        "no image_id",
    ),
    "nested 100000 deep": (lambda: b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("name", list(PREDICTIONS))
def test_bad_predictions_are_one_input_error(name: str, tmp_path: Path) -> None:
    make, words = PREDICTIONS[name]
    path = tmp_path / "preds.json"
    path.write_bytes(make())
    with pytest.raises(InputError) as caught:
        load_predictions(path)
    _check_line(str(caught.value), path, (words,))


@pytest.mark.parametrize("name", list(PREDICTIONS))
def test_bad_predictions_through_the_console_script(name: str, tmp_path: Path) -> None:
    make, words = PREDICTIONS[name]
    path = tmp_path / "preds.json"
    path.write_bytes(make())
    dataset = REPO.parent / "shared" / "data" / "spot-the-diff" / "annotations"
    if not dataset.is_dir():
        pytest.skip("needs ../shared/data/spot-the-diff/annotations")
    proc = run_spotdiff(
        "eval", "--predictions", path, "--dataset", dataset, "--out", tmp_path / "out"
    )
    assert proc.returncode == 1, proc.stderr
    _check_line(one_error_line(proc), path, (words,))
