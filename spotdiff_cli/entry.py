"""The console script's entry point: ``spotdiff`` -> :func:`main`.

It exists so that a Ctrl-C while the command-line layer is still being imported (Typer, Rich
and the command modules take a few hundred milliseconds on a busy machine) ends like any other
interrupt: one line and exit 130, not a KeyboardInterrupt traceback from inside an import.

It also gives NumPy's OpenBLAS one thread (unless the user chose a number), before NumPy is
first imported, the only time OpenBLAS reads it. spotdiff's BLAS work is small (homographies,
a search's ~10 x 384 products) and its parallelism is its own threads (the video pipeline's
stages, the recognisers' warm-up); OpenBLAS's pool, started at import, spins between calls on
the core those threads need: ~0.1 s of CPU at import alone, and a caption process took 1.01
s of CPU instead of 1.19 (six runs each, 2-core machine). Torch and onnxruntime keep their
own thread pools.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    run()
