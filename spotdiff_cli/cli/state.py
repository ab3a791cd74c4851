"""Process-wide CLI state and the one error boundary every command goes through."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class _State:
    debug: bool = False


STATE = _State()


def errors_to_exit(fn: F) -> F:
    """Turn a ``SpotdiffError`` into one red line on stderr and its exit code (2 usage, 1 other).

    With ``spotdiff --debug`` the exception propagates with its traceback. A KeyboardInterrupt
    exits 130 quietly (writers have already flushed what was done).
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ..errors import SpotdiffError

        try:
            return fn(*args, **kwargs)
        except SpotdiffError as exc:
            if STATE.debug:
                raise
            from .render import print_error

            print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if STATE.debug:
                raise
            from .render import print_error

            print_error("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
