"""The options of ``caption`` and ``video``: the defaults their help shows are the settings
dataclasses' defaults, and an option the two share is declared once (``cli/options.py``).

The expected value is read from ``config.py`` here and compared by value (40 == 40.0, on ==
True), not through the formatting ``options.py`` uses, so a help that drifts from the dataclass
fails whatever wrote it.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import types
import typing

import pytest
import typer.main
from console import SPOTDIFF, env

from spotdiff_cli.cli import app
from spotdiff_cli.cli.options import OPTIONS, SECTIONS, given
from spotdiff_cli.config import AnalysisConfig, CaptionConfig, VideoConfig

COMMANDS = ("caption", "video")
DEFAULT = re.compile(r"\\?\[default: ([^\]]*)\]")
FIELDS = {f.name: f for cls in SECTIONS.values() for f in dataclasses.fields(cls)}
HINTS = {
    name: hint for cls in SECTIONS.values() for name, hint in typing.get_type_hints(cls).items()
}


def _none_means() -> dict[str, str]:
    """Settings whose dataclass default is None, and what their help says None means."""
    from spotdiff_cli.timeline.distributed import DEFAULT_WORKERS

    return {
        "scheduler": "a cluster started on this machine",
        "workers": str(DEFAULT_WORKERS),
        "fps": "EXIF or file times",
    }


# Options that are no setting (they steer the command, not the analysis), whose default is None,
# and what their help says None means.
CLI_NONE_MEANS = {"watch_idle": "never"}


def _params(command: str) -> dict[str, typing.Any]:
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: p for p in click_command.params if p.param_type_name == "option"}


def _same(shown: str, default: typing.Any) -> bool:
    if isinstance(default, bool):
        return shown == ("on" if default else "off")
    if isinstance(default, (int, float)):
        return float(shown) == default
    return shown == default


def _expected(name: str, param: typing.Any) -> str | None:
    """What the help should show as ``name``'s default; None: no default shown."""
    if name in FIELDS:
        default = FIELDS[name].default
        if default is None:
            return _none_means().get(name)
        return None if default == () else default
    if param.default is None:
        return CLI_NONE_MEANS.get(name)
    if param.is_flag and not param.secondary_opts:
        return None  # --json, --resume: Typer shows no default for a one-way switch
    return param.default if param.show_default else None


def _base_type(hint: typing.Any) -> type:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _base_type(args[0])
    if typing.get_origin(hint) is tuple:
        return args[0]
    return hint


@pytest.mark.parametrize("command", COMMANDS)
def test_setting_options_are_not_given_by_default_and_named_as_their_field(command) -> None:
    click_types = {int: "int", float: "float", str: "str", bool: "boolean"}
    settings = {name: p for name, p in _params(command).items() if name in FIELDS}
    assert settings, command
    for name, param in settings.items():
        # None = "not given": the --config file may set it, only a typed flag overrides it.
        assert param.default is None, (command, name, param.default)
        assert name in OPTIONS, f"{command} --{name}: declare it in cli/options.py"
        assert param.type.name == click_types[_base_type(HINTS[name])], (command, name)
        assert param.multiple == (typing.get_origin(HINTS[name]) is tuple), (command, name)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_defaults_are_the_dataclass_defaults(command) -> None:
    for name, param in _params(command).items():
        typed = DEFAULT.findall(param.help or "")
        assert len(typed) <= 1, (command, name, param.help)
        expected = _expected(name, param)
        if typed:
            assert expected is not None, f"{command} --{name} shows a default it does not have"
            assert _same(typed[0], expected), (command, name, typed[0], expected)
        elif name in FIELDS or param.default is None:
            assert expected is None, f"{command} --{name}: the help shows no default ({expected})"


@pytest.mark.parametrize("command", COMMANDS)
def test_console_script_help_shows_the_dataclass_defaults(command) -> None:
    """What a user reads: ``spotdiff COMMAND --help`` from the installed script, one row per
    option (wide enough that no row wraps)."""
    proc = subprocess.run(
        [str(SPOTDIFF), command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(COLUMNS="2000", TERMINAL_WIDTH="2000"),
    )
    assert proc.returncode == 0, proc.stderr
    params = _params(command)
    by_flag = {flag: name for name, p in params.items() for flag in p.opts}
    seen = set()
    for line in proc.stdout.splitlines():
        row = re.match(r"[│|]\s+(--[\w-]+)", line)
        if not row or row.group(1) == "--help":
            continue
        name = by_flag[row.group(1)]
        seen.add(name)
        shown = DEFAULT.findall(line)
        expected = _expected(name, params[name])
        if expected is None:
            assert not shown, (command, line)
        else:
            assert len(shown) == 1 and _same(shown[0], expected), (command, line, expected)
    assert seen == set(params) - {"help"}, set(params) - seen


def test_shared_options_are_declared_once() -> None:
    caption, video = (_params(c) for c in COMMANDS)
    shared = set(caption) & set(video)
    assert {"model", "weights", "device", "max_sentences", "recognise", "config"} <= shared
    assert {"delta", "work_size", "camera"} <= shared
    for name in shared - {"out", "overwrite", "as_json"}:  # these say what *this* command writes
        a, b = caption[name], video[name]
        assert (a.opts, a.secondary_opts, a.help, a.rich_help_panel) == (
            b.opts,
            b.secondary_opts,
            b.help,
            b.rich_help_panel,
        ), name


def test_every_declared_option_is_a_setting_with_its_flags() -> None:
    for name, option in OPTIONS.items():
        assert name in FIELDS, f"cli/options.py declares {name}, which no settings dataclass has"
        assert option.flags and all(f.startswith("-") for f in option.flags), name


def test_given_groups_by_section_and_keeps_none_as_not_given() -> None:
    flags = given(
        {"delta": 30.0, "max_sentences": None, "roi": (), "every": "2s", "out": "x", "clips": False}
    )
    assert flags == {
        "analysis": {"delta": 30.0},
        "caption": {"max_sentences": None},
        "video": {"roi": None, "every": "2s", "clips": False},
    }
    assert given({"roi": ["1,2,3,4"]})["video"] == {"roi": ("1,2,3,4",)}
    assert set(SECTIONS) == {"analysis", "caption", "video"}
    assert SECTIONS["analysis"] is AnalysisConfig
    assert SECTIONS["caption"] is CaptionConfig and SECTIONS["video"] is VideoConfig
