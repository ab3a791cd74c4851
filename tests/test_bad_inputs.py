"""A corpus of bad inputs, each run through the installed console script as a user would.

Every entry is built in the test (from real media where a real file is the point: a truncated
clip, a truncated JPEG) and must end in one of two ways: one ``error:`` line naming the problem
with exit 1 or 2, or - where the input is odd but usable (a hostile file name, a clip cut in half)
- a correct answer with exit 0. Never a signal, never a traceback, never a pickle executed.

``python -m pytest tests/test_bad_inputs.py -q -rA`` lists every entry and its outcome.
"""

from __future__ import annotations

import json
import pickle
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background
from console import one_error_line, run_spotdiff

ERROR = (1, 2)  # exit codes of a handled bad input: 2 usage, 1 everything else


class Corpus:
    """The good files every bad one is paired with, made once per module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        scene = textured_background(240, 320, seed=11)
        self.before = self._png("before.png", scene)
        self.after = self._png("after.png", draw_box(scene, 120, 90, 50, 40, (220, 40, 40)))
        self.jpeg = root / "photo.jpg"
        cv2.imwrite(
            str(self.jpeg), cv2.cvtColor(scene, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90]
        )
        self.clip = root / "clip.avi"
        writer = cv2.VideoWriter(str(self.clip), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
        for i in range(30):
            frame = (
                draw_box(scene, 10 + 8 * i, 100, 40, 40, (220, 40, 40)) if 10 <= i < 25 else scene
            )
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        writer.release()
        self.marker = root / "PWNED"  # a hostile pickle tries to create this
        from spotdiff_cli.data.synth import synthesize

        self.dataset = root / "dataset"
        synthesize(self.dataset, pairs=4, seed=0, train=0.0, val=0.0)

    def _png(self, name: str, image: np.ndarray) -> Path:
        path = self.root / name
        cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        return path

    def file(self, name: str, data: bytes | str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def copy_as(self, name: str, source: Path) -> Path:
        return self.file(name, source.read_bytes())


def _png_bomb(width: int, height: int) -> bytes:
    """A valid, tiny PNG header that claims width x height pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


class _Exploit:
    """Unpickling this would run a shell command that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _ffmpeg_mp4(c: Corpus, name: str) -> Path:
    import imageio_ffmpeg

    mp4 = c.root / name
    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(),
            "-v",
            "error",
            "-y",
            "-i",
            str(c.clip),
            "-vf",
            "loop=loop=3:size=30",
            "-c:v",
            "mpeg4",
            "-movflags",
            "+faststart",
            str(mp4),
        ],
        check=True,
    )
    return mp4


# Each entry: id -> builder(corpus) returning (argv, expected exit codes, text expected in the
# error line or, for exit 0, in stdout).
Entry = Callable[[Corpus], tuple[list[object], tuple[int, ...], str]]
CORPUS: dict[str, Entry] = {
    # -- images ---------------------------------------------------------------------------------
    "zero-byte png": lambda c: (["caption", c.file("empty.png", b""), c.after], ERROR, "empty.png"),
    "truncated png": lambda c: (
        [
            "caption",
            c.file("half.png", c.before.read_bytes()[: c.before.stat().st_size // 2]),
            c.after,
        ],
        ERROR,
        "half.png",
    ),
    "truncated jpeg": lambda c: (
        ["caption", c.file("half.jpg", c.jpeg.read_bytes()[:600]), c.after],
        ERROR,
        "half.jpg",
    ),
    "text named .jpg": lambda c: (
        ["caption", c.file("notes.jpg", "just some text\n"), c.after],
        ERROR,
        "notes.jpg",
    ),
    "random bytes .png": lambda c: (
        ["caption", c.file("noise.png", np.random.default_rng(0).bytes(5000)), c.after],
        ERROR,
        "noise.png",
    ),
    "png bomb 100k x 100k": lambda c: (
        ["caption", c.file("bomb.png", _png_bomb(100_000, 100_000)), c.after],
        ERROR,
        "bomb.png",
    ),
    "png bomb 30k x 30k": lambda c: (
        ["caption", c.file("bomb30.png", _png_bomb(30_000, 30_000)), c.after],
        ERROR,
        "bomb30.png",
    ),
    "svg text": lambda c: (
        ["caption", c.file("v.svg", "<svg xmlns='http://www.w3.org/2000/svg'/>"), c.after],
        ERROR,
        "v.svg",
    ),
    "folder as image": lambda c: (["caption", c.root, c.after], ERROR, "folder"),
    "missing image": lambda c: (["caption", c.root / "nope.png", c.after], ERROR, "nope.png"),
    "1x1 images": lambda c: (
        [
            "caption",
            c._png("dot1.png", np.zeros((1, 1, 3), np.uint8)),
            c._png("dot2.png", np.full((1, 1, 3), 255, np.uint8)),
        ],
        (0, 1, 2),
        "",
    ),
    # -- hostile names: usable files, printed as they are -----------------------------------------
    "markup name br[/red]": lambda c: (
        ["caption", c.copy_as("br[/red].png", c.before), c.after],
        (0,),
        "br[/red].png",
    ),
    "markup name [red]ALERT": lambda c: (
        ["caption", c.copy_as("[red]ALERT.png", c.before), c.after],
        (0,),
        "[red]ALERT.png",
    ),
    "markup in missing name": lambda c: (
        ["caption", c.root / "[bold]x[/].png", c.after],
        ERROR,
        "[bold]x[/].png",
    ),
    "newline in name": lambda c: (
        ["caption", c.copy_as("two\nlines.png", c.before), c.after],
        (0,),
        "lines.png",
    ),
    "leading dash name": lambda c: (
        ["caption", "--", c.copy_as("-x.png", c.before), c.after],
        (0,),
        "-x.png",
    ),
    "unicode name": lambda c: (
        ["caption", c.copy_as("äfter 🚗.png", c.before), c.after],
        (0,),
        "äfter 🚗.png",
    ),
    "255-char name": lambda c: (
        ["caption", c.copy_as("n" * 251 + ".png", c.before), c.after],
        (0,),
        "nnnn",
    ),
    # -- options -------------------------------------------------------------------------------
    "sentences 0": lambda c: (
        ["caption", c.before, c.after, "--sentences", "0"],
        (2,),
        "--sentences",
    ),
    "sentences text": lambda c: (
        ["caption", c.before, c.after, "--sentences", "many"],
        (2,),
        "--sentences",
    ),
    "work size 5": lambda c: (
        ["caption", c.before, c.after, "--work-size", "5"],
        (2,),
        "--work-size",
    ),
    "delta 1000": lambda c: (["caption", c.before, c.after, "--delta", "1000"], (2,), "--delta"),
    "delta nan": lambda c: (["caption", c.before, c.after, "--delta", "nan"], (2,), "--delta"),
    "device tpu": lambda c: (["caption", c.before, c.after, "--device", "tpu"], (2,), "--device"),
    "unknown model": lambda c: (
        ["caption", c.before, c.after, "--model", "ddlaa"],
        ERROR,
        "did you mean",
    ),
    "weights for grounded": lambda c: (
        ["caption", c.before, c.after, "--weights", c.before],
        (2,),
        "takes no weights",
    ),
    # -- output --------------------------------------------------------------------------------
    "out under a file": lambda c: (
        ["caption", c.before, c.after, "--out", c.before / "report"],
        ERROR,
        "before.png",
    ),
    "out in /proc": lambda c: (
        ["caption", c.before, c.after, "--out", "/proc/spotdiff-report"],
        ERROR,
        "/proc/spotdiff-report",
    ),
    "out is a file": lambda c: (
        ["caption", c.before, c.after, "--out", c.before],
        ERROR,
        "is a file",
    ),
    "video out in /proc": lambda c: (
        ["video", c.clip, "--out", "/proc/spotdiff-video"],
        ERROR,
        "/proc/spotdiff-video",
    ),
    # -- config files --------------------------------------------------------------------------
    "yaml syntax": lambda c: (
        ["caption", c.before, c.after, "--config", c.file("bad.yaml", "analysis: [delta: 3\n")],
        (2,),
        "not valid YAML",
    ),
    "yaml list": lambda c: (
        ["caption", c.before, c.after, "--config", c.file("list.yaml", "- 1\n- 2\n")],
        (2,),
        "mapping",
    ),
    "yaml unknown key": lambda c: (
        ["caption", c.before, c.after, "--config", c.file("key.yaml", "analysis: {dleta: 3}\n")],
        (2,),
        "did you mean",
    ),
    "yaml delta text": lambda c: (
        ["caption", c.before, c.after, "--config", c.file("t1.yaml", "analysis: {delta: abc}\n")],
        (2,),
        "must be a number",
    ),
    "yaml analysis 5": lambda c: (
        ["caption", c.before, c.after, "--config", c.file("t2.yaml", "analysis: 5\n")],
        (2,),
        "mapping",
    ),
    "yaml recognise 'no'": lambda c: (
        [
            "caption",
            c.before,
            c.after,
            "--config",
            c.file("t3.yaml", "caption: {recognise: 'no'}\n"),
        ],
        (2,),
        "true or false",
    ),
    "yaml python tag": lambda c: (
        [
            "caption",
            c.before,
            c.after,
            "--config",
            c.file("tag.yaml", f"analysis: !!python/object/apply:os.system ['touch {c.marker}']\n"),
        ],
        (2,),
        "YAML",
    ),
    "binary config": lambda c: (
        ["caption", c.before, c.after, "--config", c.before],
        (2,),
        "not a text file",
    ),
    "missing config": lambda c: (
        ["caption", c.before, c.after, "--config", c.root / "none.yaml"],
        (2,),
        "not found",
    ),
    # -- videos, folders and their options -------------------------------------------------------
    "zero-byte mp4": lambda c: (["video", c.file("empty.mp4", b"")], ERROR, "empty.mp4"),
    "text named .mp4": lambda c: (
        ["video", c.file("text.mp4", "hello\n" * 100)],
        ERROR,
        "text.mp4",
    ),
    "mp4 header only": lambda c: (
        ["video", c.file("head.mp4", _ffmpeg_mp4(c, "h.mp4").read_bytes()[:1024])],
        ERROR,
        "head.mp4",
    ),
    "mp4 cut at 50%": lambda c: (
        [
            "video",
            c.file("cut.mp4", (lambda b: b[: len(b) // 2])(_ffmpeg_mp4(c, "w.mp4").read_bytes())),
            "--json",
        ],
        (0,),
        "truncated",
    ),
    "folder without images": lambda c: (
        ["video", c.file("docs/readme.txt", "x").parent],
        ERROR,
        "no images",
    ),
    "folder of corrupt images": lambda c: (
        ["video", c.file("broken/a.png", b"nope").parent],
        ERROR,
        "a.png",
    ),
    "every 0s": lambda c: (["video", c.clip, "--every", "0s"], (2,), "--every"),
    "every -1s": lambda c: (["video", c.clip, "--every", "-1s"], (2,), ""),
    "every gibberish": lambda c: (["video", c.clip, "--every", "soon"], (2,), "--every"),
    "every huge": lambda c: (["video", c.clip, "--every", "1e400s"], (2,), "--every"),
    "start past end": lambda c: (["video", c.clip, "--start", "1h"], ERROR, "past the end"),
    "roi malformed": lambda c: (["video", c.clip, "--roi", "1,2,3"], (2,), "--roi"),
    "roi outside frame": lambda c: (["video", c.clip, "--roi", "5000,5000,10,10"], ERROR, "--roi"),
    "mask is text": lambda c: (
        ["video", c.clip, "--mask", c.file("mask.png", "not an image")],
        ERROR,
        "mask.png",
    ),
    "reference missing": lambda c: (
        ["video", c.clip, "--compare", "reference", "--reference", c.root / "ref.png"],
        ERROR,
        "ref.png",
    ),
    "video weights for grounded": lambda c: (
        ["video", c.clip, "--weights", c.before],
        (2,),
        "takes no weights",
    ),
    "video device tpu": lambda c: (["video", c.clip, "--device", "tpu"], (2,), "--device"),
    "fps zero": lambda c: (["video", c.root, "--fps", "0"], (2,), "--fps"),
    # -- resume ------------------------------------------------------------------------------------
    "resume damaged json": lambda c: (
        ["video", c.clip, "--out", c.file("r1/timeline.json", "{not json").parent, "--resume"],
        ERROR,
        "timeline.json",
    ),
    "resume wrong schema": lambda c: (
        [
            "video",
            c.clip,
            "--out",
            c.file("r2/timeline.json", '{"schema": "x"}').parent,
            "--resume",
        ],
        ERROR,
        "not a spotdiff timeline",
    ),
    "resume missing keys": lambda c: (
        [
            "video",
            c.clip,
            "--out",
            c.file(
                "r3/timeline.json", '{"schema": "spotdiff.timeline/1", "sources": [{"source": 1}]}'
            ).parent,
            "--resume",
        ],
        ERROR,
        "damaged",
    ),
    "resume binary": lambda c: (
        [
            "video",
            c.clip,
            "--out",
            c.file("r4/timeline.json", b"\xff\xfe\x00\x01" * 50).parent,
            "--resume",
        ],
        ERROR,
        "timeline.json",
    ),
    # -- checkpoints -------------------------------------------------------------------------------
    "weights text": lambda c: (
        ["caption", c.before, c.after, "--model", "ddla", "--weights", c.file("w.pt", "hello")],
        ERROR,
        "w.pt",
    ),
    "weights empty": lambda c: (
        ["caption", c.before, c.after, "--model", "ddla", "--weights", c.file("e.pt", b"")],
        ERROR,
        "e.pt",
    ),
    "weights random bytes": lambda c: (
        [
            "caption",
            c.before,
            c.after,
            "--model",
            "ddla",
            "--weights",
            c.file("r.pt", np.random.default_rng(1).bytes(4096)),
        ],
        ERROR,
        "r.pt",
    ),
    "weights hostile pickle": lambda c: (
        [
            "caption",
            c.before,
            c.after,
            "--model",
            "ddla",
            "--weights",
            c.file("evil.pt", pickle.dumps(_Exploit(c.marker))),
        ],
        ERROR,
        "evil.pt",
    ),
    "weights missing": lambda c: (
        ["caption", c.before, c.after, "--model", "ddla", "--weights", c.root / "gone.pt"],
        ERROR,
        "gone.pt",
    ),
    # -- evaluation inputs -------------------------------------------------------------------------
    "predictions binary": lambda c: (
        ["eval", "--predictions", c.before, "--dataset", c.dataset],
        ERROR,
        "before.png",
    ),
    "predictions malformed": lambda c: (
        ["eval", "--predictions", c.file("p.json", "[{"), "--dataset", c.dataset],
        ERROR,
        "p.json",
    ),
    "predictions a number": lambda c: (
        ["eval", "--predictions", c.file("n.json", "42"), "--dataset", c.dataset],
        ERROR,
        "n.json",
    ),
    "predictions empty": lambda c: (
        ["eval", "--predictions", c.file("z.json", ""), "--dataset", c.dataset],
        ERROR,
        "z.json",
    ),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("bad-inputs"))


@pytest.mark.parametrize("name", list(CORPUS))
def test_bad_input_is_one_line_or_a_correct_answer(corpus, name):
    argv, codes, expected = CORPUS[name](corpus)
    proc = run_spotdiff(*argv)  # fails on a signal, "terminate called" or a traceback
    assert proc.returncode in codes, (
        f"{name}: exit {proc.returncode}\nstdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr}"
    )
    if proc.returncode == 0:
        assert expected in proc.stdout, proc.stdout
    else:
        line = one_error_line(proc)
        assert expected in line, f"{name}: {line!r} does not mention {expected!r}"
    assert not corpus.marker.exists(), f"{name}: a hostile input ran code"


def test_the_hostile_pickle_really_is_one(tmp_path):
    """The corpus's pickle does run code when unpickled naively: its test above means something."""
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(_Exploit(marker)))  # noqa: S301 - the point of the test
    assert marker.exists()


def test_the_truncated_clip_still_reports_its_events(corpus):
    data = json.loads(run_spotdiff(*CORPUS["mp4 cut at 50%"](corpus)[0]).stdout)
    source = data["sources"][0]
    assert source["ended_early_at"] is not None and source["events"]
