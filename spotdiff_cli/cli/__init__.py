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


# Commands register themselves on import (one module per command).
from . import (  # noqa: E402,F401
    caption_cmd,
    data_cmd,
    eval_cmd,
    models_cmd,
    search_cmd,
    summary_cmd,
    train_cmd,
    video_cmd,
)


def main() -> None:
    """Console entry point: the Typer app, with Click's usage errors (unknown option, missing
    argument, bad value type) shown as one line like every other error, exit code 2.

    Once the command has finished, Ctrl-C is ignored: the answer is out and the reports are on
    disk, and a KeyboardInterrupt raised while the interpreter shuts down (joining threads,
    flushing) would end the process by the signal instead of with its exit code.
    """
    import signal

    code = _run_app()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_now(code)


def _exit_now(code: int) -> None:
    """End the process with ``code`` without the interpreter's teardown. Everything the
    command wrote is final by now (reports atomically renamed, pipes and threads closed); what
    is left is freeing modules one by one (NumPy, OpenCV, onnxruntime's sessions and thread
    pools), ~0.1 s of every run, a tenth of DVR-Scan's whole scan of a short clip. The exit
    handlers still run (logging's flush, temporary folders), threads that are not daemons are
    waited for as the interpreter would, and the standard streams are flushed here; a reader
    that went away (``| head``) is no error."""
    import atexit
    import os
    import sys
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken pipe: nothing more can be said
            pass
    os._exit(code)


def _run_app() -> int:
    import sys

    try:  # Typer >= 0.2x vendors its own Click; older Typer uses the click package
        from typer._click import exceptions as click_errors
    except ImportError:  # pragma: no cover - depends on the installed Typer
        from click import exceptions as click_errors  # type: ignore[no-redef]

    try:
        code = app(standalone_mode=False)
    except click_errors.NoArgsIsHelpError:
        app(args=[*sys.argv[1:], "--help"])  # a bare `spotdiff` / `spotdiff data`: the help page
        return 0
    except click_errors.ClickException as exc:
        from .render import print_error

        ctx = getattr(exc, "ctx", None)
        hint = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
        print_error(f"{exc.format_message().rstrip('.')}{hint}")
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        return 130
    return code if isinstance(code, int) else 0
