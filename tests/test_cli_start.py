"""What the console script does before a command runs: it registers only the command its command
line names (Typer builds a Click command for every registered one at each start), all of them
where it names none or an unknown one, and it gives NumPy's OpenBLAS one thread unless the user
chose a number."""

from __future__ import annotations

import json
import subprocess
import sys

from console import REPO, SPOTDIFF, env, run_python

COMMANDS = ["caption", "data", "eval", "models", "search", "summary", "train", "video"]

# Registers what a command line asks for and prints what the root app then holds.
_REGISTERED = """
import json, sys
from spotdiff_cli.cli import load_commands
load_commands({args!r})
from spotdiff_cli.cli.root import app
print(json.dumps({{
    "commands": [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups],
    "modules": sorted(m for m in sys.modules if m.startswith("spotdiff_cli.cli.") and m.endswith("_cmd")),
}}))
"""


def _registered(args: list[str] | None) -> dict:
    return json.loads(run_python(_REGISTERED.format(args=args)).stdout)


def test_a_command_line_that_names_a_command_registers_that_command_alone():
    found = _registered(["-q", "--debug", "caption", "a.png", "b.png"])
    assert found == {"commands": ["caption"], "modules": ["spotdiff_cli.cli.caption_cmd"]}
    assert _registered(["data", "clevr", "--help"])["commands"] == ["data"]


def test_no_command_or_an_unknown_one_registers_every_command():
    for args in ([], ["--help"], ["captoin", "a.png"], None):
        assert sorted(_registered(args)["commands"]) == COMMANDS, args


def test_the_package_app_has_every_command():
    code = "from spotdiff_cli.cli import app; print(len(app.registered_commands) + len(app.registered_groups))"
    assert run_python(code).stdout.strip() == str(len(COMMANDS))


def _console(*args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SPOTDIFF), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env(**extra),
        stdin=subprocess.DEVNULL,
    )


def test_the_help_page_lists_every_command_and_a_misspelt_one_gets_a_suggestion():
    page = _console("--help")
    assert page.returncode == 0
    for name in COMMANDS:
        assert f" {name} " in page.stdout, name
    wrong = _console("captoin", "a.png", "b.png")
    assert wrong.returncode == 2
    assert wrong.stdout == ""
    assert wrong.stderr.count("\n") == 1 and "Did you mean 'caption'?" in wrong.stderr


def test_shell_completion_still_knows_every_command():
    done = _console(_SPOTDIFF_COMPLETE="complete_bash", COMP_WORDS="spotdiff vi", COMP_CWORD="1")
    assert done.returncode == 0
    assert done.stdout.split() == ["video"]


# The console script's own entry point, with an exit handler (the script's fast exit still runs
# them) that prints the BLAS thread setting the process ran with.
_BLAS = """
import atexit, os, sys
atexit.register(lambda: print("OPENBLAS_NUM_THREADS=" + os.environ.get("OPENBLAS_NUM_THREADS", "")))
sys.argv = ["spotdiff", "--version"]
from spotdiff_cli.entry import main
main()
"""


def test_the_console_script_gives_openblas_one_thread_unless_the_user_chose():
    environment = env()
    environment.pop("OPENBLAS_NUM_THREADS", None)
    assert "OPENBLAS_NUM_THREADS=1" in _run_entry(environment)
    assert "OPENBLAS_NUM_THREADS=3" in _run_entry(env(OPENBLAS_NUM_THREADS="3"))


def _run_entry(environment: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _BLAS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
