"""``spotdiff caption A B``: describe what changed between two images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import app
from .state import STATE, errors_to_exit


@app.command("caption")
@errors_to_exit
def caption(
    before: Path = typer.Argument(..., help="The earlier image.", show_default=False),
    after: Path = typer.Argument(..., help="The later image.", show_default=False),
    model: Optional[str] = typer.Option(
        None, "--model", "-m", help="Captioner (see `spotdiff models`). \\[default: grounded]"
    ),
    weights: Optional[str] = typer.Option(
        None, "--weights", help="Checkpoint for a trained captioner."
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="auto, cpu or cuda. \\[default: auto]"
    ),
    sentences: Optional[int] = typer.Option(
        None, "--sentences", "-n", help="At most this many sentences. \\[default: 5]"
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write report.json/md/html, annotated.png, mask.png here."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier report in --out."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the JSON report to stdout (for scripts)."
    ),
    exit_code: bool = typer.Option(
        False,
        "--exit-code",
        help="Exit 1 when a change is reported, 0 when none, 2 on any error "
        "(as ImageMagick `compare` does).",
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", help="YAML settings (flags override it)."
    ),
    recognise: Optional[bool] = typer.Option(
        None, "--recognise/--no-recognise", help="Look for people and vehicles. \\[default: on]"
    ),
    work_size: Optional[int] = typer.Option(
        None,
        "--work-size",
        help="Analyse at this long side, px (0 = full). \\[default: 640]",
        rich_help_panel="Analysis",
    ),
    align: Optional[str] = typer.Option(
        None,
        "--align",
        help="search, phase or none. \\[default: search]",
        rich_help_panel="Analysis",
    ),
    camera: Optional[str] = typer.Option(
        None,
        "--camera",
        help="auto (follow a camera that panned, tilted, rolled or zoomed) or fixed "
        "(shift search only). \\[default: auto]",
        rich_help_panel="Analysis",
    ),
    max_shift: Optional[int] = typer.Option(
        None,
        "--max-shift",
        help="Largest camera shift searched, analysed px. \\[default: 6]",
        rich_help_panel="Analysis",
    ),
    delta: Optional[float] = typer.Option(
        None,
        "--delta",
        help="RGB distance (0-441) above which a pixel changed. \\[default: 40]",
        rich_help_panel="Analysis",
    ),
    blur: Optional[float] = typer.Option(
        None,
        "--blur",
        help="Gaussian blur sigma before differencing. \\[default: 1.0]",
        rich_help_panel="Analysis",
    ),
    lighting: Optional[bool] = typer.Option(
        None,
        "--lighting/--no-lighting",
        help="Correct global lighting changes. \\[default: on]",
        rich_help_panel="Analysis",
    ),
    eps: Optional[float] = typer.Option(
        None,
        "--eps",
        help="DBSCAN eps at 224 px (scaled). \\[default: 20]",
        rich_help_panel="Analysis",
    ),
    min_samples: Optional[int] = typer.Option(
        None,
        "--min-samples",
        help="DBSCAN min_samples at 224 px (scaled). \\[default: 9]",
        rich_help_panel="Analysis",
    ),
    min_cluster: Optional[float] = typer.Option(
        None,
        "--min-cluster-fraction",
        help="Drop clusters smaller than this share of the frame. \\[default: 0.0005]",
        rich_help_panel="Analysis",
    ),
    scene_fraction: Optional[float] = typer.Option(
        None,
        "--scene-fraction",
        help="Above this changed share, report a view change. \\[default: 0.5]",
        rich_help_panel="Analysis",
    ),
) -> None:
    """Describe what changed from BEFORE to AFTER, in a few sentences."""
    if exit_code:
        # Set first, before anything can fail: with --exit-code, 1 means "changed".
        STATE.error_exit = 2
    from .. import api
    from ..config import Settings, resolve
    from ..report import report_to_dict, write_report
    from .render import print_caption_report

    settings = resolve(
        Settings(),
        config,
        analysis=dict(
            work_size=work_size,
            align=align,
            camera=camera,
            max_shift=max_shift,
            delta=delta,
            blur_sigma=blur,
            normalise_lighting=lighting,
            eps=eps,
            min_samples=min_samples,
            min_cluster_fraction=min_cluster,
            scene_fraction=scene_fraction,
        ),
        caption=dict(
            model=model,
            weights=weights,
            device=device,
            max_sentences=sentences,
            recognise=recognise,
        ),
    )
    report = api.describe_pair(before, after, settings.analysis, settings.caption)
    written = [str(p) for p in write_report(report, out, overwrite=overwrite)] if out else None
    data = report_to_dict(report)
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print_caption_report(data, written)
    if exit_code and report.changed:
        raise typer.Exit(1)
