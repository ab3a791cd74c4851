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


# --------------------------------------------------------------------------------------------------
# Hugging Face folders named by a model's settings (OneDiff's vision: / lm:, CLIP4IDC's vision:)


class _Exploit:
    """Unpickling this would run a shell command that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _tiny_clip(folder: Path) -> Path:
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    torch.manual_seed(0)
    CLIPVisionModel(config).save_pretrained(folder)
    return folder


def _pickled_weights(folder: Path) -> str:
    for old in folder.glob("*.safetensors"):
        old.unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Exploit(folder / "PWNED")))
    return "pytorch_model.bin"


def _garbage_safetensors(folder: Path) -> str:
    next(folder.glob("*.safetensors")).write_bytes(b"not tensors " * 20)
    return next(folder.glob("*.safetensors")).name


def _json(name: str, text: str) -> Callable[[Path], str]:
    def spoil(folder: Path) -> str:
        (folder / name).write_text(text)
        return name

    return spoil


# name -> (spoil(folder) -> the file's name, words the error line must hold). Before issue 25 the
# pickle was a 4-line "unexpected UnpicklingError" advising weights_only=False, and the JSON
# cases a TypeError about ** or a JSONDecodeError naming no file.
HF_FOLDERS: dict[str, tuple[Callable[[Path], str], tuple[str, ...]]] = {
    "pickle with code as pytorch_model.bin": (
        _pickled_weights,
        ("not a plain tensor file", "never unpickles", "safetensors"),
    ),
    "model.safetensors of garbage": (_garbage_safetensors, ("not a readable weights file",)),
    "config.json not JSON": (_json("config.json", "{not json"), ("not valid JSON", "line 1")),
    "config.json a list": (_json("config.json", "[1, 2]"), ("holds a list",)),
    "config.json a string": (_json("config.json", '"clip"'), ("holds a string",)),
}


def _check_hf_line(line: str, folder: Path, name: str, words: tuple[str, ...]) -> None:
    assert "\n" not in line.strip() and str(folder / name) in line, line
    assert all(word in line for word in words), f"{line!r} lacks one of {words}"
    assert "weights_only" not in line and "bug" not in line and "PyTorch" not in line, line
    assert not (folder / "PWNED").exists(), "the pickle ran code"


@pytest.mark.parametrize("name", list(HF_FOLDERS))
def test_a_bad_onediff_vision_folder_is_one_model_error(name: str, tmp_path: Path) -> None:
    from test_onediff import build, make_vocab

    spoil, words = HF_FOLDERS[name]
    folder = _tiny_clip(tmp_path / "clip")
    file = spoil(folder)
    with pytest.raises(ModelError) as caught:
        build(make_vocab(), vision=str(folder))
    _check_hf_line(str(caught.value), folder, file, words)


@pytest.mark.parametrize(
    "name", [*HF_FOLDERS, "tokenizer.json not JSON"], ids=[*HF_FOLDERS, "tokenizer.json not JSON"]
)
def test_a_bad_onediff_lm_folder_is_one_model_error(name: str, tmp_path: Path) -> None:
    from test_onediff import SENTENCES, build, make_vocab, tiny_llama

    spoil, words = HF_FOLDERS.get(name, (_json("tokenizer.json", "{oops"), ("not valid JSON",)))
    folder = tiny_llama(tmp_path / "llama", [w for s in SENTENCES for w in s.split()])
    file = spoil(folder)
    with pytest.raises(ModelError) as caught:
        build(make_vocab(), lm=str(folder))
    _check_hf_line(str(caught.value), folder, file, words)


@pytest.mark.parametrize(
    "name", ["pickle with code as pytorch_model.bin", "model.safetensors of garbage"]
)
def test_a_bad_weights_file_read_by_name_is_one_model_error(name: str, tmp_path: Path) -> None:
    """``read_state_dict`` (CLIP4IDC's vision:, IDC-PCL's bert:) reads the tensors itself."""
    from spotdiff_cli.captioners.local_files import read_state_dict

    spoil, words = HF_FOLDERS[name]
    folder = _tiny_clip(tmp_path / "clip")
    file = spoil(folder)
    with pytest.raises(ModelError) as caught:
        read_state_dict(folder, "clip4idc")
    _check_hf_line(str(caught.value), folder, file, words)


def test_a_checkpoint_naming_a_poisoned_vision_folder_through_the_console_script(
    tmp_path: Path, images
) -> None:
    """A OneDiff checkpoint names its CLIP folder (the frozen tower is not stored); a pickle
    with code put there since is refused in one line when `spotdiff caption` loads it."""
    from test_onediff import build, make_vocab

    from spotdiff_cli.captioners.checkpoint import save_checkpoint

    folder = _tiny_clip(tmp_path / "clip")
    path = save_checkpoint(tmp_path / "od.pt", build(make_vocab(), vision=str(folder)))
    _pickled_weights(folder)
    proc = run_spotdiff("caption", *images, "--model", "onediff", "--weights", path)
    assert proc.returncode == 1, proc.stderr
    # The checkpoint loader quotes the folder's error, cut at 200 characters: the file and
    # what is wrong with it come first.
    _check_hf_line(one_error_line(proc), folder, "pytorch_model.bin", ("not a plain tensor file",))
