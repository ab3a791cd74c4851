"""A night in one paragraph: what a guard would write after watching the footage, told from
the timeline's own structures (never from the video again), every sentence linked to the
events it rests on.

Per source: who and what came and went (people, vehicles, other objects: the tracked events
of ``timeline/tracks.py`` by their kind: ``visited`` / ``passed`` came and went, ``arrived`` /
``parked`` came and stayed, ``left`` was there and went, ``present`` stayed throughout), how
long the visits were and the longest, when the scene was busiest (the most objects in view at
once, else the window with the most events), what is different at the end from the start
(still there, gone, left behind), and what is unusual for that source (a camera move, a long
lighting change, a run that stopped early, activity in an hour that source is usually quiet).
Changes not tied to a tracked object are counted apart. Over several sources, the totals.

Deterministic: the same report gives the same words. Each claim is a :class:`Claim`, its
events :class:`EventRef` values (report folder, source number, event id) that the writers turn
into links (``timeline.html#s1-e3``).
"""

from __future__ import annotations

import datetime
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "spotdiff.summary/1"
PERSON = "person"
# As timeline/tracks.py (kept here, not imported: the report layer reads dicts, and a noun
# the tracker learns later is still a vehicle here by this list).
VEHICLES = {"car", "bus", "truck", "motorcycle", "bicycle", "train", "boat"}
PLURALS = {"person": "people", "bus": "buses"}
NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
TRACK_KINDS = {"visited", "passed", "arrived", "parked", "left", "present"}
CAME_AND_WENT = {"visited", "passed"}
LONG_LIGHTING = 60.0  # s: a lighting change this long is worth a sentence of its own
QUIET_SHARE = 0.1  # an hour with at most this share of the busiest hour's events is quiet
QUIET_MIN_BUSIEST = 5  # ... once the busiest hour has this many (else nothing is "usual")


@dataclass(frozen=True)
class EventRef:
    """One event a claim rests on: its report folder (as given), source number (1-based, the
    ``s1`` of the page's anchors) and event id."""

    report: str
    source: int
    event: int

    @property
    def anchor(self) -> str:
        return f"s{self.source}-e{self.event}"


@dataclass(frozen=True)
class Claim:
    """One sentence of the summary. topic: counts, visits, busiest, end, unusual, other."""

    topic: str
    text: str
    events: tuple[EventRef, ...] = ()


@dataclass
class SourceSummary:
    report: str
    index: int
    source: str
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)


@dataclass
class Summary:
    sources: list[SourceSummary]
    overall: list[Claim]


# -- words -------------------------------------------------------------------------------------


def plural(noun: str, n: int) -> str:
    """ "a person", "two people", "12 cars"."""
    if n == 1:
        return f"{'an' if noun[:1] in tuple('aeiou') else 'a'} {noun}"
    return f"{NUMBERS.get(n, str(n))} {PLURALS.get(noun, noun + 's')}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _when(e: dict[str, Any], end: bool = False) -> str:
    """An event's time as a guard reads it: the wall clock of a live stream, else the position
    in the footage."""
    wall = e.get("wall_end" if end else "wall_start")
    if wall:
        return str(wall)[11:19]
    return _clock(_seen(e)[1] if end else _seen(e)[0])


def _seen(e: dict[str, Any]) -> tuple[float, float]:
    seen = e.get("seen") or {}
    return float(seen.get("start", e["start"])), float(seen.get("end", e["end"]))


def _group(noun: str) -> str:
    return "people" if noun == PERSON else "vehicles" if noun in VEHICLES else "other"


# -- per source --------------------------------------------------------------------------------


def summarise(reports: Iterable[tuple[str, dict[str, Any]]]) -> Summary:
    """The summary of one or more reports: (folder as given, timeline dict) pairs."""
    sources: list[SourceSummary] = []
    hours = _hour_counts(reports := list(reports))
    for report, data in reports:
        for index, s in enumerate(data.get("sources") or [], 1):
            sources.append(_source(report, index, s, hours.get(s["source"])))
    return Summary(sources, _overall(sources) if len(sources) > 1 else [])


def _refs(report: str, index: int, events: Iterable[dict[str, Any]]) -> tuple[EventRef, ...]:
    return tuple(EventRef(report, index, int(e["id"])) for e in events)


def _tracked(e: dict[str, Any]) -> bool:
    return bool(e.get("track")) or e.get("kind") in TRACK_KINDS


def _source(
    report: str, index: int, s: dict[str, Any], hours: Counter[int] | None
) -> SourceSummary:
    name = str(s.get("path", s["source"])).replace("\\", "/").rsplit("/", 1)[-1] or s["source"]
    out = SourceSummary(report, index, s["source"], name)
    events = list(s.get("events") or [])
    refs = lambda es: _refs(report, index, es)  # noqa: E731 - one line, read below many times
    if s.get("error") and not events and s.get("complete"):
        out.claims.append(Claim("unusual", f"Skipped: {s['error']}."))
        return out
    tracked = [e for e in events if _tracked(e)]
    loose = [e for e in events if not _tracked(e)]
    _counts(out, tracked, refs)
    _visits(out, tracked, refs)
    _busiest(out, tracked, events, refs)
    _ends(out, tracked, refs)
    _loose(out, loose, refs)
    _unusual(out, s, events, hours, refs)
    if not events:
        out.claims.insert(0, Claim("counts", "Nothing changed."))
    out.counts["events"] = len(events)
    return out


def _counts(out: SourceSummary, tracked: list[dict[str, Any]], refs: Callable) -> None:
    """How many of each came and went, came and stayed, were there and went."""
    by_noun: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in tracked:
        by_noun[e.get("noun") or "object"].append(e)
    order = sorted(by_noun, key=lambda n: (["people", "vehicles", "other"].index(_group(n)), n))
    for group in ("people", "vehicles", "other"):
        came = [e for n in by_noun if _group(n) == group for e in by_noun[n]]
        out.counts[group] = sum(1 for e in came if e["kind"] != "present")
        out.counts[f"{group}_came_and_went"] = sum(1 for e in came if e["kind"] in CAME_AND_WENT)
    for noun in order:
        es = by_noun[noun]
        verb = "drove" if noun in VEHICLES else "walked" if noun == PERSON else "went"
        kinds = [
            (CAME_AND_WENT, "came and went"),
            ({"arrived", "parked"}, "came and stayed"),
            ({"left"}, "left (there from the start)"),
            ({"present"}, "stayed from start to end"),
        ]
        parts = []
        for chosen, phrase in kinds:
            these = [e for e in es if e["kind"] in chosen]
            if not these:
                continue
            passing = sum(1 for e in these if e["kind"] == "passed")
            if passing == len(these) == 1:
                phrase = f"{verb} through"
            elif passing and passing == len(these) > 1:
                phrase += f", all {verb} through"
            elif passing:
                phrase += f", {NUMBERS.get(passing, str(passing))} only {verb} through"
            parts.append((len(these), phrase))
        if len(parts) == 1:
            text = f"{_capital(plural(noun, len(es)))} {parts[0][1]}."
        else:
            text = (
                f"{_capital(plural(noun, len(es)))} in all: "
                + "; ".join(f"{n} {phrase}" for n, phrase in parts)
                + "."
            )
        out.claims.append(Claim("counts", text, refs(sorted(es, key=lambda e: e["id"]))))


def _visits(out: SourceSummary, tracked: list[dict[str, Any]], refs: Callable) -> None:
    stays = [e for e in tracked if e["kind"] != "present"]
    if not stays:
        return
    lengths = [_seen(e)[1] - _seen(e)[0] for e in stays]
    longest = max(range(len(stays)), key=lambda i: (lengths[i], -stays[i]["id"]))
    e = stays[longest]
    who = plural(e.get("noun") or "object", 1)
    still = " and still there at the end" if e["kind"] in ("arrived", "parked") else ""
    text = f"The longest stay: {who}, {_duration(lengths[longest])} from {_when(e)}{still}."
    if len(stays) > 2:
        spread = (
            f"Stays lasted {_duration(min(lengths))} to {_duration(max(lengths))} "
            f"(median {_duration(statistics.median(lengths))})"
            if _duration(min(lengths)) != _duration(max(lengths))
            else f"Every stay lasted {_duration(max(lengths))}"
        )
        text = f"{spread}; the longest: {who} from {_when(e)} to {_when(e, end=True)}{still}."
    out.claims.append(Claim("visits", text, refs([e])))


# In view at once, from this many on the tracker's stays are read as traffic (see _busiest).
CROWDED = 4


def _busiest(
    out: SourceSummary, tracked: list[dict[str, Any]], events: list[dict[str, Any]], refs: Callable
) -> None:
    """The moment with the most tracked objects in view at once; with never more than one, the
    window with the most events."""
    marks = sorted(
        [(_seen(e)[0], 1, i) for i, e in enumerate(tracked)]
        + [(_seen(e)[1], -1, i) for i, e in enumerate(tracked)],
        key=lambda m: (m[0], -m[1]),  # one that comes at the moment another goes: both counted
    )
    live: set[int] = set()
    best: tuple[int, float, set[int]] = (0, 0.0, set())
    for t, step, i in marks:
        if step > 0:
            live.add(i)
            if len(live) > best[0]:
                best = (len(live), t, set(live))
        else:
            live.discard(i)
    if best[0] >= 2:
        together = [tracked[i] for i in sorted(best[2])]
        nouns = Counter(e.get("noun") or "object" for e in together)
        what = _join([plural(n, c) for n, c in nouns.most_common()])
        until = min(_seen(e)[1] for e in together)
        at = _clock(best[1])
        wall = together[0].get("wall_start")
        if wall:  # a live stream: the moment as a wall-clock time
            at = _wall_plus(wall, best[1] - _seen(together[0])[0])
        text = f"Busiest at {at}, for {_duration(until - best[1])}: {what} in view at once."
        if best[0] >= CROWDED:
            noun = nouns.most_common(1)[0][0]
            # Dense traffic: boxes of different vehicles a look apart are closer than one
            # vehicle's own move, and a track can carry on with the wrong one (the motorway
            # clip had "a car parked at 00:00:03 is still there"). Say so, once, here.
            text += (
                " With this many in view, a track can pass from one to another between looks:"
                " read the stays and what is still there at the end as traffic, not as single"
                f" {PLURALS.get(noun, noun + 's')}."
            )
        out.claims.append(Claim("busiest", text, refs(sorted(together, key=lambda e: e["id"]))))
        return
    if len(events) < 3:
        return
    starts = sorted(_seen(e)[0] for e in events)
    span = max(starts[-1] - starts[0], 1.0)
    steps = [10, 30, 60, 300, 900, 1800, 3600, 7200, 21600]
    width = next((w for w in steps if span / w <= 8), steps[-1])
    bins: Counter[int] = Counter(int(t // width) for t in starts)
    top, n = min(bins.items(), key=lambda kv: (-kv[1], kv[0]))
    if n < 2:
        return
    inside = [e for e in events if int(_seen(e)[0] // width) == top]
    span = f"between {_clock(top * width)} and {_clock((top + 1) * width)}"
    wall = inside[0].get("wall_start")
    if wall:  # a live stream: the window on the wall clock
        offset = top * width - _seen(inside[0])[0]
        span = f"between {_wall_plus(wall, offset)} and {_wall_plus(wall, offset + width)}"
    out.claims.append(
        Claim(
            "busiest",
            f"Never more than one followed object in view at once; the most events ({n}) {span}."
            if tracked
            else f"Most activity {span}: {n} events.",
            refs(inside),
        )
    )


def _wall_plus(iso: str, seconds: float) -> str:
    try:
        moment = datetime.datetime.fromisoformat(iso) + datetime.timedelta(seconds=seconds)
    except ValueError:
        return iso[11:19]
    return moment.isoformat()[11:19]


def _ends(out: SourceSummary, tracked: list[dict[str, Any]], refs: Callable) -> None:
    """What is different at the end from the start."""
    parts, used = [], []
    for e in tracked:
        noun = e.get("noun") or "object"
        subject = plural(noun, 1)
        if e["kind"] == "parked":
            parts.append(f"{subject} parked at {_when(e)} is still there")
        elif e["kind"] == "arrived":
            how = "left behind" if _group(noun) == "other" else "that arrived"
            parts.append(f"{subject} {how} at {_when(e)} is still there")
        elif e["kind"] == "left":
            parts.append(f"{subject} that was there at the start is gone (at {_when(e, end=True)})")
        else:
            continue
        used.append(e)
    if parts:
        out.claims.append(
            Claim("end", f"At the end, unlike the start: {_join(parts)}.", refs(used))
        )
    elif tracked:
        same = "as at the start" if any(e["kind"] == "present" for e in tracked) else "empty"
        out.claims.append(
            Claim("end", f"At the end the scene is {same}: everything that came also went.")
        )


def _loose(out: SourceSummary, loose: list[dict[str, Any]], refs: Callable) -> None:
    """Changes told from pixels alone (no tracked object), by kind."""
    loose = [e for e in loose if e["kind"] not in ("camera", "lighting", "scene")]
    if not loose:
        return
    kinds = Counter(e["kind"] for e in loose)
    words = {
        "appeared": "appeared",
        "disappeared": "gone",
        "moved": "moved",
        "changed": "changed",
        "visited": "came and went",
    }
    parts = [f"{n} {words.get(k, k.replace('_', ' '))}" for k, n in kinds.most_common()]
    what = "change" if len(loose) == 1 else "changes"
    first = loose[0]["text"]
    out.counts["other_changes"] = len(loose)
    out.claims.append(
        Claim(
            "other",
            f"{_capital(NUMBERS.get(len(loose), str(len(loose))) if len(loose) > 1 else 'one')} "
            f"{what} not tied to a followed object ({_join(parts)}), such as: {first}.",
            refs(loose),
        )
    )


def _unusual(
    out: SourceSummary,
    s: dict[str, Any],
    events: list[dict[str, Any]],
    hours: Counter[int] | None,
    refs: Callable,
) -> None:
    camera = [e for e in events if e["kind"] == "camera"]
    if camera:
        times = _join([_when(e) for e in camera[:3]]) + (" and later" if len(camera) > 3 else "")
        out.claims.append(Claim("unusual", f"The camera moved at {times}.", refs(camera)))
    scene = [e for e in events if e["kind"] == "scene"]
    if scene:
        out.claims.append(
            Claim("unusual", f"The whole view changed at {_when(scene[0])}.", refs(scene))
        )
    lighting = [e for e in events if e["kind"] == "lighting"]
    long = [e for e in lighting if e["end"] - e["start"] >= LONG_LIGHTING]
    if long:
        e = max(long, key=lambda x: x["end"] - x["start"])
        out.claims.append(
            Claim(
                "unusual",
                f"A long lighting change: {_duration(e['end'] - e['start'])} from {_when(e)}.",
                refs(long),
            )
        )
    elif lighting:
        times = "once" if len(lighting) == 1 else f"{len(lighting)} times"
        out.claims.append(Claim("unusual", f"The light changed {times}.", refs(lighting)))
    if s.get("error") and events:
        out.claims.append(Claim("unusual", f"The run stopped early: {s['error']}."))
    elif not s.get("complete", True):  # a live or interrupted run: more may come
        out.claims.append(Claim("unusual", "The run had not finished when this was written."))
    if hours:
        busiest = max(hours.values())
        if busiest >= QUIET_MIN_BUSIEST:
            quiet = [
                e
                for e in events
                if e.get("wall_start")
                and hours[_hour(e["wall_start"])] <= max(1, QUIET_SHARE * busiest)
            ]
            if quiet:
                parts = [f"{plural(e.get('noun') or 'object', 1)} at {_when(e)}" for e in quiet[:3]]
                out.claims.append(
                    Claim(
                        "unusual",
                        f"Activity in a quiet hour: {_join(parts)} (this camera's busiest hour "
                        f"has {busiest} events).",
                        refs(quiet),
                    )
                )


def _hour(iso: str) -> int:
    return int(str(iso)[11:13])


def _hour_counts(reports: list[tuple[str, dict[str, Any]]]) -> dict[str, Counter[int]]:
    """Per source path, over every report given (a folder of nights): events per hour of the
    day, from their wall-clock times (live streams only; files have none)."""
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    for _, data in reports:
        for s in data.get("sources") or []:
            for e in s.get("events") or []:
                if e.get("wall_start"):
                    counts[s["source"]][_hour(e["wall_start"])] += 1
    return counts


def _overall(sources: list[SourceSummary]) -> list[Claim]:
    totals: Counter[str] = Counter()
    for s in sources:
        totals.update(s.counts)
    parts = []
    for group, one, many in (
        ("people", "person", "people"),
        ("vehicles", "vehicle", "vehicles"),
        ("other", "other object", "other objects"),
    ):
        n = totals[group]
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    busiest = max(sources, key=lambda s: (s.counts.get("events", 0), -s.index))
    text = f"Over {len(sources)} sources: " + (
        f"{_join(parts)} came into view" if parts else "no followed object came into view"
    )
    text += f"; {totals['events']} events in all, the most in {busiest.name} ({busiest.counts.get('events', 0)})."
    refs = tuple(r for s in sources for c in s.claims if c.topic == "counts" for r in c.events)
    return [Claim("counts", text, refs)]


# -- output ------------------------------------------------------------------------------------


def summary_dict(summary: Summary) -> dict[str, Any]:
    """``spotdiff summary --json``."""

    def claim(c: Claim) -> dict[str, Any]:
        return {
            "topic": c.topic,
            "text": c.text,
            "events": [
                {"report": r.report, "source": r.source, "id": r.event, "anchor": r.anchor}
                for r in c.events
            ],
        }

    return {
        "schema": SCHEMA,
        "sources": [
            {
                "report": s.report,
                "source": s.source,
                "index": s.index,
                "name": s.name,
                "counts": dict(s.counts),
                "claims": [claim(c) for c in s.claims],
            }
            for s in summary.sources
        ],
        "overall": [claim(c) for c in summary.overall],
    }


def paragraph(
    claims: list[Claim],
    link: Callable[[EventRef], str],
    escape: Callable[[str], str] = lambda text: text,
) -> str:
    """The claims as one paragraph, each followed by its event links (``link`` writes one;
    ``escape`` makes a claim's words safe for the format: they quote event sentences, source
    names and error messages)."""
    out = []
    for c in claims:
        c = Claim(c.topic, escape(c.text), c.events)
        links = " ".join(x for x in (link(r) for r in c.events[:12]) if x)
        more = f" and {len(c.events) - 12} more" if links and len(c.events) > 12 else ""
        if links:  # the links inside the sentence, before its full stop
            body, stop = (c.text[:-1], ".") if c.text.endswith(".") else (c.text, "")
            out.append(f"{body} ({links}{more}){stop}")
        else:
            out.append(c.text)
    return " ".join(out)


def paragraph_parts(claims: list[Claim], href: Callable[[EventRef], str]) -> list[dict[str, Any]]:
    """The claims for a template: each its words, its full stop, and its links (href, label)."""
    parts = []
    for c in claims:
        body, stop = (c.text[:-1], ".") if c.text.endswith(".") else (c.text, "")
        links = [{"href": href(r), "label": f"#{r.event}"} for r in c.events[:12]]
        parts.append(
            {"body": body, "stop": stop, "links": links, "more": max(0, len(c.events) - 12)}
        )
    return parts


def search_words(e: dict[str, Any]) -> str:
    """An event's words for the page's search box: its summary, sentences, noun and kind,
    lower-case, each once (colours and places are words of its sentences)."""
    texts = [e["text"], e.get("noun") or "", e["kind"].replace("_", " ")]
    texts += [x["text"] for x in e.get("sentences") or []]
    seen: dict[str, None] = {}
    for text in texts:
        for word in re.findall(r"[^\W_]+", text.lower()):
            seen.setdefault(word, None)
    return " ".join(seen)


def markdown_summary(data: dict[str, Any], page: str = "timeline.html") -> list[str]:
    """The summary lines at the top of ``timeline.md``: a paragraph per source, events linked
    to their cards in the page beside it."""
    summary = summarise([(".", data)])
    if not summary.sources:
        return []
    lines = ["## Summary", ""]
    several = len(summary.sources) > 1
    for s in summary.sources:
        text = paragraph(s.claims, lambda r: f"[#{r.event}]({page}#{r.anchor})", _md_escape)
        lines += [f"**{_md_escape(s.name)}.** {text}" if several else text, ""]
    if summary.overall:
        lines += [paragraph(summary.overall, lambda r: "", _md_escape), ""]
    return lines


def _md_escape(text: str) -> str:
    """Markdown's active characters as literals (a sentence or file name with ``*`` or ``[``
    must not turn into emphasis or a link), one line."""
    text = " ".join(str(text).split())
    return "".join("\\" + c if c in "\\`*_[]<>|#" else c for c in text)
