"""Checkpoints: self-describing, rebuilt by name, loaded with weights_only=True, written
atomically, and refused with a clear message when they are not ours."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from test_train_loop import TINY, use_tiny_model

from spotdiff_cli.captioners.checkpoint import (
    FORMAT_VERSION,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    slim_checkpoint,
)
from spotdiff_cli.captioners.registry import create_model
from spotdiff_cli.captioners.vocab import Vocabulary
from spotdiff_cli.errors import ModelError

VOCAB = Vocabulary.build(["the red car is gone", "a person appeared near the van"], 1)


def fake_batch(b: int = 2, c: int = 6, grid: tuple[int, int] = (3, 3)) -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "before": torch.randn(b, c, *grid, generator=g),
        "after": torch.randn(b, c, *grid, generator=g),
    }


@pytest.fixture
def model():
    use_tiny_model()
    torch.manual_seed(0)
    return create_model(TINY, device="cpu", vocab=VOCAB, channels=6, grid=[3, 3])


def test_round_trip_rebuilds_the_same_model(model, tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "m.pt", model, {"epoch": 3, "best_score": 0.5})
    raw = torch.load(path, weights_only=True)  # plain types and tensors only
    assert raw["format_version"] == FORMAT_VERSION and raw["model"] == TINY
    assert raw["config"]["channels"] == 6 and raw["vocab"]["words"][:2] == ["<pad>", "<bos>"]
    loaded, meta = load_checkpoint(path, "cpu")
    assert meta["extra"] == {"epoch": 3, "best_score": 0.5} and loaded.vocab == VOCAB
    assert not loaded.training
    batch = fake_batch()
    assert loaded.generate(batch, 1, max_len=6) == model.generate(batch, 1, max_len=6)


def test_registry_factory_accepts_a_checkpoint_path(model, tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "m.pt", model)
    again = create_model(TINY, weights=str(path), device="cpu")
    assert all(
        torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values())
    )


def test_a_failed_write_keeps_the_previous_checkpoint(model, tmp_path: Path, monkeypatch) -> None:
    path = save_checkpoint(tmp_path / "last.pt", model, {"epoch": 1})

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C in the middle of saving

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model, {"epoch": 2})
    monkeypatch.undo()
    assert read_checkpoint(path)["extra"]["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temp file left behind


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_files_that_are_not_ours_are_refused_clearly(model, tmp_path: Path) -> None:
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps({"model": Evil()}))
    with pytest.raises(ModelError, match="weights_only|not a readable"):
        load_checkpoint(evil)
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(2)}, plain)
    with pytest.raises(ModelError, match="missing format_version"):
        load_checkpoint(plain)
    data = torch.load(save_checkpoint(tmp_path / "m.pt", model), weights_only=True)
    data["format_version"] = 99
    torch.save(data, tmp_path / "future.pt")
    with pytest.raises(ModelError, match="format 99"):
        load_checkpoint(tmp_path / "future.pt")
    with pytest.raises(ModelError, match="not found"):
        load_checkpoint(tmp_path / "nope.pt")
    data["format_version"] = FORMAT_VERSION
    data["state_dict"] = {k: v[..., :1] for k, v in data["state_dict"].items()}
    torch.save(data, tmp_path / "wrong.pt")
    with pytest.raises(ModelError, match="does not fit"):
        load_checkpoint(tmp_path / "wrong.pt")


def test_slim_checkpoint_drops_training_state_and_halves_the_weights(model, tmp_path: Path) -> None:
    path = save_checkpoint(
        tmp_path / "last.pt",
        model,
        {
            "epoch": 4,
            "optimizer": {"state": {}, "param_groups": []},
            "rng": {"torch": torch.get_rng_state()},
        },
    )
    slim = slim_checkpoint(path, tmp_path / "ship.pt")
    data = torch.load(slim, weights_only=True)
    assert data["extra"] == {"epoch": 4}
    assert all(
        v.dtype == torch.float16 for v in data["state_dict"].values() if v.is_floating_point()
    )
    assert slim.stat().st_size < path.stat().st_size
    loaded, _ = load_checkpoint(slim)
    assert next(loaded.parameters()).dtype == torch.float32


def test_real_models_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("spotdiff_cli.captioners.spot_the_diff")
    for name in ("capt", "ddla"):
        torch.manual_seed(0)
        model = create_model(name, device="cpu", vocab=VOCAB, channels=6, grid=[3, 3], tiny=True)
        loaded, meta = load_checkpoint(save_checkpoint(tmp_path / f"{name}.pt", model))
        assert meta["model"] == name and loaded.config == model.config
        assert all(
            torch.equal(a, b)
            for a, b in zip(model.state_dict().values(), loaded.state_dict().values())
        )


@pytest.mark.parametrize("name", ["ddla", "capt", "duda"])
def test_shipped_checkpoints_are_the_manifest_defaults(name: str) -> None:
    """weights/<name>-real.pt is found with no path (the manifest default for its model), checks
    its sha256, carries what its model card says, and its manifest entry says what it was
    trained on and credits the CC BY clips of its real-pixel training data."""
    from spotdiff_cli.weights import REPO_WEIGHTS_DIR, shipped_default

    if not (REPO_WEIGHTS_DIR / f"{name}-real.pt").is_file():
        pytest.skip(f"weights/{name}-real.pt not in this checkout")
    model, meta = load_checkpoint(None, "cpu", model=name)
    assert Path(meta["path"]).name == f"{name}-real.pt" and meta["model"] == name
    assert meta["backbone"] == "efficientnet_lite0" and "optimizer" not in meta["extra"]
    assert "car" in model.vocab and model.config["channels"] == 1280
    entry = shipped_default(name)
    assert entry is not None and "real" in entry.trained_on
    assert "CC BY 4.0" in entry.licence and "intel-iot-devkit/sample-videos" in entry.licence
    assert entry.path.stat().st_size < 8_000_000  # float16: small enough for git (duda: 7.7 MB)
