"""``spotdiff data synth|clevr|stats|prepare|sprites|mix``: build, inspect and preprocess datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .root import app
from .state import errors_to_exit

data_app = typer.Typer(
    help="Datasets: synthetic benchmark, statistics, preprocessing cache.", no_args_is_help=True
)
app.add_typer(data_app, name="data")


@data_app.command("synth")
@errors_to_exit
def synth(
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder to write the benchmark into (Spot-the-diff layout)."
    ),
    pairs: int = typer.Option(
        1000, "--pairs", "-n", help="Number of image pairs (at most 100000 in one folder)."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed: the same seed gives the same files."),
    size: int = typer.Option(224, "--size", help="Image side in pixels (Spot-the-diff: 224)."),
    distractors: float = typer.Option(
        0.15, "--distractors", help="Share of 'no change' pairs (lighting, shift or noise only)."
    ),
    annotators: int = typer.Option(3, "--annotators", help="Independent descriptions per pair."),
    max_changes: int = typer.Option(4, "--max-changes", help="Most changes in one pair (1-4)."),
    backgrounds: Optional[Path] = typer.Option(
        None, "--backgrounds", help="Folder of empty fixed-camera frames to use as scenes."
    ),
    sprites: Optional[Path] = typer.Option(
        None,
        "--sprites",
        help="Folder of object cut-outs (RGBA PNG; person/car/truck/van in the name).",
    ),
    real_share: float = typer.Option(
        1.0,
        "--real-share",
        help="With --backgrounds: share of pairs set in a real scene; the rest are procedural.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty folder."),
) -> None:
    """Generate the synthetic change benchmark (images, captions, gold alignments)."""
    from ..api import synthesize
    from . import render

    with render.stage_progress() as bar:
        summary = synthesize(
            out,
            pairs=pairs,
            seed=seed,
            size=size,
            backgrounds=backgrounds,
            sprites=sprites,
            overwrite=overwrite,
            progress=lambda d, t: bar.update("generating", d, t),
            distractor_rate=distractors,
            annotators=annotators,
            max_changes=max_changes,
            real_share=real_share,
        )
    splits = ", ".join(f"{k} {v}" for k, v in summary.splits.items())
    render.print_line(
        f"wrote {summary.pairs} pairs to {summary.out} ({splits}) in {summary.seconds:.1f} s "
        f"({summary.pairs_per_second:.0f} pairs/s)"
    )


@data_app.command("clevr")
@errors_to_exit
def clevr(
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder to render into (CLEVR-Change layout); rerun to resume."
    ),
    pairs: int = typer.Option(
        3000, "--pairs", "-n", help="Scenes: each gives a change pair and a distractor pair."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed: the same seed gives the same files."),
    preset: str = typer.Option(
        "clevr",
        "--preset",
        help="clevr (CLEVR-Change's camera and lamps), wide (wider still: an untouched test "
        "split) or easy (the first renderer's small moves and sun).",
    ),
    size: Optional[str] = typer.Option(
        None, "--size", help="Image size WIDTHxHEIGHT in pixels. \\[default: the preset's]"
    ),
    spp: int = typer.Option(
        16, "--spp", help="Path-tracing samples per pixel (fewer: faster, noisier)."
    ),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", help="Render processes. \\[default: one per core]"
    ),
    captions: int = typer.Option(6, "--captions", help="Phrasings per pair."),
    min_objects: Optional[int] = typer.Option(
        None, "--min-objects", help="Fewest objects in a scene. \\[default: the preset's]"
    ),
    max_objects: Optional[int] = typer.Option(
        None, "--max-objects", help="Most objects in a scene. \\[default: the preset's]"
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace what the folder holds instead of resuming."
    ),
) -> None:
    """Render a CLEVR-Change-style 3-D benchmark with Mitsuba (moved cameras, distractors)."""
    from ..api import render_clevr_change
    from ..data.clevr_render import default_jobs, estimate_seconds, format_duration, scenes_done
    from ..data.clevr_scene import PRESETS
    from ..errors import UsageError
    from . import render

    if preset not in PRESETS:
        raise UsageError(f"--preset must be one of {', '.join(PRESETS)} (got '{preset}')")
    look = PRESETS[preset]
    size = size or f"{look.width}x{look.height}"
    width, _, height = size.lower().partition("x")
    if not (width.isdigit() and height.isdigit()):
        raise UsageError(f"--size must be WIDTHxHEIGHT, e.g. 320x240 (got '{size}')")
    left = pairs - (0 if overwrite else scenes_done(out, pairs))
    processes = jobs or default_jobs()
    seconds = estimate_seconds(left, int(width), int(height), spp, processes)
    render.print_dim(
        f"rendering {left} of {pairs} scenes with {processes} process(es): "
        f"about {format_duration(seconds)} (docs/data.md); rerun the same command to resume"
    )
    with render.stage_progress() as bar:
        summary = render_clevr_change(
            out,
            pairs=pairs,
            seed=seed,
            width=int(width),
            height=int(height),
            spp=spp,
            jobs=jobs,
            overwrite=overwrite,
            progress=lambda d, t: bar.update("rendering", d, t),
            captions=captions,
            min_objects=min_objects,
            max_objects=max_objects,
            preset=preset,
        )
    splits = ", ".join(f"{k} {v}" for k, v in summary.splits.items())
    kept = f", {summary.skipped} already there" if summary.skipped else ""
    render.print_line(
        f"rendered {summary.rendered} scenes{kept} to {summary.out} ({splits}) in "
        f"{summary.seconds:.1f} s ({summary.scenes_per_second:.2f} scenes/s, {summary.jobs} processes)"
    )


@data_app.command("stats")
@errors_to_exit
def stats(
    dataset: Path = typer.Argument(..., help="Dataset folder (or its annotations/ folder)."),
    split: Optional[list[str]] = typer.Option(
        None, "--split", help="Split(s) to count; repeat the flag. \\[default: all]"
    ),
    format: str = typer.Option(
        "auto", "--format", help="auto, spot-the-diff, clevr-change, image-editing-request, jsonl."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    markdown: Optional[Path] = typer.Option(
        None, "--markdown", help="Also write the table as Markdown to this file."
    ),
) -> None:
    """Dataset statistics as in Table 1 of the Spot-the-diff paper."""
    from ..api import dataset_stats
    from . import render

    result = dataset_stats(dataset, split or None, format)
    if markdown:
        markdown.write_text(result.to_markdown())
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    render.print_statistics(f"{dataset} ({', '.join(result.splits)})", result.rows())


@data_app.command("prepare")
@errors_to_exit
def prepare(
    dataset: Path = typer.Argument(..., help="Dataset folder with images."),
    split: Optional[list[str]] = typer.Option(
        None, "--split", help="Split(s) to prepare; repeat the flag. \\[default: all]"
    ),
    backbone: Optional[str] = typer.Option(
        None,
        "--backbone",
        help="Also cache grid features of this backbone (e.g. efficientnet_lite0).",
    ),
    weights: Optional[str] = typer.Option(
        None, "--weights", help="Backbone weights file. \\[default: the bundled ones]"
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (backbone features)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Images per backbone batch."),
    limit: Optional[int] = typer.Option(
        None, "--limit", help="Only the first N pairs of each split."
    ),
    format: str = typer.Option("auto", "--format", help="Dataset format. \\[default: auto]"),
    config: Optional[Path] = typer.Option(
        None, "--config", help="YAML with an `analysis:` section (the cache key)."
    ),
    input_size: Optional[int] = typer.Option(
        None,
        "--input-size",
        help="Resize images to this square side for the backbone (448: efficientnet_lite0's grid "
        "becomes 14x14, the paper's ResNet grid); its own cache folder. \\[default: the backbone's, 224]",
    ),
    level: Optional[list[int]] = typer.Option(
        None,
        "--level",
        help="Also cache the backbone's feature map at this stride (8, 16, 32); repeat the flag. "
        "Its own cache folder.",
    ),
) -> None:
    """Cache cluster masks, boxes and features (and backbone grids) so training does not recompute them.

    Run it again after adding pairs or changing images or settings: valid entries are reused,
    only what changed is recomputed."""
    from ..api import prepare_dataset
    from ..config import AnalysisConfig, load_yaml, resolve
    from . import render

    analysis = AnalysisConfig()
    if config is not None:
        analysis = resolve(analysis, None, **load_yaml(config).get("analysis", {}))
    with render.stage_progress() as bar:
        summary = prepare_dataset(
            dataset,
            split or None,
            analysis,
            backbone,
            weights,
            device,
            batch_size,
            format,
            limit,
            bar.update,
            input_size=input_size,
            levels=tuple(level or ()),
        )
    for name in summary.invalidated:
        render.print_warning("settings changed", f"rebuilt cache/{name}")
    for note in summary.notes:
        render.print_warning("images changed", note)
    render.print_line(
        f"analysis cache: {summary.computed} computed, {summary.reused} reused "
        f"({', '.join(f'{k} {v}' for k, v in summary.splits.items())}) in {dataset / 'cache'}"
    )
    if backbone:
        render.print_line(
            f"{backbone} features: {summary.features_computed} pair(s) computed, "
            f"{summary.features_reused} reused"
        )
    for path in summary.feature_files:
        render.print_line(f"features: {path}")


@data_app.command("sprites")
@errors_to_exit
def sprites(
    video: Path = typer.Argument(..., help="A fixed-camera clip."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder for the cut-outs and sprites.json (one folder per clip)."
    ),
    kind: str = typer.Option(
        "person", "--kind", help="What moves in the clip: person, car, truck, van."
    ),
    every: int = typer.Option(10, "--every", help="Use every N-th frame."),
    max_sprites: int = typer.Option(200, "--max", help="Stop after this many cut-outs."),
    backgrounds_out: Optional[Path] = typer.Option(
        None,
        "--backgrounds-out",
        help="Folder for the empty frame <clip>.png; share it between clips. \\[default: OUT/backgrounds]",
    ),
    threshold: float = typer.Option(
        40.0, "--threshold", help="RGB distance to the empty frame that counts as object."
    ),
    start: int = typer.Option(0, "--start", help="First frame number to use."),
    stop: Optional[int] = typer.Option(
        None,
        "--stop",
        help="Frame number to stop before (keeps the rest unseen). \\[default: the end]",
    ),
) -> None:
    """Cut object sprites and an empty background out of a fixed-camera clip (for synth --sprites/--backgrounds)."""
    from ..api import cut_sprites
    from . import render

    background, count = cut_sprites(
        video,
        out,
        kind=kind,
        every=every,
        max_sprites=max_sprites,
        threshold=threshold,
        backgrounds_out=backgrounds_out,
        start=start,
        stop=stop,
    )
    render.print_line(f"wrote {count} {kind} sprite(s) and {background}")


@data_app.command("mix")
@errors_to_exit
def mix(
    out: Path = typer.Argument(..., help="Folder for the mixed dataset's <split>.jsonl files."),
    sources: list[Path] = typer.Argument(..., help="Two or more dataset folders, any format."),
    split: Optional[list[str]] = typer.Option(
        None, "--split", help="Split(s) to mix; repeat the flag. \\[default: every split found]"
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace split files already in OUT."
    ),
) -> None:
    """One dataset from several: lists every pair of each source (images stay in place, ids get
    the source folder's name), so one model trains on all of them; then run `spotdiff data prepare OUT`."""
    from ..data.mix import mix_datasets
    from . import render

    summary = mix_datasets(out, sources, split or None, overwrite)
    for name, parts in summary.counts.items():
        detail = ", ".join(f"{source} {n}" for source, n in parts.items())
        render.print_line(
            f"{name}: {sum(parts.values())} pairs ({detail}) -> {out / (name + '.jsonl')}"
        )
