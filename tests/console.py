"""Running the installed ``spotdiff`` console script as a user does: a real subprocess, with its
real exit code and a real interpreter shutdown (an in-process runner never sees either).

``run_spotdiff`` fails the test when the process ends in a signal (an abort is exit 134 in a
shell, -6 here), prints "terminate called", or shows a traceback without ``--debug``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPOTDIFF = Path(sys.executable).parent / "spotdiff"


def env(**extra: str) -> dict[str, str]:
    """The test environment; ``extra`` adds or replaces variables (PYTHONPATH, HOME...)."""
    environment = dict(os.environ)
    environment.update(HF_HUB_OFFLINE="1", COLUMNS="200", NO_COLOR="1")
    environment.update(extra)
    return environment


def check_clean_exit(proc: subprocess.CompletedProcess, args: tuple[str, ...]) -> None:
    """No signal, no C++ abort message, no traceback (unless --debug asked for one)."""
    where = f"`spotdiff {' '.join(args)}` exit {proc.returncode}\nstderr: {proc.stderr[-2000:]}"
    assert proc.returncode >= 0, f"ended by signal {signal.Signals(-proc.returncode).name}: {where}"
    assert proc.returncode != 134, where
    assert "terminate called" not in proc.stderr, where
    if "--debug" not in args:
        assert "Traceback" not in proc.stderr, where


def run_spotdiff(
    *args: object,
    timeout: float = 120,
    cwd: Path | None = None,
    input: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run the console script once; assert it ended cleanly; return the finished process.
    extra_env: variables to add to the test environment for this run."""
    assert SPOTDIFF.is_file(), (
        f"the console script {SPOTDIFF} is not installed; run scripts/bootstrap.sh"
    )
    argv = tuple(str(a) for a in args)
    proc = subprocess.run(
        [str(SPOTDIFF), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        env=env(**(extra_env or {})),
        stdin=subprocess.DEVNULL if input is None else None,
        input=input,
    )
    check_clean_exit(proc, argv)
    return proc


def ctrl_c_reaches_child() -> None:
    """``preexec_fn`` for processes a test will interrupt: SIGINT back to its default.

    A harness started in the background (``nohup``, ``cmd &`` in a script) runs with SIGINT
    ignored; children inherit that, and Python then never turns the signal into
    KeyboardInterrupt. A user's terminal delivers Ctrl-C, so the signal tests restore the
    default and test spotdiff rather than how the suite was launched."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_spotdiff(*args: object, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the console script without waiting (to signal it mid-run); text pipes. Finish
    with ``communicate`` and check the result with ``check_clean_exit``."""
    return subprocess.Popen(
        [str(SPOTDIFF), *(str(a) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env=env(**(extra_env or {})),
        preexec_fn=ctrl_c_reaches_child,
    )


def run_python(
    code: str, timeout: float = 120, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """A user's Python script, run by the venv's interpreter, checked the same way."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env(**(extra_env or {})),
        stdin=subprocess.DEVNULL,
    )
    check_clean_exit(proc, ("<python script>",))
    return proc


def run_many(times: int, *args: object, timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """The same command ``times`` times, two at a time (a race shows up as one bad run of many)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda _: run_spotdiff(*args, timeout=timeout), range(times)))


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``error: ...`` line a bad input must produce; fails on anything longer."""
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), (
        f"exit {proc.returncode}, stderr:\n{proc.stderr}"
    )
    return lines[0]


def caption_and_score(
    model: str, weights: Path, tmp_path: Path, write_png, extra_env: dict[str, str]
) -> subprocess.CompletedProcess:
    """What a user does after ``spotdiff train`` of a tiny recipe in a fresh cache
    (``XDG_CACHE_HOME`` in ``extra_env``): ``spotdiff caption`` of a drawn change answers with
    a sentence, and ``spotdiff eval`` scores the cached synthetic test split (results under
    ``tmp_path/eval``). Returns eval's process, checked to have exited 0 with CIDEr printed."""
    from conftest import draw_box, textured_background

    before = textured_background(224, 224)
    a = write_png("a.png", before)
    b = write_png("b.png", draw_box(before, 40, 60, 50, 30, (200, 30, 30)))
    caption = run_spotdiff(
        "caption", a, b, "--model", model, "--weights", weights, extra_env=extra_env
    )
    assert caption.returncode == 0 and "1." in caption.stdout, caption.stderr
    data = next((Path(extra_env["XDG_CACHE_HOME"]) / "spotdiff" / "datasets").glob("synth-*"))
    scored = run_spotdiff(
        "eval", "--model", model, "--weights", weights, "--dataset", data, "--split", "test",
        "--protocol", "single", "--tokenizer", "python", "--out", tmp_path / "eval",
        extra_env=extra_env,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    assert "CIDEr" in scored.stdout
    return scored
