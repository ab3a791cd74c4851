"""``spotdiff caption`` on real frame pairs annotated by hand (not a test): is the changed thing
named, and is the kind of change right?

    .venv/bin/python benchmarks/real_pairs.py [--model grounded] [--before PATH] [--show]

For each annotated change of ``benchmarks/annotations/real_pairs.json`` the sentences are read
with the evaluation's lexicon (evaluate/lexicon.py): **named** when some sentence names the
thing (a vehicle word for a car, a person word for a person), **kind right** when such a
sentence (any sentence, for a change with no fair noun) says the right kind (add, drop, move).
Two changes of the same kind and noun in one pair need two such sentences. ``--before PATH``
scores another revision's checkout in the same run. Pairs marked held out were never looked at
while developing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO.parent / "shared" / "media"
ANNOTATIONS = Path(__file__).resolve().parent / "annotations" / "real_pairs.json"

# A child process, so that --before can import another revision's spotdiff_cli.
_CHILD = """
import json, sys
import cv2
from spotdiff_cli import api
from spotdiff_cli.config import CaptionConfig
pairs, model = json.loads(sys.argv[1]), sys.argv[2]
media = sys.argv[3]
def frame(clip, index):
    cap = cv2.VideoCapture(f"{media}/{clip}")
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, image = cap.read()
    if not ok:
        raise SystemExit(f"{clip}: no frame {index}")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
out = []
for p in pairs:
    if "images" in p:
        a, b = (f"{media}/{name}" for name in p["images"])
    else:
        a, b = frame(p["clip"], p["before"]), frame(p["clip"], p["after"])
    report = api.describe_pair(a, b, caption=CaptionConfig(model=model))
    out.append([s.text for s in report.sentences])
print(json.dumps(out))
"""


def sentences_of(tree: Path, pairs: list[dict], model: str) -> list[list[str]]:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(pairs), model, str(MEDIA)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def judge(changes: list[dict], sentences: list[str]) -> tuple[int, int]:
    """(changes named, changes of the right kind), each sentence used for one change at most."""
    from spotdiff_cli.evaluate import lexicon

    readings = [lexicon.read(s) for s in sentences]
    named = right = 0
    used_named: set[int] = set()
    used_kind: set[int] = set()
    for change in changes:
        noun = change["noun"]
        fits = [
            i for i, r in enumerate(readings) if noun is None or lexicon.noun_matches(r.noun, noun)
        ]
        free = [i for i in fits if i not in used_named]
        if noun is not None and free:
            named += 1
            used_named.add(free[0])
        kind = [i for i in fits if readings[i].type == change["type"] and i not in used_kind]
        if kind:
            right += 1
            used_kind.add(kind[0])
    return named, right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="grounded")
    parser.add_argument("--before", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--show", action="store_true", help="print the sentences of every pair")
    args = parser.parse_args()
    pairs = json.loads(ANNOTATIONS.read_text())["pairs"]
    pairs = [p for p in pairs if (MEDIA / (p["clip"] if "clip" in p else p["images"][0])).is_file()]
    if not pairs:
        raise SystemExit("no annotated pair's media in ../shared/media")
    trees = ([("before", args.before)] if args.before else []) + [("now", REPO)]
    print(f"{'tree':>6} {'pairs':>9}  {'changes':>7} {'named':>12} {'kind right':>12}")
    for label, tree in trees:
        said = sentences_of(tree, pairs, args.model)
        for subset, keep in (("all", None), ("held out", True), ("developed", False)):
            chosen = [(p, s) for p, s in zip(pairs, said) if keep is None or p["held_out"] == keep]
            changes = sum(len(p["changes"]) for p, _ in chosen)
            nameable = sum(c["noun"] is not None for p, _ in chosen for c in p["changes"])
            named = right = 0
            for p, s in chosen:
                n, r = judge(p["changes"], s)
                named, right = named + n, right + r
            print(
                f"{label:>6} {subset:>9}  {changes:>7} {f'{named}/{nameable}':>12} "
                f"{f'{right}/{changes}':>12}"
            )
        if args.show:
            for p, s in zip(pairs, said):
                where = p.get("clip", " vs ".join(p.get("images", [])))
                print(f"    {where} {p.get('before', '')}->{p.get('after', '')}: {s}")


if __name__ == "__main__":
    main()
