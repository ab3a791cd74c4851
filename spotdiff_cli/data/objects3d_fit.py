"""Refit the material and shape models of ``objects3d.py`` on rendered benchmarks.

    python -m spotdiff_cli.data.objects3d_fit /tmp/tune150 /tmp/wide16 ... [--scenes 150] \
        [--trees spotdiff_cli/analysis/material_trees.json] \
        [--finish-trees spotdiff_cli/analysis/finish_trees.json]

Every view of every scene is segmented; each segmented object is matched to the gold object
whose box it overlaps most (IoU >= 0.5, boxes from the scene sampler); its features and the gold
material and shape are the training rows. Printed: how many the shipped material model names
right; a logistic material model and the shape model (softmax regression by gradient descent on
standardised features, cross-validated by scene, 5 folds, printed with the standardisation folded
into the weights, in the form ``objects3d._SHAPE_MODEL`` holds); with ``--trees``, the material
trees ``objects3d`` runs (``fit_trees``), cross-validated the same way and written to the file.
The shipped trees came from the default render of seed 11 and the wide renders of seeds 16-19
(docs/analysis.md); fit on renders you will not report on.

With ``--finish-trees`` (and then only those), the trees that decide whether an object matched
across a pair changed material (``objects3d._material_changed``): every semantic and distractor
pair of every scene is matched as the describer does (``objects3d.match_objects``); each matched
object that one view reads as metal and the other as rubber is a row
(``objects3d.finish_features``), labelled by the gold (a material change of that object, found
by its box in both views). Cross-validated render by render (each folder left out in turn), then
fitted on every row and written to the file. The shipped finish trees came from the thirteen
tuning renders of docs/analysis.md (the default render of seed 11, the wide renders of seeds
16-27); ``--jobs`` folders are read at once.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ..analysis import resize_for_analysis
from ..analysis.objects3d import (
    _NEW_FINISH,
    area_growth,
    finish_candidate,
    finish_features,
    match_objects,
    segment_objects,
)
from ..config import AnalysisConfig
from ..frames import load_image
from ..geometry import box_iou
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
# The material trees' inputs (``objects3d._metal_probability``): the logistic model's features
# as measured (no logarithms: a tree's thresholds do not care) and three more that
# ``_material_of`` measures anyway.
TREE_FEATURES = (*MATERIAL_FEATURES, "chroma_corr", "saturation_spread", "median_ratio")


def rendered_config(folder: Path) -> ClevrConfig:
    """The settings a folder of ``spotdiff data clevr`` was rendered with (its ``clevr.json``):
    with them, ``sample_triplet`` gives each scene's objects and cameras again."""
    settings = json.loads((folder / "clevr.json").read_text())
    fields = ("seed", "width", "height", "spp", "min_objects", "max_objects", "captions")
    return ClevrConfig(
        pairs=settings["pairs"],
        preset=settings.get("preset", "easy"),
        **{k: settings[k] for k in fields},
    )


def rows_of(folder: Path, scenes: int) -> list[dict]:
    """One row per segmented object matched to a gold object: scene, gold attributes, features."""
    config = rendered_config(folder)
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
                    if k not in used and box_iou(seen.bbox, box) >= overlap:
                        best, overlap = k, box_iou(seen.bbox, box)
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


def _scene_folds(rows: list[dict], folds: int = 5) -> Iterator[np.ndarray]:
    """The cross-validation's test rows, fold by fold: every ``folds``-th scene, whole (its
    three views together, so no view of a test scene is trained on)."""
    scenes = np.array([r["scene"] for r in rows])
    order = sorted(set(scenes.tolist()))
    for k in range(folds):
        yield np.isin(scenes, order[k::folds])


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
    right = 0
    for test in _scene_folds(rows):
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


def fit_trees(rows: list[dict], out: Path) -> None:
    """Gradient-boosted trees for metal vs rubber (scikit-learn's histogram GBM, 100 trees of at
    most 15 leaves), cross-validated by scene (5 folds), then fitted on every row and written to
    ``out`` as plain arrays that ``objects3d`` evaluates without scikit-learn."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x = np.array([[r.get(k, 0.0) for k in TREE_FEATURES] for r in rows], np.float64)
    y = np.array([r["material"] == "metal" for r in rows])

    def model() -> HistGradientBoostingClassifier:
        return HistGradientBoostingClassifier(
            max_iter=100, max_leaf_nodes=15, early_stopping=False, random_state=0
        )

    right = 0
    for test in _scene_folds(rows):
        right += int((model().fit(x[~test], y[~test]).predict(x[test]) == y[test]).sum())
    print(f"material trees: cross-validated accuracy {right / len(rows):.3f}")
    _export(
        model().fit(x, y),
        x,
        list(TREE_FEATURES),
        out,
        "metal vs rubber for objects3d._metal_probability; data/objects3d_fit.py --trees",
    )


# A segmented object is the gold's when its box overlaps the gold box this much (an outline
# merged with a neighbour or a shadow overlaps less, and counts as not found); the finish rows
# and benchmarks/viewpoint_misses.py find changed objects so.
FOUND_IOU = 0.3


def finish_rows_of(folder: Path, scenes: int) -> list[dict]:
    """One row per matched object of a pair (semantic or distractor) read as metal in one view
    and rubber in the other: its ``finish_features`` and whether its material changed (gold)."""
    config = rendered_config(folder)
    work = AnalysisConfig().work_size
    rows = []
    for index in range(min(scenes, config.pairs)):
        triplet = sample_triplet(index, config)
        before, scale = resize_for_analysis(
            load_image(folder / FOLDERS["default"] / f"CLEVR_default_{index:06d}.png"), work
        )
        for name in ("semantic", "nonsemantic"):
            after, _ = resize_for_analysis(
                load_image(folder / FOLDERS[name] / f"CLEVR_{name}_{index:06d}.png"), work
            )
            matched = match_objects(before, after)
            if matched is None:
                continue
            (objects_b, _), (objects_a, _), fit = matched
            gold = None
            change = triplet.change
            if name == "semantic" and change.type == "material":
                gold = (
                    gold_index(
                        objects_b, gold_box(change.before, triplet.default.camera, config, scale)
                    ),
                    gold_index(
                        objects_a, gold_box(change.after, triplet.semantic.camera, config, scale)
                    ),
                )
            growth = area_growth(objects_b, objects_a, fit.pairs)
            for i, j in fit.pairs:
                b, a = objects_b[i], objects_a[j]
                if finish_candidate(b, a):
                    rows.append(
                        {
                            "folder": str(folder),
                            "changed": gold == (i, j),
                            "distractor": name == "nonsemantic",
                            **finish_features(b, a, growth),
                        }
                    )
    return rows


def gold_box(obj, camera, config: ClevrConfig, scale: float) -> tuple[float, ...]:
    """A gold object's (x, y, w, h) box as the scene sampler puts it in a view, in the pixels of
    the analysed view (the render's over ``scale``, ``resize_for_analysis``'s factor)."""
    return tuple(v / scale for v in box_of(obj, camera, *config.size))


def gold_index(objects: list, box: tuple[float, ...]) -> int | None:
    """The index of the segmented object whose box overlaps the gold ``box`` most, at least
    FOUND_IOU (same pixels as the objects'), or None."""
    overlaps = [box_iou(o.bbox, box) for o in objects]
    best = max(range(len(objects)), key=overlaps.__getitem__, default=None)
    return best if best is not None and overlaps[best] >= FOUND_IOU else None


def fit_finish_trees(rows: list[dict], out: Path) -> None:
    """Gradient-boosted trees for "this object's finish changed" (100 trees of at most 6 leaves),
    cross-validated folder by folder, then fitted on every row and written to ``out``."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    names = [k for k in rows[0] if k not in ("folder", "changed", "distractor")]
    x = np.array([[r[k] for k in names] for r in rows], np.float64)
    y = np.array([r["changed"] for r in rows])
    folders = np.array([r["folder"] for r in rows])
    distractor = np.array([r["distractor"] for r in rows])

    def model() -> HistGradientBoostingClassifier:
        return HistGradientBoostingClassifier(
            max_iter=100,
            max_leaf_nodes=6,
            learning_rate=0.1,
            min_samples_leaf=10,
            early_stopping=False,
            random_state=0,
        )

    p = np.zeros(len(rows))
    for folder in np.unique(folders):
        test = folders == folder
        p[test] = model().fit(x[~test], y[~test]).predict_proba(x[test])[:, 1]
    said = p >= _NEW_FINISH
    print(
        f"finish trees, cross-validated by render: {len(rows)} objects read metal one way and "
        f"rubber the other, {int(y.sum())} changed; at {_NEW_FINISH}: {int((said & y).sum())} "
        f"found, {int((said & ~y).sum())} others called changed "
        f"({int((said & ~y & distractor).sum())} in distractors)"
    )
    _export(
        model().fit(x, y),
        x,
        names,
        out,
        "new finish for objects3d._material_changed; data/objects3d_fit.py --finish-trees",
    )


def _export(final, x: np.ndarray, names: list[str], out: Path, about: str) -> None:
    """Write a fitted binary HistGradientBoostingClassifier to ``out`` as plain arrays that
    ``objects3d._trees_probability`` evaluates without scikit-learn, and check that it does."""
    trees = []
    for (predictor,) in final._predictors:  # binary: one tree per iteration
        nodes = predictor.nodes
        trees.append(
            {
                "feature": nodes["feature_idx"].tolist(),
                "threshold": [float(t) for t in nodes["num_threshold"]],
                "left": nodes["left"].tolist(),
                "right": nodes["right"].tolist(),
                "leaf": nodes["is_leaf"].astype(int).tolist(),
                "value": [float(v) for v in nodes["value"]],
            }
        )
    exported = {
        "about": about,
        "features": names,
        "baseline": float(np.ravel(final._baseline_prediction)[0]),
        "trees": trees,
    }
    out.write_text(json.dumps(exported, separators=(",", ":")) + "\n")
    from ..analysis.objects3d import _trees_probability

    mine = np.array([_trees_probability(exported, dict(zip(names, r))) for r in x])
    theirs = final.predict_proba(x)[:, 1]
    print(
        f"wrote {out}: {len(trees)} trees; largest gap to scikit-learn {np.abs(mine - theirs).max():.2e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", type=Path, nargs="+", help="folders written by `spotdiff data clevr`"
    )
    parser.add_argument("--scenes", type=int, default=150, help="at most this many per folder")
    parser.add_argument(
        "--trees", type=Path, help="also fit the material trees and write them here (json)"
    )
    parser.add_argument(
        "--finish-trees",
        type=Path,
        help="fit only the trees that decide a material change, and write them here (json)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="folders read at once (finish trees)")
    args = parser.parse_args()
    for folder in args.folders:
        if not (folder / "clevr.json").is_file():
            parser.error(f"{folder}: not a render of `spotdiff data clevr` (no clevr.json)")
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    if args.finish_trees:
        with ProcessPoolExecutor(args.jobs) as pool:
            found = pool.map(finish_rows_of, args.folders, [args.scenes] * len(args.folders))
            fit_finish_trees([row for rows in found for row in rows], args.finish_trees)
        return
    rows = []
    for number, folder in enumerate(args.folders):
        # Scenes of different renders are different scenes for the cross-validation's folds.
        for row in rows_of(folder, args.scenes):
            rows.append({**row, "scene": number * 1_000_000 + row["scene"]})
    print(f"{len(rows)} objects")
    current = [r["p_metal"] > 0.5 for r in rows]
    right = sum(c == (r["material"] == "metal") for c, r in zip(current, rows, strict=True))
    print(f"material: the model in objects3d.py names {right / len(rows):.3f} of them right")
    if args.trees:
        fit_trees(rows, args.trees)
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
