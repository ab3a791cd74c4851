"""Merging detections into events, the way a motion detector's user reads them: an interval
("00:00:02.000-00:00:07.000 a red object appeared in the lower right and was gone 5 s later")
with the sentences said inside it, not twenty near-identical lines.

This module owns which detections make one event, the event's interval (padding, clipping to
the source, frame numbers), its summary and its sentences, which events are too short to keep,
and the event numbers.

- **Continuing**: a detection continues an open event when its box, grown by ``merge_distance``
  of the frame diagonal, overlaps a box of the event's latest earlier sample, its kind can follow
  that one's (an arrival, motion, then its departure; not a new arrival where something just
  left), and it comes at most ``merge_gap`` samples later. Clusters of one pair in the same place
  are one change whatever their kinds: a moving object is often two clusters, where it was
  ("gone") and where it is now ("appeared"). Of several open events it continues the one it
  overlaps most. Whole-frame statements (lighting, view change) merge with their own kind.
- **Visits**: an event that began with an arrival and has not departed stays open past the merge
  gap, for up to ``max_visit`` without a detection. A later detection in its place (not a new
  arrival, and the same noun when both are known) continues it, so an arrival and its departure
  are one interval with both sentences inside.
- **Intervals** (DVR-Scan's conventions): ``seen`` is the first and last sample where the change
  was seen; the reported start / end are widened by ``pad_before`` / ``pad_after`` and clipped to
  the source. An event seen for less than ``min_length`` is dropped.
- **Tracks**: a detection about a tracked object (``Detection.track``, see :mod:`.tracks`)
  continues the event of that track and nothing else, wherever the object went; the event stays
  open while the tracker follows the object and closes when the track ends. Its summary, kind,
  noun and sentences are the track's story (:func:`.tracks.tell`), told when it ends. A track
  too short to be an object keeps only the change sentences it absorbed (else it is dropped).
- **Numbers** follow start times. A closed event is numbered only once no open event can start
  before it, so a number is final when given: partial reports, pictures named by number, and a
  ``--resume`` (which restarts the builder where nothing was open) all agree with an
  uninterrupted run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..captioners.words import article, region_name, region_phrase
from ..config import VideoConfig
from ..frames.base import TIME_EPS
from ..frames.timecode import setting_seconds
from ..types import BBox, Detection, Event, EventSentence
from .tracks import Track, TrackStory

_WHOLE_FRAME = ("lighting", "scene", "camera")
_MOTION = {"moved", "changed", "colour", "material"}
_UNKNOWN_NOUNS = ("", "object")
SEEN = "seen"  # a tracked object's sighting that came with no change sentence


@dataclass(eq=False)  # compared by identity: two events may hold equal detections
class _Open:
    """An event being built: its detections in time order, with the sample each came in."""

    seq: int  # creation order: ties in start time are numbered in this order
    detections: list[Detection] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    last_sample: int = 0
    # Named things seen, counted as detections arrive (a long event is asked often).
    nouns: Counter[str] = field(default_factory=Counter)
    track: int | None = None  # the tracked object this event is about
    since: float | None = None  # when that object was first seen
    story: TrackStory | None = None  # told when the track ended
    path: tuple[tuple[float, int, int, int, int], ...] = ()

    def add(self, detection: Detection, sample: int) -> None:
        if detection.track is not None:
            self.track = detection.track
        if detection.track_since is not None:
            since = detection.track_since
            self.since = since if self.since is None else min(self.since, since)
        self.detections.append(detection)
        self.samples.append(sample)
        self.last_sample = max(self.last_sample, sample)
        if detection.noun not in _UNKNOWN_NOUNS:
            self.nouns[detection.noun] += 1

    @property
    def pictured(self) -> Detection:
        """The detection whose pair pictures the event: the first change it made (an
        object's earlier sightings, which made none, have no pair to show)."""
        return next((d for d in self.detections if d.sentence.kind != SEEN), self.detections[0])

    @property
    def key(self) -> tuple[float, int]:
        """The earliest its event can start, then creation order: an open event can still
        reach back to when its tracked object was first seen."""
        first = self.detections[0].time
        return (first if self.since is None else min(first, self.since), self.seq)

    @property
    def last_time(self) -> float:
        return self.detections[-1].time

    @property
    def last_kind(self) -> str:
        return self.detections[-1].sentence.kind

    @property
    def whole_frame(self) -> bool:
        return self.detections[0].sentence.kind in _WHOLE_FRAME

    def split(self, sample: int) -> tuple[list[Detection], list[Detection], int | None]:
        """(this sample's detections, those of the event's latest earlier sample, that sample):
        where the change is now, and where it was last seen before. Scans from the end, as
        detections arrive in sample order (a long event does not cost a full pass)."""
        now: list[Detection] = []
        before: list[Detection] = []
        before_sample: int | None = None
        for detection, s in zip(reversed(self.detections), reversed(self.samples)):
            if s == sample:
                now.append(detection)
            elif before_sample is None or s == before_sample:
                before_sample = s
                before.append(detection)
            else:
                break
        return now, before, before_sample

    def noun(self) -> str:
        """What the event is about: the thing named most often (else the first detection's)."""
        if self.nouns:
            return self.nouns.most_common(1)[0][0]
        return self.detections[0].noun or ""


def _grown(box: BBox, pad: float) -> tuple[float, float, float, float]:
    x, y, w, h = box
    return x - pad, y - pad, x + w + pad, y + h + pad


def _overlap(a: BBox, b: BBox, pad: float) -> bool:
    ax0, ay0, ax1, ay1 = _grown(a, pad)
    bx0, by0, bx1, by1 = _grown(b, pad)
    return ax0 < bx1 and bx0 < ax1 and ay0 < by1 and by0 < ay1


def _shared_area(a: BBox, b: BBox) -> float:
    """Intersection area of two boxes (to pick the visit a departure belongs to)."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return float(max(0, w) * max(0, h))


def _continues(previous: str, current: str) -> bool:
    """Can a detection of kind ``current`` continue an event whose last detection was
    ``previous``? Motion ("moved", "changed") continues anything, an arrival can be followed by
    its departure; a new arrival where something just left is a new event (someone else came)."""
    return (
        previous == current
        or bool({previous, current} & _MOTION)
        or (previous == "appeared" and current == "disappeared")
    )


def _duration_words(seconds: float) -> str:
    """'5 s', '0.4 s', '2 min 30 s', '1 h 5 min': how long a visit lasted, for a sentence."""
    if seconds < 60:
        return f"{round(seconds, 1):g} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class EventBuilder:
    """Feed detections sample by sample; take events as they become final (numbered, in start
    order). ``open`` lists everything not final yet (building, or closed and waiting for an
    earlier-starting event to be numbered first): the pipeline keeps those events' pictures
    and takes a resume checkpoint only when it is empty."""

    def __init__(
        self,
        source: str,
        width: int,
        height: int,
        merge_distance: float,
        merge_gap: int,
        first_id: int = 1,
        *,
        pad_before: float = 0.0,
        pad_after: float = 0.0,
        min_length: float = 0.0,
        max_visit: float = 0.0,
        duration: float | None = None,
        frame_number: Callable[[float], int | None] | None = None,
    ) -> None:
        """duration: where padded ends are clipped (the time of the source's last frame), or
        None. frame_number: maps a time to its frame number (None: frames are not reported)."""
        self.source = source
        self.width, self.height = width, height
        self.pad = merge_distance * (width**2 + height**2) ** 0.5
        self.merge_gap = merge_gap
        self.next_id = first_id
        self.pad_before, self.pad_after = pad_before, pad_after
        self.min_length, self.max_visit = min_length, max_visit
        self.duration = duration
        self.frame_number = frame_number or (lambda _t: None)
        self._building: list[_Open] = []
        self._closed: list[_Open] = []  # closed, waiting to be numbered in start order
        self._seq = 0
        self._now = 0.0
        self._live: set[int] = set()  # tracks the tracker still follows

    @classmethod
    def for_source(
        cls, name: str, source: Any, video: VideoConfig, first_id: int = 1
    ) -> EventBuilder:
        """A builder with ``video``'s event settings for an open frame source (its size,
        duration and frame numbering). Only ``--compare previous`` and ``background`` report
        departures, so only they hold an arrival open to wait for one."""
        info = source.info
        fps = info.fps
        # The last frame starts one frame before the stated duration: a padded end is clipped
        # to it, so the end frame number is a frame that exists.
        last = info.duration - 1.0 / fps if info.duration and fps else info.duration
        return cls(
            name,
            info.width,
            info.height,
            video.merge_distance,
            video.merge_gap,
            first_id,
            pad_before=setting_seconds(video.pad_before, "--pad-before", fps),
            pad_after=setting_seconds(video.pad_after, "--pad-after", fps),
            min_length=setting_seconds(video.min_length, "--min-length", fps),
            max_visit=setting_seconds(video.max_visit, "--max-visit", fps)
            if video.compare in ("previous", "background")
            else 0.0,
            duration=last,
            frame_number=getattr(source, "frame_number", None),
        )

    @property
    def open(self) -> list[_Open]:
        """Everything not final yet; empty only when every event so far has been returned."""
        return self._building + self._closed

    def add(
        self,
        sample: int,
        detections: list[Detection],
        time: float | None = None,
        live_tracks: set[int] | None = None,
    ) -> list[Event]:
        """Add one sample's detections (possibly none); return the events that became final.
        ``time``: the sample's timestamp (s), which bounds how long a visit waits; without it
        the latest detection's time is used. ``live_tracks``: the ids the tracker still
        follows after this sample (their events stay open)."""
        self._now = time if time is not None else max([self._now, *(d.time for d in detections)])
        if live_tracks is not None:
            self._live = set(live_tracks)
        touched: list[_Open] = []
        superseded: list[_Open] = []
        for detection in detections:
            superseded += self._superseded_by(detection, sample)
            target = self._match(detection, sample)
            if target is None:
                target = _Open(seq=self._seq)
                self._seq += 1
                self._building.append(target)
            target.add(detection, sample)
            touched.append(target)
        for item in list(self._building):
            over = (
                item.track not in self._live
                if item.track is not None
                else sample - item.last_sample > self.merge_gap and not self._holding(item)
            )
            if over or (item in superseded and item not in touched):
                self._building.remove(item)
                self._closed.append(item)
        return self._release()

    def adopt(self, track: int, box: BBox, since: float) -> None:
        """An object was first tracked now, but its arrival made changes a moment before the
        detector could name it (a head at the bottom edge): the events of those changes, all
        seen since ``since`` and in its place (``box``, grown to match), become the track's."""
        owner = next((o for o in self._building if o.track == track), None)
        if owner is None:
            return
        for item in list(self._building):
            if item is owner or item.track is not None or item.whole_frame:
                continue
            if item.last_time < since - TIME_EPS:
                continue
            if not any(
                d.bbox is not None and _overlap(d.bbox, box, self.pad) for d in item.detections
            ):
                continue
            self._building.remove(item)
            merged = sorted(
                zip(item.detections + owner.detections, item.samples + owner.samples),
                key=lambda pair: (pair[1], pair[0].time),
            )
            owner.detections = [d for d, _ in merged]
            owner.samples = [s for _, s in merged]
            owner.seq = min(owner.seq, item.seq)
            for d in item.detections:
                if d.noun not in _UNKNOWN_NOUNS:
                    owner.nouns[d.noun] += 1

    def tell(self, track: Track, story: TrackStory | None) -> None:
        """A track ended: its event is told by ``story`` (None: too short to be an object)."""
        for item in self._building + self._closed:
            if item.track == track.id:
                item.story = story
                item.path = tuple((s.time, *s.box) for s in track.sightings)

    def finish(self) -> list[Event]:
        """Close everything still open (end of the source) and return it, numbered."""
        self._closed += self._building
        self._building = []
        return self._release()

    def pending(self) -> list[Event]:
        """Events not final yet (for partial reports), numbered after the final ones. One still
        being seen is shown even when it is shorter than min_length so far (it may grow); a
        closed one only if it is long enough. Changes nothing."""
        events = []
        number = self.next_id
        for item in sorted(self.open, key=self._order):
            if not self._told(item):
                continue
            if item in self._building or self._long_enough(item):
                events.append(self._event(item, number))
                number += 1
        return events

    # -- which event a detection belongs to --------------------------------------------------

    def _holding(self, item: _Open) -> bool:
        """An arrival with no departure yet waits (up to max_visit without a detection)."""
        return (
            self.max_visit > 0
            and not item.whole_frame
            and item.detections[0].sentence.kind == "appeared"
            and item.last_kind != "disappeared"
            and self._now - item.last_time <= self.max_visit + TIME_EPS
        )

    def _superseded_by(self, detection: Detection, sample: int) -> list[_Open]:
        """Open events in the same place that this detection cannot continue (someone left,
        now someone arrives): they are over, even within the merge gap. Only earlier samples
        count: the clusters of one pair happen together, in any order."""
        if (
            detection.bbox is None
            or detection.sentence.kind in _WHOLE_FRAME
            or detection.track is not None
        ):
            return []
        return [
            o
            for o in self._building
            if not o.whole_frame
            and o.track is None
            and any(
                d.bbox is not None
                and not _continues(d.sentence.kind, detection.sentence.kind)
                and _overlap(detection.bbox, d.bbox, self.pad)
                for d in o.split(sample)[1]
            )
        ]

    def _match(self, detection: Detection, sample: int) -> _Open | None:
        """The open event this detection continues, else None (see the module docstring):

        - one with a cluster of the same pair in the same place (a moving object is often two
          clusters, where it was and where it is now, of any kinds);
        - one whose latest earlier sample, at most ``merge_gap`` back, has a box it overlaps
          and a kind it can follow;
        - else a visit waiting for its departure whose last box it overlaps.

        Of several, the same thing first, then the one it overlaps most."""
        if detection.track is not None:  # one object, one event, wherever it goes
            return next((o for o in self._building if o.track == detection.track), None)
        kind = detection.sentence.kind
        recent: list[_Open] = []
        waiting: list[_Open] = []
        for item in self._building:
            if item.track is not None:
                continue
            now, before, before_sample = item.split(sample)
            # Light changes ramp (auto-exposure, a dimmer, a cloud): one quiet sample inside
            # a ramp does not split it.
            gap = self.merge_gap + (1 if kind == "lighting" == item.last_kind else 0)
            within = bool(now) or (before_sample is not None and sample - before_sample <= gap)
            if kind in _WHOLE_FRAME or item.whole_frame:
                if within and kind == item.last_kind:
                    return item
                continue
            if detection.bbox is None:
                continue
            box = detection.bbox
            if any(d.bbox is not None and _overlap(box, d.bbox, self.pad) for d in now) or (
                within
                and any(
                    d.bbox is not None
                    and _continues(d.sentence.kind, kind)
                    and _overlap(box, d.bbox, self.pad)
                    for d in before
                )
            ):
                recent.append(item)
            elif (
                not within
                and self._holding(item)
                and kind != "appeared"
                and self._same_thing(item, detection)
                and any(d.bbox is not None and _overlap(box, d.bbox, self.pad) for d in before)
            ):
                waiting.append(item)
        candidates = recent or waiting
        if not candidates:
            return None
        box = detection.bbox
        assert box is not None

        def closeness(item: _Open) -> tuple[bool, float, int]:
            # The same thing first, then the most shared area (boxes grown to match can reach
            # a neighbour's), then the older event.
            now, before, _ = item.split(sample)
            shared = max(_shared_area(box, d.bbox) for d in now + before if d.bbox is not None)
            return (self._same_thing(item, detection), shared, -item.seq)

        return max(candidates, key=closeness)

    @staticmethod
    def _same_thing(item: _Open, detection: Detection) -> bool:
        """A person's departure does not end a car's visit; an unnamed object may be either."""
        noun = item.noun()
        return noun in _UNKNOWN_NOUNS or detection.noun in _UNKNOWN_NOUNS or noun == detection.noun

    # -- final events --------------------------------------------------------------------------

    def _release(self) -> list[Event]:
        """Number the closed events no open event can precede, in start order (a closed
        event's start is final; an open one starts no earlier than its key)."""
        bound = min((o.key for o in self._building), default=None)
        ordered = sorted(((self._order(o), o) for o in self._closed), key=lambda pair: pair[0])
        ready = [o for order, o in ordered if bound is None or order < bound]
        events = []
        for item in ready:
            self._closed.remove(item)
            if self._told(item) and self._long_enough(item):
                events.append(self._event(item, self.next_id))
                self.next_id += 1
        return events

    @staticmethod
    def _told(item: _Open) -> bool:
        """A track too short to be an object is an event only through the changes it
        explained (a false detection alone says nothing)."""
        return (
            item.track is None
            or item.story is not None
            or any(d.sentence.kind != SEEN for d in item.detections)
        )

    def _long_enough(self, item: _Open) -> bool:
        seen = item.last_time - item.detections[0].time
        return seen >= self.min_length - TIME_EPS

    def _order(self, item: _Open) -> tuple[float, int]:
        """Numbering order: the event's first sighting as it stands, then creation order."""
        return (self._seen(item)[0], item.seq)

    @staticmethod
    def _told_detections(item: _Open) -> list[Detection]:
        if item.track is not None and item.story is None:
            return [d for d in item.detections if d.sentence.kind != SEEN] or item.detections
        return item.detections

    def _seen(self, item: _Open) -> tuple[float, float]:
        """The first and last time the event's thing was seen (before padding)."""
        ds = self._told_detections(item)  # a track never told: the changes it explained
        seen = (ds[0].time, max(d.time for d in ds))
        if item.story is not None and item.story.moments:
            # The card covers every moment its text tells: "a car was in the centre from the
            # start" on a card from 00:00:13 contradicted itself (the track was seen from 1 s
            # and explained no change before 13 s, where the event's first change was).
            moments = item.story.moments
            seen = (
                min(seen[0], *(m.start for m in moments)),
                max(seen[1], *(m.end for m in moments)),
            )
        return seen

    def _event(self, item: _Open, number: int) -> Event:
        ds = self._told_detections(item)
        seen = self._seen(item)
        start = max(0.0, seen[0] - self.pad_before)
        end = seen[1] + self.pad_after
        if self.duration:
            end = max(seen[1], min(end, self.duration))
        noun = item.noun()
        if item.story is not None:
            story = item.story
            return Event(
                id=number,
                source=self.source,
                start=start,
                end=end,
                text=story.text,
                kind=story.kind,
                noun=story.noun,
                boxes=tuple(d.bbox for d in ds if d.bbox is not None),
                frames=(item.pictured.before_time, item.pictured.time),
                detections=len(ds),
                seen=seen,
                start_frame=self.frame_number(start),
                end_frame=self.frame_number(end),
                sentences=tuple(
                    EventSentence(m.start, m.end, m.text, m.kind) for m in story.moments
                ),
                track=item.path,
                frame_size=(self.width, self.height),
            )
        text, kind = self._describe(ds, noun)
        return Event(
            id=number,
            source=self.source,
            start=start,
            end=end,
            text=text,
            kind=kind,
            noun=noun,
            boxes=tuple(d.bbox for d in ds if d.bbox is not None),
            frames=(item.pictured.before_time, item.pictured.time),
            detections=len(ds),
            seen=seen,
            start_frame=self.frame_number(start),
            end_frame=self.frame_number(end),
            sentences=self._sentences(item),
        )

    def _sentences(self, item: _Open) -> tuple[EventSentence, ...]:
        """What was said, in order; the same text in consecutive samples is one sentence."""
        said: list[EventSentence] = []
        last_seen: dict[str, tuple[int, int]] = {}  # text -> (index in said, last sample)
        for detection, sample in zip(item.detections, item.samples):
            text = detection.sentence.text
            if text in last_seen and sample - last_seen[text][1] <= max(1, self.merge_gap):
                index = last_seen[text][0]
                sentence = said[index]
                said[index] = EventSentence(
                    sentence.start, detection.time, sentence.text, sentence.kind
                )
            else:
                index = len(said)
                said.append(
                    EventSentence(detection.time, detection.time, text, detection.sentence.kind)
                )
            last_seen[text] = (index, sample)
        return tuple(said)

    def _named(self, detection: Detection, noun: str) -> str:
        """The detection's sentence, or, when it names no thing ("a small grey object
        appeared ...") and the event knows what it was (its majority noun), the same sentence
        with that noun: a car crossing a small ``--roi`` in half a second is never tracked, and
        its first pair's pixels often show too little of it to name, while the pairs after do.
        Size and colour words are left out with the pixels' noun: on those first pairs they are
        the road's as much as the car's."""
        sentence = detection.sentence
        if (
            noun in _UNKNOWN_NOUNS
            or detection.bbox is None
            or sentence.kind not in ("appeared", "disappeared")
            or noun in sentence.text.split()
        ):
            return sentence.text
        where = region_phrase(detection.bbox, self.width, self.height)
        if sentence.kind == "appeared":
            return f"{article(noun)} {noun} appeared {where}"
        return f"the {noun} {where} is gone"

    def _describe(self, ds: list[Detection], noun: str) -> tuple[str, str]:
        """One sentence for the whole event, and its kind."""
        first, last = ds[0], ds[-1]
        kind = first.sentence.kind
        if kind in _WHOLE_FRAME or len(ds) == 1 or first.bbox is None or last.bbox is None:
            return first.sentence.text, kind
        start_place = region_name(first.bbox, self.width, self.height)
        end_place = region_name(last.bbox, self.width, self.height)
        what = noun or "object"
        if start_place != end_place:
            return (
                f"{article(what)} {what} moved from the {start_place} to the {end_place}",
                "moved",
            )
        kinds = {d.sentence.kind for d in ds}
        opening = self._named(first, noun)
        if kind == "appeared" and last.sentence.kind == "disappeared":
            stay = _duration_words(last.time - first.time)
            return f"{opening} and was gone {stay} later", "visited"
        if kinds == {"appeared"} or kind == "appeared":
            return opening, "appeared"
        if kinds == {"disappeared"}:
            return opening, "disappeared"
        where = region_phrase(first.bbox, self.width, self.height)
        if what == "object":
            return f"something kept changing {where}", "changed"
        return f"{article(what)} {what} moved about {where}", "changed"
