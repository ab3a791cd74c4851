"""IDC-PCL's cross-modal transformer: one BERT-shaped stream over the pair's tokens and the words
(``papers/idc-pcl-pretraining-slides.txt``, "Model Architecture"), and the loader that fills it
from a local BERT.

The stream is ``[visual tokens of the pair] [CLS] w1 ... wT`` (our ``<bos>`` plays [CLS]). Its
layers are BERT's: post-norm, GELU, LayerNorm eps 1e-12, which is exactly
``nn.TransformerEncoderLayer(norm_first=False, activation="gelu")``; words get BERT's word,
position and token-type embeddings (type 0 = text, BERT's sentence A; type 1 = visual), visual
tokens only the type embedding (they carry the vision encoder's positions already). Three ways
to attend, one set of weights:

- ``joint``: everything sees everything (pre-training: MLM and MVCL, each side conditioned on the
  other);
- ``seq2seq``: visual tokens see visual tokens only; each word sees every visual token and the
  words before it (the uni-directional mask of fine-tuning and inference, UniLM's);
- ``text``: the words alone, bidirectional (FDA's caption embedding).

The word head is BERT's MLM head (dense, GELU, LayerNorm, then the word embeddings, tied), used by
MLM in pre-training and, on the next position, by the captioner in fine-tuning: what pre-training
teaches it carries over.

:func:`load_bert` builds the stream from a local Hugging Face BERT folder (``BertModel`` or
``BertForMaskedLM`` saved with ``save_pretrained``, plus its ``vocab.txt``): every layer, the
position, type and LayerNorm embeddings and the MLM head's transform are BERT's; each word of the
project's vocabulary starts from BERT's embedding of that word (the mean of its WordPiece pieces
when BERT splits it). The captions stay in the project's word vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import ModelError
from ..local_files import check_json_files, read_state_dict
from ..vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, UNK_ID, Vocabulary

MODES = ("joint", "seq2seq", "text")
# The project's specials -> BERT's.
_BERT_SPECIALS = {
    PAD_ID: "[PAD]",
    BOS_ID: "[CLS]",
    EOS_ID: "[SEP]",
    UNK_ID: "[UNK]",
    SEP_ID: "[SEP]",
}


class CrossModalTransformer(nn.Module):
    """Args: vocab_size (the project's, [MASK] is one more id), width, layers, heads,
    intermediate (the feed-forward width), positions (longest caption), dropout, eps."""

    def __init__(
        self,
        vocab_size: int,
        width: int,
        layers: int,
        heads: int,
        intermediate: int,
        positions: int,
        dropout: float,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if width % heads:
            raise ModelError(f"cross-modal width {width} must be a multiple of its {heads} heads")
        self.vocab_size, self.width, self.heads, self.positions = (
            vocab_size,
            width,
            heads,
            positions,
        )
        self.mask_id = vocab_size  # [MASK]
        self.word = nn.Embedding(vocab_size + 1, width, padding_idx=PAD_ID)
        self.position = nn.Embedding(positions, width)
        self.segment = nn.Embedding(2, width)  # 0: text (BERT's sentence A), 1: visual
        self.norm = nn.LayerNorm(width, eps=eps)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            width,
            heads,
            dim_feedforward=intermediate,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=False,
            layer_norm_eps=eps,
        )
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head_transform = nn.Sequential(
            nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width, eps=eps)
        )
        self.head_bias = nn.Parameter(torch.zeros(vocab_size + 1))
        for module in (self.word, self.position, self.segment):
            nn.init.normal_(module.weight, std=0.02)  # BERT's initializer_range

    def embed_words(self, ids: Tensor, extra: Tensor | None = None) -> Tensor:
        """(N, T) ids -> (N, T, width); ``extra`` (N, width), when given, is added to every
        word's embedding (before the norm, as the position and type are): a per-row input every
        word reads, as the direction head's answer (``IDCPCLCaptioner.word_extra``)."""
        if ids.shape[1] > self.positions:
            raise ModelError(
                f"a caption of {ids.shape[1]} tokens is longer than the {self.positions} positions "
                "the cross-modal transformer has (text_max_len)"
            )
        where = torch.arange(ids.shape[1], device=ids.device)
        x = self.word(ids) + self.position(where)[None] + self.segment.weight[0]
        if extra is not None:
            x = x + extra[:, None, :]
        return self.drop(self.norm(x))

    def embed_visual(self, visual: Tensor) -> Tensor:
        """(N, L, width) visual tokens -> the stream's visual embeddings."""
        return self.drop(self.norm(visual + self.segment.weight[1]))

    def forward(
        self, visual: Tensor | None, ids: Tensor, mode: str, extra: Tensor | None = None
    ) -> tuple[Tensor | None, Tensor]:
        """visual (N, L, width) or None (``text``), ids (N, T) -> (visual states (N, L, width)
        or None, word states (N, T, width)). Padding (id 0) is never attended to. ``extra``
        (N, width): added to every word's embedding (:meth:`embed_words`)."""
        if mode not in MODES:
            raise ModelError(f"unknown attention mode '{mode}' ({', '.join(MODES)})")
        words = self.embed_words(ids, extra)
        pad = ids == PAD_ID
        if mode == "text" or visual is None:
            hidden = self.layers(words, src_key_padding_mask=self._float(pad, words))
            return None, hidden
        n_visual = visual.shape[1]
        x = torch.cat([self.embed_visual(visual), words], dim=1)
        keys = torch.cat([pad.new_zeros(pad.shape[0], n_visual), pad], dim=1)
        mask = None
        if mode == "seq2seq":
            mask = seq2seq_mask(n_visual, ids.shape[1], x.device, x.dtype)
        hidden = self.layers(x, mask=mask, src_key_padding_mask=self._float(keys, x))
        return hidden[:, :n_visual], hidden[:, n_visual:]

    def visual_states(self, visual: Tensor) -> tuple[Tensor, ...]:
        """The visual tokens' input to every layer under the ``seq2seq`` mask, where they read
        only each other: (N, L, width) per layer. Computed once per pair for decoding."""
        states = [self.embed_visual(visual)]
        for layer in self.layers.layers[:-1]:
            states.append(layer(states[-1]))
        return tuple(states)

    def words_given(
        self, states: tuple[Tensor, ...], ids: Tensor, extra: Tensor | None = None
    ) -> Tensor:
        """The ``seq2seq`` word states (N, T, width) from :meth:`visual_states`: each layer's
        words attend to that layer's visual states and the words up to themselves; the same
        numbers as :meth:`forward` (``extra`` as there), without recomputing the pair at every
        decoding step."""
        h = self.embed_words(ids, extra)
        t, n_visual = ids.shape[1], states[0].shape[1]
        mask = seq2seq_mask(n_visual, t, h.device, h.dtype)[n_visual:]  # the word rows
        for layer, visual in zip(self.layers.layers, states, strict=True):
            kv = torch.cat([visual, h], dim=1)
            attended = layer.self_attn(h, kv, kv, attn_mask=mask, need_weights=False)[0]
            h = layer.norm1(h + layer.dropout1(attended))  # BERT's post-norm layer
            h = layer.norm2(h + layer._ff_block(h))
        return h

    @staticmethod
    def _float(pad: Tensor, like: Tensor) -> Tensor:
        # A float mask, as the attention mask is one (PyTorch warns on mixed kinds).
        return torch.zeros(pad.shape, dtype=like.dtype, device=like.device).masked_fill(
            pad, float("-inf")
        )

    def word_logits(self, hidden: Tensor) -> Tensor:
        """(…, width) states -> (…, vocab_size) scores of the project's words ([MASK] is never
        a prediction)."""
        h = self.head_transform(hidden)
        return F.linear(h, self.word.weight[: self.vocab_size], self.head_bias[: self.vocab_size])


def seq2seq_mask(n_visual: int, n_words: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """(L, L) additive mask, L = n_visual + n_words: visual rows see visual columns only; word
    rows see every visual column and the words up to themselves."""
    size = n_visual + n_words
    mask = torch.zeros((size, size), device=device, dtype=dtype)
    mask[:n_visual, n_visual:] = float("-inf")
    causal = torch.triu(torch.ones(n_words, n_words, dtype=torch.bool, device=device), diagonal=1)
    mask[n_visual:, n_visual:] = mask[n_visual:, n_visual:].masked_fill(causal, float("-inf"))
    return mask


# -- a local BERT ----------------------------------------------------------------------------------
def bert_config(folder: Path) -> dict:
    file = folder / "config.json"
    if not file.is_file():
        raise ModelError(
            f"idc-pcl: bert folder {folder} not found or without config.json; give a local Hugging "
            "Face BERT folder (config.json, model.safetensors, vocab.txt), or bert: '' to train the "
            "cross-modal transformer from scratch"
        )
    check_json_files(folder, "idc-pcl")  # a malformed config.json is one line naming it
    return json.loads(file.read_text(encoding="utf-8"))


def bert_word_rows(vocab: Vocabulary, bert_vocab: list[str]) -> list[list[int]]:
    """For each project word (by id), the BERT vocabulary rows whose mean starts its embedding:
    the special's, the word's own, or its greedy longest-match WordPiece pieces; [UNK] if none."""
    index = {w: i for i, w in enumerate(bert_vocab)}
    unk = index.get("[UNK]", 0)
    rows: list[list[int]] = []
    for i, word in enumerate(vocab.words):
        if i in _BERT_SPECIALS:
            rows.append([index.get(_BERT_SPECIALS[i], unk)])
            continue
        if word in index:
            rows.append([index[word]])
            continue
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while (
                end > start
                and (word[start:end] if start == 0 else "##" + word[start:end]) not in index
            ):
                end -= 1
            if end == start:
                pieces = []
                break
            pieces.append(index[word[start:end] if start == 0 else "##" + word[start:end]])
            start = end
        rows.append(pieces or [unk])
    return rows


def load_bert(folder: str | Path, vocab: Vocabulary, dropout: float) -> CrossModalTransformer:
    """A :class:`CrossModalTransformer` shaped as, and filled from, the local BERT in
    ``folder`` (module docstring)."""
    folder = Path(folder).expanduser()
    cfg = bert_config(folder)
    vocab_file = folder / "vocab.txt"
    if not vocab_file.is_file():
        raise ModelError(f"idc-pcl: {folder} has no vocab.txt (BERT's WordPiece vocabulary)")
    bert_vocab = vocab_file.read_text(encoding="utf-8").splitlines()
    model = CrossModalTransformer(
        len(vocab),
        int(cfg.get("hidden_size", 768)),
        int(cfg.get("num_hidden_layers", 12)),
        int(cfg.get("num_attention_heads", 12)),
        int(cfg.get("intermediate_size", 3072)),
        int(cfg.get("max_position_embeddings", 512)),
        dropout,
        float(cfg.get("layer_norm_eps", 1e-12)),
    )
    state = read_state_dict(folder, "idc-pcl")
    prefix = "bert." if any(k.startswith("bert.") for k in state) else ""

    def take(key: str) -> Tensor:
        if prefix + key not in state:
            raise ModelError(
                f"idc-pcl: {folder} is not a BERT checkpoint: it lacks {prefix + key}; save a "
                "BertModel or BertForMaskedLM with save_pretrained"
            )
        return state[prefix + key]

    words = take("embeddings.word_embeddings.weight")
    if words.shape[0] != len(bert_vocab):
        raise ModelError(
            f"idc-pcl: {folder}'s vocab.txt has {len(bert_vocab)} words but its embeddings "
            f"{words.shape[0]} rows: the files are not of one model"
        )
    target: dict[str, Tensor] = {}
    rows = bert_word_rows(vocab, bert_vocab)
    mask_row = bert_vocab.index("[MASK]") if "[MASK]" in bert_vocab else None
    table = [words[r].mean(0) for r in rows]
    table.append(words[mask_row] if mask_row is not None else words.mean(0))
    target["word.weight"] = torch.stack(table)
    target["position.weight"] = take("embeddings.position_embeddings.weight")
    types = take("embeddings.token_type_embeddings.weight")
    target["segment.weight"] = types[:2] if types.shape[0] >= 2 else types.repeat(2, 1)
    target["norm.weight"] = take("embeddings.LayerNorm.weight")
    target["norm.bias"] = take("embeddings.LayerNorm.bias")
    for i in range(len(model.layers.layers)):
        src, dst = f"encoder.layer.{i}.", f"layers.layers.{i}."
        for p in ("weight", "bias"):
            target[dst + f"self_attn.in_proj_{p}"] = torch.cat(
                [take(src + f"attention.self.{x}.{p}") for x in ("query", "key", "value")]
            )
            for a, b in (
                ("attention.output.dense", "self_attn.out_proj"),
                ("attention.output.LayerNorm", "norm1"),
                ("intermediate.dense", "linear1"),
                ("output.dense", "linear2"),
                ("output.LayerNorm", "norm2"),
            ):
                target[dst + f"{b}.{p}"] = take(src + f"{a}.{p}")
    # BertForMaskedLM's head, when the folder has it (a bare BertModel has not: it stays new).
    head = "cls.predictions."
    if head + "transform.dense.weight" in state:
        for a, b in (
            ("transform.dense", "head_transform.0"),
            ("transform.LayerNorm", "head_transform.2"),
        ):
            for p in ("weight", "bias"):
                target[f"{b}.{p}"] = state[f"{head}{a}.{p}"]
        if head + "bias" in state:
            bias = state[head + "bias"]
            target["head_bias"] = torch.stack([bias[r].mean() for r in rows] + [bias.new_zeros(())])
    try:
        model.load_state_dict(target, strict=False)
    except RuntimeError as exc:
        raise ModelError(f"idc-pcl: {folder}'s weights do not fit its config.json ({exc})") from exc
    return model


__all__ = ["MODES", "CrossModalTransformer", "bert_word_rows", "load_bert", "seq2seq_mask"]
