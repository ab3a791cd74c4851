"""The default describer on a rendered CLEVR-Change-style benchmark: moved cameras (not a test).

    .venv/bin/spotdiff data clevr --out /tmp/tune --pairs 150 --seed 11             # tuning
    .venv/bin/spotdiff data clevr --out /tmp/wide --pairs 150 --seed 48 --preset wide  # test
    .venv/bin/python benchmarks/viewpoint.py /tmp/tune /tmp/wide --split all --only auto

The wide set is the untouched test split: its own seed, the wide preset's camera and light
jitter (docs/data.md), run once to report and never looked at pair by pair. A split that has
reported once becomes a tuning render; seeds 12-47 have been used so (docs/analysis.md), so the
next untouched one is seed 48 or later.

Each scene gives two pairs: the before image against the semantic change (one object changed
colour or material, was added, dropped or moved, seen from a slightly moved camera) and against
the distractor (only the camera moved and/or the light changed; the truth is "no change"). Both
are described twice in the same run: with ``camera="fixed"`` (the paper's shift search alone -
the baseline; the captioner's reading is today's in both) and with the default ``"auto"``.
Copied into a checkout from before cameras were followed (``git worktree add``), it measures
that checkout's default instead: the original behaviour, reading included.

It prints, per setting:

- distractors reported as no change: no sentence about an object (the camera and lighting
  sentences are not changes of the scene; "the whole view changed" is);
- semantic changes reported: at least one sentence about an object;
- change type: the most salient object sentence's kind read as CLEVR-Change's type (appeared ->
  add, disappeared -> drop, moved -> move, colour -> color, material -> material; "something
  changed" names no type), over all semantic pairs and over the reported ones;
- right place: that sentence's clusters touch the changed object's gold box (the before box;
  for an addition the after box brought onto the before frame by the estimated motion);
- attribute accuracy against gold, read from the words as ``spotdiff eval`` reads them
  (``evaluate/judge.py``): of each semantic pair's first change sentence, whether it names the
  change's type, its object (shape), its colour (and the new one), its material (and the new
  one: metal/metallic/shiny, rubber/matte) and its place (thirds of the frame); a pair with no
  change sentence is wrong on all five;
- the camera: the share of pairs whose camera moved that got the "camera moved" sentence, and
  of fixed-camera pairs (lighting-only distractors) that did not;
- seconds per pair, and a breakdown by change type and by distractor kind.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spotdiff_cli.config import AnalysisConfig, CaptionConfig  # noqa: E402
from spotdiff_cli.describer import PairDescriber  # noqa: E402
from spotdiff_cli.evaluate.judge import gold_change, judge_attributes  # noqa: E402
from spotdiff_cli.evaluate.lexicon import read, words  # noqa: E402
from spotdiff_cli.frames import load_image  # noqa: E402
from spotdiff_cli.types import Report  # noqa: E402

# The grounded captioner's sentence kinds that talk about an object, and the change type each
# one claims (None: a change without a type).
OBJECT_KINDS = {
    "appeared": "add",
    "disappeared": "drop",
    "moved": "move",
    "colour": "color",
    "material": "material",
    "changed": None,
    "scene": None,
}


def object_sentences(report: Report) -> list:
    return [s for s in report.sentences if s.kind in OBJECT_KINDS]


def _touches(a: tuple, b: list | tuple, margin: float) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return (
        ax < bx + bw + margin
        and bx < ax + aw + margin
        and ay < by + bh + margin
        and by < ay + ah + margin
    )


def _after_box_on_before(report: Report, box: list) -> list:
    """A box of the after image in before-frame coordinates (through the estimated motion)."""
    analysis = report.analysis
    x, y, w, h = (v / analysis.scale for v in box)
    corners = np.array([[x, y], [x + w, y], [x, y + h], [x + w, y + h]], dtype=np.float64)
    if getattr(analysis, "camera", None) is not None:
        inverse = np.linalg.inv(np.array(analysis.camera.homography))
        corners = cv2.perspectiveTransform(corners.reshape(-1, 1, 2), inverse).reshape(-1, 2)
    else:
        corners = corners - [analysis.alignment.dx, analysis.alignment.dy]
    x0, y0 = corners.min(axis=0)
    x1, y1 = corners.max(axis=0)
    return [x0, y0, x1 - x0, y1 - y0]


MATERIAL_WORDS = {"metal": "metal", "metallic": "metal", "shiny": "metal", "rubber": "rubber"}
MATERIAL_WORDS["matte"] = "rubber"
ATTRIBUTES = ("type", "object", "colour", "material", "place")


def attribute_verdicts(texts: list[str], gold: dict, size: tuple[int, int]) -> dict[str, bool]:
    """Per attribute, whether the pair's first change sentence names it rightly (see the module
    docstring); every attribute is judged (CLEVR's gold has them all)."""
    readings = [read(t) for t in texts]
    verdicts = judge_attributes(readings, [gold_change(gold, size)])[0]
    first = next((t for t, r in zip(texts, readings) if r.kind == "change"), None)
    said = {MATERIAL_WORDS[w] for w in words(first or "") if w in MATERIAL_WORDS}
    truth = {gold["object"]["material"], gold.get("new", {}).get("material")} - {None}
    verdicts["material"] = bool(said) and said <= truth
    return {a: bool(verdicts.get(a, False)) for a in ATTRIBUTES}


def right_place(report: Report, sentence, gold: dict) -> bool:
    boxes = {c.id: c.bbox for c in report.analysis.clusters}
    golds = []
    if gold["bbox_before"]:
        golds.append([v / report.analysis.scale for v in gold["bbox_before"]])
    if gold["bbox_after"] and gold["type"] in ("add", "move"):
        golds.append(_after_box_on_before(report, gold["bbox_after"]))
    return any(_touches(boxes[i], g, 4) for i in sentence.cluster_ids if i in boxes for g in golds)


class Tally:
    """Counts for one setting."""

    def __init__(self) -> None:
        self.n = defaultdict(int)
        self.by_type = defaultdict(lambda: [0, 0, 0])  # pairs, reported, right type
        self.by_distractor = defaultdict(lambda: [0, 0])  # pairs, no change
        self.seconds = 0.0
        self.pairs = 0
        self.confusion = defaultdict(int)
        self.attributes = {a: [0, 0] for a in ATTRIBUTES}  # right, judged
        self.size = (0, 0)  # the images' width and height, for the place

    def distractor(self, report: Report, gold: dict) -> None:
        quiet = not object_sentences(report)
        self.n["distractors"] += 1
        self.n["quiet"] += quiet
        kind = gold["distractor"]
        self.by_distractor[kind][0] += 1
        self.by_distractor[kind][1] += quiet
        self._camera(report, moved="viewpoint" in kind)

    def semantic(self, report: Report, gold: dict) -> None:
        said = object_sentences(report)
        kind = gold["type"]
        predicted = OBJECT_KINDS[said[0].kind] if said else "none"
        right = predicted == kind
        self.n["semantic"] += 1
        self.n["reported"] += bool(said)
        self.n["right_type"] += right
        self.n["right_place"] += bool(said) and right_place(report, said[0], gold)
        self.by_type[kind][0] += 1
        self.by_type[kind][1] += bool(said)
        self.by_type[kind][2] += right
        self.confusion[(kind, str(predicted))] += 1
        self._camera(report, moved=True)
        verdicts = attribute_verdicts([s.text for s in report.sentences], gold, self.size)
        for name, good in verdicts.items():
            self.attributes[name][0] += good
            self.attributes[name][1] += 1

    def _camera(self, report: Report, moved: bool) -> None:
        said = any(s.kind == "camera" for s in report.sentences)
        key = "moved" if moved else "fixed"
        self.n[f"camera_{key}"] += 1
        self.n[f"camera_{key}_said"] += said

    def summary(self) -> dict:
        """The numbers as plain JSON values."""
        n = self.n
        return {
            "distractors": n["distractors"],
            "no_change": n["quiet"],
            "semantic": n["semantic"],
            "reported": n["reported"],
            "right_type": n["right_type"],
            "right_place_box": n["right_place"],
            "by_distractor": dict(self.by_distractor),
            "by_type": dict(self.by_type),
            "attributes": dict(self.attributes),
            "camera": {k: n[k] for k in n if k.startswith("camera")},
            "seconds_per_pair": self.seconds / max(1, self.pairs),
        }

    def lines(self) -> list[str]:
        n = self.n

        def share(a: str, b: str) -> str:
            return f"{n[a] / n[b]:.3f} ({n[a]}/{n[b]})" if n[b] else "-"

        out = [
            f"  distractors reported as no change: {share('quiet', 'distractors')}",
            f"  semantic changes reported:         {share('reported', 'semantic')}",
            f"  right change type (all semantic):  {share('right_type', 'semantic')}",
            f"  right change type (reported):      {share('right_type', 'reported')}",
            f"  right place (top sentence):        {share('right_place', 'semantic')}",
            "  attribute accuracy (type, object, colour, material, place): "
            + ", ".join(
                f"{a} {r / n:.3f} ({r}/{n})" if n else f"{a} -"
                for a, (r, n) in self.attributes.items()
            ),
            f"  'camera moved' said when it moved: {share('camera_moved_said', 'camera_moved')}",
            f"  ... and said with a fixed camera:  {share('camera_fixed_said', 'camera_fixed')}",
            f"  seconds per pair: {self.seconds / max(1, self.pairs):.3f}",
            "  by type (pairs, reported, right type): "
            + ", ".join(f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in sorted(self.by_type.items())),
            "  by distractor (pairs, no change): "
            + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(self.by_distractor.items())),
            "  confusion (gold -> said): "
            + ", ".join(f"{g}->{p} {c}" for (g, p), c in sorted(self.confusion.items())),
        ]
        return out


def measure(folder: Path, args: argparse.Namespace) -> dict[str, Tally]:
    """Describe every scene of ``folder`` (its split ``args.split``) with each setting."""
    gold = json.loads((folder / "gold.json").read_text())
    scenes = [g for g in gold.values() if args.split == "all" or g["split"] == args.split]
    scenes.sort(key=lambda g: g["index"])
    if args.limit:
        scenes = scenes[: args.limit]
    if not scenes:
        sys.exit(f"no scenes of split '{args.split}' in {folder}")
    settings_file = json.loads((folder / "clevr.json").read_text())
    size = (int(settings_file["width"]), int(settings_file["height"]))
    caption = CaptionConfig(recognise=not args.no_recognise)
    if "camera" in {f.name for f in dataclasses.fields(AnalysisConfig)}:
        settings = [args.only] if args.only else ["fixed", "auto"]
        describers = {s: PairDescriber(AnalysisConfig(camera=s), caption) for s in settings}
    else:  # a checkout from before moved cameras were followed: its default is the baseline
        settings = ["default"]
        describers = {"default": PairDescriber(AnalysisConfig(), caption)}
    tallies = {s: Tally() for s in settings}
    for tally in tallies.values():
        tally.size = size
    for g in scenes:
        i = g["index"]
        before = load_image(folder / "images" / f"CLEVR_default_{i:06d}.png")
        views = {
            "semantic": load_image(folder / "sc_images" / f"CLEVR_semantic_{i:06d}.png"),
            "distractor": load_image(folder / "nsc_images" / f"CLEVR_nonsemantic_{i:06d}.png"),
        }
        for setting, describer in describers.items():
            tally = tallies[setting]
            for view, after in views.items():
                t0 = time.perf_counter()
                report = describer.describe(before, after)
                tally.seconds += time.perf_counter() - t0
                tally.pairs += 1
                if view == "semantic":
                    tally.semantic(report, g)
                else:
                    tally.distractor(report, g)
                if args.verbose:
                    truth = g["type"] if view == "semantic" else g["distractor"]
                    if view == "semantic":
                        truth += " " + " ".join(g["object"][k] for k in OBJECT_WORDS)
                    said = " | ".join(s.text for s in report.sentences)
                    print(f"{i:6d} {setting:5s} {view:10s} {truth:30s} {said}", flush=True)
    print(f"{folder}: split {args.split}, {len(scenes)} scenes ({2 * len(scenes)} pairs)")
    labels = {
        "fixed": "shift search only",
        "auto": "camera followed (default)",
        "default": "this checkout's default",
    }
    for setting in settings:
        print(f"camera={setting}: {labels[setting]}")
        print("\n".join(tallies[setting].lines()), flush=True)
    return tallies


OBJECT_WORDS = ("size", "color", "material", "shape")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", type=Path, nargs="+", help="folders written by `spotdiff data clevr`"
    )
    parser.add_argument("--split", default="test", help="train, val, test or all")
    parser.add_argument("--limit", type=int, default=0, help="at most this many scenes")
    parser.add_argument("--no-recognise", action="store_true", help="skip people/vehicles")
    parser.add_argument("--only", choices=("fixed", "auto"), help="run one setting only")
    parser.add_argument("--verbose", action="store_true", help="print every pair's sentences")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args()
    results = {}
    for folder in args.folders:
        tallies = measure(folder, args)
        results[str(folder)] = {s: t.summary() for s, t in tallies.items()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
