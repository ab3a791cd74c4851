"""Training and inference throughput of every learned captioner on the CPU (not part of the tests).

    .venv/bin/python benchmarks/train.py [--tiny] [--models capt,ddla] [--batch 8] [--repeat 5] [--json]

Per model, on contract-shaped random batches (docs/training-interfaces.md: efficientnet_lite0 grids
1280 x 7 x 7, K = 4 clusters, S = 2 sentences of 12 words, a 150-word vocabulary, like the
synthetic benchmark):

* train samples/s: forward + backward + Adam step on a batch of ``--batch`` (paper: 8);
  ``nn``/``nn-multi`` have no steps: their one-off ``fit`` is reported as samples/s instead;
* infer pairs/s: ``generate`` (greedy, one sentence; ``-multi``: up to 5) on a batch.

Both are also given as a ratio to a baseline measured in the same run: the frozen backbone's
forward pass alone (efficientnet_lite0 at 224 px, two images per pair), i.e. what any captioner
must pay per pair at inference before its own work. Ratios survive a busy or a faster machine
better than absolute numbers do. Model sizes are each model's defaults (``--tiny``: the test
variants).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from spotdiff_cli.captioners.features import PairInputs, collate  # noqa: E402
from spotdiff_cli.captioners.registry import available_models, create_model, model_info  # noqa: E402
from spotdiff_cli.captioners.vocab import Vocabulary  # noqa: E402

MODELS = tuple(name for name in available_models() if model_info(name).family == "spot-the-diff")
C, GRID, K = 1280, (7, 7), 4


def fake_vocab(n: int = 150) -> Vocabulary:
    return Vocabulary.build([" ".join(f"w{i}" for i in range(n))], 1)


def fake_batch(vocab: Vocabulary, b: int, seed: int = 0) -> dict[str, Any]:
    """A contract batch of random features, random masks and random 12-word sentences."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = vocab.words[5:]
    pairs = []
    for i in range(b):
        masks = (rng.random((K, *GRID)) > 0.7).astype(np.float32)
        sentences = tuple(" ".join(rng.choice(words, 12)) for _ in range(2))
        pairs.append(
            PairInputs(
                id=str(i),
                before=rng.standard_normal((C, *GRID)).astype(np.float32),
                after=rng.standard_normal((C, *GRID)).astype(np.float32),
                masks=masks,
                feats=rng.random((K, 4)).astype(np.float32),
                cluster_ids=tuple(range(1, K + 1)),
                annotations=(sentences,),
                gold=((0, 1),),
            )
        )
    return collate([(p, 0) for p in pairs], vocab)


def best_of(repeat: int, fn: Callable[[], None]) -> float:
    """Fastest of ``repeat`` timed calls after one warm-up (the least disturbed by other load)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def backbone_pairs_per_second(repeat: int, b: int) -> float:
    from spotdiff_cli.captioners.backbones import create_backbone

    module, info = create_backbone("efficientnet_lite0")
    x = torch.randn(2 * b, 3, *info.input_size)
    with torch.inference_mode():
        seconds = best_of(repeat, lambda: module(x))
    return b / seconds


def measure(
    name: str, vocab: Vocabulary, batch: dict[str, Any], repeat: int, tiny: bool
) -> dict[str, float]:
    torch.manual_seed(0)
    model = create_model(name, device="cpu", vocab=vocab, channels=C, grid=list(GRID), tiny=tiny)
    b = batch["before"].shape[0]
    multi = name.endswith("multi")
    if hasattr(model, "fit") and not any(True for _ in model.parameters()):
        train_s = best_of(repeat, lambda: model.fit([batch]))
    else:
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step() -> None:
            out = model.loss(batch)
            out["loss"].backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        train_s = best_of(repeat, step)
    model.eval()
    infer_s = best_of(
        repeat, lambda: model.generate(batch, max_sentences=5 if multi else 1, max_len=20)
    )
    params = sum(p.numel() for p in model.parameters())
    return {
        "train_samples_per_s": b / train_s,
        "infer_pairs_per_s": b / infer_s,
        "parameters": params,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--tiny", action="store_true", help="the tiny test variants instead of the default sizes"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    vocab = fake_vocab()
    batch = fake_batch(vocab, args.batch)
    base = backbone_pairs_per_second(args.repeat, args.batch)
    rows = {
        name: measure(name, vocab, batch, args.repeat, args.tiny) for name in args.models.split(",")
    }
    if args.json:
        print(
            json.dumps(
                {"backbone_pairs_per_s": base, "threads": torch.get_num_threads(), "models": rows},
                indent=2,
            )
        )
        return
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
        f"{'tiny' if args.tiny else 'default'} sizes"
    )
    print(f"baseline: efficientnet_lite0 forward, 2 images/pair: {base:.1f} pairs/s")
    print(
        f"{'model':<14}{'params':>10}{'train samples/s':>17}{'x backbone':>12}{'infer pairs/s':>15}{'x backbone':>12}"
    )
    for name, r in rows.items():
        print(
            f"{name:<14}{r['parameters']:>10,}{r['train_samples_per_s']:>17.1f}{r['train_samples_per_s'] / base:>12.2f}"
            f"{r['infer_pairs_per_s']:>15.1f}{r['infer_pairs_per_s'] / base:>12.2f}"
        )


if __name__ == "__main__":
    main()
