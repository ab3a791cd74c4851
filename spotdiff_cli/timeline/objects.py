"""The objects of one source: when to run the detector, what its boxes are called, which change
sentences each tracked object explains.

The detector costs a forward pass (tens of ms), the pixel analysis much less, so it runs only
where it can tell something new: on a sample that starts a change, on changed samples at most
once per ``look_every``, and, while objects are tracked, a few looks on the quiet samples after
a change (a person who stopped at a table makes no pixel change: they are still there; one who
walked out made changes, and the quiet looks after them end the track). Once settled, a quiet
scene is not looked at again until something changes. Only the watched region (``--roi`` /
``--mask``'s box) is searched.

A change sentence is explained by a tracked object when its box overlaps the object's box at
that sample (or the object's last box, between looks): it becomes part of that object's event
instead of an event of its own ("a large black object appeared" is the man in black walking
in). A whole-frame statement (the light changed, the camera moved) made while an object is in
view is the object's doing too (an exposure change as a white car fills the frame): dropped.

An object is an event only once it explains a change: a parked car or a sign the detector sees
at every look, that never moves, is scenery. Until then its track is kept by the tracker alone
(the event builder never hears of it), and the tracker starts afresh whenever no event is open,
which is when the run takes a resume checkpoint, so a resumed run tracks exactly what an
uninterrupted one does. A track that ended keeps its event open for a short grace, so the
changes its object leaves behind (the door it walked out of) join its event.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable

import numpy as np

from ..analysis.detect import CAR_SIZE, NOUNS, TOP_VIEW_CAR
from ..captioners.base import Hint
from ..captioners.grounded import hint_for
from ..captioners.words import colour_name, region_phrase, scene_cast
from ..geometry import box_iou
from ..types import Analysis, BBox, Detection, Sentence
from .events import SEEN
from .tracks import ObjectTracker, Sighting, Track, TrackStory, tell

# Whole-frame statements an object in view explains.
_WHOLE_FRAME = ("lighting", "scene", "camera")
# A detection must score this much to start or feed a track.
MIN_SCORE = 0.4
# A car seen from above scores low under NanoDet's odd labels; the size and motion checks of
# ObjectWatcher._named are the evidence then, so a lower score is enough.
MIN_TOP_VIEW_SCORE = 0.3
# While tracked objects explain every change, the detector looks this many times less often
# (1: as often as otherwise; 3 halved the looks of the room clip but blurred where visits end).
SETTLED_LOOKS = 1
# Nouns the pixel analysis gives a change cluster that make it a sighting of a tracked object.
_CHANGE_NOUNS = {
    "person": "person",
    "car": "car",
    "vehicle": "car",
    "van": "car",
    "truck": "truck",
    "bus": "bus",
    "bicycle": "bicycle",
    "motorcycle": "motorcycle",
    "dog": "dog",
    "cat": "cat",
}
VEHICLE_MASS = 0.35
_PRESENT = ("appeared", "moved", "changed")  # change kinds whose box shows the thing now
MOVING_SHARE = 0.1  # changed pixels in a box that make it a thing that moved  # the classifier's summed vehicle probability that names such a box a car


@dataclasses.dataclass
class Look:
    """What one look at a sample found: the tracks seen, and those that ended."""

    seen: list[Track]
    ended: list[Track]


# A change "held" by what was described: every changed pixel of the first look lies on a
# thing the detector finds where it was at the sample last described (IoU at least HELD_IOU,
# the same label, no more and no fewer things), boxes grown by HELD_PAD of their size. A person
# standing at a table shifts their weight (0.1-2 % of the room clip's thumbnail changes from
# second to second) and stays within 0.8 of the box; one walking in, a car driving through,
# even at 25 samples a second on the motorway, does not.
HELD_IOU = 0.8
HELD_PAD = 0.1
# A detector pass's answer stands for a later sample whose changes since that pass all lie on
# the things it found (boxes grown by HELD_PAD) and fill at most this share of their boxes: the
# things are where the pass saw them. Someone standing at a table shifts their weight and
# fills 0.01-0.15 of their box from pass to pass on the room clip at 1 s; someone walking fills
# 0.17-0.33 of the box a pass found them in one second before. Picked on the room clip; the
# car park, the motorway and the held-out GIF gave the same events with it as without.
STILL_SHARE = 0.15
# Frames an earlier pass's answer stands for are kept pinned while the samples in flight between
# the first looks and the tracker (the pipeline's queues, ``in_flight``) may still ask about
# them, and a few more (one in each stage's hands): a question that came after its frame was
# unpinned made a pass of its own. When the queues grew from 3 + 2 + 2 to 30 + 20 + 20 with
# this left at 32, the room clip at 1 s made 98-104 passes instead of 65 in most runs.
_STANDING_SPARE = 8


def held_by(
    now: list, described: list, changed: np.ndarray, to_changed: tuple[float, float, float, float]
) -> bool:
    """Whether a pair's change is things standing where they were last described.

    now / described: :meth:`ObjectWatcher.movers` of this sample and of the sample last
    described; changed: the first look's (h, w) bool change mask; to_changed: (x0, y0, sx, sy)
    mapping work pixels to that mask (``(x - x0) * sx``)."""
    if not now or len(now) != len(described):
        return False
    for d in now:
        if not any(p.label == d.label and box_iou(p.box, d.box) >= HELD_IOU for p in described):
            return False
    x0, y0, sx, sy = to_changed
    outside = changed.copy()
    h, w = outside.shape
    for d in now + described:
        x, y, bw, bh = d.box
        px, py = HELD_PAD * bw, HELD_PAD * bh
        top, left = max(0, int((y - py - y0) * sy)), max(0, int((x - px - x0) * sx))
        bottom = min(h, int(np.ceil((y + bh + py - y0) * sy)))
        right = min(w, int(np.ceil((x + bw + px - x0) * sx)))
        outside[top:bottom, left:right] = False
    return not outside.any()


def still_on(
    found: list, changed: np.ndarray, to_changed: tuple[float, float, float, float]
) -> bool:
    """Whether a change is only the things a detector pass found standing where it found them,
    so that pass's answer stands for the later frame (``STILL_SHARE``).

    found: the pass's answer (detections in work pixels); changed: the first look's (h, w)
    bool change mask between the pass's frame and the later one; to_changed: (x0, y0, sx, sy)
    mapping work pixels to that mask."""
    movers = [d for d in found if d.label in NOUNS and d.score >= MIN_SCORE]
    if not held_by(movers, movers, changed, to_changed):
        return False
    _, _, sx, sy = to_changed
    boxes = sum(d.box[2] * d.box[3] for d in movers) * sx * sy
    return float(np.count_nonzero(changed)) <= STILL_SHARE * boxes


class ObjectWatcher:
    """Detector + tracker for one source. ``width``/``height``: the source's pixels;
    ``scale``: original pixels per analysed (work) pixel; ``region``: the watched box in work
    pixels, or None for the whole frame."""

    def __init__(
        self,
        width: int,
        height: int,
        scale: float,
        look_every: float,
        region: BBox | None = None,
        detector: object | None = None,
        first_time: float = 0.0,
        every: float = 0.0,
        in_flight: int = 24,
    ) -> None:
        """first_time: when the source's first sample is (``--start``): an object seen then
        was there from the start. every: the sample spacing (s; 0 when counted in frames).
        in_flight: how many samples the pipeline's queues hold between :meth:`pass_due` and
        the tracker (answers :meth:`pass_due` pinned stay pinned that long)."""
        self.standing_kept = in_flight + _STANDING_SPARE
        self._kept_more = False  # the detector was asked to keep standing_kept answers
        self.width, self.height, self.scale = width, height, scale
        self.look_every = look_every
        self._region = region
        self._detector = detector
        # Looks come at most once per look_every, and no more often than samples do.
        self.misses = max(0, round(2 * look_every / max(look_every, every)))
        self.tracker = self._new_tracker()
        self.last_look: float | None = None
        self.first_time = first_time
        self.last_object_time: float | None = None
        self.quiet_looks = 0  # looks at quiet samples since the last changed one
        self.visible: set[int] = set()  # tracks that explained a change: the builder has them
        self.arrived: list[Track] = []  # tracks made visible at the latest sample
        self.ending: dict[int, tuple[Track, float]] = {}  # ended visible tracks, grace end
        self.grace = 1.5 * look_every
        self.trail: dict[int, BBox] = {}  # each track's latest change's own box
        # The first looks' state (warm) and the look-ahead thread's (look_ahead): each touched
        # by its own thread only.
        self._ahead_at: float | None = None
        self._ahead_changed = False
        # The last pass made ahead: (the first look's thumbnail of its frame, its answer).
        self._last_pass: tuple[np.ndarray, list] | None = None
        # Frames whose answer is an earlier pass's, pinned in the detector (``pass_due``):
        # (frame, region), oldest first.
        self._standing: deque[tuple[np.ndarray, BBox | None]] = deque()
        self.passes_spared = 0
        self._ahead_clusters: list[Hint] = []  # where the last analysed pair changed

    def reset(self) -> None:
        """No event is open (a checkpoint): forget the scenery, as a resumed run starts."""
        self.tracker = self._new_tracker()
        self.last_look = None
        self.last_object_time = None
        self.quiet_looks = 0
        self.visible.clear()
        self.trail.clear()

    @property
    def region(self) -> BBox | None:
        """The watched box in work pixels, or None for the whole frame. The pipeline learns it
        from the first frame, after this watcher is made: setting it moves the tracker's view."""
        return self._region

    @region.setter
    def region(self, region: BBox | None) -> None:
        self._region = region
        self.tracker.view = self._view()

    def _view(self) -> BBox:
        """The watched view in original pixels: where tracks end as objects leave it."""
        if self._region is None:
            return (0, 0, self.width, self.height)
        x, y, w, h = (round(v * self.scale) for v in self._region)
        return (x, y, w, h)

    def _new_tracker(self) -> ObjectTracker:
        return ObjectTracker(self.misses, view=self._view())

    @property
    def live_ids(self) -> set[int]:
        """The tracks whose events stay open: followed and visible, or in their grace."""
        return (self.visible & set(self.tracker.live)) | set(self.ending)

    # -- when ------------------------------------------------------------------------------

    def wants_look(
        self,
        time: float,
        changed: bool,
        starts_change: bool,
        changes: list[Detection] | None = None,
    ) -> bool:
        """Run the detector at this sample? See the module docstring. ``changes``: the
        sample's change detections: while the tracked objects explain all of them (someone
        shifting their weight at the table), looking again tells nothing new, so it waits
        ``SETTLED_LOOKS`` times longer."""
        since = None if self.last_look is None else time - self.last_look
        # A tenth of slack: samples of a 12.5 fps video at --every 1s fall 0.96 s apart.
        due = since is None or since >= 0.9 * self.look_every
        if changed:
            self.quiet_looks = 0
            if starts_change or since is None:
                return True
            if due and not self._explained(changes or []):
                return True
            return since >= 0.9 * SETTLED_LOOKS * self.look_every
        # Quiet: nothing moved, so whoever is tracked is still where it was, or left just
        # before. A few looks settle which (a track needs ``misses`` + 1 looks without its
        # object to end); after that, looking again would only see the same scene.
        wanted = (
            bool(self.visible & set(self.tracker.live)) and due and self.quiet_looks <= self.misses
        )
        if wanted:
            self.quiet_looks += 1
        return wanted

    def _explained(self, changes: list[Detection]) -> bool:
        """Whether the objects followed now own every localized change (by their last box)."""
        where = {i: t.sightings[-1].box for i, t in self.tracker.live.items()}
        if not where:
            return False
        # Something appearing or going is worth a look even in a tracked object's place: it
        # may be the object leaving, or another arriving where it stood.
        return all(
            c.sentence.kind not in ("appeared", "disappeared")
            and _best_overlap(c.bbox, where) is not None
            for c in changes
            if c.bbox is not None and c.sentence.kind not in _WHOLE_FRAME
        )

    # -- what ------------------------------------------------------------------------------

    def movers(self, pixels: np.ndarray, region: BBox | None) -> list:
        """What the detector confidently finds in ``pixels`` (a sample at work size, read-only)
        of the things tracks follow, in work pixels: the pass :meth:`look` and
        :meth:`warm` make of the same frame (``analysis/detect.py`` keeps the last few),
        so asking costs nothing more. Safe from any thread (it reads no tracking state)."""
        return [d for d in self._found(pixels, region) if d.label in NOUNS and d.score >= MIN_SCORE]

    def _found(self, pixels: np.ndarray, region: BBox | None) -> list:
        """The detector's pass over ``region`` of ``pixels``, as every caller here asks it (the
        same question, so one pass per frame: ``analysis/detect.py`` keeps the last few)."""
        return self._the_detector().detect(pixels, region=region, min_score=MIN_TOP_VIEW_SCORE)

    def _the_detector(self):  # -> analysis.detect.ObjectDetector (or a test's stand-in)
        from ..analysis.detect import default_detector

        detector = self._detector or default_detector()
        keep = getattr(detector, "keep_answers", None)
        if keep is not None and not self._kept_more:
            # Answers made ahead are still there when later stages ask.
            keep(self.standing_kept)
            self._kept_more = True
        return detector

    def pass_due(
        self,
        time: float,
        pixels: np.ndarray,
        changed: bool,
        region: BBox | None,
        thumb: np.ndarray,
        changed_since: Callable[[np.ndarray], np.ndarray],
        to_thumb: tuple[float, float, float, float],
    ) -> bool:
        """Whether the pipeline's first looks should make the detector's pass on this sample
        (:meth:`warm`), so that its answer is ready when :meth:`look` and the held-change check
        (``pipeline._Looker._held``) ask. It follows :meth:`wants_look`'s rule for changed
        samples (the first of a change, then once per ``look_every``), so it rarely looks at a
        frame :meth:`look` then does not.

        A changed sample after one whose changes are only the things the last pass here found
        standing where it found them (:func:`still_on`) takes that pass's answer instead of a
        pass of its own: someone standing at a table is where the detector last saw them (the
        room clip at 1 s: 123 passes -> 65, the same events). Decided on the first looks'
        thread before the sample is handed on, so every later question about the frame gets
        the same answer. A sample's answer is not carried past a quiet one (the first changed
        sample after it passes again): a run resumed there, which knows no earlier pass,
        decides as an uninterrupted one (no checkpoint is taken at a changed sample: the
        pipeline's ``holding``). The answer is pinned in the detector
        (``ObjectDetector.pin``), so the captions' naming, which asks the detector the same
        question, gets it too.

        region: the watched box in work pixels (None: the whole frame); thumb: the first
        look's thumbnail of the watched box, (h, w, 3) uint8; changed_since: the first look's
        (h, w) bool change mask from an earlier such thumbnail to this one; to_thumb: (x0, y0,
        sx, sy) mapping work pixels to the thumbnail."""
        starts = changed and not self._ahead_changed
        self._ahead_changed = changed
        if not changed:
            self._last_pass = None
            return False
        if not starts and self._ahead_at is not None:
            if time - self._ahead_at < 0.9 * self.look_every:
                return False
        self._ahead_at = time
        if self._last_pass is not None:
            before, answer = self._last_pass
            if still_on(answer, changed_since(before), to_thumb):
                detector = self._the_detector()
                detector.pin(pixels, answer, region, MIN_TOP_VIEW_SCORE)
                self._standing.append((pixels, region))
                while len(self._standing) > self.standing_kept:
                    detector.unpin(*self._standing.popleft(), MIN_TOP_VIEW_SCORE)
                self.passes_spared += 1
                return False
        return True

    def close(self) -> None:
        """The run is over: unpin the answers :meth:`pass_due` pinned in the detector, which
        the process shares (a long-lived one describes many sources)."""
        while self._standing:
            self._the_detector().unpin(*self._standing.popleft(), MIN_TOP_VIEW_SCORE)
        if self._kept_more:  # the answers kept for this run's queues: the default again
            self._kept_more = False
            from ..analysis.detect import default_detector  # built already: it was asked

            (self._detector or default_detector()).keep_answers()

    def warm(self, pixels: np.ndarray, thumb: np.ndarray, region: BBox | None) -> None:
        """Make the detector's pass that :meth:`pass_due` asked for, on the first looks' thread
        right after the sample is handed on: the pass releases the GIL and runs there while
        the analysis thread works on the pairs before (a question about the same frame from
        another thread waits for it: ``analysis/detect.py``). What it finds is what a later
        question would: nothing a run reports depends on when it is made. ``pixels``: the
        sample at work size, read-only (the array later stages ask about: the detector knows a
        frame by its memory); ``thumb``: its first look's thumbnail."""
        self._last_pass = (thumb, self._found(pixels, region))

    def look_ahead(self, analysis: Analysis | None, continues: bool = False) -> None:
        """Make the detector's answer for naming an analysed pair's changes ready before the
        captions ask (the grounded captioner asks about the pair's after frame,
        ``recognise.detect_for_naming``). Called by the pipeline's look-ahead thread, a few
        samples before the captions: on the busy motorway the captions' own passes were 97
        of 122, all on the captions' thread. Not when every change is where one of the pair
        before was (``continues``: this pair's before frame is that one's after frame): the
        captions then take the noun from that pair's (a hint, ``grounded.hint_for``) and ask
        nothing; with ``--describe-every 0s`` on the motorway, naming every pair ahead made
        573 passes where the captions wanted far fewer. ``analysis``: None for a sample
        without an analysed pair (the hints then start again)."""
        before, self._ahead_clusters = (
            self._ahead_clusters,
            ([Hint(c.bbox, "") for c in analysis.clusters] if analysis is not None else []),
        )
        if analysis is not None and not (
            continues and before and all(hint_for(before, c.bbox) for c in analysis.clusters)
        ):
            from ..analysis.recognise import detect_for_naming, watched_area

            detect_for_naming(analysis.pair.after.pixels, watched_area(analysis.valid))

    def look(
        self,
        time: float,
        pixels: np.ndarray,
        changes: list[Detection] | None = None,
        active: np.ndarray | None = None,
    ) -> Look:
        """Detect in ``pixels`` (the sample's (H, W, 3) uint8 RGB frame at work size) and step
        the tracker. ``changes``: this sample's change detections; those the pixel analysis
        already named ("a person", "a car" from HOG and the ImageNet classifier) are sightings
        too where the detector found nothing there (it misses cars seen from above).
        ``active``: the pair's changed pixels ((H, W) bool, work size), when it was analysed."""
        self.last_look = time
        found = self._found(pixels, self.region)
        sightings, weak = [], []
        moving = [
            tuple(v / self.scale for v in c.bbox) for c in changes or () if c.bbox is not None
        ]
        cast = scene_cast(pixels) if found else (0.0, 0.0)
        for d in found:
            label = self._named(d.label, d.box, pixels, moving, active)
            if label is None:
                continue
            x, y, w, h = d.box
            s = self.scale
            box = (round(x * s), round(y * s), round(w * s), round(h * s))
            # The middle half of the box: the thing itself, little of the road around it.
            middle = pixels[y + h // 4 : y + h - h // 4, x + w // 4 : x + w - w // 4]
            sighting = Sighting(time, box, label, d.score, colour_name(middle, cast=cast))
            # Below MIN_SCORE a thing the detector names may only continue a track (a car
            # from above, named by its size and motion, is judged by _named alone).
            (weak if d.label in NOUNS and d.score < MIN_SCORE else sightings).append(sighting)
        for change in changes or ():
            label = _CHANGE_NOUNS.get(change.noun)
            # "The person in the centre is gone" names where someone was, not is.
            if label is None or change.bbox is None or change.sentence.kind not in _PRESENT:
                continue
            if any(box_iou(change.bbox, s.box) > 0.2 for s in sightings):
                continue
            # A change holding two or more things the detector found is a group - dense
            # traffic merged into one cluster - not one object: named "a truck" and followed,
            # it became a phantom that "stayed in the centre" for a whole motorway clip.
            where = tuple(v / self.scale for v in change.bbox)
            if sum(_covered(d.box, where) >= 0.8 for d in found) >= 2:
                continue
            confidence = float(change.sentence.details.get("recognition_confidence", 0.5))
            sightings.append(Sighting(time, change.bbox, label, min(confidence, 0.6)))
        kept = _one_per_object(sightings)
        weak = [w for w in _one_per_object(weak) if all(box_iou(w.box, k.box) < 0.6 for k in kept)]
        seen, ended = self.tracker.update(time, kept, weak)
        for track in ended:
            if track.id in self.visible:
                self.visible.discard(track.id)
                self.ending[track.id] = (track, time + self.grace)
        return Look(seen, ended)

    def expired(self, time: float) -> list[Track]:
        """Ended tracks whose grace is over at ``time``: their events can be told."""
        done = [t for t, until in self.ending.values() if time >= until - 1e-6]
        for track in done:
            del self.ending[track.id]
        return done

    def finish(self) -> list[tuple[Track, bool]]:
        """The source ended: every visible track ends, with whether it was still followed then
        (in view at the end) or already gone (in its grace)."""
        done = [(t, True) for t in self.tracker.finish() if t.id in self.visible]
        done += [(t, False) for t, _ in self.ending.values()]
        self.ending.clear()
        self.visible.clear()
        return done

    def _object_did_it(self, detection: Detection, time: float) -> bool:
        """A whole-frame statement (light, camera, view) made while something moves in view or
        just did: a white car filling the frame moves a camera's exposure and fools the
        camera-motion fit; the thing's own event tells what happened. A change of light with
        nothing moving behind it (a lamp switched on) stays an event of its own."""
        return (
            detection.sentence.kind in _WHOLE_FRAME
            and self.last_object_time is not None
            and time - self.last_object_time <= self.look_every + 1e-6
        )

    @staticmethod
    def _named(
        label: str,
        box: BBox,
        pixels: np.ndarray,
        moving: list[tuple[float, ...]],
        active: np.ndarray | None = None,
    ) -> str | None:
        """The noun a detection is followed as, or None for things that do not come and go.

        NanoDet, trained on street-level photos, calls a car seen from straight above a "cell
        phone", a "kite" or a "bottle". Such a box is a car by the evidence around it: it is
        car-sized for the frame (no phone fills a sixth of a surveillance view) and either it
        moves (a change of the pixel analysis covers it: phones and kites do not drive through
        a car park, and a painted line never moves) or the ImageNet classifier on the crop,
        which knows cars from above, says vehicle."""
        if label in NOUNS:
            return label
        share = box[2] * box[3] / max(1, pixels.shape[0] * pixels.shape[1])
        if label not in TOP_VIEW_CAR or not CAR_SIZE[0] <= share <= CAR_SIZE[1]:
            return None
        if any(_covered(box, change) >= 0.5 for change in moving):
            return "car"
        if active is not None and active.shape == pixels.shape[:2]:
            x, y, w, h = (int(v) for v in box)
            if active[y : y + h, x : x + w].mean() >= MOVING_SHARE:
                return "car"
        from ..analysis.recognise import VEHICLE_GROUPS, classify_groups

        masses = classify_groups(pixels, tuple(int(v) for v in box))
        return "car" if sum(masses.get(g, 0.0) for g in VEHICLE_GROUPS) >= VEHICLE_MASS else None

    def story(self, track: Track, *, to_end: bool) -> TrackStory | None:
        """How an ended track is told (None: too short to be an object)."""
        if not self.tracker.reportable(track):
            return None
        from_start = track.start <= self.first_time + self.look_every + 1e-6
        return tell(track, self.width, self.height, from_start=from_start, to_end=to_end)

    # -- which sentences -------------------------------------------------------------------

    def explain(
        self,
        detections: list[Detection],
        time: float,
        before_time: float,
        look: Look | None,
        light_changed: bool = False,
    ) -> list[Detection]:
        """This sample's change detections, with those a tracked object explains made part of
        its event, and a sighting for each object seen that no change sentence mentioned.
        ``light_changed``: the pair's exposure changed (the analysis' global light fit); then
        an unnamed change elsewhere while an object is in view is the exposure's doing (a
        painted arrow "gone" as a white car brightens the frame), and goes with it."""
        self.arrived = []
        tracks = dict(self.tracker.live)
        tracks.update({i: t for i, (t, _) in self.ending.items()})
        ended_now = {t.id: t for t in look.ended} if look is not None else {}
        # An object that went out through the view's edge owns only "gone" changes (the trail
        # of its leaving) after the look that found it gone: the next car to come by its last
        # place is another car.
        departed = {i for i, (t, _) in self.ending.items() if t.left_view and i not in ended_now}
        # Tracks that ended at this look without having made a change yet: an object that left
        # the view between two looks of a busy scene, whose own changes merged into the
        # clusters of the traffic around it, makes its first change of its own by leaving (a
        # lorry "gone from the lower right").
        just_ended = {i: t for i, t in ended_now.items() if i not in tracks}
        tracks.update(just_ended)
        gone = set(self.ending) | set(ended_now)
        seen_now = {t.id for t in look.seen} if look is not None else set()
        # At a look, the objects where they are now; between looks, where they were last seen.
        where = {i: t.sightings[-1].box for i, t in tracks.items()}
        if where or any(
            d.bbox is not None and d.sentence.kind not in _WHOLE_FRAME for d in detections
        ):
            self.last_object_time = time
        if not where:
            return [d for d in detections if not self._object_did_it(d, time)]
        out: list[Detection] = []
        mentioned: set[int] = set()
        for detection in detections:
            if self._object_did_it(detection, time):
                continue  # what moves in view explains a change of the whole frame
            if detection.bbox is None or detection.sentence.kind in _WHOLE_FRAME:
                out.append(detection)
                continue
            leaving = detection.sentence.kind == "disappeared"
            owners = where if leaving else {i: b for i, b in where.items() if i not in departed}
            owner = _best_overlap(detection.bbox, owners, gone)
            if owner is None and leaving:
                # Between looks an object walking out of view leaves a trail of "gone" changes,
                # each touching the one before: the last of them can be beyond the object's last
                # box (the room clip's man in black, two pixels past it at the frame's edge).
                trail = {i: b for i, b in self.trail.items() if i in tracks}
                owner = _best_overlap(detection.bbox, trail, gone)
            if owner is None:
                if not (light_changed and detection.noun in ("", "object")):
                    out.append(detection)
                continue
            mentioned.add(owner)
            self.trail[owner] = detection.bbox
            if owner in just_ended:
                self.ending[owner] = (just_ended.pop(owner), time + self.grace)
                self.arrived.append(tracks[owner])
            elif owner not in self.ending and owner not in self.visible:
                self.visible.add(owner)
                self.arrived.append(tracks[owner])
            track = tracks[owner]
            out.append(
                dataclasses.replace(
                    detection,
                    bbox=where[owner],
                    noun=track.noun,
                    track=owner,
                    track_since=track.start,
                )
            )
        # An object that explains its first change now was seen before: its event starts at its
        # first sighting, not at the first change it made (a car named at the top of the lot
        # that drove in from the bottom a moment ago).
        earlier = [
            Detection(
                s.time,
                s.time,
                Sentence(self._seen_text(t.noun, s.box), kind=SEEN),
                s.box,
                t.noun,
                t.id,
                t.start,
            )
            for t in self.arrived
            for s in t.sightings
            if s.time < time - 1e-6
        ]
        out = earlier + out
        for track_id, box in where.items():
            if track_id in mentioned or track_id not in seen_now or track_id not in self.visible:
                continue
            track = tracks[track_id]
            text = self._seen_text(track.noun, box)
            out.append(
                Detection(
                    time,
                    before_time,
                    Sentence(text, kind=SEEN),
                    box,
                    track.noun,
                    track_id,
                    track.start,
                )
            )
        return out

    def _seen_text(self, noun: str, box: BBox) -> str:
        return f"a {noun} {region_phrase(box, self.width, self.height)}"


def in_video_words(detection: Detection, width: int, height: int) -> Detection:
    """A still's words made right for a camera's footage.

    "Changed colour" and "changed material" describe an object that stays in place with its
    shape: a repainted car in a media team's two versions, a rendered sphere turned metal. In a
    camera's footage the same measurement is a person turning round or light moving over a
    surface: a named thing (a person, a vehicle) that "changed colour" moved; an unnamed one is
    a local change of light, which merges with the light changes around it."""
    kind = detection.sentence.kind
    if kind not in ("colour", "material") or detection.bbox is None:
        return detection
    where = region_phrase(detection.bbox, width, height)
    if detection.noun in _CHANGE_NOUNS:
        noun = _CHANGE_NOUNS[detection.noun]
        sentence = dataclasses.replace(
            detection.sentence, text=f"the {noun} {where} moved", kind="changed"
        )
    else:
        sentence = dataclasses.replace(
            detection.sentence, text=f"the light changed {where}", kind="lighting"
        )
    return dataclasses.replace(detection, sentence=sentence)


def _one_per_object(sightings: list[Sighting], iou: float = 0.6) -> list[Sighting]:
    """One sighting per box: the detector's non-maximum suppression runs per class, so a person
    seen from behind can come back as a person, a dog and a cat in one place. The best score
    stays; the track's noun is then the vote over all its looks."""
    kept: list[Sighting] = []
    for sighting in sorted(sightings, key=lambda s: -s.score):
        if all(box_iou(sighting.box, k.box) < iou for k in kept):
            kept.append(sighting)
    return kept


def _covered(box: BBox, change: tuple[float, ...]) -> float:
    """The share of ``box`` a change's box covers."""
    x, y, w, h = box
    cx, cy, cw, ch = change
    ix = min(x + w, cx + cw) - max(x, cx)
    iy = min(y + h, cy + ch) - max(y, cy)
    return max(0.0, ix) * max(0.0, iy) / max(1.0, w * h)


def _best_overlap(box: BBox, where: dict[int, BBox], gone: set[int] = frozenset()) -> int | None:
    """The tracked object a change belongs to, or None: the one whose box, grown by a fifth of
    its size (a cluster often covers a part of a person), covers most of the change; else,
    between looks, when exactly one object is near (its box grown by half its size touches the
    change: it walked on since it was last seen), that one. ``gone``: objects whose track
    ended, which only a change in their very place still belongs to."""
    x, y, w, h = box
    best, best_area = None, 0.0
    near = []
    for track_id, (ox, oy, ow, oh) in where.items():
        for grow, store in ((0.2, True), (0.5, False)):
            gx, gy = ow * grow, oh * grow
            ix = min(x + w, ox + ow + gx) - max(x, ox - gx)
            iy = min(y + h, oy + oh + gy) - max(y, oy - gy)
            area = max(0.0, ix) * max(0.0, iy)
            if store and area > best_area and area >= 0.3 * w * h:
                best, best_area = track_id, area
            if not store and area > 0 and track_id not in gone:
                near.append(track_id)
    if best is None and len(near) == 1:
        return near[0]
    return best
