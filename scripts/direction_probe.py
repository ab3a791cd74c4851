"""Is arrival-vs-departure in what a grid-reading captioner sees? A linear probe (docs/results.md,
"The direction is in what duda reads").

A logistic regression on the mask-weighted means of the after and before grids (the inputs of a
model with ``change_gate: focus``), fitted on the one-change appear / disappear pairs of a
prepared training set, scored on its validation split and on the one-change real pairs of
benchmarks/annotations/real_pairs.json (their features built exactly as ``spotdiff caption
--model MODEL`` builds them). Compare its real-pair score with the model's own sentences
(scripts/check_real_pairs.py): where the probe is right and the model is not, the information is
in the input and the speaker does not use it.

    python scripts/direction_probe.py runs/mixed [--model duda] [--media ../shared/media]

Needs the set's cache (`spotdiff data prepare DIR --backbone efficientnet_lite0`) and ../shared/media.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_real_pairs import frame  # noqa: E402

from spotdiff_cli.captioners.features import change_direction, project_masks  # noqa: E402
from spotdiff_cli.config import CaptionConfig  # noqa: E402
from spotdiff_cli.data.cache import cluster_masks, load_analysis  # noqa: E402
from spotdiff_cli.describer import PairDescriber  # noqa: E402


def pooled(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(2C,) mask-weighted means of the after and the before grid. before, after: (C, h, w);
    mask: (h, w) union of the cluster masks on the grid."""
    weights = mask / max(float(mask.sum()), 1e-6)
    return np.r_[(after * weights).sum((1, 2)), (before * weights).sum((1, 2))]


def training_rows(root: Path, split: str, grid: str) -> tuple[np.ndarray, np.ndarray]:
    """Probe inputs (N, 2C) and labels (N,) 1 = appear, 0 = disappear of one split's one-change
    pairs with at least one cluster."""
    with np.load(root / "cache" / grid / f"{split}.npz") as data:
        ids = [str(i) for i in data["ids"]]
        before, after = data["before"], data["after"]
    row_of = {pair_id: n for n, pair_id in enumerate(ids)}
    inputs, labels = [], []
    for line in (root / f"{split}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        types = entry.get("change_types", [])
        direction = change_direction(types)  # the label duda's direction_weight trains on
        if len(types) != 1 or direction < 0:
            continue
        analysis = load_analysis(root, split, entry["id"])
        if len(analysis["ids"]) == 0:
            continue
        row = row_of[entry["id"]]
        h, w = before.shape[-2:]
        mask = project_masks(cluster_masks(analysis, analysis["ids"]), (h, w)).max(0)
        inputs.append(pooled(before[row].astype(np.float32), after[row].astype(np.float32), mask))
        labels.append(direction)
    return np.array(inputs), np.array(labels)


def main() -> int:
    from sklearn.linear_model import LogisticRegression

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a prepared set with train/val .jsonl (runs/mixed)")
    parser.add_argument(
        "--model", default="duda", help="whose analysis_batch builds the real inputs"
    )
    parser.add_argument("--grid", default="features-efficientnet_lite0", help="cache folder")
    parser.add_argument("--media", type=Path, default=ROOT.parent / "shared" / "media")
    args = parser.parse_args()

    x_train, y_train = training_rows(args.data, "train", args.grid)
    x_val, y_val = training_rows(args.data, "val", args.grid)
    probe = LogisticRegression(max_iter=3000, C=0.1).fit(x_train, y_train)
    print(
        f"{args.data}: {len(y_train)} training pairs; validation accuracy {probe.score(x_val, y_val):.3f} ({len(y_val)} pairs)"
    )

    annotations = json.loads((ROOT / "benchmarks/annotations/real_pairs.json").read_text())
    pairs = [
        p
        for p in annotations["pairs"]
        if p.get("clip", "").endswith(".mp4")
        and len(p["changes"]) == 1
        and p["changes"][0]["type"] in ("add", "drop")
    ]
    describer = PairDescriber(None, CaptionConfig(model=args.model, device="cpu"))
    model = describer.captioner
    right = 0
    for pair in pairs:
        before, after = (frame(args.media, pair["clip"], pair[k]) for k in ("before", "after"))
        batch = model.analysis_batch(describer.analyse(before, after))
        masks = batch["cluster_masks"][0] * batch["cluster_valid"][0][:, None, None]
        x = pooled(
            batch["before"][0].float().numpy(),
            batch["after"][0].float().numpy(),
            masks.amax(0).numpy() if len(masks) else np.zeros(batch["before"].shape[-2:]),
        )
        p_appear = float(probe.predict_proba(x[None])[0, 1])
        truth = pair["changes"][0]["type"]
        ok = (p_appear > 0.5) == (truth == "add")
        right += ok
        print(
            f"{pair['clip']} {pair['before']}->{pair['after']} {truth}: P(appear) {p_appear:.3f} {'ok' if ok else 'WRONG'}"
        )
    print(f"real pairs right: {right} of {len(pairs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
