"""Synthetic benchmark speed and statistics: ``python benchmarks/synth.py --pairs 10000``.

Generates a benchmark into a temporary folder (or --out), prints pairs per second (generation
plus PNG writing, one process) and the Table-1 statistics of what was written.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from spotdiff_cli.data.stats import dataset_stats
from spotdiff_cli.data.synth import synthesize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the benchmark here (default: a temp folder)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "synth"
        summary = synthesize(out, pairs=args.pairs, seed=args.seed)
        print(
            f"{summary.pairs} pairs in {summary.seconds:.1f} s: {summary.pairs_per_second:.1f} pairs/s "
            f"({60 * summary.pairs_per_second:,.0f} pairs/min) {summary.splits}"
        )
        print(dataset_stats(out).to_markdown())


if __name__ == "__main__":
    main()
