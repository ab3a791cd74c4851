"""CLEVR-Change-style rendering speed: ``python benchmarks/clevr.py --pairs 12``.

Renders the same scenes twice into temporary folders, once in this process (one render thread)
and once with ``--jobs`` processes (default: one per core), and prints scenes per second (each
scene is three images, and two pairs: a change and a distractor), the speed-up of the parallel
run over the single-process one measured in this same run, and how long ``--extrapolate`` scenes
would take at the parallel speed. Both runs must give byte-identical files; it says if not.
"""

from __future__ import annotations

import argparse
import filecmp
import tempfile
from pathlib import Path

from spotdiff_cli.data.clevr_render import default_jobs, render_clevr_change
from spotdiff_cli.data.clevr_scene import PRESETS


def _same_files(a: Path, b: Path) -> bool:
    names = sorted(
        p.relative_to(a) for p in a.rglob("*") if p.is_file() and not p.name.startswith(".")
    )
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=12, help="scenes per run")
    parser.add_argument("--preset", default="clevr", help="easy, clevr or wide")
    parser.add_argument("--width", type=int, help="default: the preset's")
    parser.add_argument("--height", type=int, help="default: the preset's")
    parser.add_argument("--spp", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--extrapolate", type=int, default=3000, help="scenes to estimate for")
    args = parser.parse_args()
    look = PRESETS[args.preset]
    args.width, args.height = args.width or look.width, args.height or look.height
    settings = dict(
        pairs=args.pairs, width=args.width, height=args.height, spp=args.spp, preset=args.preset
    )
    with tempfile.TemporaryDirectory() as tmp:
        one = render_clevr_change(Path(tmp) / "one", jobs=1, **settings)
        many = render_clevr_change(Path(tmp) / "many", jobs=args.jobs, **settings)
        identical = _same_files(one.out, many.out)
    size = f"{args.preset}, {args.width}x{args.height}, {args.spp} spp"
    for label, run in (("1 process", one), (f"{many.jobs} processes", many)):
        print(
            f"{label:>12}: {run.pairs} scenes ({size}) in {run.seconds:.1f} s: "
            f"{run.scenes_per_second:.3f} scenes/s = {2 * run.scenes_per_second:.3f} pairs/s"
        )
    ratio = many.scenes_per_second / one.scenes_per_second if one.scenes_per_second else 0.0
    hours = args.extrapolate / many.scenes_per_second / 3600 if many.scenes_per_second else 0.0
    print(f"speed-up {ratio:.2f}x with {many.jobs} processes; files identical: {identical}")
    print(f"{args.extrapolate} scenes at this speed: about {hours:.1f} h")


if __name__ == "__main__":
    main()
