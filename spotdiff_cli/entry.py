"""The console script's entry point: ``spotdiff`` -> :func:`main`.

It exists so that a Ctrl-C while the command-line layer is still being imported (Typer, Rich
and the command modules take a few hundred milliseconds on a busy machine) ends like any other
interrupt: one line and exit 130, not a KeyboardInterrupt traceback from inside an import.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    run()
