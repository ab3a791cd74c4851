"""Refit the material and shape models of ``objects3d.py`` on a rendered benchmark.

    python -m spotdiff_cli.data.objects3d_fit /tmp/tune [--scenes 150]

Every view of every scene is segmented; each segmented object is matched to the gold object
whose box it overlaps most (IoU >= 0.5, boxes from the scene sampler); its features and the gold
material and shape are the training rows. Two logistic models (metal vs rubber; cube, sphere,
cylinder) are fitted by gradient descent on standardised features, cross-validated by scene (5
folds), and printed with the standardisation folded into the weights, in the form
``objects3d._METAL_WEIGHTS`` and ``_SHAPE_MODEL`` hold. Fit on the tuning split only: the wide
split is for reporting.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from ..analysis.objects3d import segment_objects
from ..frames import load_image
from .clevr_scene import ClevrConfig, box_of, sample_triplet

MATERIAL_FEATURES = {  # name: enters as its logarithm?
    "inner_edges": True,
    "spread": True,
    "bright": True,
    "dark": True,
    "faded": False,
    "edge_p90": True,
    "top_over_bottom": True,
    "vgrad": False,
    "ratio_iqr": True,
    "dark_share": False,
    "light_cv": True,
}
SHAPE_FEATURES = {
    name: False
    for name in (
        "fit_cube",
        "fit_cylinder",
        "fit_sphere",
        "vertical",
        "slanted",
        "ellipse_iou",
        "aspect",
        "solidity",
        "straight_sides",
        "corners",
    )
}
FOLDERS = {"default": "images", "semantic": "sc_images", "nonsemantic": "nsc_images"}


def rows_of(folder: Path, scenes: int) -> list[dict]:
    """One row per segmented object matched to a gold object: scene, gold attributes, features."""
    settings = json.loads((folder / "clevr.json").read_text())
    fields = ("seed", "width", "height", "spp", "min_objects", "max_objects", "captions")
    config = ClevrConfig(
        pairs=settings["pairs"],
        preset=settings.get("preset", "easy"),
        **{k: settings[k] for k in fields},
    )
    rows = []
    for index in range(min(scenes, config.pairs)):
        triplet = sample_triplet(index, config)
        for name, view in triplet.views().items():
            image = load_image(folder / FOLDERS[name] / f"CLEVR_{name}_{index:06d}.png")
            found = segment_objects(image) or []
            used: set[int] = set()
            for obj in view.objects:
                box = box_of(obj, view.camera, *config.size)
                best, overlap = None, 0.5
                for k, seen in enumerate(found):
                    if k not in used and _iou(seen.bbox, box) >= overlap:
                        best, overlap = k, _iou(seen.bbox, box)
                if best is None:
                    continue
                used.add(best)
                rows.append(
                    {
                        "scene": index,
                        "shape": obj.shape,
                        "material": obj.material,
                        **found[best].features,
                    }
                )
    return rows


def _iou(a: tuple, b: tuple) -> float:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    ix = max(0, min(ax + aw, bx + bw) - max(ax, bx))
    iy = max(0, min(ay + ah, by + bh) - max(ay, by))
    inter = ix * iy
    return inter / max(1e-9, aw * ah + bw * bh - inter)


def _matrix(rows: list[dict], features: dict[str, bool]) -> np.ndarray:
    return np.array(
        [
            [
                math.log(max(r.get(k, 0.0), 1e-3)) if log else r.get(k, 0.0)
                for k, log in features.items()
            ]
            for r in rows
        ]
    )


def _logistic(x: np.ndarray, y: np.ndarray, classes: int, l2: float = 1e-2) -> np.ndarray:
    """Softmax regression on [1, x] by gradient descent; (1 + d, classes) weights."""
    design = np.column_stack((np.ones(len(x)), x))
    weights = np.zeros((design.shape[1], classes))
    target = np.eye(classes)[y]
    for _ in range(3000):
        z = design @ weights
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        grad = design.T @ (p - target) / len(x)
        grad[1:] += l2 * weights[1:]
        weights -= 0.5 * grad
    return weights


def fit(rows: list[dict], features: dict[str, bool], label: str, classes: list[str]) -> dict:
    """Cross-validated accuracy and the final model (weights per class on raw features)."""
    x = _matrix(rows, features)
    y = np.array([classes.index(r[label]) for r in rows])
    scenes = np.array([r["scene"] for r in rows])
    folds = sorted(set(scenes.tolist()))
    right = 0
    for k in range(5):
        test = np.isin(scenes, folds[k::5])
        mu, sd = x[~test].mean(axis=0), x[~test].std(axis=0) + 1e-9
        w = _logistic((x[~test] - mu) / sd, y[~test], len(classes))
        z = np.column_stack((np.ones(test.sum()), (x[test] - mu) / sd)) @ w
        right += int((z.argmax(axis=1) == y[test]).sum())
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    w = _logistic((x - mu) / sd, y, len(classes))
    folded = w[1:] / sd[:, None]
    bias = w[0] - (mu[:, None] * folded).sum(axis=0)
    return {
        "accuracy": right / len(rows),
        "bias": dict(zip(classes, np.round(bias, 3).tolist())),
        "weights": {
            name: dict(zip(classes, np.round(folded[i], 3).tolist()))
            for i, name in enumerate(features)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder written by `spotdiff data clevr`")
    parser.add_argument("--scenes", type=int, default=150)
    args = parser.parse_args()
    rows = rows_of(args.folder, args.scenes)
    print(f"{len(rows)} objects")
    material = fit(rows, MATERIAL_FEATURES, "material", ["rubber", "metal"])
    shape = fit(rows, SHAPE_FEATURES, "shape", ["cube", "sphere", "cylinder"])
    print(f"material: cross-validated accuracy {material['accuracy']:.3f}")
    # Two classes: the metal logit is the difference of the two columns.
    bias = material["bias"]["metal"] - material["bias"]["rubber"]
    print(f"_METAL_BIAS = {bias:.3f}")
    for name, w in material["weights"].items():
        print(f'    "{name}": ({w["metal"] - w["rubber"]:.3f}, {MATERIAL_FEATURES[name]}),')
    print(f"shape: cross-validated accuracy {shape['accuracy']:.3f}")
    for cls in ("cube", "sphere", "cylinder"):
        weights = {name: w[cls] for name, w in shape["weights"].items()}
        print(f'    "{cls}": ({shape["bias"][cls]}, {weights}),')


if __name__ == "__main__":
    main()
