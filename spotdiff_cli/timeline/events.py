"""Merging detections into events: "00:12:30-00:14:00 a person moved from the left to the
centre", not twenty near-identical lines.

A detection joins an open event when its box, grown by a share of the frame diagonal, overlaps
the event's last box, and it comes no more than ``merge_gap`` samples after the event's last
detection. Whole-frame statements (lighting, view change) merge with their own kind.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..captioners.words import article, region_name, region_phrase
from ..types import BBox, Detection, Event

_WHOLE_FRAME = ("lighting", "scene")


@dataclass
class _Open:
    detections: list[Detection] = field(default_factory=list)
    last_sample: int = 0


def _grown(box: BBox, pad: float) -> tuple[float, float, float, float]:
    x, y, w, h = box
    return x - pad, y - pad, x + w + pad, y + h + pad


def _overlap(a: BBox, b: BBox, pad: float) -> bool:
    ax0, ay0, ax1, ay1 = _grown(a, pad)
    bx0, by0, bx1, by1 = _grown(b, pad)
    return ax0 < bx1 and bx0 < ax1 and ay0 < by1 and by0 < ay1


def _continues(previous: str, current: str) -> bool:
    """Can a detection of kind ``current`` continue an event whose last detection was
    ``previous``? An arrival then a departure in the same place are two events (someone came,
    later left), not one; motion ("moved", "changed") continues anything."""
    return previous == current or bool({previous, current} & {"moved", "changed", "colour"})


class EventBuilder:
    """Feed detections sample by sample; take finished events as they close."""

    def __init__(self, source: str, width: int, height: int, merge_distance: float, merge_gap: int, first_id: int = 1) -> None:
        self.source = source
        self.width, self.height = width, height
        self.pad = merge_distance * (width**2 + height**2) ** 0.5
        self.merge_gap = merge_gap
        self.next_id = first_id
        self.open: list[_Open] = []

    def add(self, sample: int, detections: list[Detection]) -> list[Event]:
        """Add one sample's detections (possibly none); return the events that closed."""
        superseded: list[_Open] = []
        for detection in detections:
            superseded += self._superseded_by(detection)
            target = self._match(detection, sample)
            if target is None:
                target = _Open()
                self.open.append(target)
            target.detections.append(detection)
            target.last_sample = sample
        closed = [o for o in self.open if sample - o.last_sample > self.merge_gap or o in superseded]
        self.open = [o for o in self.open if o not in closed]
        return [self._event(o) for o in closed]

    def finish(self) -> list[Event]:
        """Close everything still open (end of the source)."""
        closed, self.open = self.open, []
        return [self._event(o) for o in closed]

    def pending(self) -> list[Event]:
        """Events still open, as they would read if the source ended now (for partial reports)."""
        saved = self.next_id
        events = [self._event(o) for o in self.open]
        self.next_id = saved
        return events

    def _superseded_by(self, detection: Detection) -> list[_Open]:
        """Open events in the same place that this detection cannot continue (someone arrived,
        now they left): they are over, even within the merge gap."""
        if detection.bbox is None or detection.sentence.kind in _WHOLE_FRAME:
            return []
        return [
            o for o in self.open
            if o.detections[-1].bbox is not None
            and o.detections[-1].sentence.kind not in _WHOLE_FRAME
            and not _continues(o.detections[-1].sentence.kind, detection.sentence.kind)
            and _overlap(detection.bbox, o.detections[-1].bbox, self.pad)
        ]

    def _match(self, detection: Detection, sample: int) -> _Open | None:
        kind = detection.sentence.kind
        for candidate in self.open:
            last = candidate.detections[-1]
            if kind in _WHOLE_FRAME or last.sentence.kind in _WHOLE_FRAME:
                if kind == last.sentence.kind:
                    return candidate
                continue
            if not _continues(last.sentence.kind, kind):
                continue
            if detection.bbox is not None and last.bbox is not None and _overlap(detection.bbox, last.bbox, self.pad):
                return candidate
        return None

    def _event(self, item: _Open) -> Event:
        ds = item.detections
        first, last = ds[0], ds[-1]
        nouns = Counter(d.noun for d in ds if d.noun and d.noun != "object")
        noun = nouns.most_common(1)[0][0] if nouns else (first.noun or "")
        text, kind = self._describe(ds, noun)
        event = Event(
            id=self.next_id,
            source=self.source,
            start=first.time,
            end=last.time,
            text=text,
            kind=kind,
            noun=noun,
            boxes=tuple(d.bbox for d in ds if d.bbox is not None),
            frames=(first.before_time, first.time),
            detections=len(ds),
        )
        self.next_id += 1
        return event

    def _describe(self, ds: list[Detection], noun: str) -> tuple[str, str]:
        first, last = ds[0], ds[-1]
        kind = first.sentence.kind
        if kind in _WHOLE_FRAME or len(ds) == 1 or first.bbox is None or last.bbox is None:
            return first.sentence.text, kind
        start_place = region_name(first.bbox, self.width, self.height)
        end_place = region_name(last.bbox, self.width, self.height)
        what = noun or "object"
        if start_place != end_place:
            return f"{article(what)} {what} moved from the {start_place} to the {end_place}", "moved"
        kinds = {d.sentence.kind for d in ds}
        if kinds == {"appeared"} or kind == "appeared":
            return first.sentence.text, "appeared"
        where = region_phrase(first.bbox, self.width, self.height)
        if what == "object":
            return f"something kept changing {where}", "changed"
        return f"{article(what)} {what} moved about {where}", "changed"
