"""Event hooks: ``spotdiff video --on-event 'CMD ARG... {json}'`` runs a command per event.

When: once per event, as soon as the event is final - closed (the change ended, or the source
did), numbered, its picture written - with the same fields as the event in ``timeline.json``.
``clip`` is still null then: clips are cut after the analysis. With ``--jobs N`` a source's
events are final when its worker returns, so its hooks run then.

At least once: ``--resume`` continues from the report's last checkpoint (a moment when no event
was open) and runs the hooks of the events it closes from there. Events the earlier run closed
before that checkpoint are not sent again; one it closed after it is found again and sent again,
with the same source and id. A hook that must act once per event keys on ``(path, event.id)``.
On Ctrl-C the queued hooks are dropped and a warning names their events.

How, with no shell: the template is split once, as a POSIX shell splits words (``shlex``), and
run directly (no ``sh -c``). In every argument, ``{json}`` is replaced by the event's JSON, which
stays that one argument whatever it holds; the same JSON, one line, is written to the command's
stdin. A file name with spaces, quotes, ``;`` or ``$(...)`` therefore reaches the command as data
and is never run. Only the literal ``{json}`` is replaced; other braces (a ``jq`` filter) stay.

Failures never stop the run: a command that exits non-zero, cannot start or runs past its
timeout (then it is killed, with every process it started) gives one warning line, and the
event is in the timeline all the same. Commands run one at a time, in the order events close,
on a background thread, so a slow hook delays later hooks, not the analysis; at the end the run
waits for the hooks still queued (each bounded by the timeout). Their stdout is discarded; the
last line of their stderr is shown when they fail, without control characters (only the last
4 KB of it is kept, however much a hook writes). A hook is judged by its own exit: a process it
leaves running in the background (``sh -c 'notifier &'``) does not make it "too slow".

The hook is a command-line option only, never a setting in ``--config`` or in the
``config.yaml`` a report carries: reproducing someone's report must not run their commands.
"""

from __future__ import annotations

import json
import os
import queue
import select
import selectors
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..types import Event
from .timeline import event_dict, source_path

PLACEHOLDER = "{json}"
EVENT_SCHEMA = "spotdiff.event/1"
DEFAULT_TIMEOUT = 10.0  # s: a webhook or a notifier answers in well under this
_REAP_SECONDS = 5.0  # after the kill, how long to wait for the hook to be reaped
_STDERR_SHOWN = 200  # characters of the hook's last stderr line in a warning
_STDERR_KEPT = 4096  # bytes of a hook's stderr kept (its end): memory never grows with it
_EOF_GRACE = 0.5  # s: after the hook exits, how long its stderr pipe is still read
_POLL_SECONDS = 0.05  # s: how often a running hook is checked for its exit
_PIPE_CHUNK = getattr(select, "PIPE_BUF", 512)  # bytes a ready pipe takes without blocking


def event_payload(
    source: str, event: Event, report_dir: str | Path | None, started_at: str | None = None
) -> dict[str, Any]:
    """What a hook receives: the event as in ``timeline.json`` and where it came from.

    report_dir: the ``--out`` folder (absolute), which ``event.picture`` is relative to; None
    when the run writes no report. started_at: a live stream's wall-clock second 0 (the
    event then carries ``wall_start`` / ``wall_end``).
    """
    return {
        "schema": EVENT_SCHEMA,
        "source": source,
        "path": source_path(source),
        "report_dir": os.path.abspath(report_dir) if report_dir is not None else None,
        "event": event_dict(event, started_at),
    }


@dataclass(frozen=True)
class EventHook:
    """A command template, split into arguments once; see the module docstring."""

    argv: tuple[str, ...]
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def parse(cls, template: str, timeout: float = DEFAULT_TIMEOUT) -> EventHook:
        """Split ``template`` (shell word rules, no shell) and check the command exists now,
        so a typo fails once before the run (exit 2), not once per event."""
        try:
            argv = tuple(shlex.split(template))
        except ValueError as exc:  # an unclosed quote
            raise UsageError(f"--on-event {template!r}: {exc}; quote it as a shell would") from None
        if not argv:
            raise UsageError("--on-event needs a command, e.g. --on-event 'notify-send {json}'")
        from ..frames.timecode import check_seconds

        timeout = check_seconds(timeout, "--on-event-timeout", "e.g. --on-event-timeout 10")
        if PLACEHOLDER in argv[0]:
            raise UsageError(
                f"--on-event {template!r}: {PLACEHOLDER} cannot be the command itself; "
                "give a program, then the arguments"
            )
        if shutil.which(argv[0]) is None:
            raise UsageError(
                f"--on-event: command {argv[0]!r} not found or not executable; "
                "give a program on PATH or its full path"
            )
        return cls(argv, float(timeout))

    def command(self, payload: str) -> list[str]:
        """The arguments for one event: ``{json}`` replaced, each argument still one argument."""
        return [arg.replace(PLACEHOLDER, payload) for arg in self.argv]

    def run(
        self, payload: str, started: Callable[[subprocess.Popen], None] | None = None
    ) -> str | None:
        """Run the command once with ``payload`` (the event's JSON). Returns None when it
        succeeded, else why not, in a few words. Never raises for the command's failures.

        started: called with the process once it runs (HookRunner uses it to stop the hook on
        Ctrl-C).
        """
        try:
            proc = subprocess.Popen(
                self.command(payload),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                # Its own process group: a timeout kills everything it started, and the
                # terminal's Ctrl-C goes to spotdiff, which decides what to stop.
                start_new_session=True,
            )
        except OSError as exc:  # E2BIG (a huge event), a command removed since the start...
            return f"could not start: {exc.strerror or exc}"
        if started is not None:
            started(proc)
        try:
            exited, tail, cut = _exchange(proc, (payload + "\n").encode("utf-8"), self.timeout)
        except BaseException:
            stop(proc)  # nothing it started outlives a failure here
            raise
        if not exited:
            stop(proc)
            return f"took longer than {self.timeout:g} s and was stopped"
        if proc.returncode != 0:
            last = _last_line(bytes(tail), cut)
            how = (
                f"ended by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exit {proc.returncode}"
            )
            return f"{how}{f': {last}' if last else ''}"
        return None


def _exchange(proc: subprocess.Popen, data: bytes, timeout: float) -> tuple[bool, bytearray, bool]:
    """Write ``data`` to the hook's stdin and read its stderr until it exits or ``timeout``
    passes. Returns (exited, the last :data:`_STDERR_KEPT` bytes of its stderr, whether
    earlier bytes were dropped).

    Unlike ``communicate``, memory stays bounded whatever the hook writes (a hook writing
    400 MB to stderr took the process to 1.38 GB), and the hook is judged by its own exit: a
    detached process it leaves behind (``sh -c 'notifier &'``) may hold the stderr pipe open
    for ever, so after the exit the pipe is read for :data:`_EOF_GRACE` seconds at most.
    """
    deadline = time.monotonic() + timeout
    tail = bytearray()
    cut = False
    selector = selectors.DefaultSelector()
    stdin, stderr = proc.stdin, proc.stderr
    offset = 0
    if stdin is not None:
        if data:
            selector.register(stdin, selectors.EVENT_WRITE)
        else:
            stdin.close()
    if stderr is not None:
        selector.register(stderr, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None:
                if not selector.get_map() or now - exited_at >= _EOF_GRACE:
                    return True, tail, cut
                wait = exited_at + _EOF_GRACE - now
            elif now >= deadline:
                return False, tail, cut
            else:
                # Wake now and then to see whether the hook exited: a pipe held by a detached
                # child never signals its end.
                wait = min(deadline - now, _POLL_SECONDS)
            if not selector.get_map():
                time.sleep(wait)
                continue
            for key, _ in selector.select(wait):
                if key.fileobj is stdin:
                    try:
                        offset += os.write(stdin.fileno(), data[offset : offset + _PIPE_CHUNK])
                    except BrokenPipeError:  # the hook does not read its stdin: fine
                        offset = len(data)
                    if offset >= len(data):
                        selector.unregister(stdin)
                        _close(stdin)
                else:
                    chunk = os.read(stderr.fileno(), 65536)  # type: ignore[union-attr]
                    if not chunk:
                        selector.unregister(stderr)
                        _close(stderr)
                        continue
                    tail += chunk
                    if len(tail) > _STDERR_KEPT:
                        del tail[: len(tail) - _STDERR_KEPT]
                        cut = True
    finally:
        selector.close()
        if exited_at is not None:  # done with the pipes; a timed-out hook is stopped first
            for pipe in (stdin, stderr):
                if pipe is not None:
                    _close(pipe)


def _close(pipe: Any) -> None:
    try:
        pipe.close()
    except OSError:
        pass  # BrokenPipeError flushing a stdin nobody reads


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a hook and every process it started (its process group)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups of this kind
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def stop(proc: subprocess.Popen) -> None:
    """Kill a hook and every process it started, then reap it (its output is not read: a
    process that left the group may hold the pipes open)."""
    kill_group(proc)
    for pipe in (proc.stdin, proc.stderr):
        if pipe is not None:
            _close(pipe)
    try:
        proc.wait(timeout=_REAP_SECONDS)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not refused
        pass


def _last_line(err: bytes | None, cut: bool = False) -> str:
    """The last non-blank line of a hook's stderr, as a warning may show it: control
    characters (NUL, escape sequences that recolour or retitle the terminal, bidi overrides)
    removed, at most :data:`_STDERR_SHOWN` characters. ``cut``: ``err`` is the end of a
    longer output, so a line that starts it is a line's end: its last characters are shown."""
    text = (err or b"").decode("utf-8", "replace")
    lines = [_printable(line).strip() for line in text.splitlines()]
    if cut and len(lines) == 1 and len(lines[0]) > _STDERR_SHOWN:
        return "…" + lines[0][-(_STDERR_SHOWN - 1) :]
    lines = [line for line in lines if line]
    return lines[-1][:_STDERR_SHOWN] if lines else ""


def _printable(text: str) -> str:
    """``text`` without control and format characters (Unicode Cc, Cf); tabs become spaces."""
    import unicodedata

    return "".join(
        " " if c == "\t" else c
        for c in text
        if c == "\t" or unicodedata.category(c) not in ("Cc", "Cf")
    )


class HookRunner:
    """Runs an ``EventHook`` for each submitted event, in order, on one background thread.

    on_warning: called (from that thread) with one line per hook that failed.
    Use as a context manager: leaving it normally waits for the queued hooks; leaving it by
    Ctrl-C stops the running hook and drops the queued ones, naming their events.
    """

    def __init__(
        self,
        hook: EventHook,
        on_warning: Callable[[str], None],
        report_dir: str | Path | None = None,
    ) -> None:
        self.hook = hook
        self.on_warning = on_warning
        self.report_dir = report_dir
        self.ran = 0
        self.failed = 0
        self.dropped: list[tuple[str, int]] = []  # (source, event id) not run: Ctrl-C
        self._queue: queue.Queue[tuple[str, int, str] | None] = queue.Queue()
        self._current: subprocess.Popen | None = None
        self._dropping = False
        # Set by the worker as it returns. Waited on instead of Thread.join: a join that Ctrl-C
        # interrupts can leave the thread looking finished to the next join, which would then
        # return before the dropped events are counted.
        self._finished = threading.Event()
        # A daemon thread: an interrupted run must be able to exit while a hook still runs.
        self._thread = threading.Thread(target=self._work, name="spotdiff-on-event", daemon=True)
        self._thread.start()

    def submit(self, source: str, event: Event, started_at: str | None = None) -> None:
        """Queue the hook for one final event (the JSON is made now, from the event as it is).
        started_at: see :func:`event_payload`."""
        # ASCII (\uXXXX escapes): a file name that is not valid UTF-8 (lone surrogates from
        # the file system) still makes an argument and a stdin line every hook can read.
        payload = json.dumps(
            event_payload(source, event, self.report_dir, started_at), separators=(",", ":")
        )
        self._queue.put((source, event.id, payload))

    def _work(self) -> None:
        try:
            self._drain()
        finally:
            self._finished.set()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            source, event_id, payload = item
            if self._dropping:
                self.dropped.append((source, event_id))
                continue
            try:
                why = self.hook.run(payload, started=self._started)
            except Exception as exc:  # noqa: BLE001 - one odd event must not stop the next hooks
                why = f"{type(exc).__name__}: {exc}"
            self._current = None
            if self._dropping:  # stopped by Ctrl-C, not a failure of the hook
                self.dropped.append((source, event_id))
                continue
            self.ran += 1
            if why is not None:
                self.failed += 1
                self.on_warning(f"--on-event for event {event_id} of {source} failed: {why}")

    def _started(self, proc: subprocess.Popen) -> None:
        self._current = proc

    def close(self, interrupted: bool = False) -> list[tuple[str, int]]:
        """Wait for the queued hooks or, ``interrupted``, stop the running one and drop the
        rest. Returns the (source, event id) whose hook did not run."""
        if interrupted:
            self._dropping = True
            proc = self._current
            if proc is not None:
                # Only the kill here: the worker thread is inside communicate() and reaps it.
                kill_group(proc)
        self._queue.put(None)
        # Interrupted, the worker only skips what is left (and reaps a killed hook): brief.
        self._finished.wait(timeout=2 * _REAP_SECONDS if interrupted else None)
        return list(self.dropped)

    def __enter__(self) -> HookRunner:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
        try:
            dropped = self.close(interrupted=interrupted)
        except KeyboardInterrupt:
            # Ctrl-C while waiting for the last hooks: stop them as if it came during the run.
            self._warn_dropped(self.close(interrupted=True))
            raise
        self._warn_dropped(dropped)

    def _warn_dropped(self, dropped: list[tuple[str, int]]) -> None:
        if dropped:
            self.on_warning(f"interrupted: --on-event did not run for {_event_list(dropped)}")


def _event_list(items: list[tuple[str, int]]) -> str:
    """``event 4, 5 of cam.mp4; event 1 of b.mp4``: the events, grouped by source."""
    by_source: dict[str, list[int]] = {}
    for source, event_id in items:
        by_source.setdefault(source, []).append(event_id)
    return "; ".join(
        f"event {', '.join(str(i) for i in ids)} of {source}" for source, ids in by_source.items()
    )
