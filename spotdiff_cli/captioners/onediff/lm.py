"""The causal language models OneDiff's projector feeds (``papers/onediff-2024.txt`` §4.1, §5.1:
Vicuna-7B or Qwen2 there).

Two kinds behind one interface (``width``, ``vocab_size``, ``embed(ids)``, ``logits(embeds)``,
``targets(texts or ids)``, ``text(ids)``):

- :class:`ScratchLM` (``lm: ""``, the default here): a GPT-2-shaped decoder built from
  ``transformers.GPT2Config`` and trained from scratch over the project's word vocabulary
  (``captioners/vocab.py``: ``<pad>``=0, ``<bos>``=1, ``<eos>``=2). No published LM can be
  installed on these machines; this one is named for what it is in the model card.
- :class:`HuggingFaceLM` (``lm: /path/to/folder``): any local Hugging Face causal LM and its
  tokenizer (``AutoModelForCausalLM`` / ``AutoTokenizer``, ``local_files_only=True``: nothing is
  downloaded). Captions are re-tokenised with its tokenizer; the project vocabulary then only
  names the words the data had.

The shared decoding (``captioners/decoding.py``) starts every row with id 1 and stops at id 2 and
never writes ids 0 and 1. A Hugging Face tokenizer has its own ids, so :class:`HuggingFaceLM` works
in a permuted id space (:func:`decoding_permutation`): its end token sits at 2 and its begin / pad
tokens, when it has them, at 1 / 0. A tokenizer without those tokens (GPT-2 has neither a pad
token nor a begin token distinct from its end token) cannot write the two ordinary tokens that
then sit at 0 and 1 ('!' and '"' for GPT-2's): a known, documented limit.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ...errors import ModelError
from ..local_files import FolderFileError, check_json_files, first_line, weights_file_error
from ..vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary


class ScratchLM(nn.Module):
    """GPT-2-shaped causal LM over the project vocabulary, randomly initialised.

    Args:
        vocab: the run's vocabulary (its ids are the LM's ids).
        width, layers, heads: d_model, blocks, attention heads; positions: longest sequence
        (visual prefix + words); dropout: GPT-2's residual, embedding and attention dropout.
    """

    kind = "scratch"

    def __init__(
        self, vocab: Vocabulary, width: int, layers: int, heads: int, positions: int, dropout: float
    ) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=len(vocab),
            n_positions=positions,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            bos_token_id=BOS_ID,
            eos_token_id=EOS_ID,
            pad_token_id=PAD_ID,
        )
        self.model = GPT2LMHeadModel(config)
        self.vocab = vocab
        self.positions = positions

    @property
    def width(self) -> int:
        return int(self.model.config.n_embd)

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def embed(self, ids: Tensor) -> Tensor:
        """(N, T) ids -> (N, T, width) word embeddings (GPT-2 adds positions itself)."""
        return self.model.get_input_embeddings()(ids)

    def logits(self, embeds: Tensor) -> Tensor:
        """(N, L, width) input embeddings -> (N, L, V) next-token logits (causal)."""
        if embeds.shape[1] > self.positions:
            raise ModelError(
                f"onediff: {embeds.shape[1]} tokens (visual prefix + words) exceed the LM's "
                f"{self.positions} positions; raise lm_positions"
            )
        return self.model(inputs_embeds=embeds).logits

    def to_decoding(self, ids: Tensor) -> Tensor:
        """Ids of this LM -> the shared decoding's ids (the same: the vocabulary has the specials)."""
        return ids

    def from_decoding(self, ids: Tensor) -> Tensor:
        return ids

    def sequences(self, texts: list[list[str]], max_len: int) -> tuple[Tensor, Tensor]:
        """Target sequences of several sentences each: ``<bos> s1 <sep> s2 ... <eos>`` (N, T) and
        the mask of the positions that are targets (N, T - 1) (all but padding)."""
        rows = [self.vocab.encode_many(sentences, max_len) for sentences in texts]
        return _pad(rows, PAD_ID)

    def text(self, ids: list[int]) -> str:
        return self.vocab.decode(ids)


class HuggingFaceLM(nn.Module):
    """A local Hugging Face causal LM and its tokenizer (module docstring).

    dtype: how its weights are held (``"float32"``, ``"bfloat16"``, ``"float16"``). Half
    precision is for a frozen LM: the visual prefix stays float32 and is cast on the way in,
    the logits are cast back to float32 for the loss and the decoding.
    """

    kind = "huggingface"

    def __init__(self, path: str, vocab: Vocabulary, dtype: str = "float32") -> None:
        super().__init__()
        self.dtype = getattr(torch, dtype)

        def load(folder: str) -> tuple[Any, Any]:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            # Straight into ``dtype`` (transformers 5 builds the model empty and fills it from
            # the files): a 7B LM never passes through a 28 GB float32 copy.
            model = AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, dtype=self.dtype
            )
            return tokenizer, model

        self.tokenizer, self.model = load_local(
            path, "lm", "a Hugging Face causal LM with a tokenizer", load
        )
        folder = Path(path).expanduser()
        self.vocab = vocab
        tok = self.tokenizer
        self.eos = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        if self.eos is None:
            raise ModelError(f"onediff: the tokenizer in {folder} has no end-of-sequence token")
        bos = tok.bos_token_id if tok.bos_token_id is not None else self.eos
        self.start = int(bos)
        size = int(self.model.get_output_embeddings().weight.shape[0])
        perm = decoding_permutation(size, int(self.eos), tok.bos_token_id, tok.pad_token_id)
        self.register_buffer("perm", torch.tensor(perm, dtype=torch.long), persistent=False)

    @property
    def width(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[1])

    @property
    def vocab_size(self) -> int:
        return int(self.perm.shape[0])

    def embed(self, ids: Tensor) -> Tensor:
        """(N, T) ids -> (N, T, width) float32 embeddings (cast up from a half-precision LM, so
        they join the float32 visual prefix)."""
        return self.model.get_input_embeddings()(ids).float()

    def logits(self, embeds: Tensor) -> Tensor:
        """(N, T, width) embeddings -> (N, T, vocab) float32 logits."""
        return self.model(inputs_embeds=embeds.to(self.dtype)).logits.float()

    def to_decoding(self, ids: Tensor) -> Tensor:
        """Logits or ids over this LM's ids -> the decoding's permuted order (last dimension)."""
        return ids[..., self.perm]

    def from_decoding(self, ids: Tensor) -> Tensor:
        """Decoding ids (the first column is the decoder's <bos>) -> this LM's ids."""
        out = self.perm[ids]
        out[:, 0] = self.start
        return out

    def sequences(self, texts: list[list[str]], max_len: int) -> tuple[Tensor, Tensor]:
        """``start`` + the tokenizer's ids of the sentences joined into one text + ``eos``."""
        rows = []
        for sentences in texts:
            text = ". ".join(s.strip() for s in sentences if s.strip())
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: 2 * max_len]
            rows.append([self.start, *ids, int(self.eos)])
        return _pad(rows, int(self.eos))

    def text(self, ids: list[int]) -> str:
        real = [int(self.perm[i]) for i in ids]
        return self.tokenizer.decode(real, skip_special_tokens=True).strip()


def load_local(path: str, setting: str, what: str, load: Callable[[str], Any]) -> Any:
    """``load(folder)`` of a local Hugging Face folder (``from_pretrained(...,
    local_files_only=True)``: nothing is downloaded), with one-line errors naming the folder and
    the fix: a missing folder, or files that do not load as ``what``."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FolderFileError(
            f"onediff: {setting} folder {folder} not found; give a local folder holding {what} "
            f"(config.json and weights), or {setting}: '' for the built-in one"
        )
    check_json_files(folder, "onediff")  # a broken config.json or tokenizer.json, by name
    try:
        with warnings.catch_warnings():
            # torch and transformers warn (each with a source line) on the way to an error.
            warnings.simplefilter("ignore")
            return load(str(folder))
    except Exception as exc:  # noqa: BLE001 - sorted below: the folder's fault, or a bug
        pickles = sorted(folder.glob("*.bin"))
        if pickles and (isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc)):
            raise weights_file_error("onediff", pickles[0], exc) from exc
        tensors = sorted(folder.glob("*.safetensors"))
        if tensors and type(exc).__name__ == "SafetensorError":
            raise weights_file_error("onediff", tensors[0], exc) from exc
        if not isinstance(exc, _FOLDER_ERRORS):
            raise  # not the folder's fault: a bug keeps its traceback
        raise FolderFileError(
            f"onediff: {folder} does not load as {what} ({first_line(exc)})"
        ) from exc


# What transformers raises for a folder whose files are not what they claim: a missing file
# (OSError), bad values (ValueError, KeyError, TypeError: a config.json value of the wrong
# type, AttributeError), a cut file (EOFError), shapes that do not fit (RuntimeError).
_FOLDER_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, RuntimeError)


def decoding_permutation(size: int, eos: int, bos: int | None, pad: int | None) -> list[int]:
    """perm[k] = the LM id at decoding id k: the end token at 2, and the begin / pad tokens at 1
    / 0 when the tokenizer has them (distinct from the end token); everything else in place."""
    perm = list(range(size))

    def place(slot: int, token: int | None) -> None:
        if token is None or not 0 <= token < size or token in perm[:slot]:
            return
        where = perm.index(token)
        perm[slot], perm[where] = perm[where], perm[slot]

    place(EOS_ID, eos)
    if bos != eos:
        place(BOS_ID, bos)
    if pad not in (eos, bos):
        place(PAD_ID, pad)
    return perm


def _pad(rows: list[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    """Right-padded (N, T) ids and the (N, T - 1) mask of real target positions (ids 1..)."""
    t = max(2, max(len(r) for r in rows))
    ids = torch.full((len(rows), t), pad, dtype=torch.long)
    mask = torch.zeros(len(rows), t - 1, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row) - 1] = True
    return ids, mask


def build_lm(config: dict[str, Any], vocab: Vocabulary) -> ScratchLM | HuggingFaceLM:
    """The LM a config asks for: ``lm`` empty -> :class:`ScratchLM`, else a local folder."""
    if str(config.get("lm", "")).strip():
        return HuggingFaceLM(str(config["lm"]), vocab, str(config.get("lm_dtype", "float32")))
    return ScratchLM(
        vocab,
        int(config["lm_width"]),
        int(config["lm_layers"]),
        int(config["lm_heads"]),
        int(config["lm_positions"]),
        float(config["dropout"]),
    )
