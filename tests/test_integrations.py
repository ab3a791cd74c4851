"""Integrations, run through the installed console script as a shell, a cron job or CI runs it:
``video --on-event`` (a command per final event, no shell, never fatal), ``caption --exit-code``
(0 no change, 1 change, 2 error, as ImageMagick ``compare``), ``--version`` and shell completion.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import draw_box, textured_background
from console import check_clean_exit, one_error_line, run_spotdiff, start_spotdiff
from test_video import write_video

import spotdiff_cli
from spotdiff_cli.config import Settings, resolve
from spotdiff_cli.report.hooks import EventHook, HookRunner
from spotdiff_cli.timeline.pipeline import describe_source

RED = (220, 40, 40)
# A folder name a shell would mangle or run: spaces, quotes, `;` and a command substitution. If
# any of it reached a shell, `touch PWNED` would leave a file in the working directory.
NASTY = "cam 1; $(touch PWNED) 'q\" `touch PWNED2`"

# The hook: appends {"argv": [...], "stdin": "..."} to the log named by its first argument.
HOOK_SCRIPT = """
import json, sys
record = {"argv": sys.argv[2:], "stdin": sys.stdin.read()}
with open(sys.argv[1], "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\\n")
"""


FRAMES = 70  # 7 s at 10 fps


def _two_visits(i: int) -> list[tuple[int, int, int, int]]:
    """A red box visits the upper left (1.0-2.0 s), then another the lower right (5.0-6.0 s):
    far enough apart that the first event closes, with nothing open, before the second."""
    boxes = []
    if 10 <= i < 20:
        boxes.append((30, 30, 50, 40))
    if 50 <= i < 60:
        boxes.append((220, 160, 50, 40))
    return boxes


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hooks") / NASTY
    folder.mkdir()
    return write_video(folder / "it's a clip.avi", _two_visits, frames=FRAMES)


@pytest.fixture
def hook(tmp_path) -> tuple[str, Path]:
    """(an --on-event template that logs what it received, the log's path)."""
    script = tmp_path / "hook.py"
    script.write_text(HOOK_SCRIPT)
    log = tmp_path / "hook log.jsonl"
    return shlex.join([sys.executable, str(script), str(log)]) + " {json}", log


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


# -- --on-event ------------------------------------------------------------------------------------


def test_on_event_gets_each_final_event_as_one_argument_and_on_stdin(clip, hook, tmp_path):
    template, log = hook
    out = tmp_path / "report"
    proc = run_spotdiff(
        "video", clip, "--every", "0.5s", "--no-recognise", "--out", out, "--json",
        "--on-event", template, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    timeline = json.loads(proc.stdout)  # the hook's output never reaches stdout
    events = timeline["sources"][0]["events"]
    assert len(events) == 2, events

    records = _records(log)
    assert len(records) == len(events)
    for record, event in zip(records, events):
        assert len(record["argv"]) == 1, "the JSON must stay one argument"
        payload = json.loads(record["argv"][0])
        assert json.loads(record["stdin"]) == payload
        assert payload["schema"] == "spotdiff.event/1"
        assert payload["source"] == str(clip)
        assert payload["path"] == str(clip)
        assert payload["report_dir"] == str(out)
        assert payload["event"] == event  # exactly what timeline.json says, picture included
        assert (out / payload["event"]["picture"]).is_file()
    assert not list(tmp_path.glob("PWNED*")), "a file name reached a shell"


def test_a_failing_hook_warns_once_per_event_and_the_run_goes_on(clip, tmp_path):
    proc = run_spotdiff(
        "video", clip, "--every", "0.5s", "--no-recognise", "--json",
        "--on-event", "sh -c 'echo out of disk >&2; exit 3'",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = json.loads(proc.stdout)["sources"][0]["events"]
    warnings = _warnings(proc.stderr)
    assert len(warnings) == len(events) == 2, proc.stderr
    assert all(w.endswith("failed: exit 3: out of disk") for w in warnings), warnings
    assert [f"event {e['id']} of {clip}" in w for w, e in zip(warnings, events)] == [True, True]


def _running(marker: str) -> list[str]:
    """Command lines of live processes that contain ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text)
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find leftover processes")
def test_a_slow_hook_is_stopped_with_what_it_started_and_the_run_goes_on(clip):
    marker = "61.4037"  # an unusual sleep length: no other process runs exactly this
    started = time.perf_counter()
    proc = run_spotdiff(
        "video", clip, "--every", "0.5s", "--no-recognise", "--json",
        # A grandchild holds the pipes too: only killing the group ends both.
        "--on-event", f"sh -c 'sleep {marker} & sleep {marker}'", "--on-event-timeout", "0.5",
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["sources"][0]["events"]) == 2
    warnings = _warnings(proc.stderr)
    assert len(warnings) == 2 and all("took longer than 0.5 s" in w for w in warnings), warnings
    assert elapsed < 30, f"the hooks held the run for {elapsed:.0f} s"
    assert not _running(f"sleep {marker}"), "a hook's process outlived its timeout"


def test_ctrl_c_stops_the_running_hook_and_names_the_events_not_sent(clip, tmp_path):
    started = tmp_path / "hook started"
    marker = "62.7193"  # an unusual sleep length, to find a leftover hook process
    template = shlex.join(["sh", "-c", f"touch '{started}'; sleep {marker}"])
    args = ("video", str(clip), "--every", "0.5s", "--no-recognise", "--json")
    proc = start_spotdiff(*args, "--on-event", template)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert started.exists(), "the first hook never ran"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    check_clean_exit(subprocess.CompletedProcess(args, proc.returncode, stdout, stderr), args)
    assert proc.returncode == 130, stderr
    [warning] = _warnings(stderr)
    # Event 1's hook was stopped; event 2's never ran (or, if Ctrl-C came mid-analysis, never
    # closed): the line names what was not sent.
    assert warning.startswith("warning: interrupted: --on-event did not run for event 1"), stderr
    assert not _running(f"sleep {marker}"), "the running hook outlived Ctrl-C"


@pytest.mark.parametrize(
    "template,expected",
    [
        ("no-such-command-xyz {json}", "command 'no-such-command-xyz' not found"),
        ("echo 'unclosed", "No closing quotation"),
        ("", "--on-event needs a command"),
        ("{json} x", "cannot be the command itself"),
    ],
)
def test_a_bad_on_event_is_one_usage_error_before_the_run(clip, template, expected):
    proc = run_spotdiff("video", clip, "--on-event", template)
    assert proc.returncode == 2
    assert expected in one_error_line(proc)


def test_a_bad_on_event_timeout_is_a_usage_error(clip):
    proc = run_spotdiff("video", clip, "--on-event", "true", "--on-event-timeout", "0")
    assert proc.returncode == 2
    assert "--on-event-timeout" in one_error_line(proc)


def test_hooks_run_for_every_source_with_several_jobs(clip, hook, tmp_path):
    template, log = hook
    other = write_video(tmp_path / "other.avi", _two_visits, frames=FRAMES)
    proc = run_spotdiff(
        "video", clip, other, "--every", "0.5s", "--no-recognise", "--jobs", "2", "--json",
        "--on-event", template,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    timeline = json.loads(proc.stdout)
    expected = sorted((s["source"], e["id"]) for s in timeline["sources"] for e in s["events"])
    received = [json.loads(r["argv"][0]) for r in _records(log)]
    assert sorted((p["source"], p["event"]["id"]) for p in received) == expected
    assert len(expected) == 4


class _StopAfter:
    """A progress callback that presses Ctrl-C after ``n`` samples."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, position: float, duration: float | None, samples: int) -> None:
        if samples >= self.n:
            raise KeyboardInterrupt


def _back_to_back(i: int) -> list[tuple[int, int, int, int]]:
    """The first visit as in ``_two_visits``, the second from 3.0 s: the first event closes at
    the very sample the second opens, so no checkpoint falls between them."""
    return [(30, 30, 50, 40)] if 10 <= i < 20 else [(220, 160, 50, 40)] if 30 <= i < 40 else []


@pytest.mark.parametrize(
    "boxes,stop_after,again",
    [
        # Ctrl-C at 4.5 s, after the checkpoint at 4.0 s that holds event 1: only 2 is new.
        (_two_visits, 10, [2]),
        # Ctrl-C at 3.5 s: event 1 closed at 3.0 s while event 2 opened, so the last checkpoint
        # is from before event 1; the resumed run finds it again and sends it again.
        (_back_to_back, 8, [1, 2]),
    ],
)
def test_a_resumed_run_sends_the_events_it_closes_from_the_checkpoint(
    tmp_path, boxes, stop_after, again
):
    clip = write_video(tmp_path / "clip.avi", boxes, frames=FRAMES)
    settings = resolve(Settings(), None, caption={"recognise": False}, video={"every": "0.5s"})
    partial = {}
    before: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        describe_source(
            clip,
            settings,
            on_progress=_StopAfter(stop_after),
            on_update=lambda r: partial.update(result=r),
            on_closed=lambda e: before.append(e.id),
        )
    after: list[int] = []
    result = describe_source(
        clip, settings, previous=partial["result"], on_closed=lambda e: after.append(e.id)
    )
    assert (before, after) == ([1], again)
    assert [e.id for e in result.events] == [1, 2]  # the report itself has each once


def test_the_runner_waits_for_queued_hooks_in_order(tmp_path, hook):
    template, log = hook
    warnings: list[str] = []
    with HookRunner(EventHook.parse(template), warnings.append, report_dir=tmp_path) as runner:
        for event in _events(3):
            runner.submit("cam.mp4", event)
    assert [json.loads(r["argv"][0])["event"]["id"] for r in _records(log)] == [1, 2, 3]
    assert runner.ran == 3 and runner.failed == 0 and warnings == []


def test_a_file_name_that_is_not_utf8_still_reaches_the_hook(tmp_path, hook):
    template, log = hook
    name = os.fsdecode(b"cam-\xff.mp4")  # a Latin-1 name on a UTF-8 system: a lone surrogate
    warnings: list[str] = []
    with HookRunner(EventHook.parse(template), warnings.append) as runner:
        for event in _events(2):
            runner.submit(name, event)
    assert warnings == []
    received = [json.loads(r["argv"][0]) for r in _records(log)]
    assert [p["source"] for p in received] == [name, name]
    assert [p["event"]["id"] for p in received] == [1, 2]


def test_literal_braces_other_than_the_placeholder_are_left_alone():
    hook = EventHook.parse("jq '{id: .event.id}' {json} --arg x {json}suffix")
    assert hook.command('{"a": 1}') == [
        "jq",
        "{id: .event.id}",
        '{"a": 1}',
        "--arg",
        "x",
        '{"a": 1}suffix',
    ]


def _events(n: int):
    from spotdiff_cli.types import Event

    return [
        Event(i, "cam.mp4", float(i), float(i) + 1, "a red object appeared", "appeared", "object",
              ((1, 2, 3, 4),), (float(i) - 1, float(i)))
        for i in range(1, n + 1)
    ]  # fmt: skip


# -- caption --exit-code ---------------------------------------------------------------------------


@pytest.fixture
def stills(write_png) -> dict[str, Path]:
    """A scene, the scene with a red box added, and the scene 40 % brighter."""
    scene = textured_background(240, 320, seed=3)
    brighter = (scene.astype("float32") * 1.4).clip(0, 255).astype("uint8")
    return {
        "scene": write_png("scene.png", scene),
        "object": write_png("object.png", draw_box(scene, 120, 90, 50, 40, RED)),
        "brighter": write_png("brighter.png", brighter),
    }


@pytest.mark.parametrize(
    "after,code",
    [("scene", 0), ("object", 1), ("brighter", 1)],  # lighting is a change too
)
def test_exit_code_says_whether_a_change_was_reported(stills, after, code):
    proc = run_spotdiff("caption", stills["scene"], stills[after], "--exit-code")
    assert proc.returncode == code, proc.stdout + proc.stderr
    plain = run_spotdiff("caption", stills["scene"], stills[after])
    assert plain.returncode == 0  # without the flag, a change is not a failure


def test_exit_code_with_json_still_prints_the_report(stills):
    proc = run_spotdiff("caption", stills["scene"], stills["object"], "--exit-code", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["sentences"][0]["kind"] == "appeared"


def test_with_exit_code_every_error_exits_2_not_1(stills, tmp_path):
    missing = run_spotdiff("caption", stills["scene"], tmp_path / "nope.png", "--exit-code")
    assert missing.returncode == 2 and "no such file" in one_error_line(missing)
    assert run_spotdiff("caption", stills["scene"], tmp_path / "nope.png").returncode == 1

    usage = run_spotdiff("caption", stills["scene"], stills["object"], "--exit-code", "-n", "x")
    assert usage.returncode == 2

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    output = run_spotdiff(
        "caption", stills["scene"], stills["object"], "--exit-code", "--out", blocker / "r"
    )
    assert output.returncode == 2, output.stderr
    one_error_line(output)


# -- --version and shell completion ------------------------------------------------------------------


def test_version_is_the_installed_distribution_version():
    proc = run_spotdiff("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"spotdiff {importlib.metadata.version('spotdiff')}\n"
    assert spotdiff_cli.__version__ == importlib.metadata.version("spotdiff")


# Typer finds the shell by looking at the parent process; a test names it instead.
NO_DETECTION = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last of ``words`` (as the installed script asks)."""
    parts = words.split(" ")
    proc = run_spotdiff(
        extra_env={
            "_SPOTDIFF_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
        }
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_completion_options_are_offered():
    proc = run_spotdiff("--help")
    assert "--install-completion" in proc.stdout and "--show-completion" in proc.stdout


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o default -F"), ("zsh", "#compdef")])
def test_show_completion_prints_a_script_for_the_shell(shell, marker):
    proc = run_spotdiff("--show-completion", shell, extra_env=NO_DETECTION)
    assert proc.returncode == 0
    assert marker in proc.stdout and "_SPOTDIFF_COMPLETE" in proc.stdout


def test_completion_answers_commands_and_options():
    assert _complete("spotdiff cap") == ["caption"]
    assert "--exit-code" in _complete("spotdiff caption --exit")
    assert set(_complete("spotdiff video --on-ev")) == {"--on-event", "--on-event-timeout"}


def test_install_completion_writes_into_the_users_shell_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = run_spotdiff(
        "--install-completion", "bash", extra_env={**NO_DETECTION, "HOME": str(home)}
    )
    assert proc.returncode == 0, proc.stderr
    script = home / ".bash_completions" / "spotdiff.sh"
    assert "_SPOTDIFF_COMPLETE" in script.read_text()
    assert (
        str(script) in (home / ".bashrc").read_text()
        or "spotdiff.sh" in (home / ".bashrc").read_text()
    )
    assert os.environ.get("HOME") != str(home)  # the user's own files were not touched
