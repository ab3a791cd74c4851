"""``spotdiff train`` as a user types it: errors that say what to do, a run folder with the best
checkpoint, no silent overwrite, --resume, the default synthetic benchmark when --data is left out,
and ``spotdiff caption --weights`` with what it trained."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_train_loop import TINY, make_tiny_bench, use_tiny_model
from typer.testing import CliRunner

from spotdiff_cli.cli import app

runner = CliRunner()


def recipe(tmp_path: Path, **extra: object) -> Path:
    values = {
        "min_count": 1,
        "lr": 0.01,
        "val_tokenizer": "python",
        "device": "cpu",
        "log_every": 3,
        "model_config": {"hidden": 16},
        **extra,
    }
    path = tmp_path / "tiny.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in values.items()))
    return path


def test_train_needs_a_model_and_a_trainable_one() -> None:
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2 and "--model" in result.output
    result = runner.invoke(app, ["train", "--model", "grounded"])
    assert result.exit_code == 2 and "not trainable" in result.output
    result = runner.invoke(app, ["train", "--model", "dla"])
    assert result.exit_code == 1 and "did you mean 'ddla'" in result.output


def test_train_then_refuse_overwrite_then_resume(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    use_tiny_model()
    bench = make_tiny_bench(tmp_path_factory)
    out = tmp_path / "run"
    args = [
        "train",
        "--model",
        TINY,
        "--data",
        str(bench),
        "--recipe",
        str(recipe(tmp_path)),
        "--out",
        str(out),
        "--epochs",
        "1",
        "--seed",
        "3",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        "best validation CIDEr" in result.output and f"--weights {out / 'best.pt'}" in result.output
    )
    assert "samples/s" in result.output  # the interval log lines
    assert (out / "best.pt").is_file() and (out / "last.pt").is_file()
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "--resume" in again.output
    more = runner.invoke(app, [*args[:-4], "--epochs", "2", "--resume"])
    assert more.exit_code == 0, more.output
    assert "resumed" in more.output and "2 epoch(s)" in more.output


def test_without_data_it_trains_on_the_default_synthetic_benchmark(
    tmp_path: Path, monkeypatch
) -> None:
    use_tiny_model()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    small = recipe(tmp_path, synth_pairs=12, synth_size=64, epochs=1, batch_size=8)
    result = runner.invoke(app, ["train", "--model", TINY, "--recipe", str(small)])
    assert result.exit_code == 0, result.output
    assert "generating the default synthetic benchmark" in result.output
    made = tmp_path / "cache" / "spotdiff" / "datasets" / "synth-12x64-seed0"
    assert (made / "cache" / "features-efficientnet_lite0" / "train.npz").is_file()
    assert (tmp_path / "runs" / f"{TINY}-synth" / "best.pt").is_file()
    second = runner.invoke(app, ["train", "--model", TINY, "--recipe", str(small)])
    assert second.exit_code == 0 and "generating" not in second.output  # made once, reused
    assert (tmp_path / "runs" / f"{TINY}-synth-2" / "best.pt").is_file()  # a new run folder


@pytest.mark.slow
def test_tiny_cpu_recipe_trains_ddla_and_caption_uses_it(
    tmp_path: Path, write_png, monkeypatch
) -> None:
    """The shipped tiny recipe end to end, then `spotdiff caption --weights` with its checkpoint."""
    from conftest import draw_box, textured_background

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # never the user's cache

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "ddla"
    result = runner.invoke(
        app,
        [
            "train",
            "--model",
            "ddla",
            "--recipe",
            str(repo / "training" / "ddla-tiny-cpu.yaml"),
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    before = textured_background(224, 224)
    a = write_png("a.png", before)
    b = write_png("b.png", draw_box(before, 40, 60, 50, 30, (200, 30, 30)))
    caption = runner.invoke(
        app, ["caption", str(a), str(b), "--model", "ddla", "--weights", str(out / "best.pt")]
    )
    assert caption.exit_code == 0, caption.output
    assert "1." in caption.output
