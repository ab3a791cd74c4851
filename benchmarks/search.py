"""How well ``spotdiff search`` finds events, how right ``spotdiff summary`` counts, and how
fast search is on a large report (not a test; issue 28).

    .venv/bin/python benchmarks/search.py [--reports DIR] [--set all|tuned|heldout|judge|judge2|judge3]
        [--events 10000]

1. **Recall** over five query sets, each scored on its own:

   - ``annotations/search_queries.json`` (18 queries; the ranking weights of report/search.py
     were set while looking at them);
   - ``annotations/search_queries_heldout.json`` (16, written with their answers before search
     was run on them; its misses were studied on 2026-11-26, so it no longer judges);
   - ``annotations/search_queries_judge.json`` (16, written blind that day; run once at
     b113481: 0.646, then spent);
   - ``annotations/search_queries_judge2.json`` (16, written blind after that; run once at
     194c981: 0.719, then spent);
   - ``annotations/search_queries_judge3.json`` (16, written by a helper who never read the
     search code, from the footage's facts).

   The three reports (the two Intel clips and
   the motorway, ``spotdiff video CLIP --every 1s``) are searched together, each query ranked
   three ways: meaning alone (the MiniLM cosine), filters alone (the nouns, colours, kinds,
   places and times the query names) and both (what ``spotdiff search`` does). recall@k =
   answers in the top k / min(k, answers), averaged over the queries.

   An answer is a thing of the footage, not an event number (numbers move whenever the
   pipeline changes): its clip, its time window, and optionally the nouns or kinds its event
   may carry. Its event is the one of that clip whose [start, end] (at least 1 s long) best
   overlaps the window, IoU >= 0.3, one event per thing and one thing per event, best overlap
   first (``match_answers``; as ``visits.py``'s ``match()``), else an instant event (a thing
   "is gone" at one sample) inside the window; the things of both sets are matched together,
   and which event each thing got is printed first. A thing with no event cannot be found: it
   counts as missed.
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


MIN_IOU = 0.3  # as benchmarks/visits.py's match(): less is a different thing at the same time
MIN_SPAN = 1.0  # s: the reports sample every second; an event seen at one sample stands for it
WHOLE_FRAME = ("lighting", "scene", "camera")  # never a thing of the footage
VEHICLES = {"car", "truck", "bus", "motorcycle", "bicycle", "vehicle"}
QUERY_SETS = {
    "tuned": ("search_queries.json", "tuned: the ranking weights were set on these"),
    "heldout": ("search_queries_heldout.json", "held out: never used to set a weight"),
    "judge": ("search_queries_judge.json", "judge: written blind, run once to report"),
    "judge2": ("search_queries_judge2.json", "judge2: written blind after judge was spent"),
    "judge3": ("search_queries_judge3.json", "judge3: written by a helper who never saw search"),
}

# A thing of the footage: (clip, window, nouns, kinds), and which of the query's identical
# answers it is (two cars that came and stayed in the same seconds are two things). Answers
# with the same clip, window, nouns and kinds are the same thing in every query; "what" only
# says in words what it is.
Thing = tuple[str, tuple[float, float], tuple[str, ...], tuple[str, ...], int]


def _words(value: str | list[str] | None) -> tuple[str, ...]:
    return () if value is None else (value,) if isinstance(value, str) else tuple(value)


def things_of(query: dict) -> list[Thing]:
    """The query's answers as things, in order."""
    out: list[Thing] = []
    for a in query["answers"]:
        lo, hi = a["window"]
        key = (a["clip"], (float(lo), float(hi)), _words(a.get("noun")), _words(a.get("kind")))
        out.append((*key, sum(t[:4] == key for t in out)))
    return out


def interval(event: dict) -> tuple[float, float]:
    """The event's [start, end], at least MIN_SPAN long (a thing gone between two samples is
    an event of no length at the second sample)."""
    lo, hi = float(event["start"]), float(event["end"])
    if hi - lo < MIN_SPAN:
        mid = (lo + hi) / 2
        lo, hi = mid - MIN_SPAN / 2, mid + MIN_SPAN / 2
    return lo, hi


def iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    union = max(a[1], b[1]) - min(a[0], b[0])
    return max(0.0, inter) / union if union > 0 else 0.0


def allows(thing: Thing, event: dict) -> bool:
    """Whether the event may be the thing: not a whole-frame event (unless the answer names its
    kind), of a kind and a noun the answer allows if it names any. A vaguer noun never
    contradicts: "object" may be anything, "vehicle" any vehicle (the pixel captioner's
    words for a lorry it saw leave)."""
    _, _, nouns, kinds, _ = thing
    if kinds and event["kind"] not in kinds:
        return False
    if event["kind"] in WHOLE_FRAME and event["kind"] not in kinds:
        return False
    noun = event.get("noun")
    return (
        not nouns
        or noun in nouns
        or noun == "object"
        or (noun == "vehicle" and bool(VEHICLES & set(nouns)))
    )


def match_answers(things: list[Thing], by_clip: dict[str, dict]) -> dict[Thing, tuple[str, int]]:
    """Thing -> (clip, event id): in each clip, one event per thing and one thing per event.

    First by temporal overlap, best first: the IoU of the event's interval (at least MIN_SPAN
    long) and the annotated window, at least MIN_IOU. Then a thing still without an event
    takes an instant event (something appeared or is gone, at one sample) inside its window
    (a sample of slack either side), the closest to its middle: a lorry's "is gone" at the
    second it left answers for the lorry, but an instant cannot overlap a long window by IoU.
    Only events the answer allows count (``allows``). All things of both query sets are
    matched together, so that the red car of one query and the silver car of another (in
    view at the same time) do not take one event."""
    overlaps, instants = [], []
    for ti, t in enumerate(things):
        clip, (lo, hi), *_ = t
        for ei, e in enumerate(by_clip[clip]["events"]):
            if not allows(t, e):
                continue
            overlap = iou(interval(e), (lo, hi))
            if overlap >= MIN_IOU:
                overlaps.append((-overlap, ti, ei))
            elif e["start"] == e["end"] and lo - MIN_SPAN <= e["start"] <= hi + MIN_SPAN:
                instants.append((abs(e["start"] - (lo + hi) / 2), ti, ei))
    matched: dict[Thing, tuple[str, int]] = {}
    taken: set[tuple[str, int]] = set()
    for _, ti, ei in sorted(overlaps) + sorted(instants):
        t = things[ti]
        event = (t[0], by_clip[t[0]]["events"][ei]["id"])
        if t in matched or event in taken:
            continue
        matched[t] = event
        taken.add(event)
    return matched


def load_queries(name: str) -> list[dict]:
    return json.loads((ANNOTATIONS / QUERY_SETS[name][0]).read_text())["queries"]


def recall(folders: dict[str, Path], sets: list[str], weights: Path | None = None) -> None:
    reports = [load_report(folders[c]) for c in CLIPS]
    by_clip = {Path(r.data["sources"][0]["source"]).name: r.data["sources"][0] for r in reports}
    # Every thing of every set, so that the matching does not depend on the sets scored.
    what: dict[Thing, str] = {}
    for name in QUERY_SETS:
        for q in load_queries(name):
            for t, a in zip(things_of(q), q["answers"], strict=True):
                what.setdefault(t, a.get("what", ""))
    things = list(what)
    matched = match_answers(things, by_clip)
    print(f"\nthings of the footage -> events of the reports (IoU >= {MIN_IOU})")
    for t in things:
        got = f"#{matched[t][1]}" if t in matched else "none (the report has no event of it)"
        copy = f" ({t[4] + 1})" if t[4] else ""
        print(
            f"  {Path(t[0]).stem[:14]:14s} {t[1][0]:6g}-{t[1][1]:<6g} {what[t][:56]}{copy}: {got}"
        )
    encoder = MiniLM(weights) if weights else default_encoder()
    n_events = sum(len(s["events"]) for s in by_clip.values())
    modes = ("meaning", "filters", "both")
    for name in sets:
        queries = load_queries(name)
        scores: dict[str, dict[int, list[float]]] = {m: {1: [], 3: []} for m in modes}
        print(f"\n{QUERY_SETS[name][1]} ({QUERY_SETS[name][0]})")
        print(
            f"{'query':58s}"
            + "".join(f"{m:>12s}" for m in modes)
            + f"{'both@3':>8s}   (rank of the first answer; both's recall@3)"
        )
        for q in queries:
            wanted = things_of(q)
            answers = {matched[t] for t in wanted if t in matched}
            ranks = []
            for mode in modes:
                # "flags": what the operator would add on the command line (--source ...).
                flags = filters_from_flags(**q.get("flags", {}))
                hits = search(reports, q["query"], flags, mode=mode, limit=None, encoder=encoder)
                got = [(Path(h.source).name, h.event["id"]) for h in hits]
                for k in (1, 3):
                    # An answer without an event counts as one not found.
                    scores[mode][k].append(len(answers & set(got[:k])) / min(k, len(wanted)))
                first = next((i + 1 for i, g in enumerate(got) if g in answers), None)
                ranks.append(str(first) if first else "-")
            print(
                f"{q['query'][:57]:58s}"
                + "".join(f"{r:>12s}" for r in ranks)
                + f"{scores['both'][3][-1]:>8.2f}"
            )
        print(f"recall over {len(queries)} queries ({name}), {n_events} events")
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
        "--set",
        choices=("tuned", "heldout", "judge", "judge2", "judge3", "all"),
        default="all",
        help="which queries: the 18 the weights were set on, the held-out ones, the judging set "
        "(16, written blind after the held-out set's misses had been studied), or all three "
        "(each scored on its own)",
    )
    parser.add_argument(
        "--weights",
        type=Path,
        help="another encoder file for the recall (scripts/export_minilm.py --float32: what "
        "int8 costs)",
    )
    args = parser.parse_args()
    if MEDIA.is_dir():
        folders = reports_in(args.reports)
        recall(folders, list(QUERY_SETS) if args.set == "all" else [args.set], args.weights)
        counts(folders)
    else:
        print(f"{MEDIA} is absent: recall and counts skipped")
    if not args.skip_latency:
        latency(args.events)


if __name__ == "__main__":
    main()
