"""CPU inference cost of ``onediff`` per pair, against ``duda`` measured in the same run (not part
of the test suite).

    .venv/bin/python benchmarks/onediff_speed.py [--pairs 20] [--threads 1] \
        [--weights onediff=runs/od/best.pt --weights duda=runs/duda/best.pt]

Without ``--weights`` every model is untrained at the sizes of ``training/*-clevr-cpu.yaml``
(an untrained decoder rarely ends early, so its sentences run to ``--max-len`` words: an upper
bound); with a checkpoint, its own sizes and sentence lengths. Each model decodes one pair at a
time (greedy, as ``spotdiff caption``) from backbone features of efficientnet-lite0's shapes
(final 1280 x 7 x 7, stride 8 40 x 28 x 28, stride 16 112 x 14 x 14); the backbone's own cost is
timed apart (final grid alone vs with the two lower levels onediff also reads), on 224 px images.
Prints milliseconds per pair, words per pair, and each figure as a ratio to duda's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spotdiff_cli.captioners.checkpoint import load_checkpoint  # noqa: E402
from spotdiff_cli.captioners.features import backbone_features, get_backbone  # noqa: E402
from spotdiff_cli.captioners.registry import create_model  # noqa: E402
from spotdiff_cli.captioners.vocab import PAD_ID, Vocabulary  # noqa: E402
from spotdiff_cli.train.recipes import load_recipe  # noqa: E402

RECIPES = {
    "duda": "duda-clevr-cpu",
    "onediff": "onediff-clevr-cpu",
    "onediff (VDM ×)": "onediff-clevr-cpu-no-vdm",
}
WORDS = "the small large red blue green gray metal rubber cube sphere cylinder changed to moved"


def batch(vocab: Vocabulary, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    shapes = {"": (1280, 7), "_s8": (40, 28), "_s16": (112, 14)}
    out = {
        f"{side}{key}": torch.randn(1, c, s, s, generator=g)
        for side in ("before", "after")
        for key, (c, s) in shapes.items()
    }
    out["tokens"] = torch.full((1, 1, 2), PAD_ID)
    out["sentence_valid"] = torch.zeros(1, 1, dtype=torch.bool)
    return out


def model_of(name: str, weights: dict[str, str], vocab: Vocabulary, recipes: dict[str, str]):
    """The checkpoint given for ``name``, else an untrained model at its recipe's sizes."""
    if name in weights:
        return load_checkpoint(weights[name])[0].eval()
    recipe = load_recipe(recipes[name])
    torch.manual_seed(0)
    return create_model(
        recipe.model, vocab=vocab, channels=1280, grid=(7, 7), device="cpu", **recipe.model_config
    ).eval()


def time_model(model, vocab: Vocabulary, pairs: int, max_len: int) -> tuple[float, float]:
    """(median ms per pair, mean words per pair), one pair per call, after one warm-up call."""
    model.generate(batch(vocab, 0), 1, max_len=max_len)
    times, words = [], []
    for i in range(pairs):
        b = batch(vocab, i + 1)
        start = time.perf_counter()
        text = model.generate(b, 1, max_len=max_len)[0][0]
        times.append(1000 * (time.perf_counter() - start))
        words.append(len(text.split()))
    return statistics.median(times), float(np.mean(words))


def time_backbone(pairs: int) -> dict[str, float]:
    """Median ms per pair of the backbone: the final grid alone, and with strides 8 and 16."""
    backbone = get_backbone("efficientnet_lite0", "cpu")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for _ in range(2)]
    out = {}
    for label, levels in (("grid", ()), ("grid + s8 + s16", (8, 16))):
        backbone_features(images, backbone, "cpu", levels=levels)
        times = []
        for _ in range(pairs):
            start = time.perf_counter()
            backbone_features(images, backbone, "cpu", levels=levels)
            times.append(1000 * (time.perf_counter() - start))
        out[label] = statistics.median(times)
    return out


def speed_arguments(description: str) -> tuple[argparse.Namespace, dict[str, str], Vocabulary]:
    """The options both speed scripts take, parsed and applied: (args, weights by name, vocab)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=25)
    parser.add_argument("--weights", action="append", default=[], help="NAME=PATH")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    weights = dict(w.split("=", 1) for w in args.weights)
    print(f"CPU, {args.threads} thread(s), {args.pairs} pairs, greedy, max {args.max_len} words")
    return args, weights, Vocabulary.build([WORDS], min_count=1)


def time_models(
    recipes: dict[str, str],
    weights: dict[str, str],
    vocab: Vocabulary,
    args: argparse.Namespace,
    counted: Callable[[str], bool] = lambda name: True,
) -> tuple[dict[str, tuple[float, float, int]], dict[str, Any]]:
    """({name: (ms per pair, words per pair, parameters counted)}, {name: model}) for every
    model of ``recipes``; ``counted(parameter name)`` picks what the caption path runs through."""
    rows, models = {}, {}
    with torch.inference_mode():
        for name in recipes:
            model = models[name] = model_of(name, weights, vocab, recipes)
            params = sum(p.numel() for n, p in model.named_parameters() if counted(n))
            rows[name] = (*time_model(model, vocab, args.pairs, args.max_len), params)
    return rows, models


def print_rows(rows: dict[str, tuple[float, float, int]]) -> None:
    """The table of :func:`time_models`, ratios to duda's row."""
    base_ms = rows["duda"][0]
    print(f"{'model':<18} {'ms/pair':>9} {'x duda':>7} {'words':>6} {'ms/word':>8} {'params':>10}")
    for name, (ms, words, params) in rows.items():
        print(
            f"{name:<18} {ms:9.1f} {ms / base_ms:7.2f} {words:6.1f} "
            f"{ms / max(words, 1):8.2f} {params:10,d}"
        )


def main() -> None:
    args, weights, vocab = speed_arguments(__doc__.splitlines()[0])
    rows, _ = time_models(RECIPES, weights, vocab, args)
    print_rows(rows)
    backbone = time_backbone(args.pairs)
    base = backbone["grid"]
    for label, ms in backbone.items():
        print(f"backbone {label:<16} {ms:9.1f} ms/pair ({ms / base:.2f} x the grid alone)")


if __name__ == "__main__":
    main()
