"""The report as plain data: the one place that decides what a report contains.

Coordinates are in pixels of the original before image (the analysis runs smaller; boxes are
scaled back here). The schema string is versioned so scripts can rely on the layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import __version__
from ..types import BBox, CameraMotion, Report

SCHEMA = "spotdiff.report/1"


def scale_box(bbox: BBox, scale: float) -> list[int]:
    """A working-resolution (x, y, w, h) box in original pixels."""
    x, y, w, h = bbox
    return [
        int(round(x * scale)),
        int(round(y * scale)),
        max(1, int(round(w * scale))),
        max(1, int(round(h * scale))),
    ]


def report_to_dict(report: Report) -> dict[str, Any]:
    """Everything a reader of the report needs, JSON-ready."""
    a = report.analysis
    scale = a.scale
    before = report.original.before.pixels if report.original else a.pair.before.pixels
    after_shape = (
        report.original.after.pixels.shape if report.original else a.pair.after.pixels.shape
    )
    numbered = cluster_numbers(report)
    return {
        "schema": SCHEMA,
        "tool": {"name": "spotdiff", "version": __version__},
        "inputs": {
            "before": {
                "path": report.before_path,
                "width": int(before.shape[1]),
                "height": int(before.shape[0]),
            },
            "after": {
                "path": report.after_path,
                "width": int(after_shape[1]),
                "height": int(after_shape[0]),
            },
        },
        "model": report.model,
        "sentences": [
            {
                "number": i + 1,
                "text": s.text,
                "kind": s.kind,
                "cluster_ids": list(s.cluster_ids),
                "confidence": s.confidence,
                "details": s.details,
            }
            for i, s in enumerate(report.sentences)
        ],
        "alignment": {
            "dx": round(a.alignment.dx * scale, 2),
            "dy": round(a.alignment.dy * scale, 2),
            "method": a.alignment.method,
            "score": round(a.alignment.score, 5),
        },
        "camera": _camera_block(a.camera, scale),
        "change": {
            "delta": a.mask.delta,
            "changed_fraction": round(a.mask.changed_fraction, 5),
            "changed_fraction_before_lighting_correction": round(a.mask.raw_changed_fraction, 5),
            "lighting_changed": a.mask.lighting_changed,
            "scene_changed": a.scene_changed,
            "analysed_size": [
                int(a.pair.before.pixels.shape[1]),
                int(a.pair.before.pixels.shape[0]),
            ],
        },
        "clusters": [
            {
                "id": c.id,
                "sentence": numbered.get(c.id),
                "bbox": scale_box(c.bbox, scale),
                "n_active": c.n_active,
                "salience": round(c.salience, 6),
                # g(z) of Spot-the-diff §3.2, in analysed pixels (as the models consume them).
                "features": dict(zip(("length", "width", "area", "n_active"), c.features)),
            }
            for c in a.clusters
        ],
        "notes": list(report.notes),
        "settings": report.settings,
        "timings": {k: round(v, 4) for k, v in report.timings.items()},
    }


def cluster_numbers(report: Report) -> dict[int, int]:
    """cluster id -> number of the first sentence that mentions it (the box label)."""
    numbers: dict[int, int] = {}
    for i, s in enumerate(report.sentences):
        for cid in s.cluster_ids:
            numbers.setdefault(cid, i + 1)
    return numbers


def _camera_block(camera: CameraMotion | None, scale: float) -> dict[str, Any] | None:
    """The camera's motion in original pixels (None: it stayed, or a shift explained it). The
    homography maps a before pixel (x, y, 1) to the after image: S H S^-1, S = diag(s, s, 1)."""
    if camera is None:
        return None
    to_original = np.diag([scale, scale, 1.0])
    matrix = to_original @ np.array(camera.homography) @ np.linalg.inv(to_original)
    return {
        "moved": True,
        "dx": round(camera.dx * scale, 2),
        "dy": round(camera.dy * scale, 2),
        "rotation_degrees": round(camera.rotation, 3),
        "zoom": round(camera.zoom, 4),
        "homography": [[round(float(v), 6) for v in row] for row in matrix / matrix[2, 2]],
        "inliers": camera.inliers,
        "matches": camera.matches,
    }
