"""``spotdiff video --jsonl PATH``: the events as a JSON Lines stream, one line per final event.

Each line is what an ``--on-event`` hook receives (:func:`.hooks.event_payload`: the event as
in ``timeline.json``, its source and the report folder), written as soon as the event is final
and flushed at once, so ``tail -f events.jsonl | jq`` (or a program reading ``--jsonl -`` from
a pipe) sees each event while the run goes on. Lines are ASCII JSON (``\\uXXXX`` escapes): a
file name that is not valid UTF-8 still gives a line every reader can parse.

An existing file is refused, as an existing report is: ``--resume`` appends to it (the resumed
run sends the events it closes, as the hooks do: at least once, keyed on ``(path, event.id)``),
``--overwrite`` starts it again. ``-`` is stdout; the caller then keeps everything else off it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..errors import OutputError
from ..types import Event
from .hooks import event_payload

STDOUT = "-"


class JsonlWriter:
    """Writes one flushed JSON line per event to a file or stdout. Use as a context manager."""

    def __init__(
        self,
        target: str | Path,
        report_dir: str | Path | None = None,
        append: bool = False,
        overwrite: bool = False,
    ) -> None:
        """target: a path, or ``-`` for stdout. append (``--resume``): add to an existing file;
        overwrite: replace it; neither: an existing file is an OutputError (one line)."""
        self.report_dir = report_dir
        self.written = 0
        self._owned = os.fspath(target) != STDOUT
        self._name = f"--jsonl {os.fspath(target)}"
        if not self._owned:
            self._stream: IO[str] = sys.stdout
            return
        path = Path(target)
        if path.is_dir():
            raise OutputError(f"--jsonl {path} is a folder; give a file path or - for stdout")
        mode = "a" if append else "w" if overwrite else "x"
        try:
            # "x" makes the refusal atomic: two runs cannot both create the same stream.
            self._stream = open(path, mode, encoding="ascii", newline="\n")  # noqa: SIM115
        except FileExistsError:
            raise OutputError(
                f"--jsonl {path} already exists; use --resume to append to it, --overwrite to "
                "start again, or another path"
            ) from None
        except OSError as exc:
            raise OutputError(f"--jsonl {path}: cannot write ({exc.strerror or exc})") from None

    def write(self, source: str, event: Event, started_at: str | None = None) -> None:
        """One line for a final event, flushed so a follower sees it now, not at exit.
        started_at: a live stream's wall-clock second 0 (see :func:`.hooks.event_payload`)."""
        payload = event_payload(source, event, self.report_dir, started_at)
        line = json.dumps(payload, separators=(",", ":"))
        with self._naming_errors():
            self._stream.write(line + "\n")
            self._stream.flush()
        self.written += 1

    def close(self) -> None:
        with self._naming_errors():
            if self._owned:
                self._stream.close()
            else:
                self._stream.flush()

    @contextlib.contextmanager
    def _naming_errors(self) -> Iterator[None]:
        """A write that fails (a full disk, ``/dev/full``, a file system gone read-only) says
        which output and what the OS said: "--jsonl /dev/full: No space left on device". It
        stays an OSError (of the same kind, e.g. BrokenPipeError for a closed pipe), so the
        run stops as for any failed write, with the report saved first."""
        try:
            yield
        except OSError as exc:
            if exc.filename is not None or exc.errno is None:
                raise
            why = exc.strerror or os.strerror(exc.errno)
            raise OSError(exc.errno, why, self._name) from exc

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
