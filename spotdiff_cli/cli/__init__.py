"""The ``spotdiff`` command line: a thin Typer layer over ``spotdiff_cli.api``.

Each command lives in its own module, registers itself on ``app`` (``root.py``) and wraps its
body in ``errors_to_exit`` (state.py): errors raised on purpose (``SpotdiffError``) become one
line and an exit code; ``--debug`` shows the traceback instead.

The console script registers only the command its command line names (``load_commands``):
Typer builds a Click command for every registered one before it parses anything, and the eight
together cost ~25 ms of every start, a twentieth of a whole ``spotdiff caption``. ``app`` read
from this package (tests, in-process callers) has all of them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

# Each command's module, by the name it registers, in the order `spotdiff --help` lists them.
COMMAND_MODULES = {
    "caption": "caption_cmd",
    "data": "data_cmd",
    "eval": "eval_cmd",
    "models": "models_cmd",
    "search": "search_cmd",
    "summary": "summary_cmd",
    "train": "train_cmd",
    "video": "video_cmd",
}


def load_commands(args: Sequence[str] | None = None) -> None:
    """Register the commands on ``app``: only the one ``args`` (a command line without the
    program name) names, or all of them when it names none or an unknown one (the help page,
    "No such command" with its suggestions) or when the shell asks for completions. The first
    word that is not an option is the command: the top-level options take no values."""
    names = list(COMMAND_MODULES)
    if args is not None and "_SPOTDIFF_COMPLETE" not in os.environ:
        named = next((arg for arg in args if not arg.startswith("-")), None)
        if named in COMMAND_MODULES:
            names = [named]
    for name in names:
        importlib.import_module(f".{COMMAND_MODULES[name]}", __name__)


def __getattr__(name: str):
    # `from spotdiff_cli.cli import app`: the whole command line.
    if name == "app":
        load_commands()
        from .root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console entry point: the Typer app, with Click's usage errors (unknown option, missing
    argument, bad value type) shown as one line like every other error, exit code 2.

    Once the command has finished, Ctrl-C is ignored: the answer is out and the reports are on
    disk, and a KeyboardInterrupt raised while the interpreter shuts down (joining threads,
    flushing) would end the process by the signal instead of with its exit code.
    """
    import signal
    import sys

    load_commands(sys.argv[1:])
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

    import typer

    from .root import app

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
