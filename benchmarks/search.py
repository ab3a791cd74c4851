"""How well ``spotdiff search`` finds events, how right ``spotdiff summary`` counts, and how
fast search is on a large report (not a test; issue 28).

    .venv/bin/python benchmarks/search.py [--reports DIR] [--events 10000]

1. **Recall** over ``annotations/search_queries.json``: the three reports (the two Intel clips
   and the motorway, ``spotdiff video CLIP --every 1s``) searched together, each query ranked
   three ways: meaning alone (the MiniLM cosine), filters alone (the nouns, colours, kinds,
   places and times the query names) and both (what ``spotdiff search`` does). recall@k =
   answers in the top k / min(k, answers), averaged over the queries.
2. **Summary counts** on the Intel clips against ``annotations/visits.json``: people and cars
   that came, and whether every claim links to events of the report.
3. **Latency** over a synthetic report of ``--events`` events (sentences drawn from the words
   the video pipeline uses): indexing on first use, a warm query (in-process and through the
   console script), filters alone, and the summary.

``--reports DIR``: folders named after each clip's stem (``DIR/intel_car-detection``...);
any that is missing is made there with ``spotdiff video`` (about 10 s a clip here).
``--weights FILE``: the recall with another encoder file, e.g. the float32 export
(``scripts/export_minilm.py --float32 --out /tmp/minilm_f32.npz``), to see what int8 costs.
"""

from __future__ import annotations

import os

# As `spotdiff search` does (cli/search_cmd.py): one BLAS thread, set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spotdiff_cli.embed import MiniLM, default_encoder  # noqa: E402
from spotdiff_cli.report.folder import load_report  # noqa: E402
from spotdiff_cli.report.search import filters_from_flags, search  # noqa: E402
from spotdiff_cli.report.summary import summarise  # noqa: E402

MEDIA = REPO.parent / "shared" / "media"
ANNOTATIONS = Path(__file__).resolve().parent / "annotations"
CLIPS = ("intel_car-detection.mp4", "intel_one-by-one-person-detection.mp4",
         "dvrscan_traffic_camera.mp4")  # fmt: skip
SPOTDIFF = Path(sys.executable).parent / "spotdiff"


def reports_in(folder: Path) -> dict[str, Path]:
    out = {}
    for clip in CLIPS:
        target = folder / Path(clip).stem
        if not (target / "timeline.json").is_file():
            print(f"making {target} ...", flush=True)
            subprocess.run(
                [str(SPOTDIFF), "-q", "video", str(MEDIA / clip), "--every", "1s", "-o",
                 str(target), "--overwrite"],
                check=True,
            )  # fmt: skip
        out[clip] = target
    return out


def recall(folders: dict[str, Path], weights: Path | None = None) -> None:
    queries = json.loads((ANNOTATIONS / "search_queries.json").read_text())["queries"]
    reports = [load_report(folders[c]) for c in CLIPS]
    by_clip = {Path(r.data["sources"][0]["source"]).name: r for r in reports}
    stale = []
    for q in queries:
        for a in q["answers"]:
            events = {e["id"]: e for e in by_clip[a["clip"]].data["sources"][0]["events"]}
            e = events.get(a["event"])
            lo, hi = a["window"]
            if e is None or e["end"] < lo - 1 or e["start"] > hi + 1:
                stale.append(f"{q['query']!r}: {a['clip']} #{a['event']}")
    if stale:
        print("annotations no longer fit the reports (re-annotate):\n  " + "\n  ".join(stale))
    encoder = MiniLM(weights) if weights else default_encoder()
    modes = ("meaning", "filters", "both")
    scores: dict[str, dict[int, list[float]]] = {m: {1: [], 3: []} for m in modes}
    print(
        f"\n{'query':58s}" + "".join(f"{m:>12s}" for m in modes) + "   (rank of the first answer)"
    )
    for q in queries:
        answers = {(a["clip"], a["event"]) for a in q["answers"]}
        ranks = []
        for mode in modes:
            # "flags": what the operator would add on the command line (--source ...).
            flags = filters_from_flags(**q.get("flags", {}))
            hits = search(reports, q["query"], flags, mode=mode, limit=None, encoder=encoder)
            got = [(Path(h.source).name, h.event["id"]) for h in hits]
            for k in (1, 3):
                scores[mode][k].append(len(answers & set(got[:k])) / min(k, len(answers)))
            first = next((i + 1 for i, g in enumerate(got) if g in answers), None)
            ranks.append(str(first) if first else "-")
        print(f"{q['query'][:57]:58s}" + "".join(f"{r:>12s}" for r in ranks))
    print(
        f"\nrecall over {len(queries)} queries, {sum(len(r.data['sources'][0]['events']) for r in reports)} events"
    )
    for mode in modes:
        print(
            f"  {mode:8s} recall@1 {statistics.mean(scores[mode][1]):.3f}"
            f"  recall@3 {statistics.mean(scores[mode][3]):.3f}"
        )


def counts(folders: dict[str, Path]) -> None:
    visits = json.loads((ANNOTATIONS / "visits.json").read_text())["clips"]
    print("\nsummary counts against annotations/visits.json")
    for clip in visits:
        if clip["clip"] not in folders:
            continue
        report = load_report(folders[clip["clip"]])
        (s,) = summarise([(str(report.path), report.data)]).sources
        nouns = [v["noun"] if isinstance(v["noun"], str) else v["noun"][0] for v in clip["visits"]]
        people, cars = nouns.count("person"), sum(1 for n in nouns if n == "car")
        events = {e["id"] for e in report.data["sources"][0]["events"]}
        linked = all(r.event in events for c in s.claims for r in c.events)
        said_cars = sum(
            1
            for e in report.data["sources"][0]["events"]
            if e.get("noun") == "car" and e["kind"] != "present" and e.get("track")
        )
        print(
            f"  {clip['clip']:42s} people {s.counts['people']} (annotated {people}), "
            f"cars {said_cars} (annotated {cars}); every claim links to an event: {linked}"
        )
        for c in s.claims:
            print(f"      {c.text}")


def synthetic(n: int, folder: Path) -> Path:
    rng = random.Random(28)
    nouns = ["person", "car", "truck", "bus", "bicycle", "dog"]
    colours = ["", "red ", "blue ", "white ", "grey ", "black ", "green ", "yellow "]
    places = ["the left", "the right", "the top", "the bottom", "the centre", "the lower left",
              "the lower right", "the upper left", "the upper right"]  # fmt: skip
    kinds = ["visited", "passed", "parked", "arrived", "left", "appeared", "disappeared"]
    events = []
    t = 0.0
    for i in range(1, n + 1):
        t += rng.expovariate(1 / 8.0)
        noun, colour, kind = rng.choice(nouns), rng.choice(colours), rng.choice(kinds)
        a, b = rng.sample(places, 2)
        stay = rng.choice([2, 5, 10, 20, 40])
        subject = f"a {colour}{noun}"
        text = {
            "visited": f"{subject} came in from {a}, stayed in {b} for {stay} s and left",
            "passed": f"{subject} went through from {a} to {b}",
            "parked": f"{subject} came in from {a}, stopped in {b} and was still there at the end",
            "arrived": f"{subject} appeared in {a} and was still there at the end",
            "left": f"{subject} was in {a} from the start and left to {b}",
            "appeared": f"{subject} appeared in {a}",
            "disappeared": f"the {colour}{noun} in {a} is gone",
        }[kind]
        sentences = [
            {"start": t, "end": t, "start_tc": "", "end_tc": "", "text": f"{subject} appeared in {a}",
             "kind": "appeared"},
            {"start": t + stay, "end": t + stay, "start_tc": "", "end_tc": "",
             "text": f"{subject} was gone from {b}", "kind": "disappeared"},
        ]  # fmt: skip
        events.append({
            "id": i, "start": round(t, 3), "end": round(t + stay, 3), "start_tc": f"{t:.3f}",
            "end_tc": f"{t + stay:.3f}", "seen": {"start": t, "end": t + stay}, "text": text,
            "kind": kind, "noun": noun, "sentences": sentences if kind == "visited" else [],
            "boxes": [], "pair_times": {"before": t, "after": t}, "picture": None,
            "track": [[t, 1, 1, 2, 2], [t + stay, 3, 1, 2, 2]] if kind not in ("appeared", "disappeared") else [],
            "detections": 1,
        })  # fmt: skip
    data = {
        "schema": "spotdiff.timeline/2", "tool": {"name": "spotdiff", "version": "0"},
        "complete": True, "settings": {},
        "sources": [{"source": "/night/cam.mp4", "path": "/night/cam.mp4", "info": {},
                     "complete": True, "error": None, "events": events}],
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "timeline.json").write_text(json.dumps(data))
    return folder


def latency(n: int) -> None:
    queries = ["a red car parked in the lower right", "a person who left to the bottom",
               "a white truck after 01:00:00", "a dog running through", "something gone from the top"]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        folder = synthetic(n, Path(tmp) / "big")
        encoder = default_encoder()
        report = load_report(folder)
        texts = {t for s in report.data["sources"] for e in s["events"]
                 for t in [e["text"], *(x["text"] for x in e["sentences"])]}  # fmt: skip
        t0 = time.perf_counter()
        search([report], queries[0], encoder=encoder)
        first = time.perf_counter() - t0
        warm = []
        for q in queries * 4:
            t0 = time.perf_counter()
            search([load_report(folder)], q, encoder=encoder)
            warm.append(time.perf_counter() - t0)
        words = []
        for q in queries * 4:
            t0 = time.perf_counter()
            search([load_report(folder)], q, mode="filters")
            words.append(time.perf_counter() - t0)
        cli = []
        for q in queries[:3]:
            t0 = time.perf_counter()
            subprocess.run([str(SPOTDIFF), "search", str(folder), q, "-n", "5"], check=True,
                           capture_output=True)  # fmt: skip
            cli.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        summarise([("big", report.data)])
        summary = time.perf_counter() - t0
        size = (folder / "search-index.npz").stat().st_size
    print(f"\nlatency over a synthetic report of {n} events ({len(texts)} distinct sentences)")
    print(f"  first search (embeds every sentence, writes the index): {first:.1f} s")
    print(f"  index beside the report: {size / 1e6:.1f} MB")
    print(
        f"  warm search, in-process (load report + index, embed query, rank): median {1000 * statistics.median(warm):.0f} ms"
    )
    print(f"  filters alone, in-process: median {1000 * statistics.median(words):.0f} ms")
    print(f"  `spotdiff search` end to end, warm: median {statistics.median(cli):.2f} s")
    print(f"  summary: {1000 * summary:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reports", type=Path, default=Path(tempfile.gettempdir()) / "spotdiff-search-reports"
    )
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--weights",
        type=Path,
        help="another encoder file for the recall (scripts/export_minilm.py --float32: what "
        "int8 costs)",
    )
    args = parser.parse_args()
    if MEDIA.is_dir():
        folders = reports_in(args.reports)
        recall(folders, args.weights)
        counts(folders)
    else:
        print(f"{MEDIA} is absent: recall and counts skipped")
    if not args.skip_latency:
        latency(args.events)


if __name__ == "__main__":
    main()
