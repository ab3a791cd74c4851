"""Process-wide CLI state and the one error boundary every command goes through."""

from __future__ import annotations

import errno
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class _State:
    debug: bool = False
    # `caption --exit-code` gives exit 1 the meaning "a change was reported" (as `compare` and
    # `diff` do), so an error that would exit 1 exits with this instead; None: errors keep 1.
    error_exit: int | None = None
    # `spotdiff -q`: no progress bars, tables or summaries; errors and warnings still print.
    quiet: bool = False
    # What Ctrl-C says instead of "interrupted": how to continue, set by the command that knows
    # (`video --out DIR`: the report holds what was found, `--resume` continues it).
    interrupt_hint: str | Callable[[], str] | None = None


STATE = _State()


def set_interrupt_hint(hint: str | Callable[[], str] | None) -> None:
    """The line Ctrl-C prints for this command (exit 130), e.g. "interrupted; the report in
    night/ holds what was found so far: rerun with --resume to continue"; None: "interrupted"."""
    STATE.interrupt_hint = hint


def resume_hint(out: object) -> Callable[[], str]:
    """The interrupt line of a command whose report in ``out`` continues with ``--resume``,
    read when Ctrl-C comes: before the first report is written (the sources still opening)
    there is nothing to continue, and the line says so."""

    def hint() -> str:
        if not (Path(str(out)) / "timeline.json").is_file():
            return f"interrupted before anything was found; nothing was written to {out}"
        return (
            f"interrupted; the report in {out} holds what was found so far: rerun with "
            f"--resume to continue"
        )

    return hint


def errors_to_exit(fn: F) -> F:
    """The one error boundary: every failure becomes one red line on stderr and an exit code.

    - ``SpotdiffError``: its message (it names the problem and the fix), exit 2 for usage, 1 else.
    - ``OSError`` that escaped the library (a full disk, a permission change mid-run): the OS's
      words and the path, exit 1.
    - ``KeyboardInterrupt``: "interrupted", or the command's ``set_interrupt_hint`` line saying
      how to continue, exit 130 (writers have already flushed what was done).
    - ``ImportError`` of torch / torchvision / timm on a path this error boundary did not expect
      to need them: the training extra to install (``extras.py``), exit 1.
    - anything else is a bug: one line that says so and how to see the traceback, exit 1.

    With ``spotdiff --debug`` the exception propagates with its traceback instead.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ..errors import SpotdiffError

        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            if STATE.debug:
                raise
            hint = STATE.interrupt_hint
            _fail((hint() if callable(hint) else hint) or "interrupted", 130)
        except SpotdiffError as exc:
            if STATE.debug:
                raise
            _fail(str(exc), exc.exit_code)
        except ImportError as exc:
            from ..extras import is_training_import_error, missing_extra_message

            if STATE.debug:
                raise
            if is_training_import_error(exc):
                # A path that reached torch without calling require_training_extra first: still
                # one line naming the extra, never "this is a bug" for an install choice.
                _fail(missing_extra_message("this command", exc), 1)
            _fail(_bug_message(exc), 1)
        except OSError as exc:
            if STATE.debug:
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            fix = (
                "free some space and run it again" if full else "check the path and its permissions"
            )
            _fail(f"{where}{exc.strerror or exc}; {fix} (--debug shows the traceback)", 1)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
            if STATE.debug:
                raise
            _fail(_bug_message(exc), 1)

    return wrapper  # type: ignore[return-value]


def _bug_message(exc: BaseException) -> str:
    return (
        f"unexpected {type(exc).__name__}: {exc}; this is a bug in spotdiff - rerun with "
        f"`spotdiff --debug ...` and report the traceback"
    )


def _fail(message: str, code: int) -> None:
    from .render import print_error

    if code == 1 and STATE.error_exit is not None:
        code = STATE.error_exit
    print_error(message)
    raise typer.Exit(code) from None
