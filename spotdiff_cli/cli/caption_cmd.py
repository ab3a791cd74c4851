"""``spotdiff caption A B``: describe what changed between two images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .options import config_option, given, setting
from .root import app
from .state import STATE, errors_to_exit


@app.command("caption")
@errors_to_exit
def caption(
    ctx: typer.Context,
    before: Path = typer.Argument(..., help="The earlier image.", show_default=False),
    after: Path = typer.Argument(..., help="The later image.", show_default=False),
    model: Optional[str] = setting("model"),
    weights: Optional[str] = setting("weights"),
    device: Optional[str] = setting("device"),
    max_sentences: Optional[int] = setting("max_sentences"),
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
    config: Optional[Path] = config_option(),
    recognise: Optional[bool] = setting("recognise"),
    work_size: Optional[int] = setting("work_size"),
    align: Optional[str] = setting("align"),
    camera: Optional[str] = setting("camera"),
    max_shift: Optional[int] = setting("max_shift"),
    delta: Optional[float] = setting("delta"),
    blur_sigma: Optional[float] = setting("blur_sigma"),
    normalise_lighting: Optional[bool] = setting("normalise_lighting"),
    eps: Optional[float] = setting("eps"),
    min_samples: Optional[int] = setting("min_samples"),
    min_cluster_fraction: Optional[float] = setting("min_cluster_fraction"),
    scene_fraction: Optional[float] = setting("scene_fraction"),
) -> None:
    """Describe what changed from BEFORE to AFTER, in a few sentences."""
    if exit_code:
        # Set first, before anything can fail: with --exit-code, 1 means "changed".
        STATE.error_exit = 2
    from .. import api
    from ..config import Settings, resolve

    # The setting options reach config.resolve by their field names (cli/options.py).
    settings = resolve(Settings(), config, **given(ctx.params))
    describer = api.PairDescriber(settings.analysis, settings.caption)
    # The recognisers load on another core while this thread imports the rest, reads the
    # images and analyses them (api.describe_pair would start them only once the images are in).
    describer.warm_up()
    from ..report.compose import report_to_dict
    from .render import print_caption_report

    report = describer.describe(before, after)
    written = None
    if out:
        from ..report import write_report  # the HTML page's templates load only for --out

        written = [str(p) for p in write_report(report, out, overwrite=overwrite)]
    data = report_to_dict(report)
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print_caption_report(data, written)
    if exit_code and report.changed:
        raise typer.Exit(1)
