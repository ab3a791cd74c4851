"""Objects followed over time: the detector's boxes linked into tracks, and a track told as
one event ("a person walked in from the bottom, stood in the centre for 20 s and left to the
right").

Linking is norfair's (the tracker Frigate uses; the maintained ``norfair-enough`` fork):
a Kalman filter per object over its box corners, matched to the next sample's boxes by IoU.
The tracker is stepped only on the samples where the detector ran (the pipeline decides: a
changed sample, or a confirmation look while objects are tracked), so "missed" counts looks
at the scene, not frames, and an object standing still through quiet samples stays tracked.

What a track says is decided from its sightings alone (deterministic, no learned words):
where it entered (an edge of the frame, or a place inside it), whether and how long it stayed
still, where it left, whether it was there from the start or is still there at the end, and
its noun: the label it was given most often, weighted by score, among the labels spotdiff
names (a one-off "kite" on a car is outvoted).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.detect import NOUNS
from ..captioners.words import noun_phrase, region_name, region_phrase
from ..types import BBox

VEHICLES = {"car", "bus", "truck", "motorcycle", "bicycle", "train", "boat"}
PLURALS = {"person": "people", "bus": "buses"}

EDGE_SHARE = 0.04  # a box within this share of the frame's size from an edge touches it
STILL_SHARE = 0.03  # centre moves less than this share of the diagonal between looks: still
# How much a change of box size between looks counts against a match, per log of the area
# ratio (``_box_distance``). A vehicle is rigid: its box grows or shrinks only with distance, a
# step a look. A person's box halves when they sit down behind a table or step behind
# someone. With 0.25 for both, the motorway's lorry track went on with a car a quarter its
# length beside it (9 times less area: 0.54 of the 1.5 reach); 0.5 for people split one visit
# in the room at 0.2 s (benchmarks/visits.py).
_SIZE_WEIGHT = {"vehicle": 0.5}
_SIZE_WEIGHT_OTHERS = 0.25


@dataclass(frozen=True)
class Sighting:
    """One look at a tracked object: when, where (original pixels) and what it looked like."""

    time: float
    box: BBox
    label: str
    score: float
    colour: str = ""  # the colour word of the box's middle, "" when it has no single one


@dataclass
class Track:
    """One object's sightings, in time order. ``id`` counts up from 1 per source."""

    id: int
    sightings: list[Sighting] = field(default_factory=list)
    left_view: bool = False  # it ended by going out through the watched view's edge

    @property
    def start(self) -> float:
        return self.sightings[0].time

    @property
    def end(self) -> float:
        return self.sightings[-1].time

    @property
    def noun(self) -> str:
        """The label seen most, weighted by score (one object, one noun for its whole life)."""
        votes: Counter[str] = Counter()
        for s in self.sightings:
            votes[NOUNS.get(s.label, s.label)] += s.score
        return votes.most_common(1)[0][0] if votes else "object"

    @property
    def colour(self) -> str:
        """The colour word most of its sightings agree on ("" when they do not: a car in a
        shadow and then in the sun is white at one look and grey at the next)."""
        votes = Counter(s.colour for s in self.sightings if s.colour)
        if not votes:
            return ""
        colour, count = votes.most_common(1)[0]
        return colour if count > 0.5 * len(self.sightings) else ""

    @property
    def boxes(self) -> list[BBox]:
        return [s.box for s in self.sightings]

    def path(self) -> list[tuple[float, float]]:
        """The box centres, original pixels."""
        return [(x + w / 2, y + h / 2) for x, y, w, h in self.boxes]


_INWARD = {"left": (1.0, 0.0), "right": (-1.0, 0.0), "top": (0.0, 1.0), "bottom": (0.0, -1.0)}


def _touching(box: BBox, width: int, height: int) -> list[str]:
    """The frame edges a box touches ("bottom", "left"...)."""
    x, y, w, h = box
    gaps = {
        "left": x / width,
        "right": (width - x - w) / width,
        "top": y / height,
        "bottom": (height - y - h) / height,
    }
    return [name for name, gap in gaps.items() if gap <= EDGE_SHARE]


def _motion(path: list[tuple[float, float]], step: float) -> tuple[float, float] | None:
    """From the first point to the first one more than ``step`` away: where it went."""
    x0, y0 = path[0]
    for x, y in path[1:]:
        if np.hypot(x - x0, y - y0) > step:
            return (x - x0, y - y0)
    return None


def _crossed_edge(
    box: BBox, motion: tuple[float, float] | None, width: int, height: int, sign: float
) -> str | None:
    """The edge an object came in through (``sign`` 1: it moved away from it) or went out
    through (``sign`` -1: it moved towards it): one its box touches, in the direction it moved.
    A tall person's head touching the top of the frame is no way in; walking up from the bottom
    edge is."""
    if motion is None:
        return None
    best, best_dot = None, 0.0
    for edge in _touching(box, width, height):
        nx, ny = _INWARD[edge]
        dot = sign * (motion[0] * nx + motion[1] * ny)
        if dot > best_dot:
            best, best_dot = edge, dot
    return best


@dataclass(frozen=True)
class Stay:
    """The longest stretch over which a tracked object stayed in one place."""

    seconds: float
    box: BBox
    start: float
    end: float


def _longest_stay(track: Track, diagonal: float) -> Stay | None:
    """Where and for how long the object stayed still the longest (None: one sighting)."""
    best: Stay | None = None
    path = track.path()
    start = 0
    for i in range(1, len(path) + 1):
        moved = i < len(path) and (
            np.hypot(path[i][0] - path[start][0], path[i][1] - path[start][1])
            > STILL_SHARE * diagonal
        )
        if i == len(path) or moved:
            t0, t1 = track.sightings[start].time, track.sightings[i - 1].time
            if best is None or t1 - t0 > best.seconds:
                best = Stay(t1 - t0, track.sightings[(start + i - 1) // 2].box, t0, t1)
            start = i
    return best


@dataclass(frozen=True)
class Moment:
    """One thing a tracked object did, with when: a sentence inside its event."""

    start: float
    end: float
    text: str
    kind: str


@dataclass(frozen=True)
class TrackStory:
    """What a track says: its kind, one sentence for the event, the moments inside it."""

    kind: str  # arrived, left, visited, passed, parked, present
    text: str
    noun: str
    moments: tuple[Moment, ...]


def _subject(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def tell(
    track: Track,
    width: int,
    height: int,
    *,
    from_start: bool,
    to_end: bool,
) -> TrackStory:
    """The sentences a person would write about one track.

    from_start: the object was already there at the first look of the source.
    to_end: it was still there at the last look (the source ended with it in view).
    """
    noun = track.noun
    diagonal = float(np.hypot(width, height))
    first, last = track.sightings[0], track.sightings[-1]
    step = STILL_SHARE * diagonal
    path = track.path()
    came = _motion(path, step)
    went = _motion(path[::-1], step)
    went = (-went[0], -went[1]) if went is not None else None
    enter_edge = None if from_start else _crossed_edge(first.box, came, width, height, 1.0)
    leave_edge = None if to_end else _crossed_edge(last.box, went, width, height, -1.0)
    vehicle = noun in VEHICLES
    person = noun == "person"
    # "a white car"; "a person in black" (a person's colour is their clothes: the middle of
    # their box is the torso - on the room clip 6 of 6 visitors' clothes named right).
    colour = track.colour
    subject = f"a person in {colour}" if person and colour else _subject(noun_phrase(noun, colour))
    stay = _longest_stay(track, diagonal)
    stayed = stay is not None and stay.seconds >= 2.0

    if (
        not from_start
        and not to_end
        and enter_edge
        and leave_edge
        and enter_edge != leave_edge
        and not stayed
    ):
        through = "drove through" if vehicle else "walked through" if person else "passed"
        text = f"{subject} {through} from the {enter_edge} to the {leave_edge}"
        return TrackStory("passed", text, noun, (Moment(first.time, last.time, text, "passed"),))

    moments: list[Moment] = []
    clauses: list[str] = []
    if from_start:
        clauses.append(f"{subject} was {region_phrase(first.box, width, height)} from the start")
        moments.append(Moment(first.time, first.time, clauses[-1], "present"))
    else:
        if enter_edge:
            come = "drove in" if vehicle else "walked in" if person else "came in"
            clauses.append(f"{subject} {come} from the {enter_edge}")
        else:
            clauses.append(f"{subject} appeared {region_phrase(first.box, width, height)}")
        moments.append(Moment(first.time, first.time, clauses[-1], "appeared"))
    if stayed:
        assert stay is not None
        verb = "stopped" if vehicle else "stood" if person else "stayed"
        where = region_phrase(stay.box, width, height)
        # "appeared in the centre, stood in the centre" says the place twice.
        said = where if where != region_phrase(first.box, width, height) or enter_edge else "there"
        clauses.append(f"{verb} {said} for {stay.seconds:.0f} s")
        moments.append(Moment(stay.start, stay.end, f"{subject} {verb} {where}", "stayed"))
    if to_end:
        kind = "present" if from_start else "parked" if vehicle and stayed else "arrived"
        clauses.append("was still there at the end")
    else:
        kind = "left" if from_start else "visited"
        if leave_edge:
            go = f"{'drove off' if vehicle else 'left'} to the {leave_edge}"
        elif stayed and region_phrase(last.box, width, height) == where:
            go = "left"
        else:
            go = f"was gone from the {region_name(last.box, width, height)}"
            if not stayed and track.end - track.start >= 2.0:
                go += f" {track.end - track.start:.0f} s later"
        clauses.append(go)
        moments.append(Moment(last.time, last.time, f"{subject} {go}", "disappeared"))
    if len(clauses) == 1:
        text = clauses[0]
    else:
        text = ", ".join(clauses[:-1]) + " and " + clauses[-1]
    return TrackStory(kind, text, noun, tuple(moments))


class ObjectTracker:
    """norfair over sightings: ``update`` at each look, ``finish`` at the end.

    misses: looks in a row without a match after which a track ends (its object left); a
    track's end time is its last sighting. Looks a second apart allow two (a detector misses a
    person now and then); looks ten seconds apart allow none, or the next visitor at the same
    table would continue the last one's track. min_hits: sightings a track needs to be told as
    an object (one false detection never becomes a visit). reach: how far a box may be from
    where its track was expected, in the track's box diagonals (looks are a second apart, so a
    walking person's boxes need not overlap). view: the watched part of the frame (x, y, w, h,
    original pixels; the ``--roi`` box or the whole frame), or None when unknown: a track whose
    last box touched its edge, moving out through it, and that is missed at the next look has
    left the view and ends there, so it cannot go on with the next object that comes by.
    """

    def __init__(
        self,
        misses: int = 2,
        min_hits: int = 2,
        reach: float = 1.5,
        view: BBox | None = None,
    ) -> None:
        self.min_hits = min_hits
        self.misses = misses
        self.view = view
        self.reach = reach
        # norfair's tracker is made at the first look, not here: the object watcher is set up
        # before a video's decoding starts, and importing norfair (~30 ms) there held the
        # decoder back by as much.
        self._norfair: Any = None
        self._tracks: dict[int, Track] = {}  # our id -> the track
        self._of_object: dict[int, int] = {}  # norfair's object id -> our id
        self._missed: dict[int, int] = {}  # our id -> looks in a row without a match
        self._next_id = 1

    @property
    def _tracker(self) -> Any:
        """norfair's Tracker, made on first use (the light install has it: pure Python over
        numpy)."""
        if self._norfair is None:
            import logging

            from .norfair_import import import_norfair

            # norfair logs a speed hint for every scalar distance function; a handful of boxes
            # a look needs no vectorising, and a report must not carry a library's advice.
            logging.getLogger("norfair.tracker").setLevel(logging.ERROR)
            # norfair keeps an object a little longer than a track lives, so a match to an
            # object whose track ended starts a new track instead of silently reviving it.
            self._norfair = import_norfair().Tracker(
                distance_function=_box_distance,
                distance_threshold=self.reach,
                hit_counter_max=self.misses + 2,
                initialization_delay=0,
                pointwise_hit_counter_max=self.misses + 2,
            )
        return self._norfair

    @property
    def live(self) -> dict[int, Track]:
        """Tracks still followed, by id (an id is never reused within one tracker)."""
        return dict(self._tracks)

    def reportable(self, track: Track) -> bool:
        """Seen often enough to be an object, not one false detection."""
        return len(track.sightings) >= self.min_hits

    def update(
        self, time: float, sightings: list[Sighting], weak: list[Sighting] = ()
    ) -> tuple[list[Track], list[Track]]:
        """One look at the scene at ``time``. Returns (the tracks seen at this look, the tracks
        that ended with it); each sighting belongs to at most one track.

        weak: sightings the detector scored too low to start a track, offered afterwards to
        the tracks this look's confident sightings did not continue (ByteTrack's second
        association, Zhang et al. 2022): an object turning, half hidden or leaving by the
        frame's edge scores lower for a look or two, and without them its track ends a look
        early or, for a lorry that crosses the view in three looks, never has the two
        sightings it needs. A weak sighting never starts a track."""
        from .norfair_import import import_norfair

        NorfairDetection = import_norfair().Detection

        detections = [_detection(NorfairDetection, s) for s in sightings]
        seen: list[Track] = []
        ended: list[Track] = []
        for obj in self._tracker.update(detections=detections):
            detection = obj.last_detection
            if obj.id is None or detection is None or not isinstance(detection.data, Sighting):
                continue
            if detection.data.time != time:
                continue  # not matched at this look: norfair keeps the last match
            ours = self._of_object.get(obj.id)
            if ours is None:
                ours = self._of_object[obj.id] = self._next_id
                self._tracks[ours] = Track(ours)
                self._next_id += 1
            self._tracks[ours].sightings.append(detection.data)
            self._missed[ours] = 0
            seen.append(self._tracks[ours])
        seen += self._continue_weakly(time, [_detection(NorfairDetection, w) for w in weak])
        alive = {obj.id for obj in self._tracker.tracked_objects if obj.id is not None}
        for obj_id, ours in list(self._of_object.items()):
            track = self._tracks[ours]
            missed = track.sightings[-1].time != time
            if missed:
                self._missed[ours] = self._missed.get(ours, 0) + 1
            gone = obj_id not in alive or self._missed[ours] > self.misses
            track.left_view = missed and self._left_the_view(track)
            if gone or track.left_view:
                ended.append(self._tracks.pop(ours))
                del self._of_object[obj_id]
                del self._missed[ours]
        return seen, ended

    def _left_the_view(self, track: Track) -> bool:
        """Its last box touched the view's edge and it was moving out through it. On the
        motorway at one look a second, a lorry that went out at the right edge was kept for its
        two misses and went on with a car that came by 3 s later: the track, and its noun,
        became the car's."""
        if self.view is None or len(track.sightings) < 2:
            return False
        vx, vy, vw, vh = self.view
        (x0, y0), (x1, y1) = track.path()[-2:]
        motion = (x1 - x0, y1 - y0)
        if np.hypot(*motion) <= STILL_SHARE * np.hypot(vw, vh):
            return False  # standing at the edge, not leaving by it
        x, y, w, h = track.sightings[-1].box
        return _crossed_edge((x - vx, y - vy, w, h), motion, vw, vh, -1.0) is not None

    def _continue_weakly(self, time: float, weak: list) -> list[Track]:
        """Give each weak detection (norfair's, carrying its sighting) to the unmatched track
        whose predicted box is nearest (within the tracker's reach, of the same family),
        closest pairs first, and update that track's norfair object with it as norfair's own
        matching would (``TrackedObject.hit``): its Kalman filter then predicts from where the
        object was last seen, not from where it was when it last scored high."""
        if not weak:
            return []
        waiting = {
            obj.id: obj
            for obj in self._tracker.tracked_objects
            if obj.id in self._of_object
            and self._tracks[self._of_object[obj.id]].sightings[-1].time != time
        }
        pairs = []
        for i, detection in enumerate(weak):
            for obj_id, obj in waiting.items():
                if obj.label != detection.label:
                    continue
                distance = _box_distance(detection, obj)
                if distance < self._tracker.distance_threshold:
                    pairs.append((distance, i, obj_id))
        continued: list[Track] = []
        used: set[int] = set()
        for _, i, obj_id in sorted(pairs):
            if i in used or obj_id not in waiting:
                continue
            waiting[obj_id].hit(weak[i])
            track = self._tracks[self._of_object[obj_id]]
            track.sightings.append(weak[i].data)
            self._missed[track.id] = 0
            continued.append(track)
            used.add(i)
            del waiting[obj_id]
        return continued

    def finish(self) -> list[Track]:
        """The source ended: every track still followed ends."""
        ended = list(self._tracks.values())
        self._tracks.clear()
        self._of_object.clear()
        self._missed.clear()
        return ended


def _detection(detection_class, sighting: Sighting):
    """A sighting as a norfair detection: its box's corners, its score, its family as label."""
    x, y, w, h = sighting.box
    return detection_class(
        points=np.array([[x, y], [x + w, y + h]], dtype=float),
        scores=np.array([sighting.score, sighting.score]),
        label=_family(sighting.label),
        data=sighting,
    )


def _box_distance(detection, tracked) -> float:
    """Distance of a new box from a track's predicted box: the gap between their centres in
    diagonals of the larger box, plus how much their sizes differ (0 = same place and size)."""
    (ax0, ay0), (ax1, ay1) = detection.points
    (bx0, by0), (bx1, by1) = tracked.estimate
    aw, ah, bw, bh = ax1 - ax0, ay1 - ay0, bx1 - bx0, by1 - by0
    diagonal = max(np.hypot(aw, ah), np.hypot(bw, bh), 1.0)
    gap = np.hypot((ax0 + ax1 - bx0 - bx1) / 2, (ay0 + ay1 - by0 - by1) / 2) / diagonal
    sizes = abs(np.log(max(aw * ah, 1.0) / max(bw * bh, 1.0)))
    weight = _SIZE_WEIGHT.get(getattr(tracked, "label", None), _SIZE_WEIGHT_OTHERS)
    return float(gap + weight * sizes)


ANIMATE = {"person", "dog", "cat", "horse", "bird"}


def _family(label: str) -> str:
    """Labels the detector confuses on one object are one family the tracker matches across:
    vehicles (a car seen as a truck in one look stays one track), and people and animals (a
    person seen from behind, long hair first, is a "dog" in one look)."""
    noun = NOUNS.get(label, label)
    if noun in VEHICLES:
        return "vehicle"
    return "animate" if noun in ANIMATE else noun


def count_phrase(noun: str, n: int) -> str:
    """ "a person", "two people", "3 cars"."""
    if n == 1:
        return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    plural = PLURALS.get(noun, noun + "s")
    return f"{words.get(n, str(n))} {plural}"
