"""How well ``spotdiff video`` tells visits in real footage (not a test): each annotated visit of
``benchmarks/annotations/visits.json`` scored against the events of a run.

    .venv/bin/python benchmarks/visits.py [--every 1s,0.2s] [--before PATH]

Per clip and sampling it prints:

- found: visits that some object event overlaps (a second of slack either side);
- one event: visits covered by exactly one event that covers no other visit (one visit, one
  event, as an operator reads it);
- noun right: of the visits found, those whose events name the annotated thing;
- camera / lighting: camera-move and lighting events, all wrong on these fixed, steadily lit
  cameras (auto-exposure is the camera's own);
- other: events that overlap no visit.

``--work-size N``: run both trees analysing at this long side (``spotdiff video --work-size``).

``--before PATH``: also score a checkout of another revision (its ``spotdiff_cli`` imported by a
child process with that tree first on ``sys.path``), so a change is measured against what it
replaced in one run. Clips marked ``tuned_on: false`` were held out of all development.
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
ANNOTATIONS = Path(__file__).resolve().parent / "annotations" / "visits.json"
SLACK = 1.0  # s: an event this close to a visit overlaps it
WHOLE_FRAME = ("lighting", "scene", "camera")

# Run in a child process so that --before can import another revision's spotdiff_cli.
_CHILD = """
import json, sys
from spotdiff_cli.config import Settings, resolve
from spotdiff_cli import api
clip, every, analysis = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
settings = resolve(Settings(), None, video={"every": every}, analysis=analysis or None)
(result,) = api.describe_video([clip], settings)
print(json.dumps([
    {"start": e.start, "end": e.end, "kind": e.kind, "noun": e.noun, "text": e.text}
    for e in result.events
]))
"""


def events_of(tree: Path, clip: Path, every: str, analysis: dict | None = None) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(clip), every, json.dumps(analysis or {})],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {clip.name} --every {every} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def overlaps(event: dict, visit: dict) -> bool:
    return event["start"] <= visit["end"] + SLACK and event["end"] >= visit["start"] - SLACK


def nouns_of(visit: dict) -> set[str]:
    noun = visit["noun"]
    return set(noun) if isinstance(noun, list) else {noun}


def iou(event: dict, visit: dict) -> float:
    """Temporal intersection over union of an event and a visit."""
    inter = min(event["end"], visit["end"]) - max(event["start"], visit["start"])
    union = max(event["end"], visit["end"]) - min(event["start"], visit["start"])
    return max(0.0, inter) / union if union > 0 else float(inter >= 0)


def match(visits: list[dict], events: list[dict]) -> dict[int, int]:
    """Visit index -> event index, one to one, best temporal overlap first (two cars in view
    at once are two visits, each owed its own event). Between overlaps equal to a hundredth,
    an event naming the visit's thing goes first: the GIF's car, cyclist and pedestrian are
    all in view from start to end, and by time alone the car's event went to the pedestrian."""
    pairs = sorted(
        (
            (round(iou(e, v), 2), e.get("noun") in nouns_of(v), -vi, -ei)
            for vi, v in enumerate(visits)
            for ei, e in enumerate(events)
        ),
        reverse=True,
    )
    matched: dict[int, int] = {}
    taken: set[int] = set()
    for overlap, _, vi, ei in pairs:
        vi, ei = -vi, -ei
        if overlap < 0.3 or vi in matched or ei in taken:
            continue
        matched[vi] = ei
        taken.add(ei)
    return matched


def score(visits: list[dict], events: list[dict]) -> dict[str, int]:
    objects = [e for e in events if e["kind"] not in WHOLE_FRAME]
    matched = match(visits, objects)
    taken = set(matched.values())
    covering = [[i for i, e in enumerate(objects) if overlaps(e, v)] for v in visits]
    found = [bool(c) for c in covering]
    # One visit, one event: it has its own event, and no unclaimed fragment overlaps it.
    one = [vi in matched and all(i in taken for i in c) for vi, c in enumerate(covering)]
    noun_right = [
        vi in matched and objects[matched[vi]]["noun"] in nouns_of(v) for vi, v in enumerate(visits)
    ]
    return {
        "visits": len(visits),
        "found": sum(found),
        "one event": sum(one),
        "noun right": sum(noun_right),
        "camera": sum(e["kind"] == "camera" for e in events),
        "lighting": sum(e["kind"] == "lighting" for e in events),
        "other": sum(not any(overlaps(e, v) for v in visits) for e in objects),
        "events": len(events),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", default="1s,0.2s", help="samplings, comma-separated")
    parser.add_argument("--before", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--show", action="store_true", help="print every event's sentence")
    parser.add_argument(
        "--work-size", type=int, help="analyse at this long side (spotdiff video --work-size)"
    )
    args = parser.parse_args()
    analysis = {"work_size": args.work_size} if args.work_size is not None else None
    clips = json.loads(ANNOTATIONS.read_text())["clips"]
    trees = [("before", args.before)] if args.before else []
    trees.append(("now", REPO))
    columns = [
        "visits",
        "found",
        "one event",
        "noun right",
        "camera",
        "lighting",
        "other",
        "events",
    ]
    print(f"{'clip':42} {'every':>5} {'tree':>6}  " + "  ".join(f"{c:>10}" for c in columns))
    for entry in clips:
        clip = MEDIA / entry["clip"]
        if not clip.is_file():
            print(f"{entry['clip']}: not in ../shared/media, skipped")
            continue
        name = entry["clip"] + ("" if entry["tuned_on"] else " (held out)")
        for every in args.every.split(","):
            for label, tree in trees:
                events = events_of(tree, clip, every, analysis)
                row = score(entry["visits"], events)
                print(
                    f"{name:42} {every:>5} {label:>6}  "
                    + "  ".join(f"{row[c]:>10}" for c in columns),
                    flush=True,
                )
                if args.show:
                    for e in events:
                        print(f"    {e['start']:7.2f}-{e['end']:7.2f} {e['kind']:9} {e['text']}")


if __name__ == "__main__":
    main()
