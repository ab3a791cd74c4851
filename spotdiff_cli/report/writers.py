"""Report writers, one small function per format, collected in ``WRITERS``.

Each takes the composed report dict (compose.py) and the Report (for pictures) and returns the
file's bytes; ``write_report`` writes the chosen ones atomically into an output folder and
refuses to overwrite an earlier report unless asked to.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..atomic import atomic_write_bytes, folder_lock, write_new_folder
from ..errors import OutputError
from ..types import Report
from .compose import report_to_dict
from .draw import annotated_image, mask_image
from .encoding import json_bytes, text_bytes
from .html import caption_page


def _png(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise OutputError("could not encode a PNG image")
    return buf.tobytes()


def sentences_text(data: dict[str, Any]) -> list[str]:
    return [f"{s['number']}. {s['text']}" for s in data["sentences"]]


def write_txt(data: dict[str, Any], report: Report) -> bytes:
    lines = [
        f"{data['inputs']['before']['path']} -> {data['inputs']['after']['path']}",
        *sentences_text(data),
    ]
    lines += [f"note: {n}" for n in data["notes"]]
    return text_bytes("\n".join(lines) + "\n")


def write_json(data: dict[str, Any], report: Report) -> bytes:
    return json_bytes(data)


def write_md(data: dict[str, Any], report: Report) -> bytes:
    al = data["alignment"]
    out = [
        "# What changed",
        "",
        f"**Before:** `{data['inputs']['before']['path']}`  ",
        f"**After:** `{data['inputs']['after']['path']}`",
        "",
        *[f"{s['number']}. {s['text']}" for s in data["sentences"]],
        "",
        "![before and after, numbered boxes](annotated.png)",
        "",
        "| # | box (x, y, w, h) | changed pixels | salience |",
        "|---|---|---|---|",
    ]
    for c in data["clusters"]:
        out.append(
            f"| {c['sentence'] or '–'} | {tuple(c['bbox'])} | {c['n_active']} | {c['salience']:.4f} |"
        )
    out += [
        "",
        f"Camera shift found: dx={al['dx']}, dy={al['dy']} px ({al['method']}). "
        f"Changed area: {100 * data['change']['changed_fraction']:.2f} % of the frame"
        + (" (after correcting a lighting change)." if data["change"]["lighting_changed"] else "."),
    ]
    out += ["", *[f"> note: {n}" for n in data["notes"]]] if data["notes"] else []
    out += [
        "",
        f"Model `{data['model']}`, spotdiff {data['tool']['version']}. Mask: ![mask](mask.png)",
        "",
    ]
    return text_bytes("\n".join(out))


def write_csv(data: dict[str, Any], report: Report) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["number", "sentence", "kind", "confidence", "cluster_ids", "boxes"])
    boxes = {c["id"]: c["bbox"] for c in data["clusters"]}
    for s in data["sentences"]:
        ids = s["cluster_ids"]
        writer.writerow(
            [
                s["number"],
                s["text"],
                s["kind"],
                s["confidence"],
                " ".join(map(str, ids)),
                " ".join("x".join(map(str, boxes[i])) for i in ids if i in boxes),
            ]
        )
    return text_bytes(buf.getvalue())


def write_html(data: dict[str, Any], report: Report) -> bytes:
    """One self-contained page (report/html.py): the sentences, before and after with numbered
    boxes drawn over them, the mask; images embedded, every user-supplied string escaped."""
    return caption_page(data, report)


WRITERS: dict[str, Callable[[dict[str, Any], Report], bytes]] = {
    "txt": write_txt,
    "json": write_json,
    "md": write_md,
    "html": write_html,
    "csv": write_csv,
}

# Files a caption report folder holds; used to refuse silent overwrites.
PICTURES = {
    "annotated.png": lambda r: _png(annotated_image(r)),
    "mask.png": lambda r: _png(mask_image(r)),
}


def write_report(
    report: Report,
    out_dir: str | Path,
    formats: tuple[str, ...] = ("json", "md", "html"),
    overwrite: bool = False,
) -> list[Path]:
    """Write ``report.<fmt>`` for each format plus annotated.png and mask.png into ``out_dir``.

    Refuses (OutputError) when any of those files already exists, unless ``overwrite``.
    Returns the paths written.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder path")
    unknown = [f for f in formats if f not in WRITERS]
    if unknown:
        raise OutputError(f"unknown report format {unknown[0]!r}: use {', '.join(WRITERS)}")
    data = report_to_dict(report)
    files = {f"report.{fmt}": WRITERS[fmt](data, report) for fmt in formats}
    files.update({name: draw(report) for name, draw in PICTURES.items()})
    # The resolved settings, reusable as `--config config.yaml` to reproduce the report.
    files["config.yaml"] = _yaml(report.settings)
    if not out.exists():
        write_new_folder(out, files)  # the common case: one rename, so a race has one winner
    else:
        with folder_lock(out):
            existing = [name for name in files if (out / name).exists()]
            if existing and not overwrite:
                raise OutputError(
                    f"{out / existing[0]} already exists; choose another --out folder or pass --overwrite"
                )
            for name, payload in files.items():
                atomic_write_bytes(out / name, payload)
    return [out / name for name in files]


def _yaml(settings: dict[str, Any]) -> bytes:
    import yaml

    header = "# Resolved settings of this report; rerun with `spotdiff caption A B --config config.yaml`.\n"
    return text_bytes(header + yaml.safe_dump(settings, sort_keys=False))
