"""`spotdiff caption` and `spotdiff models` as a user runs them (in-process, Typer's CliRunner)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, draw_box
from typer.testing import CliRunner

from spotdiff_cli.cli import app

runner = CliRunner()


@pytest.fixture
def pair(scene, write_png):
    return write_png("before.png", scene), write_png(
        "after.png", draw_box(scene, 230, 170, 50, 40, (220, 40, 40))
    )


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_caption_prints_the_sentence(pair):
    result = run("caption", *pair, "--no-recognise")
    assert result.exit_code == 0, result.output
    assert "1. a red object appeared in the lower right" in result.output


def test_json_goes_to_stdout_for_scripts(pair):
    result = run("caption", *pair, "--no-recognise", "--json")
    data = json.loads(result.stdout)
    assert data["schema"] == "spotdiff.report/1"
    assert data["sentences"][0]["cluster_ids"] == [data["clusters"][0]["id"]]
    assert data["clusters"][0]["bbox"][0] == pytest.approx(230, abs=3)


def test_out_writes_every_report_and_refuses_to_overwrite(pair, tmp_path):
    out = tmp_path / "report"
    assert run("caption", *pair, "--no-recognise", "--out", out).exit_code == 0
    for name in (
        "report.json",
        "report.md",
        "report.html",
        "annotated.png",
        "mask.png",
        "config.yaml",
    ):
        assert (out / name).stat().st_size > 0, name
    html = (out / "report.html").read_text()
    assert "data:image/jpeg;base64," in html and "appeared in the lower right" in html
    before = (out / "report.json").read_bytes()
    again = run("caption", *pair, "--no-recognise", "--out", out)
    assert (
        again.exit_code == 1 and "already exists" in again.output and "--overwrite" in again.output
    )
    assert (out / "report.json").read_bytes() == before
    assert run("caption", *pair, "--no-recognise", "--out", out, "--overwrite").exit_code == 0


def test_html_escapes_file_names(scene, write_png, tmp_path):
    evil = write_png("<img src=x onerror=alert(1)>.png", scene)
    out = tmp_path / "r"
    assert run("caption", evil, evil, "--no-recognise", "--out", out).exit_code == 0
    page = (out / "report.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_config_file_is_applied_and_flags_win(pair, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("analysis:\n  delta: 300\ncaption:\n  recognise: false\n")
    result = run("caption", *pair, "--config", config, "--json")
    assert json.loads(result.stdout)["sentences"][0]["kind"] == "no_change"  # delta 300 hides it
    result = run("caption", *pair, "--config", config, "--delta", "40", "--json")
    assert json.loads(result.stdout)["sentences"][0]["kind"] == "appeared"


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["missing.png", "missing.png"], 1, "no such file"),
        (["--model", "grounde"], 1, "did you mean 'grounded'"),
        (["--delta", "-1"], 2, "--delta must be between"),
        (["--align", "sideways"], 2, "--align must be one of"),
        (["--sentences", "0"], 2, "--sentences must be at least 1"),
        (["--device", "gpu"], 2, "is not one of auto, cpu, cuda"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(pair, args, code, message):
    files = [] if args[0].endswith(".png") else list(pair)
    result = run("caption", *files, *args)
    assert result.exit_code == code
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_text_file_named_png_is_rejected(pair, tmp_path):
    fake = tmp_path / "fake.png"
    fake.write_text("not an image")
    result = run("caption", fake, pair[1])
    assert result.exit_code == 1 and "not an image file" in result.output


def test_bad_config_key_suggests_the_right_one(pair, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("analysis:\n  detla: 30\n")
    result = run("caption", *pair, "--config", config)
    assert result.exit_code == 2 and "did you mean 'delta'" in result.output


def test_debug_shows_the_traceback(pair):
    result = run("--debug", "caption", "missing.png", "missing.png")
    assert result.exit_code != 0 and result.exception is not None


def test_models_lists_grounded():
    result = run("models")
    assert result.exit_code == 0 and "grounded" in result.output


def test_help_and_default_caption_never_import_torch(pair):
    code = (
        "import sys; from typer.testing import CliRunner; from spotdiff_cli.cli import app;"
        f"r = CliRunner().invoke(app, ['caption', {str(pair[0])!r}, {str(pair[1])!r}]);"
        "assert r.exit_code == 0, r.output; print('torch' in sys.modules, 'timm' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "False False"


@pytest.mark.parametrize(
    "args,message",
    [
        (["caption", "a.png", "b.png", "--bogus"], "No such option: --bogus"),
        (["caption", "a.png"], "Missing argument 'after'"),
        (["caption", "a.png", "b.png", "--sentences", "abc"], "Invalid value for '--sentences'"),
    ],
)
def test_console_script_usage_errors_are_one_line(args, message):
    # Click's own usage errors (raised before our commands run) go through the entry point too.
    out = subprocess.run(
        [sys.executable, "-c", "from spotdiff_cli.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "--help" in lines[0], out.stderr
