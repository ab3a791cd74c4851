"""CPU inference cost of ``clip4idc`` per pair, against ``duda`` measured in the same run (not part
of the test suite).

    .venv/bin/python benchmarks/clip4idc_speed.py [--pairs 20] [--threads 1] \
        [--weights clip4idc=runs/c4/best.pt --weights duda=runs/duda/best.pt]

Without ``--weights`` every model is untrained at the sizes of ``training/*-clevr-cpu.yaml`` (an
untrained decoder rarely ends early, so its sentences run to ``--max-len`` words: an upper bound);
with a checkpoint, its own sizes and sentence lengths. Each model decodes one pair at a time
(greedy, as ``spotdiff caption``) from efficientnet-lite0-shaped grids (1280 x 7 x 7); the
backbone's cost, the same for both, is printed by ``benchmarks/onediff_speed.py``. Also timed:
clip4idc's retrieval embeddings of one pair and one caption (the pair's v and the text encoder's
g), which captioning does not need. Prints milliseconds per pair and ratios to duda's.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from onediff_speed import batch, print_rows, speed_arguments, time_models  # noqa: E402

from spotdiff_cli.captioners.vocab import Vocabulary  # noqa: E402

RECIPES = {"duda": "duda-clevr-cpu", "clip4idc": "clip4idc-clevr-cpu"}


def time_retrieval(model, vocab: Vocabulary, pairs: int) -> float:
    """Median ms of one pair's retrieval embeddings with one caption (text encoder included)."""
    caption = "the small red metal cube changed to blue"
    model.retrieval_embeddings(batch(vocab, 0), [caption])
    times = []
    for i in range(pairs):
        start = time.perf_counter()
        model.retrieval_embeddings(batch(vocab, i + 1), [caption])
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> None:
    args, weights, vocab = speed_arguments(__doc__.splitlines()[0])
    # Captioning reads no text encoder: count what a caption runs through.
    rows, models = time_models(
        RECIPES, weights, vocab, args, lambda name: not name.startswith(("text.", "text_proj."))
    )
    with torch.inference_mode():
        retrieval = time_retrieval(models["clip4idc"], vocab, args.pairs)
    print_rows(rows)
    text = models["clip4idc"].text
    print(
        f"clip4idc retrieval (pair v + one caption through {text.source}): {retrieval:.1f} ms "
        f"({retrieval / rows['duda'][0]:.2f} x duda's caption)"
    )


if __name__ == "__main__":
    main()
