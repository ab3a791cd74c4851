"""resolve_weights: the documented search order, the one-line error, manifest checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotdiff_cli import weights as W
from spotdiff_cli.errors import ModelError, WeightsNotFoundError


@pytest.fixture()
def isolated(tmp_path, monkeypatch):
    """No $SPOTDIFF_WEIGHTS, an empty cache and a private manifest folder in place of the repo's."""
    monkeypatch.delenv(W.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    manifest_dir = tmp_path / "repo_weights"
    manifest_dir.mkdir()
    monkeypatch.setattr(W, "REPO_WEIGHTS_DIR", manifest_dir)
    monkeypatch.setattr(W, "INSTALLED_WEIGHTS_DIR", tmp_path / "no_such_install")
    return tmp_path


def _write_manifest(
    folder: Path,
    name: str,
    payload: bytes,
    *,
    kind: str = "backbone",
    default: bool = False,
    trained_on: str | None = None,
) -> Path:
    import hashlib

    (folder / f"{name}.pt").write_bytes(payload)
    entry = {
        "file": f"{name}.pt",
        "kind": kind,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "licence": "MIT",
        "source": "test",
        "default": default,
    }
    if trained_on is not None:
        entry["trained_on"] = trained_on
    (folder / "manifest.json").write_text(json.dumps({"format": 1, "weights": {name: entry}}))
    return folder / f"{name}.pt"


def test_explicit_path_wins(isolated):
    f = isolated / "mine.pt"
    f.write_bytes(b"x")
    assert W.resolve_weights(str(f), kind="backbone") == f.resolve()


def test_env_folder_finds_name_with_any_extension(isolated, monkeypatch):
    d = isolated / "env"
    d.mkdir()
    (d / "resnet101.pth").write_bytes(b"x")
    monkeypatch.setenv(W.ENV_VAR, str(d))
    assert W.resolve_weights("resnet101", kind="backbone") == (d / "resnet101.pth").resolve()


def test_env_folder_comes_before_manifest(isolated, monkeypatch):
    _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"manifest copy")
    d = isolated / "env"
    d.mkdir()
    (d / "net.pt").write_bytes(b"env copy")
    monkeypatch.setenv(W.ENV_VAR, str(d))
    assert W.resolve_weights("net", kind="backbone").read_bytes() == b"env copy"


def test_ambiguous_name_in_folder_is_an_error(isolated, monkeypatch):
    d = isolated / "env"
    d.mkdir()
    (d / "net.pt").write_bytes(b"a")
    (d / "net.onnx").write_bytes(b"b")
    monkeypatch.setenv(W.ENV_VAR, str(d))
    with pytest.raises(ModelError, match="ambiguous"):
        W.resolve_weights("net", kind="backbone")


def test_manifest_entry_is_found_and_listed(isolated):
    path = _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights")
    assert W.resolve_weights("net", kind="backbone") == path.resolve()
    (entry,) = W.known_weights()
    assert (entry.name, entry.licence, entry.present) == ("net", "MIT", True)


def test_manifest_kind_must_match(isolated):
    _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights", kind="classifier-onnx")
    with pytest.raises(WeightsNotFoundError, match="is kind 'classifier-onnx'"):
        W.resolve_weights("net", kind="backbone")


def test_none_picks_the_manifest_default_of_that_kind(isolated):
    path = _write_manifest(
        W.REPO_WEIGHTS_DIR, "net", b"weights", kind="classifier-onnx", default=True
    )
    assert W.resolve_weights(None, kind="classifier-onnx") == path.resolve()
    with pytest.raises(WeightsNotFoundError, match="no backbone weights are shipped or named"):
        W.resolve_weights(None, kind="backbone")


def test_corrupt_manifest_file_is_refused(isolated):
    path = _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights")
    path.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")
    with pytest.raises(ModelError, match="Git LFS pointer"):
        W.resolve_weights("net", kind="backbone")


def test_manifest_listed_file_can_live_in_the_cache(isolated):
    path = _write_manifest(W.REPO_WEIGHTS_DIR, "big", b"large checkpoint")
    cache = isolated / "cache" / "spotdiff"
    cache.mkdir(parents=True)
    path.rename(cache / path.name)
    assert W.resolve_weights("big", kind="backbone") == (cache / "big.pt").resolve()


def test_cache_by_name(isolated):
    cache = isolated / "cache" / "spotdiff"
    cache.mkdir(parents=True)
    (cache / "resnet101.safetensors").write_bytes(b"x")
    assert W.resolve_weights("resnet101", kind="backbone").name == "resnet101.safetensors"


def test_error_lists_every_place_on_one_line(isolated):
    _write_manifest(W.REPO_WEIGHTS_DIR, "resnet101_in1k", b"x")
    with pytest.raises(WeightsNotFoundError) as info:
        W.resolve_weights("resnet10l", kind="backbone", allow_download=True)
    msg = str(info.value)
    assert "\n" not in msg
    for place in (
        "path resnet10l",
        "$SPOTDIFF_WEIGHTS (not set)",
        "manifest",
        "cache",
        "no download source is configured",
        "did you mean 'resnet101_in1k'",
    ):
        assert place in msg, place


def test_download_not_allowed_is_said(isolated):
    with pytest.raises(WeightsNotFoundError, match=r"download \(not allowed\)"):
        W.resolve_weights("nothing", kind="backbone")


def test_shipped_manifest_resolves_the_onnx_classifier():
    """The repository's own weights/ folder: the ONNX file is present and its sha256 matches."""
    entries = {e.name: e for e in W.known_weights()}
    entry = entries["efficientnet_lite0_imagenet"]
    assert entry.licence == "Apache-2.0" and entry.present
    assert W.resolve_weights(None, kind="classifier-onnx") == entry.path


def test_models_says_which_models_ship_weights_and_their_training_data(isolated):
    from typer.testing import CliRunner

    from spotdiff_cli.cli import app

    _write_manifest(
        W.REPO_WEIGHTS_DIR, "ddla-toy", b"w", kind="ddla", default=True, trained_on="toy pairs"
    )
    assert W.shipped_default("ddla").trained_on == "toy pairs"
    assert W.shipped_default("capt") is None
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())  # Rich wraps at the terminal width
    assert "ddla ships ddla-toy.pt: trained on toy pairs" in flat
    assert "capt ships" not in flat  # no file for it in this manifest


LEARNED_NAMES = ("ddla", "capt", "duda", "duda-aux", "clip4idc", "idc-pcl", "onediff")


def test_models_tells_each_learned_models_training_scores_and_weakness():
    """Issue 24, item 4: every family name shows its shipped weights' training data, scores and
    warning, or, without weights, what its runs gave; and the model cards say the same words."""
    from typer.testing import CliRunner

    from spotdiff_cli.cli import app

    result = CliRunner().invoke(app, ["models"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    cards = " ".join((W.REPO_WEIGHTS_DIR / "README.md").read_text(encoding="utf-8").split())
    notes = W.unshipped_notes()
    for name in LEARNED_NAMES:
        entry = W.shipped_default(name)
        if entry is None:
            note = notes.get(name)
            assert note, f"{name}: no shipped weights and no 'unshipped' note in the manifest"
            lines = [f"{name}: no shipped weights: {note}"]
            assert " ".join(note.split()) in cards, f"{name}: the model cards lack its note"
        else:
            assert entry.trained_on and entry.checks and entry.warning, name
            lines = [
                f"{name} ships {entry.file}: trained on {entry.trained_on}",
                f"checks: {entry.checks}",
                f"warning: {entry.warning}",
            ]
            for text in (entry.trained_on, entry.checks, entry.warning):
                assert " ".join(text.split()) in cards, f"{name}: the model cards lack {text!r}"
        for line in lines:
            assert " ".join(line.split()) in flat, line
    assert "no shipped weights (train them" in flat and "nn-multi" in flat


def test_every_shipped_weights_file_is_installed_with_the_package():
    """An installed copy (pip install .) finds the manifest's files under share/spotdiff/weights:
    a file renamed in the manifest but not in pyproject's data-files breaks the install."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    manifest = json.loads((root / "weights" / "manifest.json").read_text(encoding="utf-8"))
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    installed = set(project["tool"]["setuptools"]["data-files"]["share/spotdiff/weights"])
    for name, entry in manifest["weights"].items():
        path = f"weights/{entry['file']}"
        assert (root / path).is_file(), f"{name}: {path} is in the manifest but not in weights/"
        assert path in installed, f"{name}: {path} is missing from pyproject's data-files"
    assert "weights/manifest.json" in installed


def test_a_match_is_recorded_so_the_next_process_does_not_hash_again(isolated, monkeypatch):
    """The sha256 of a shipped file is taken once per version of the file, not at every start
    (the classifier's 19 MB cost ~15 ms of each caption's warm-up)."""
    path = _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights")
    monkeypatch.setattr(W, "_VERIFIED", set())
    W.resolve_weights("net", kind="backbone")
    markers = list((isolated / "cache" / "spotdiff" / "verified").iterdir())
    assert len(markers) == 1

    monkeypatch.setattr(W, "_VERIFIED", set())  # a new process
    read = []
    real_open = Path.open
    monkeypatch.setattr(
        Path, "open", lambda self, *a, **k: read.append(self) or real_open(self, *a, **k)
    )
    assert W.resolve_weights("net", kind="backbone") == path.resolve()
    assert path.resolve() not in read and path not in read


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_a_file_changed_since_its_record_is_hashed_again(isolated, monkeypatch, how):
    """Other bytes of the same size under the old modification time (``cp -p``) are still
    refused: the record is keyed by the file's inode and change time too."""
    import os
    import shutil
    import time

    path = _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights")
    W.resolve_weights("net", kind="backbone")
    before = path.stat()
    time.sleep(0.05)  # past the file system's clock tick
    if how == "in place":
        path.write_bytes(b"WEIGHTS")
    else:
        other = path.with_name("other.pt")
        other.write_bytes(b"WEIGHTS")
        shutil.copystat(path, other)
        os.replace(other, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setattr(W, "_VERIFIED", set())
    with pytest.raises(ModelError, match="sha256"):
        W.resolve_weights("net", kind="backbone")


def test_an_unwritable_cache_keeps_no_record(isolated, monkeypatch):
    _write_manifest(W.REPO_WEIGHTS_DIR, "net", b"weights")
    (isolated / "cache").write_text("a file where the cache folder would be")
    monkeypatch.setattr(W, "_VERIFIED", set())
    assert W.resolve_weights("net", kind="backbone").name == "net.pt"
