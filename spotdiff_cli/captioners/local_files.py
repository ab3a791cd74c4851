"""Local files a model family reads by name, shared so no family imports another's internals:
a benchmark folder named in a stage option (``cst_data``, ``fda_data``) and the tensors of a saved
Hugging Face model folder (a local CLIP or BERT)."""

from __future__ import annotations

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


def read_state_dict(folder: Path, family: str = "clip4idc") -> dict[str, Any]:
    """The tensors of a saved HF model folder (``model.safetensors`` or ``pytorch_model.bin``,
    read without unpickling objects); ``family`` names the model in the error."""
    safetensors = folder / "model.safetensors"
    if safetensors.is_file():
        from safetensors.torch import load_file

        return load_file(str(safetensors))
    binary = folder / "pytorch_model.bin"
    if binary.is_file():
        import torch

        return torch.load(binary, map_location="cpu", weights_only=True)
    raise ModelError(f"{family}: {folder} has no model.safetensors or pytorch_model.bin")


__all__ = ["read_state_dict", "resolve_root"]
