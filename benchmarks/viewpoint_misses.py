"""Where the rendered benchmark's missed changes are lost (not a test): segmentation, the
camera's matching, or the decision about a matched or left-over object.

    .venv/bin/python benchmarks/viewpoint_misses.py /tmp/tune150 /tmp/wide17 ... [--jobs 2]

For every semantic pair of each folder (written by ``spotdiff data clevr``) that the default
describer leaves without an object sentence (a miss, as ``benchmarks/viewpoint.py`` counts
"semantic changes reported"), the changed object is looked for by its gold box (the scene
sampler's ``box_of``, IoU at least ``objects3d_fit.FOUND_IOU``) among the objects that
``analysis/objects3d.analyse_objects`` segments in each view, and then among the camera's
pairs. Each miss lands in one stage:

- ``not a floor scene``: the object analysis did not take the pair (the pixel path answered);
- ``not segmented (before / after / both)``: no segmented object is the changed one in that view;
- ``matched to another``: the changed object's before outline was paired with another object;
- ``matched, judged unchanged``: paired with its own after outline, and no change found on it
  (a material, a colour, a short move);
- ``segmented, left over, unsaid``: unpaired in a view where it was segmented (an arrival's after
  outline, a departure's before outline, or a moved or repainted object), and the leftover tests
  of ``compare_objects`` said nothing.

Printed: a table of stage by change type, the pairs in each cell (folder:scene), and for the
segmentation misses the changed objects' colours and materials. A render that reports here is
looked at pair by pair: use tuning renders only (docs/analysis.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from viewpoint import object_sentences  # noqa: E402  (what counts as reported)

from spotdiff_cli.analysis import resize_for_analysis  # noqa: E402
from spotdiff_cli.analysis.objects3d import analyse_objects  # noqa: E402
from spotdiff_cli.config import AnalysisConfig, CaptionConfig  # noqa: E402
from spotdiff_cli.data.clevr_scene import sample_triplet  # noqa: E402
from spotdiff_cli.data.objects3d_fit import gold_box, gold_index, rendered_config  # noqa: E402
from spotdiff_cli.describer import PairDescriber  # noqa: E402
from spotdiff_cli.frames import load_image  # noqa: E402

STAGES = (
    "not a floor scene",
    "not segmented (before)",
    "not segmented (after)",
    "not segmented (both)",
    "matched to another",
    "matched, judged unchanged",
    "segmented, left over, unsaid",
)
TYPES = ("add", "drop", "move", "color", "material")


@functools.cache
def _describer() -> PairDescriber:
    """The default describer, made once per worker process."""
    return PairDescriber(AnalysisConfig(camera="auto"), CaptionConfig())


def miss_stage(folder: Path, index: int) -> tuple[str, str, str] | None:
    """(stage, change type, the changed object's words) for a missed semantic pair of scene
    ``index``, or None when the default describer reports the change."""
    before = load_image(folder / "images" / f"CLEVR_default_{index:06d}.png")
    after = load_image(folder / "sc_images" / f"CLEVR_semantic_{index:06d}.png")
    if object_sentences(_describer().describe(before, after)):
        return None
    config = rendered_config(folder)
    triplet = sample_triplet(index, config)
    change = triplet.change
    gold = change.before or change.after
    words = f"{gold.size} {gold.color} {gold.material} {gold.shape}"
    work = AnalysisConfig().work_size
    before, scale = resize_for_analysis(before, work)
    after, _ = resize_for_analysis(after, work)
    found = analyse_objects(before, after)
    if found is None:
        return "not a floor scene", change.type, words

    k_before = k_after = None
    lost = []
    if change.before is not None:
        k_before = gold_index(
            found.before, gold_box(change.before, triplet.default.camera, config, scale)
        )
        if k_before is None:
            lost.append("before")
    if change.after is not None:
        k_after = gold_index(
            found.after, gold_box(change.after, triplet.semantic.camera, config, scale)
        )
        if k_after is None:
            lost.append("after")
    if lost:
        side = "both" if len(lost) == 2 else lost[0]
        return f"not segmented ({side})", change.type, words
    pairs = dict(found.camera.pairs)
    if k_before is not None and k_before in pairs:
        if k_after is not None and pairs[k_before] == k_after:
            return "matched, judged unchanged", change.type, words
        return "matched to another", change.type, words
    return "segmented, left over, unsaid", change.type, words


def _job(args: tuple[str, int]) -> tuple[str, int, tuple[str, str, str] | None]:
    folder, index = args
    return folder, index, miss_stage(Path(folder), index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders of `spotdiff data clevr`")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args()
    jobs = []
    for folder in args.folders:
        if not (folder / "clevr.json").is_file():
            parser.error(f"{folder}: not a render of `spotdiff data clevr` (no clevr.json)")
        gold = json.loads((folder / "gold.json").read_text())
        jobs += [(str(folder), g["index"]) for g in sorted(gold.values(), key=lambda g: g["index"])]
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    unsegmented: Counter[str] = Counter()
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for folder, index, found in pool.map(_job, jobs, chunksize=4):
            if found is None:
                continue
            stage, kind, words = found
            cells[stage, kind].append(f"{Path(folder).name}:{index}")
            if stage.startswith("not segmented"):
                colour, material = words.split()[1:3]
                unsegmented[f"{colour} {material}"] += 1
    misses = sum(len(v) for v in cells.values())
    print(f"{len(jobs)} changed pairs, {misses} unreported")
    print(f"{'stage':32}" + "".join(f"{t:>9}" for t in TYPES) + f"{'all':>6}")
    for stage in STAGES:
        counts = [len(cells.get((stage, t), [])) for t in TYPES]
        print(f"{stage:32}" + "".join(f"{c:>9}" for c in counts) + f"{sum(counts):>6}")
    for (stage, kind), where in sorted(cells.items()):
        print(f"  {stage} / {kind}: {' '.join(where)}")
    if unsegmented:
        print("not segmented, by colour and material:", dict(unsegmented.most_common()))


if __name__ == "__main__":
    main()
