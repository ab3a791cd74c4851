"""Sentence embeddings offline, with numpy alone: all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT)
run from the int8 weights shipped in ``weights/``, and its WordPiece tokenizer in plain Python.

Why not torch, onnxruntime or the ``tokenizers`` package: the light install (``pip install
spotdiff``) has no torch or tokenizers, onnxruntime (the detector's) may fail to install on a
platform it has no wheel for, and ``spotdiff search`` must run anywhere. Six small layers over a
sentence of twenty tokens are a few matrix products; numpy's BLAS does them in milliseconds.
"""

from __future__ import annotations

from .minilm import MiniLM, default_encoder
from .wordpiece import WordPiece

__all__ = ["MiniLM", "WordPiece", "default_encoder"]
