"""The ``spotdiff`` command line: a thin Typer layer over ``spotdiff_cli.api``.

Each command lives in its own module, registers itself on ``app`` and wraps its body in
``errors_to_exit`` (state.py): errors raised on purpose (``SpotdiffError``) become one line and
an exit code; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import typer

from .state import STATE

app = typer.Typer(
    name="spotdiff",
    help="Say, in plain sentences, what changed between two images, a folder of frames or a video.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback on errors."),
) -> None:
    STATE.debug = debug


# Commands register themselves on import (one module per command).
from . import caption_cmd, data_cmd, eval_cmd, models_cmd, train_cmd, video_cmd  # noqa: E402,F401

