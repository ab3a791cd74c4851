"""More of the bad-input corpus (issue 25): inputs an outside sweep found still getting through.

The same rule as ``tests/test_bad_inputs.py``, whose ``Corpus`` of good files this reuses: each
input, run through the installed console script, ends in one ``error:`` line naming the problem
with exit 1 or 2 (or a correct answer with exit 0) - never a traceback, never a hang (every run
here has a time limit far below what the unfixed hangs took), and no process count or memory
that grows with a flag's value or a hook's output.

``python -m pytest tests/test_bad_inputs_more.py -q -rA`` lists every entry and its outcome.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from console import one_error_line, run_spotdiff
from test_bad_inputs import ERROR, Corpus

LIMIT = (
    60  # s per run: every input here is refused at once; the unfixed ones ran minutes or for ever
)


class Case(NamedTuple):
    argv: list[object]
    codes: tuple[int, ...]
    expected: str  # in the error line, or in stdout for exit 0
    env: dict[str, str] | None = None


class MoreCorpus(Corpus):
    """The shared good files, plus named pipes and the folders some entries need."""

    def fifo(self, name: str) -> Path:
        path = self.root / name
        if not path.exists():
            os.mkfifo(path)
        return path

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(exist_ok=True)
        return path

    def cache_env(self) -> dict[str, str]:
        """A cache of its own: an unfixed `train` would generate a benchmark into it."""
        return {"XDG_CACHE_HOME": str(self.folder("cache"))}


def _hook(code: str) -> str:
    """An --on-event command running ``code`` in this interpreter (quoted for shlex)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


CORPUS: dict[str, Callable[[MoreCorpus], Case]] = {
    # -- processes: a flag's value must not become a process count ------------------------------
    "jobs 10000": lambda c: Case(["video", c.before, c.after, "--jobs", "10000"], (2,), "--jobs"),
    "dask workers 10000": lambda c: Case(
        ["video", c.clip, "--engine", "dask", "--workers", "10000"], (2,), "--workers"
    ),
    # -- named pipes and devices: refused before they are opened, never waited on ----------------
    "fifo as image": lambda c: Case(["caption", c.fifo("f1.png"), c.after], ERROR, "named pipe"),
    "fifo as second image": lambda c: Case(
        ["caption", c.before, c.fifo("f2.png")], ERROR, "named pipe"
    ),
    "fifo as video": lambda c: Case(["video", c.fifo("f3.mp4")], ERROR, "named pipe"),
    "fifo png as video": lambda c: Case(["video", c.fifo("f4.png")], ERROR, "named pipe"),
    "fifo as reference": lambda c: Case(
        ["video", c.clip, "--compare", "reference", "--reference", c.fifo("f5.png")],
        ERROR,
        "named pipe",
    ),
    "fifo as config": lambda c: Case(
        ["caption", c.before, c.after, "--config", c.fifo("f6.yaml")], (2,), "named pipe"
    ),
    "device as image": lambda c: Case(["caption", "/dev/zero", c.after], ERROR, "character device"),
    "config is a folder": lambda c: Case(
        ["caption", c.before, c.after, "--config", c.folder("conf.d")], (2,), "is a folder"
    ),
    # -- sizes: a job without end is refused with its limit --------------------------------------
    "synth a trillion pairs": lambda c: Case(
        ["data", "synth", "--out", c.root / "synth-huge", "--pairs", "1000000000000"],
        (2,),
        "100000",
    ),
    # -- a recipe's model is checked as the recipe is read, before any data work ----------------
    "recipe with an unknown model": lambda c: Case(
        ["train", "--recipe", c.file("r1.yaml", "model: nosuchmodel\n"), "--out", c.root / "t1"],
        ERROR,
        "unknown model 'nosuchmodel'",
        c.cache_env(),
    ),
    "recipe with a misspelt model": lambda c: Case(
        ["train", "--recipe", c.file("r2.yaml", "model: ddlaa\n"), "--out", c.root / "t2"],
        ERROR,
        "did you mean 'ddla'",
        c.cache_env(),
    ),
    "recipe with an untrainable model": lambda c: Case(
        ["train", "--recipe", c.file("r3.yaml", "model: grounded\n"), "--out", c.root / "t3"],
        (2,),
        "not trainable",
        c.cache_env(),
    ),
    # -- numbers that are not finite -------------------------------------------------------------
    "fps inf": lambda c: Case(["video", c.folder("frames-inf"), "--fps", "inf"], (2,), "--fps"),
    "fps nan": lambda c: Case(["video", c.folder("frames-nan"), "--fps", "nan"], (2,), "--fps"),
    "fps -inf": lambda c: Case(["video", c.folder("frames-ninf"), "--fps", "-inf"], (2,), "--fps"),
    "lower inf": lambda c: Case(["video", c.clip, "--lower", "inf"], (2,), "--lower"),
    "upper nan": lambda c: Case(["video", c.clip, "--upper", "nan"], (2,), "--upper"),
    "delta inf": lambda c: Case(["caption", c.before, c.after, "--delta", "inf"], (2,), "--delta"),
    "stream timeout inf": lambda c: Case(
        ["video", "rtsp://127.0.0.1:9/cam", "--stream-timeout", "inf"], (2,), "--stream-timeout"
    ),
    "stream timeout nan": lambda c: Case(
        ["video", "rtsp://127.0.0.1:9/cam", "--stream-timeout", "nan"], (2,), "--stream-timeout"
    ),
    "stream timeout 1e300": lambda c: Case(
        ["video", "rtsp://127.0.0.1:9/cam", "--stream-timeout", "1e300"], (2,), "--stream-timeout"
    ),
    "watch poll inf": lambda c: Case(
        ["video", "--watch", c.folder("watched1"), "--watch-poll", "inf"], (2,), "--watch-poll"
    ),
    "watch idle inf": lambda c: Case(
        ["video", "--watch", c.folder("watched2"), "--watch-idle", "inf"], (2,), "--watch-idle"
    ),
    "on-event timeout 1e300": lambda c: Case(
        ["video", c.clip, "--on-event", "true", "--on-event-timeout", "1e300"],
        (2,),
        "--on-event-timeout",
    ),
    "config eps .inf": lambda c: Case(
        ["caption", c.before, c.after, "--config", c.file("inf.yaml", "analysis: {eps: .inf}\n")],
        (2,),
        "--eps",
    ),
    "config merge_distance .nan": lambda c: Case(
        ["video", c.clip, "--config", c.file("nan.yaml", "video: {merge_distance: .nan}\n")],
        (2,),
        "--merge-distance",
    ),
    # -- config files ------------------------------------------------------------------------------
    "config of 5000 nested [": lambda c: Case(
        ["caption", c.before, c.after, "--config", c.file("deep.yaml", "[" * 5000)],
        (2,),
        "not a valid settings file",
    ),
    "config of 5000 nested {a:": lambda c: Case(
        [
            "caption",
            c.before,
            c.after,
            "--config",
            c.file("deep2.yaml", "{a: " * 5000 + "1" + "}" * 5000),
        ],
        (2,),
        "not a valid settings file",
    ),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> MoreCorpus:
    return MoreCorpus(tmp_path_factory.mktemp("bad-inputs-more"))


@pytest.mark.parametrize("name", list(CORPUS))
def test_bad_input_is_one_line_or_a_correct_answer(corpus, name):
    if "/dev/full" in name and not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    argv, codes, expected, env = CORPUS[name](corpus)
    proc = run_spotdiff(*argv, timeout=LIMIT, extra_env=env)
    assert proc.returncode in codes, (
        f"{name}: exit {proc.returncode}\nstdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr}"
    )
    if proc.returncode == 0:
        assert expected in proc.stdout, proc.stdout
    else:
        line = one_error_line(proc)
        assert expected in line, f"{name}: {line!r} does not mention {expected!r}"
    assert not corpus.marker.exists(), f"{name}: a hostile input ran code"


def test_a_refused_synth_writes_nothing(corpus):
    run_spotdiff(*CORPUS["synth a trillion pairs"](corpus).argv, timeout=LIMIT)
    assert not (corpus.root / "synth-huge").exists()


def test_a_refused_recipe_generates_no_data(corpus):
    case = CORPUS["recipe with an unknown model"](corpus)
    run_spotdiff(*case.argv, timeout=LIMIT, extra_env=case.env)
    assert not any((corpus.root / "cache").rglob("*.png"))
    assert not (corpus.root / "t1").exists()
