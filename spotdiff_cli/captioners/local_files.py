"""Local files a model family reads by name, shared so no family imports another's internals:
a benchmark folder named in a stage option (``cst_data``, ``fda_data``) and the tensors of a saved
Hugging Face model folder (a local CLIP or BERT)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ..errors import DataError, ModelError


def resolve_root(name: str, setting: str = "cst_data") -> Path:
    """A dataset folder from a path, or from the name of a benchmark folder the training loop
    made in the user cache (``synth-60x96-seed0``, ``clevr-3000x320x240-spp16-seed0``)."""
    from ..weights import user_cache_dir

    path = Path(name).expanduser()
    if path.is_dir():
        return path
    cached = user_cache_dir() / "datasets" / name
    if cached.is_dir():
        return cached
    raise DataError(
        f"{setting} '{name}' is neither a dataset folder nor a benchmark in {cached.parent}; give "
        "the folder of the synthetic or rendered benchmark the run trains on"
    )


class FolderFileError(ModelError):
    """A file of a model folder a setting names (``vision:``, ``lm:``, ``bert:``) is not what it
    claims. Its message names that file and the fix; a caller that wraps model errors with its
    own context (a checkpoint naming the folder) should let this one through unchanged."""


def read_state_dict(folder: Path, family: str = "clip4idc") -> dict[str, Any]:
    """The tensors of a saved HF model folder (``model.safetensors`` or ``pytorch_model.bin``,
    read without unpickling objects); ``family`` names the model in the error. A file that is
    not a plain tensor file is one ModelError naming it (:func:`weights_file_error`)."""
    safetensors = folder / "model.safetensors"
    if safetensors.is_file():
        from safetensors.torch import load_file

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # one error line, not a library's warning too
                return load_file(str(safetensors))
        except Exception as exc:  # noqa: BLE001 - SafetensorError, OSError: a bad file, one line
            raise weights_file_error(family, safetensors, exc) from exc
    binary = folder / "pytorch_model.bin"
    if binary.is_file():
        import torch

        try:
            with warnings.catch_warnings():
                # torch warns (with a source line) about a pickle protocol before refusing it.
                warnings.simplefilter("ignore")
                return torch.load(binary, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - UnpicklingError, EOFError, RuntimeError...
            raise weights_file_error(family, binary, exc) from exc
    raise ModelError(f"{family}: {folder} has no model.safetensors or pytorch_model.bin")


def weights_file_error(family: str, file: Path, exc: BaseException) -> FolderFileError:
    """One line for a weights file of a Hugging Face folder that does not load. A pickle that
    holds more than tensors is refused by ``torch.load(weights_only=True)`` with several lines
    that advise ``weights_only=False``, which would run whatever code it carries: never that
    here."""
    import pickle

    if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
        return FolderFileError(
            f"{family}: {file} is not a plain tensor file: it holds pickled Python objects, and "
            "spotdiff never unpickles code; give the weights as model.safetensors "
            "(save_pretrained(folder, safe_serialization=True)) from a source you trust"
        )
    return FolderFileError(
        f"{family}: {file} is not a readable weights file ({first_line(exc)}); save the model "
        "again with save_pretrained, or download it again"
    )


def check_json_files(folder: Path, family: str) -> None:
    """Every ``*.json`` of a Hugging Face folder (config.json, tokenizer.json, ...) is a JSON
    mapping, else one ModelError naming the file: transformers reports a list as a TypeError
    about ``**`` and a syntax error in tokenizer.json without the file's name."""
    import json

    for file in sorted(folder.glob("*.json")):
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise FolderFileError(
                f"{family}: {file} is not a JSON text file (not UTF-8); save the model again "
                "with save_pretrained"
            ) from None
        except json.JSONDecodeError as exc:
            raise FolderFileError(
                f"{family}: {file} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg}); save the model again with save_pretrained"
            ) from None
        except RecursionError:
            raise FolderFileError(
                f"{family}: {file} is not valid: it nests too deeply; save the model again "
                "with save_pretrained"
            ) from None
        except OSError as exc:
            raise FolderFileError(
                f"{family}: {file} cannot be read ({exc.strerror or exc})"
            ) from None
        if not isinstance(data, dict):
            kind = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}
            raise FolderFileError(
                f"{family}: {file} holds {kind.get(type(data), 'a number')}, not the mapping of "
                "settings a Hugging Face folder keeps there; save the model again with "
                "save_pretrained"
            )


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, printable and at most 200 characters (the
    exception's type when it has no text)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    line = "".join(c if c.isprintable() else " " for c in line)
    return line[:200]


__all__ = [
    "FolderFileError",
    "check_json_files",
    "first_line",
    "read_state_dict",
    "resolve_root",
    "weights_file_error",
]
