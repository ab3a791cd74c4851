"""What FDA taught an ``idc-pcl`` checkpoint: on a split of the rendered benchmark, how often a
pair scores its own caption above each kind of hard negative (``rewrites.py``: replace, confuse,
retrieve; chance 0.5), and text -> pair R@1 among the split's pairs (chance 1 / pairs).

    .venv/bin/python scripts/idc_pcl_alignment.py DATA WEIGHTS... [--split test]

DATA: the benchmark folder (with its preprocessing cache); each pair's first caption is used.
Prints one line per checkpoint. A checkpoint whose run never trained FDA (its pair and text
projections untouched) is the chance baseline.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spotdiff_cli.captioners.checkpoint import load_checkpoint  # noqa: E402
from spotdiff_cli.captioners.idc_pcl.rewrites import REWRITES, rewrite_bank  # noqa: E402
from spotdiff_cli.train.batches import load_training_data  # noqa: E402


def alignment(weights: str, data: Path, split: str) -> dict[str, float]:
    model, _ = load_checkpoint(weights, device="cpu")
    model.eval()
    bank = rewrite_bank(data, split)
    rng = random.Random(0)
    pairs = load_training_data(data, split, model.vocab, max_len=32)
    wins = {kind: [] for kind in REWRITES}
    pair_vectors, text_vectors = [], []
    with torch.no_grad():
        for batch in pairs.pair_batches(32):
            pair, ids = model.rows(batch)
            v = model.pair_embedding(model.visual(batch["before"], batch["after"]))[pair]
            t = model.text_embedding(ids)
            pair_vectors.append(v)
            text_vectors.append(t)
            for row, p in enumerate(pair.tolist()):
                pid, caption = str(batch["pair_ids"][p]), model.vocab.decode(ids[row].tolist())
                own = float(v[row] @ t[row])
                for kind in REWRITES:
                    negative = getattr(bank, kind)(pid, caption, rng)
                    if negative:
                        other = model.text_embedding(model.encode_texts([negative], ids))[0]
                        wins[kind].append(own > float(v[row] @ other))
    v, t = torch.cat(pair_vectors), torch.cat(text_vectors)
    scores = t @ v.T  # caption i vs pair j
    hits = (scores.argmax(1) == torch.arange(len(t))).float().mean()
    out = {kind: sum(w) / max(1, len(w)) for kind, w in wins.items()}
    out["R@1"] = float(hits)
    out["pairs"] = float(len(t))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("weights", nargs="+")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    print(
        f"{'checkpoint':<48} {'replace':>8} {'confuse':>8} {'retrieve':>9} {'R@1':>6}  (chance 0.5 / 1/N)"
    )
    for weights in args.weights:
        r = alignment(weights, args.data, args.split)
        print(
            f"{weights[-48:]:<48} {r['replace']:8.3f} {r['confuse']:8.3f} {r['retrieve']:9.3f} "
            f"{r['R@1']:6.3f}  (N = {int(r['pairs'])})"
        )


if __name__ == "__main__":
    main()
