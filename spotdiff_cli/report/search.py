"""``spotdiff search``: a report's events ranked by what a query means, narrowed by what it
names.

Two signals, each usable alone (``mode``) so their worth can be measured
(``benchmarks/search.py``):

- **meaning**: the query and every sentence of every event embedded with the shipped MiniLM
  (:mod:`spotdiff_cli.embed`, numpy, offline); an event scores its best sentence's cosine.
- **filters**: words of the query that name a noun ("person", "vehicles"), a colour, a kind of
  event ("parked", "drove through", "still there") or a place ("left", "lower right") are
  checked against the event's structured fields and words; each group that matches adds a
  bonus. Times in the query ("after 00:01:30", "before 20s", "between 0:15 and 0:20") and the
  command's flags (``--kind``, ``--noun``, ``--colour``, ``--after``, ``--before``,
  ``--source``) are hard: an event outside them is not listed.

Embeddings are computed on first use and cached beside the report (``search-index.npz``), keyed
by the sha256 of ``timeline.json`` and of the encoder's weights: a report that changed (a
resumed or live run) is re-indexed, its unchanged sentences taken from the old cache. A report
written before search existed is indexed the first time it is searched. A folder that cannot
be written keeps its index in the user cache instead.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..atomic import atomic_write_bytes
from ..captioners.words import region_name
from ..errors import UsageError
from ..frames.timecode import parse_time
from ..weights import user_cache_dir
from .folder import ReportFolder
from .summary import VEHICLES, search_words

INDEX_NAME = "search-index.npz"
INDEX_FORMAT = 1
MODES = ("both", "meaning", "filters")

# Bonus per group of filter words the query names and the event matches (added to a cosine in
# [-1, 1]): a named noun or colour outweighs most differences in wording.
WEIGHTS = {
    "noun": 0.3,
    "colour": 0.3,
    "kind": 0.2,
    "place": 0.25,
    "order": 0.3,
    "together": 0.3,
}

NOUN_WORDS: dict[str, set[str]] = {
    "person": {
        "person",
        "people",
        "persons",
        "man",
        "men",
        "woman",
        "women",
        "someone",
        "somebody",
        "pedestrian",
        "pedestrians",
        "visitor",
        "visitors",
        "guy",
        "guard",
    },
    "car": {"car", "cars", "sedan", "taxi"},
    "truck": {"truck", "trucks", "lorry", "lorries", "van", "vans"},
    "bus": {"bus", "buses", "coach"},
    "bicycle": {"bicycle", "bicycles", "bike", "bikes", "cyclist", "cyclists"},
    "motorcycle": {"motorcycle", "motorcycles", "motorbike", "motorbikes", "scooter"},
    "dog": {"dog", "dogs"},
    "cat": {"cat", "cats"},
    "bag": {"bag", "bags", "backpack", "suitcase", "handbag"},
}
GROUP_WORDS = {"vehicle": VEHICLES, "vehicles": VEHICLES, "traffic": VEHICLES}
COLOURS = {
    "red": "red",
    "orange": "orange",
    "yellow": "yellow",
    "green": "green",
    "blue": "blue",
    "purple": "purple",
    "pink": "pink",
    "white": "white",
    "black": "black",
    "grey": "grey",
    "gray": "grey",
    "silver": "grey",
    "brown": "brown",
    "dark": "black",
}
# Words that name more than one of the report's colours: a silver car reads white in the sun
# and grey in the shade (the car park's silver car is "white"; the motorway's, "grey").
COLOUR_ALSO = {"silver": frozenset({"white"})}


def colours_named(word: str) -> frozenset[str]:
    """The report's colour names a query word stands for ("silver" -> grey and white)."""
    return frozenset({COLOURS[word]}) | COLOUR_ALSO.get(word, frozenset())


_WENT = {"disappeared", "left", "visited", "passed"}
# Query words -> the event kinds (the event's or one of its sentences') they name.
KIND_WORDS = {
    "parked": {"parked", "stayed"},
    "parking": {"parked", "stayed"},
    "stopped": {"parked", "stayed"},
    "stood": {"stayed"},
    "waited": {"stayed"},
    "through": {"passed"},
    "passed": {"passed"},
    "passing": {"passed"},
    "arrived": {"arrived", "parked", "appeared"},
    "arriving": {"arrived", "parked", "appeared"},
    "appeared": {"appeared", "arrived"},
    # Leaving: anything that went, a visit or a drive-through included (as a bare "left" is read).
    "gone": _WENT,
    "leaving": _WENT,
    "leaves": _WENT,
    "exit": _WENT,
    "exited": _WENT,
    "departed": _WENT,
    "disappeared": {"disappeared", "left"},
    "vanished": {"disappeared", "left"},
    "moved": {"moved"},
    "lighting": {"lighting"},
    "light": {"lighting"},
    "camera": {"camera"},
    "visit": {"visited"},
    "visited": {"visited"},
}
PHRASE_KINDS = {
    "still there": {"arrived", "parked", "present"},
    "drove through": {"passed"},
    "walked through": {"passed"},
    "came and went": {"visited", "passed"},
    "from the start": {"present", "left"},
}
PLACES = {"left", "right", "top", "bottom", "centre", "center", "middle", "upper", "lower"}
PLACE_SAME = {"center": "centre", "middle": "centre"}
CORNER_SAME = {"bottom": "lower", "top": "upper"}
# The camera as the viewpoint, not as the thing that moved: "driving away from the camera" asks
# for no camera event. A fixed camera looks down on its scene, so what moves away from it moves
# up the picture and what comes towards it, down.
_TOWARDS_CAMERA = re.compile(
    r"\b(?P<away>away\s+)?(?:from|towards?|to|at|facing)\s+(?:the\s+)?(?:camera|viewer)\b"
)
_PLACE_PHRASE = re.compile(
    r"\b(?P<prep>from|to|in|on|at|near|into|towards?)\s+the\s+"
    r"(?P<where>(?:(?:upper|lower|top|bottom)\s+)?(?:left|right|top|bottom|centre|center|middle))\b"
)

_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
_SPAN = r"\d+(?:\.\d+)?\s*(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b"
_TIME = rf"(?:{_CLOCK}|{_SPAN})"
_BETWEEN = re.compile(rf"\bbetween\s+({_TIME})\s+and\s+({_TIME})", re.I)
_AFTER = re.compile(rf"\b(?:after|since|from)\s+({_TIME})", re.I)
_BEFORE = re.compile(rf"\b(?:before|until|till|by)\s+({_TIME})", re.I)
# "In the first five seconds", "during the last 2 minutes": a window from the source's start
# or back from its end. Read before the superlatives, whose "first" and "last" they are not.
_FIRST_SPAN = re.compile(rf"\b(?:in|during|within|over)\s+the\s+first\s+({_SPAN})", re.I)
_LAST_SPAN = re.compile(rf"\b(?:in|during|within|over)\s+the\s+(?:last|final)\s+({_SPAN})", re.I)
# "Around 00:01:00": a window either side, in the footage or, on a live stream's report, on the
# clock (an operator's "around 22:00" means a quarter of an hour, not seconds).
_AROUND = re.compile(rf"\b(?:around|about|approximately|roughly|circa)\s+({_TIME})", re.I)
AROUND_SECONDS = 15.0
AROUND_CLOCK_SECONDS = 900.0
# Motion up or down the picture: "a red car going up", "driving down the car park".
_UP_DOWN = re.compile(
    r"\b(?:go|goes|going|went|drive|drives|driving|drove|head|heads|heading|headed|move|moves|"
    r"moving|moved|walk|walks|walking|walked|come|comes|coming|came)\s+(?P<way>up|down)\b"
)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90,
}  # fmt: skip
_SPELLED_SPAN = re.compile(
    r"\b(" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")(?=\s+"
    r"(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b)",
    re.I,
)
_UNITS = {
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "min": "m",
    "mins": "m",
    "minute": "m",
    "minutes": "m",
    "hour": "h",
    "hours": "h",
}


class Encoder(Protocol):
    fingerprint: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class TimePoint:
    """A bound of --after / --before: a position in the footage (seconds) or, for a live
    stream's report, a wall-clock moment (a full date-time) or time of day (HH:MM[:SS])."""

    seconds: float | None = None
    moment: datetime.datetime | None = None
    clock: float | None = None  # seconds since midnight, for a time of day
    text: str = ""
    from_end: bool = False  # ``seconds`` counts back from the end of the source ("the last 10 s")


@dataclass(frozen=True)
class Filters:
    """What an event must be (hard: flags and query times) or is rewarded for being (soft:
    words of the query). Empty sets mean "any"."""

    kinds: frozenset[str] = frozenset()
    nouns: frozenset[str] = frozenset()
    colours: frozenset[str] = frozenset()
    places: frozenset[str] = frozenset()
    after: TimePoint | None = None
    before: TimePoint | None = None
    sources: tuple[str, ...] = ()
    # "first" / "last": the query asks for the earliest or latest; "longest" / "shortest": the
    # longest or shortest stay (the summary names the longest; an operator asks for it)
    order: str | None = None
    nth: int = 1  # which of them in that order: "the third visitor" is order first, nth 3
    together: bool = False  # "at the same time", "passing each other": in view with another

    def groups(self) -> dict[str, frozenset[str]]:
        return {
            "noun": self.nouns,
            "colour": self.colours,
            "kind": self.kinds,
            "place": self.places,
        }


@dataclass(frozen=True)
class Hit:
    """One ranked event. score: what it was ranked by; similarity: its best sentence's cosine
    with the query (None in filters-only mode); matched: the filter groups it met."""

    report: Path
    source_index: int
    source: str
    event: dict[str, Any]
    score: float
    similarity: float | None
    matched: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return f"s{self.source_index}-e{self.event['id']}"

    @property
    def page(self) -> str:
        """The event's card in the report's page, as a file URL with its anchor."""
        return f"{(self.report / 'timeline.html').resolve().as_uri()}#{self.anchor}"

    @property
    def picture(self) -> str | None:
        picture = self.event.get("picture")
        return str(self.report / picture) if picture else None

    def as_dict(self) -> dict[str, Any]:
        e = self.event
        return {
            "report": str(self.report),
            "source": self.source,
            "source_index": self.source_index,
            "id": e["id"],
            "score": round(self.score, 4),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "matched": list(self.matched),
            "start": e["start"],
            "end": e["end"],
            "start_tc": e.get("start_tc"),
            "end_tc": e.get("end_tc"),
            "wall_start": e.get("wall_start"),
            "wall_end": e.get("wall_end"),
            "kind": e["kind"],
            "noun": e.get("noun") or "",
            "text": e["text"],
            "sentences": [x["text"] for x in e.get("sentences") or []],
            "picture": self.picture,
            "page": self.page,
        }


# -- the query ---------------------------------------------------------------------------------


def parse_time_point(text: str, what: str) -> TimePoint:
    """A --after / --before value: ``2026-11-25T22:00`` (a wall-clock moment), ``22:00`` or
    ``00:01:30`` (a time of day for a live stream's report, a position in the footage for a
    file's), or any time syntax of ``--every`` (``90s``, ``1.5m``)."""
    value = text.strip()
    if re.match(r"^\d{4}-\d{2}-\d{2}[T ]", value):
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError as exc:
            raise UsageError(f"{what}: cannot read {text!r} as a date and time ({exc})") from exc
        return TimePoint(moment=moment, text=value)
    short = re.sub(r"\s+", "", value.lower())
    match = re.match(r"^(\d+(?:\.\d+)?)([a-z]+)$", short)
    if match and match[2] in _UNITS:
        short = match[1] + _UNITS[match[2]]
    seconds = parse_time(short, what=what).seconds
    if seconds is None:
        raise UsageError(f"{what}: give a time, not a frame count ({text!r})")
    # A clock time may be a time of day (used on a live stream's report): HH:MM or HH:MM:SS;
    # on a file's report the same text is a position, where "22:30" reads as MM:SS.
    clock = None
    if re.match(rf"^{_CLOCK}$", value):
        fields = [float(x) for x in value.split(":")]
        clock = fields[0] * 3600 + fields[1] * 60 + (fields[2] if len(fields) > 2 else 0.0)
    return TimePoint(seconds=seconds, clock=clock, text=value)


def _comparable(point: TimePoint) -> float | None:
    """A bound as one number for ordering two of the same kind: a moment's timestamp, else its
    position in the footage (a time of day is read as one where it could be either)."""
    if point.moment is not None:
        return point.moment.timestamp()
    return None if point.from_end else point.seconds


def _around(point: TimePoint, side: float) -> TimePoint:
    """One bound of "around ``point``": ``side`` -1 the earlier, 1 the later."""
    seconds = None if point.seconds is None else max(0.0, point.seconds + side * AROUND_SECONDS)
    clock = None if point.clock is None else point.clock + side * AROUND_CLOCK_SECONDS
    moment = None
    if point.moment is not None:
        moment = point.moment + datetime.timedelta(seconds=side * AROUND_CLOCK_SECONDS)
    return TimePoint(seconds=seconds, moment=moment, clock=clock, text=f"around {point.text}")


def parse_query(query: str) -> tuple[Filters, str]:
    """The filters a query names, and the query with its time phrases taken out (what is
    embedded: "after 00:01:30" says nothing about what happened)."""
    text = _SPELLED_SPAN.sub(lambda m: str(_NUMBER_WORDS[m[1].lower()]), query.strip())
    text = re.sub(r"\b(first|last|final)\s+(second|minute|hour)\b", r"\1 1 \2", text, flags=re.I)
    after = before = None
    found = _FIRST_SPAN.search(text)
    if found:
        before = parse_time_point(found[1], "the query")
        text = text.replace(found[0], " ")
    found = _LAST_SPAN.search(text)
    if found:
        after = replace(parse_time_point(found[1], "the query"), from_end=True, clock=None)
        text = text.replace(found[0], " ")
    found = _AROUND.search(text)
    if found:
        point = parse_time_point(found[1], "the query")
        after, before = _around(point, -1.0), _around(point, 1.0)
        text = text.replace(found[0], " ")
    found = _BETWEEN.search(text)
    if found:
        # "between 1:00 and 0:10" means the window from 0:10 to 1:00.
        after, before = sorted(
            (parse_time_point(found[1], "the query"), parse_time_point(found[2], "the query")),
            key=lambda point: _comparable(point) or 0.0,
        )
        text = text.replace(found[0], " ")
    for pattern in (_AFTER, _BEFORE):
        found = pattern.search(text)
        if found:
            point = parse_time_point(found[1], "the query")
            after, before = (point, before) if pattern is _AFTER else (after, point)
            text = text.replace(found[0], " ")
    lower = " ".join(re.findall(r"[^\W_]+", text.lower()))
    places: set[str] = set()
    for way in _UP_DOWN.finditer(lower):
        places.add("to the top" if way["way"] == "up" else "to the bottom")
    viewpoint = _TOWARDS_CAMERA.search(lower)
    if viewpoint is not None:
        away = viewpoint["away"] or viewpoint[0].split()[0] == "from"
        places.add("to the top" if away else "to the bottom")
        lower = lower.replace(viewpoint[0], " ")
    words = lower.split()
    nouns: set[str] = set()
    for word in words:
        nouns |= GROUP_WORDS.get(word, set())
        nouns |= {noun for noun, names in NOUN_WORDS.items() if word in names}
    kinds: set[str] = set()
    for phrase, named in PHRASE_KINDS.items():
        if phrase in lower:
            kinds |= named
    for word in words:
        kinds |= KIND_WORDS.get(word, set())
    # Places as phrases: "from the top" and "to the bottom" keep a direction (a car that
    # drove from the bottom to the top is not the one asked for); "lower right", "left" alone.
    rest = lower
    for found in _PLACE_PHRASE.finditer(lower):
        prep, where = found["prep"], _place(found["where"])
        places.add(f"{prep} the {where}" if prep in ("from", "to") else where)
        rest = rest.replace(found[0], " ")
    places |= {_place(w) for w in rest.split() if w in PLACES and w != "left"}
    # A bare "left" is a departure ("a car left"), not a place.
    if re.search(r"\bleft\b", rest):
        kinds |= _WENT
    order = next((name for name, pattern in _ORDER_WORDS if re.search(pattern, lower)), None)
    nth = 1
    ordinal = _ORDINAL.search(lower)
    if ordinal is not None:
        nth = _ORDINALS.get(ordinal[1]) or int(re.sub(r"\D", "", ordinal[1]))
        order = order or "first"
    together = any(phrase in lower for phrase in _TOGETHER)
    filters = Filters(
        order=order,
        nth=nth,
        together=together,
        kinds=frozenset(kinds),
        nouns=frozenset(nouns),
        colours=frozenset(c for w in words if w in COLOURS for c in colours_named(w)),
        places=frozenset(places),
        after=after,
        before=before,
    )
    return filters, " ".join(text.split())


@functools.lru_cache(maxsize=64)
def _place_pattern(place: str) -> re.Pattern[str]:
    """A place phrase ("to the bottom", "lower right", "centre") as it may be written in an
    event's sentences: any spelling of the centre, any spaces or punctuation between words."""
    words = ["(?:centre|center|middle)" if w == "centre" else re.escape(w) for w in place.split()]
    return re.compile(r"\b" + r"\W+".join(words) + r"\b")


def _place(words: str) -> str:
    """A place as the sentences write it: "middle" is the centre, and a corner is "lower
    left" or "upper right" (the grid's words), however the query says it ("bottom left")."""
    names = [PLACE_SAME.get(w, w) for w in words.split()]
    if len(names) == 2 and names[1] in ("left", "right"):
        names[0] = CORNER_SAME.get(names[0], names[0])
    return " ".join(names)


def merge(flags: Filters, parsed: Filters) -> Filters:
    """The query's times join the flags' (a flag's bound wins where both give one: it was
    typed on purpose, the query's may be a phrase read as a time)."""
    return replace(
        flags,
        after=flags.after or parsed.after,
        before=flags.before or parsed.before,
    )


# -- the events --------------------------------------------------------------------------------


@dataclass
class _Row:
    report: ReportFolder
    source_index: int
    source: str
    event: dict[str, Any]
    texts: list[int] = field(default_factory=list)  # rows of the report's text matrix
    size: tuple[int, int] | None = None  # the source's width and height, where the report says
    duration: float | None = None  # the source's length (s), for "in the last 10 seconds"
    _words: set[str] | None = None

    def words(self) -> set[str]:
        """The event's words (summary, sentences, noun, kind), made once, when first asked."""
        if self._words is None:
            self._words = set(search_words(self.event).split())
        return self._words


def event_texts(e: dict[str, Any]) -> list[str]:
    """What an event said: its summary and each of its sentences, once each."""
    return list(dict.fromkeys([e["text"], *(x["text"] for x in e.get("sentences") or [])]))


def _kinds(e: dict[str, Any]) -> set[str]:
    return {e["kind"], *(x.get("kind", "") for x in e.get("sentences") or [])}


# The detector's two names for a long box on wheels: NanoDet calls a white box trailer a bus as
# often as a truck, and a coach a truck.
HEAVY = frozenset({"truck", "bus"})


def _family(nouns: Iterable[str]) -> set[str]:
    """The vehicle family of these nouns: the detector confuses car, truck and bus on one
    object (timeline/tracks.py links them as one family too), and the pixel captioner says
    "vehicle"."""
    return {"vehicle"} if set(nouns) & (VEHICLES | {"vehicle"}) else set()


def _matches(
    e: dict[str, Any],
    filters: Filters,
    words: Callable[[], set[str]],
    size: tuple[int, int] | None = None,
) -> dict[str, float]:
    """The soft filter groups the event meets, each 1 (fully) or 0.5 (a noun of the same
    family: the query's "lorry" on an event the detector called a bus). words: the event's
    words, made when first needed (most of the time of a search over a large report). size:
    the source's (width, height), to read places off the event's track as well as its words."""
    met: dict[str, float] = {}
    noun = e.get("noun") or ""
    if filters.nouns:
        if noun in filters.nouns or words() & filters.nouns:
            met["noun"] = 1.0
        elif {noun} & HEAVY and filters.nouns & HEAVY:
            met["noun"] = 0.8  # a lorry is a "truck" in one look and a "bus" in the next
        elif _family({noun} | words()) & _family(filters.nouns):
            met["noun"] = 0.5
    # A colour belongs to the thing the query names: a grey car is no answer to "a woman in
    # a grey coat".
    if filters.colours and (not filters.nouns or "noun" in met):
        if words() & (filters.colours | {w for w, c in COLOURS.items() if c in filters.colours}):
            met["colour"] = 1.0
    if filters.kinds and _kinds(e) & filters.kinds:
        met["kind"] = 1.0
    if filters.places:
        said = " ".join([*event_texts(e), track_places(e, size)]).lower()
        if all(_place_pattern(p).search(said) for p in filters.places):
            met["place"] = 1.0
    return met


# Superlatives a query may ask for, first match wins ("the last car", "who stayed the longest").
_ORDER_WORDS = (
    ("longest", r"\b(?:longest|long(?:est)? stay)\b"),
    ("shortest", r"\b(?:shortest|briefest|quickest)\b"),
    ("last", r"\b(?:last|latest|final)\b"),
    ("first", r"\b(?:first|earliest)\b"),
)
_LATEST_FIRST = {"last", "longest"}  # orders counted from the end
# "The third visitor", "the 2nd car": which one, counted in the order asked for (from the first
# unless the query says "last": "the second last car").
_ORDINALS = {
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10,
}  # fmt: skip
_ORDINAL = re.compile(r"\bthe\s+(" + "|".join(_ORDINALS) + r"|\d{1,2}(?:st|nd|rd|th))\b")
# Two things in view at once: "two cars passing each other", "people at the table together".
_TOGETHER = ("at the same time", "passing each other", "pass each other", "together",
             "side by side", "simultaneously", "at once")  # fmt: skip


def _in_view_together(rows: list[_Row], mets: list[dict[str, float]], soft: Filters) -> list[int]:
    """The rows (all of one report) whose event shares time with another event of its source,
    both of what the query names ("two cars passing each other"). One sweep per source in start
    order: an event overlaps another when it starts before an earlier one ends, or the next one
    starts before it ends (a night's report has thousands of events)."""
    by_source: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        if not soft.nouns or "noun" in mets[i]:
            by_source.setdefault(r.source_index, []).append(i)
    together: set[int] = set()
    for named in by_source.values():
        spans = sorted(
            (float(rows[i].event["start"]), float(rows[i].event["end"]), i) for i in named
        )
        latest_end = float("-inf")
        for k, (start, end, i) in enumerate(spans):
            if start < latest_end or (k + 1 < len(spans) and spans[k + 1][0] < end):
                together.add(i)
            latest_end = max(latest_end, end)
    return sorted(together)


def _order_key(e: dict[str, Any], order: str) -> float:
    """What a superlative compares: an event's start, or its length for a stay."""
    if order in ("longest", "shortest"):
        return float(e["end"]) - float(e["start"])
    return float(e["start"])


def track_places(e: dict[str, Any], size: tuple[int, int] | None) -> str:
    """Where a tracked event's object was first and last seen, in the grid words of the
    sentences ("from the bottom centre to the lower right"), or "".

    A sentence names one place per clause and the edge an object crossed ("drove off to the
    bottom"), so "leaving at the lower right" missed a lorry whose last box was there; the
    track's boxes ([time, x, y, w, h] in source pixels) say it whatever the wording."""
    track = e.get("track") or []
    if size is None or not track:
        return ""
    first, last = (region_name(tuple(b[1:5]), *size) for b in (track[0], track[-1]))
    return f"from the {first} to the {last}"


def _offset(
    e: dict[str, Any], point: TimePoint, key: str, duration: float | None = None
) -> float | None:
    """How far the event's ``start`` or ``end`` is past ``point``, in seconds; None when the
    event has no time on that scale (a wall-clock bound, a report of a file; a point counted
    back from the end of a source of unknown length)."""
    if point.from_end:
        if duration is None:
            return None
        return float(e[key]) - (float(duration) - (point.seconds or 0.0))
    wall = e.get(f"wall_{key}")
    if point.moment is not None:
        if not wall:
            return None
        moment = datetime.datetime.fromisoformat(wall)
        ref = point.moment if point.moment.tzinfo else point.moment.replace(tzinfo=moment.tzinfo)
        return (moment - ref).total_seconds()
    if point.clock is not None and wall:  # a time of day, on a live stream's report
        t = datetime.datetime.fromisoformat(wall)
        return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6 - point.clock
    return float(e[key]) - (point.seconds or 0.0)


def _in_time(e: dict[str, Any], filters: Filters, duration: float | None = None) -> bool:
    """The event overlaps [after, before]. duration: its source's length (s)."""
    if filters.after is not None:
        past = _offset(e, filters.after, "end", duration)
        if past is None or past < 0:
            return False
    if filters.before is not None:
        past = _offset(e, filters.before, "start", duration)
        if past is None or past > 0:
            return False
    return True


def _hard(
    e: dict[str, Any],
    source: str,
    flags: Filters,
    words: Callable[[], set[str]],
    duration: float | None = None,
) -> bool:
    """The flags' filters (all must hold) and the time bounds (duration: the source's)."""
    if flags.kinds and not (_kinds(e) & flags.kinds):
        return False
    if flags.nouns and not ((e.get("noun") or "") in flags.nouns or words() & flags.nouns):
        return False
    if flags.colours and not _matches(e, Filters(colours=flags.colours), words):
        return False
    if flags.sources and not any(s in source for s in flags.sources):
        return False
    return _in_time(e, flags, duration)


# -- the index ---------------------------------------------------------------------------------


def _index_path(report: ReportFolder) -> Path:
    return report.path / INDEX_NAME


def _fallback_path(report: ReportFolder) -> Path:
    key = hashlib.sha256(str(report.path.resolve()).encode()).hexdigest()[:16]
    return user_cache_dir() / "search" / f"{key}.npz"


def _read_index(path: Path, encoder: str) -> tuple[str, list[str], np.ndarray] | None:
    """(timeline sha256, texts, their vectors) from a cache file made by this encoder, else
    None."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            if int(npz["format"]) != INDEX_FORMAT or str(npz["encoder"]) != encoder:
                return None
            texts = json.loads(bytes(npz["texts"]).decode("utf-8"))
            vectors = npz["vectors"].astype(np.float32)
            digest = str(npz["timeline"])
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError):
        return None  # no cache, or a damaged one: it is made again
    if len(texts) != len(vectors):
        return None
    return digest, texts, vectors


def _write_index(report: ReportFolder, encoder: str, texts: list[str], vectors: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez(
        buf,
        format=np.array(INDEX_FORMAT),
        encoder=np.array(encoder),
        timeline=np.array(report.digest),
        texts=np.frombuffer(json.dumps(texts, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        # float16: half the file, and a cosine moves by less than 1e-3.
        vectors=vectors.astype(np.float16),
    )
    for path in (_index_path(report), _fallback_path(report)):
        try:
            atomic_write_bytes(path, buf.getvalue())
            return
        except OSError:  # a read-only report folder: the user cache instead
            continue


def text_vectors(report: ReportFolder, texts: list[str], encoder: Encoder) -> np.ndarray:
    """The vectors of a report's texts: from the cache beside it when it was made from these
    very bytes of ``timeline.json`` by this encoder; else the texts an older cache has are
    reused, the rest encoded, and the cache rewritten."""
    known: dict[str, np.ndarray] = {}
    for path in (_index_path(report), _fallback_path(report)):
        cached = _read_index(path, encoder.fingerprint)
        if cached is None:
            continue
        digest, cached_texts, vectors = cached
        if digest == report.digest and cached_texts == texts:
            return vectors  # the common case: made from these very bytes
        known.update(zip(cached_texts, vectors))
    missing = [t for t in texts if t not in known]
    if missing:
        known.update(zip(missing, encoder.encode(missing)))
    matrix = np.stack([known[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)
    _write_index(report, encoder.fingerprint, texts, matrix)
    return matrix.astype(np.float32)


def _report_texts(report: ReportFolder) -> tuple[list[str], list[_Row]]:
    texts: dict[str, int] = {}
    rows = []
    for index, s in enumerate(report.data.get("sources") or [], 1):
        info = s.get("info") or {}
        size = (int(info["width"]), int(info["height"])) if info.get("width") else None
        # A live stream's report has no duration: its end is as far as it was watched.
        ends = [float(e["end"]) for e in s.get("events") or []]
        duration = info.get("duration") or s.get("processed_until") or max(ends, default=None)
        for e in s.get("events") or []:
            row = _Row(report, index, s["source"], e, size=size, duration=duration)
            row.texts = [texts.setdefault(t, len(texts)) for t in event_texts(e)]
            rows.append(row)
    return list(texts), rows


# -- ranking -----------------------------------------------------------------------------------


def search(
    reports: Sequence[ReportFolder],
    query: str,
    flags: Filters = Filters(),
    *,
    mode: str = "both",
    limit: int | None = 10,
    encoder: Encoder | None = None,
) -> list[Hit]:
    """The events of ``reports`` ranked for ``query`` (best first), at most ``limit``.

    mode: ``both`` (cosine + filter bonus), ``meaning`` (cosine alone) or ``filters`` (the
    bonus alone; ties keep report order). The flags and the query's times always hold.
    """
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    _check_kinds(flags.kinds, reports)
    parsed, meaning_text = parse_query(query)
    hard = merge(flags, parsed) if mode != "meaning" else flags
    soft = parsed if mode != "meaning" else Filters()
    use_meaning = mode != "filters" and bool(meaning_text)
    if use_meaning and encoder is None:
        from ..embed import default_encoder

        encoder = default_encoder()
    q = encoder.encode([meaning_text])[0] if use_meaning and encoder is not None else None
    hits: list[Hit] = []
    for report in reports:
        texts, rows = _report_texts(report)
        rows = [r for r in rows if _hard(r.event, r.source, hard, r.words, r.duration)]
        if not rows:
            continue
        sims = None
        if q is not None and encoder is not None:
            sims = text_vectors(report, texts, encoder) @ q
        named = any(soft.groups().values())
        mets = [_matches(r.event, soft, r.words, r.size) if named else {} for r in rows]
        if soft.order:  # "the last car": the latest (or first) of what the query names, per source
            for index in {r.source_index for r in rows}:
                named = [
                    i
                    for i, r in enumerate(rows)
                    if r.source_index == index and (not soft.nouns or "noun" in mets[i])
                ]
                named.sort(
                    key=lambda i: _order_key(rows[i].event, soft.order),
                    reverse=soft.order in _LATEST_FIRST,
                )
                if len(named) >= soft.nth:
                    mets[named[soft.nth - 1]]["order"] = 1.0
        if soft.together:
            for i in _in_view_together(rows, mets, soft):
                mets[i]["together"] = 1.0
        for r, met in zip(rows, mets):
            matched = tuple(met)
            bonus = sum(WEIGHTS[g] * share for g, share in met.items())
            similarity = float(max(sims[i] for i in r.texts)) if sims is not None else None
            score = (similarity or 0.0) + bonus
            hits.append(
                Hit(report.path, r.source_index, r.source, r.event, score, similarity, matched)
            )
    hits.sort(key=lambda h: -h.score)  # stable: equal scores keep report and time order
    return hits[:limit] if limit is not None else hits


# The kinds the timeline writes (events and the sentences inside them); a report may hold more.
KINDS = {
    "appeared", "disappeared", "moved", "changed", "colour", "material", "lighting", "camera",
    "scene", "no_change", "visited", "passed", "parked", "arrived", "left", "present", "stayed",
}  # fmt: skip


def _check_kinds(kinds: Iterable[str], reports: Sequence[ReportFolder]) -> None:
    """A --kind no report could hold is a typo: say so, with the closest kind, rather than list
    nothing."""
    import difflib

    known = set(KINDS)
    for report in reports:
        for s in report.data.get("sources") or []:
            for e in s.get("events") or []:
                known |= _kinds(e)
    for kind in kinds:
        if kind not in known:
            close = difflib.get_close_matches(kind, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(
                f"--kind {kind!r} is no kind of event{hint} (kinds: {', '.join(sorted(KINDS))})"
            )


def filters_from_flags(
    kinds: Iterable[str] = (),
    nouns: Iterable[str] = (),
    colours: Iterable[str] = (),
    after: str | None = None,
    before: str | None = None,
    sources: Iterable[str] = (),
) -> Filters:
    """The command's flags as hard filters (names as the report writes them; a plural noun or
    another spelling of a colour is read as the query reads it)."""
    noun_set: set[str] = set()
    for n in nouns:
        word = n.strip().lower()
        named = GROUP_WORDS.get(word) or {k for k, v in NOUN_WORDS.items() if word in v}
        noun_set |= named or {word}
    colour_set = set()
    for c in colours:
        word = c.strip().lower()
        if word not in COLOURS:
            raise UsageError(
                f"--colour {c!r}: use one of {', '.join(sorted(set(COLOURS.values())))}"
            )
        colour_set |= colours_named(word)
    first = parse_time_point(after, "--after") if after else None
    last = parse_time_point(before, "--before") if before else None
    if first is not None and last is not None:
        start, end = _comparable(first), _comparable(last)
        same_kind = (first.moment is None) == (last.moment is None)  # both moments, or neither
        if same_kind and start is not None and end is not None and start > end:
            raise UsageError(
                f"--after {after} is later than --before {before}: no event can lie between; "
                "swap them"
            )
    return Filters(
        kinds=frozenset(k.strip().lower() for k in kinds),
        nouns=frozenset(noun_set),
        colours=frozenset(colour_set),
        after=first,
        before=last,
        sources=tuple(sources),
    )
