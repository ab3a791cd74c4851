"""CPU inference cost of ``idc-pcl`` per pair, against ``duda`` measured in the same run (not part
of the test suite).

    .venv/bin/python benchmarks/idc_pcl_speed.py [--pairs 20] [--threads 1] \
        [--weights idc-pcl=runs/ipcl/best.pt --weights duda=runs/duda/best.pt]

Without ``--weights`` every model is untrained at the sizes of ``training/*-clevr-cpu.yaml`` (an
untrained decoder rarely ends early, so its sentences run to ``--max-len`` words: an upper bound);
with a checkpoint, its own sizes and sentence lengths. Each model decodes one pair at a time
(greedy, as ``spotdiff caption``) from efficientnet-lite0-shaped grids (1280 x 7 x 7); the
backbone's cost, the same for both, is printed by ``benchmarks/onediff_speed.py``. The parameters
counted are those a caption runs through (not FDA's and MVCL's pre-training heads). Prints
milliseconds per pair and ratios to duda's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from onediff_speed import print_rows, speed_arguments, time_models  # noqa: E402

RECIPES = {"duda": "duda-clevr-cpu", "idc-pcl": "idc-pcl-clevr-cpu"}


def main() -> None:
    args, weights, vocab = speed_arguments(__doc__.splitlines()[0])
    rows, _ = time_models(
        RECIPES, weights, vocab, args, lambda name: not name.startswith(("mvcl_", "fda_"))
    )
    print_rows(rows)


if __name__ == "__main__":
    main()
