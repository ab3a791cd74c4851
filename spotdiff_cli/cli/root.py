"""The root of the command line: the Typer ``app`` every command module registers on, and its
top-level options (``--debug``, ``--quiet``, ``--version``)."""

from __future__ import annotations

import typer

from .state import STATE

app = typer.Typer(
    name="spotdiff",
    help="Say, in plain sentences, what changed between two images, a folder of frames or a video.",
    no_args_is_help=True,
    # Typer's --install-completion / --show-completion: a completion script that calls
    # `spotdiff` back with _SPOTDIFF_COMPLETE set, which Click answers before any command runs.
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"spotdiff {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback on errors."),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress bars, tables or summaries; errors and warnings still print, and so "
        "does what --json or --jsonl - asks for.",
    ),
    version: bool = typer.Option(
        False,
        "--version",
        # Eager: answered before a command is required, so `spotdiff --version` needs none.
        is_eager=True,
        callback=_print_version,
        help="Print the version and exit.",
    ),
) -> None:
    STATE.debug = debug
    # Per invocation: an in-process caller may run several commands.
    STATE.error_exit = None
    STATE.quiet = quiet
    STATE.interrupt_hint = None
