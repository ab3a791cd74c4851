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


def test_data_clevr_renders_the_benchmark_once_into_the_cache(tmp_path: Path, monkeypatch) -> None:
    """`--data clevr`: the rendered benchmark is made once into the cache (tiny here: the
    default 3000 scenes take hours), saying first how long it will take; later runs reuse it."""
    pytest.importorskip(
        "mitsuba", reason="rendering needs Mitsuba 3: pip install 'spotdiff[render]'"
    )
    use_tiny_model()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    # 20 scenes: the smallest count whose 5 % validation share rounds to a whole scene.
    small = recipe(tmp_path, clevr_pairs=20, clevr_width=48, clevr_height=36, clevr_spp=1, epochs=1)
    args = ["train", "--model", TINY, "--data", "clevr", "--recipe", str(small)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())
    assert "--data clevr: rendering the CLEVR benchmark (20 scenes, 48x36, 1 spp)" in shown
    assert "processes: about" in shown and "the same command resumes it" in shown
    made = tmp_path / "cache" / "spotdiff" / "datasets" / "clevr-20x48x36-spp1-seed0"
    assert (made / "gold.json").is_file() and len(list((made / "images").iterdir())) == 20
    assert (made / "cache" / "features-efficientnet_lite0" / "train.npz").is_file()
    assert (tmp_path / "runs" / f"{TINY}-clevr" / "best.pt").is_file()
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "rendering" not in again.output
    assert "using the rendered CLEVR benchmark" in again.output


def test_clevr_render_time_is_estimated_from_the_benchmark() -> None:
    from spotdiff_cli.data.clevr_render import estimate_seconds, format_duration

    # docs/data.md: 0.22 scenes/s in one process, 0.38 with two (320x240, 16 spp).
    assert 1 / estimate_seconds(1, jobs=1) == pytest.approx(0.22, abs=0.01)
    assert 1 / estimate_seconds(1, jobs=2) == pytest.approx(0.38, abs=0.01)
    assert format_duration(estimate_seconds(3000, jobs=2)) == "2.2 h"
    assert estimate_seconds(10, 160, 120, 16, 1) == pytest.approx(estimate_seconds(10) / 4)


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
