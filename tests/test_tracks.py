"""Objects followed over time (timeline.tracks / timeline.objects): tracks from sightings, the
sentence a track says, and events built from tracks - with synthetic sightings of known truth,
so no detector runs here."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from spotdiff_cli.analysis.detect import Detection as Found
from spotdiff_cli.timeline import objects as objects_module
from spotdiff_cli.timeline.events import SEEN, EventBuilder
from spotdiff_cli.timeline.objects import Look, ObjectWatcher, still_on
from spotdiff_cli.timeline.tracks import ObjectTracker, Sighting, Track, count_phrase, tell
from spotdiff_cli.types import Detection, Sentence

W, H = 640, 360


def visit_sightings(i: int) -> list[Sighting]:
    """A person walks in from the bottom (2-7), stands still (8-19), walks out right (20-24)."""
    t = float(i)
    if 2 <= i < 8:
        return [Sighting(t, (300, 360 - 40 * (i - 1), 40, 100), "person", 0.8)]
    if 8 <= i < 20:
        return [Sighting(t, (300, 120, 40, 100), "person", 0.8)]
    if 20 <= i < 25:
        return [Sighting(t, (300 + 70 * (i - 19), 120, 40, 100), "person", 0.7)]
    return []


def test_one_visit_is_one_track_and_its_story_says_what_happened():
    tracker = ObjectTracker()
    ended = []
    for i in range(30):
        ended += tracker.update(float(i), visit_sightings(i))[1]
    assert len(ended) == 1 and not tracker.live
    track = ended[0]
    assert (track.start, track.end, track.noun) == (2.0, 24.0, "person")
    story = tell(track, W, H, from_start=False, to_end=False)
    assert story.kind == "visited"
    assert story.text.startswith("a person walked in from the bottom, stood in the centre for 1")
    assert story.text.endswith("and left to the right")
    assert [m.kind for m in story.moments] == ["appeared", "stayed", "disappeared"]


def test_two_objects_crossing_are_two_tracks():
    tracker = ObjectTracker()
    ended = []
    for i in range(12):
        t = float(i)
        a = Sighting(t, (20 + 50 * i, 150, 60, 40), "car", 0.7)  # left -> right
        b = Sighting(t, (570 - 52 * i, 170, 60, 40), "car", 0.7)  # right -> left
        ended += tracker.update(t, [a, b])[1]
    for k in range(5):  # the cars are gone: a few looks with nothing end both tracks
        ended += tracker.update(20.0 + k, [])[1]
    assert len(ended) == 2
    stories = {tell(t, W, H, from_start=False, to_end=False).text for t in ended}
    assert stories == {
        "a car drove through from the left to the right",
        "a car drove through from the right to the left",
    }


def test_a_noun_is_the_tracks_majority_not_one_vote():
    tracker = ObjectTracker()
    for i, label in enumerate(["car", "car", "truck", "car"]):
        tracker.update(float(i), [Sighting(float(i), (100 + 5 * i, 100, 80, 50), label, 0.6)])
    (track,) = tracker.finish()
    assert track.noun == "car"
    story = tell(track, W, H, from_start=False, to_end=True)
    assert story.kind == "parked" and "still there at the end" in story.text


def test_a_weak_sighting_continues_a_track_but_never_starts_one():
    """ByteTrack's second association: a lorry leaving by the frame's edge scores below the
    threshold that starts a track, yet it is the same lorry."""
    tracker = ObjectTracker()
    lorry = [Sighting(float(i), (400 + 60 * i, 150, 90, 90), "bus", 0.5) for i in range(3)]
    assert tracker.update(0.0, [], weak=[dataclasses.replace(lorry[0], score=0.35)]) == ([], [])
    assert not tracker.live  # weak alone: nothing followed
    tracker.update(1.0, [lorry[1]])
    far = Sighting(2.0, (20, 300, 40, 40), "car", 0.35)  # too far from where the lorry goes
    person = Sighting(2.0, (530, 150, 90, 90), "person", 0.35)  # not a vehicle
    weak = [far, person, dataclasses.replace(lorry[2], score=0.35)]
    seen, _ = tracker.update(2.0, [], weak=weak)
    (track,) = seen
    assert [s.time for s in track.sightings] == [1.0, 2.0] and tracker.reportable(track)
    assert [s.box for s in track.sightings][-1] == lorry[2].box
    assert len(tracker.live) == 1  # neither the far car nor the person became a track


def test_a_vehicle_track_does_not_go_on_with_a_much_smaller_box_a_person_track_does():
    """A change of size counts twice as much against a vehicle's match as a person's: a
    lorry's box does not shrink to a fifth of its width between looks, and a person's may
    (sitting down behind a table, stepping behind someone)."""
    for label, continues in (("truck", False), ("person", True)):
        tracker = ObjectTracker()
        for i in range(2):
            tracker.update(float(i), [Sighting(float(i), (400, 150, 150, 150), label, 0.6)])
        small = Sighting(2.0, (465, 195, 30, 30), label, 0.6)  # a fifth as wide, inside
        seen, _ = tracker.update(2.0, [small])
        (track,) = seen
        assert (len(track.sightings) == 3) is continues, label


def test_a_track_that_went_out_through_the_views_edge_ends_at_the_next_look():
    """The motorway at one look a second: a lorry that went out at the right edge was kept for
    its two misses and went on with a car that came by its last place 3 s later; the track and
    its noun became the car's. Leaving by the edge ends it at once; standing at the edge, or
    an unknown view, keeps the misses' patience."""
    lorry = [Sighting(0.0, (900, 300, 160, 160), "truck", 0.7),
             Sighting(1.0, (1000, 350, 280, 330), "truck", 0.7)]  # fmt: skip
    car = Sighting(3.0, (1100, 520, 140, 110), "car", 0.7)
    for view, ends in (((0, 0, 1280, 720), True), (None, False)):
        tracker = ObjectTracker(view=view)
        for s in lorry:
            tracker.update(s.time, [s])
        seen, ended = tracker.update(2.0, [])
        assert (len(ended) == 1) is ends, view
        if ends:
            assert ended[0].left_view and ended[0].noun == "truck"
            seen, _ = tracker.update(3.0, [car])
            assert [len(t.sightings) for t in seen] == [1]  # the car is a track of its own
    still = ObjectTracker(view=(0, 0, 1280, 720))
    for i in range(3):  # at the edge, not moving out: a miss is only a miss
        still.update(float(i), [Sighting(float(i), (1150, 300, 130, 120), "car", 0.7)])
    assert still.update(3.0, [])[1] == []
    roi = ObjectTracker(view=(800, 200, 300, 300))  # the edge of a --roi box is the view's edge
    for i, x in enumerate((850, 978)):
        roi.update(float(i), [Sighting(float(i), (x, 300, 120, 100), "car", 0.7)])
    (gone,) = roi.update(2.0, [])[1]
    assert gone.left_view


def test_the_trackers_view_follows_the_watched_region_the_pipeline_sets_later():
    """The pipeline learns the --roi box from the first frame, after the watcher is made: its
    tracker must then end tracks at the box's edge, not the frame's, and so must the tracker a
    checkpoint starts afresh."""
    watcher = ObjectWatcher(1280, 720, 2.0, look_every=1.0)
    assert watcher.tracker.view == (0, 0, 1280, 720)
    watcher.region = (300, 250, 120, 80)  # work pixels, half size
    assert watcher.tracker.view == (600, 500, 240, 160)
    watcher.reset()
    assert watcher.tracker.view == (600, 500, 240, 160)


def test_an_object_that_left_between_looks_of_busy_traffic_is_told_by_its_leaving():
    """On a busy road the pixel analysis merges the traffic into clusters too large for any one
    track, so a lorry crossing in two looks explains no change of its own; found gone at the
    next look, the change at its last place is its leaving, and it is told. A change that comes
    to that place afterwards is another vehicle's."""
    watcher = ObjectWatcher(1280, 720, 1.0, look_every=1.0)
    lorry = [Sighting(2.0, (844, 312, 164, 162), "bus", 0.6),
             Sighting(3.0, (996, 372, 284, 336), "bus", 0.6)]  # fmt: skip
    traffic = _change(2.0, (0, 234, 1012, 486), "the grey truck in the lower left moved", "moved")

    def cars(t: float) -> list[Sighting]:  # the traffic around it, slow in the distance
        return [Sighting(t, (190 + 4 * t, 418, 178, 180), "car", 0.7),
                Sighting(t, (380, 546 - 4 * t, 118, 108), "car", 0.7)]  # fmt: skip

    for s in lorry:
        seen, ended = watcher.tracker.update(s.time, [s, *cars(s.time)])
        look = Look(seen, ended)
        assert all(d.track is None for d in watcher.explain([traffic], s.time, s.time - 1, look))
    seen, ended = watcher.tracker.update(4.0, cars(4.0))
    assert [t.id for t in ended] == [1] and ended[0].left_view
    leaving = _change(4.0, (900, 394, 380, 326), "the large grey object in the lower right is gone",
                      "disappeared")  # fmt: skip
    said = watcher.explain([leaving], 4.0, 3.0, Look(seen, ended))
    assert [d.track for d in said if d.sentence.kind == "disappeared"] == [1]
    assert [t.id for t in watcher.arrived] == [1]  # its event starts with its first sighting
    assert {d.time for d in said if d.track == 1} == {2.0, 3.0, 4.0}
    later = _change(6.0, (1096, 528, 140, 106), "a grey car appeared on the right")
    (other,) = watcher.explain([later], 6.0, 5.0, None)
    assert other.track is None
    (track,) = watcher.expired(6.0)
    story = watcher.story(track, to_end=False)
    assert story.text == "a bus appeared on the right and drove off to the right"


def test_count_phrases():
    assert count_phrase("person", 1) == "a person"
    assert count_phrase("person", 2) == "two people"
    assert count_phrase("car", 7) == "7 cars"


class FakeDetector:
    """Returns the visit's person box (in work pixels) at each look."""

    def __init__(self) -> None:
        self.calls = 0

    def detect(self, pixels, region=None, min_score=0.0):
        self.calls += 1
        from spotdiff_cli.analysis.detect import Detection as Box

        i = int(round(self.now))
        return [Box(s.box, s.label, s.score) for s in visit_sightings(i)]


def _change(t: float, box, text="a large black object appeared", kind="appeared") -> Detection:
    return Detection(t, t - 1, Sentence(text, kind=kind), box, "object")


def test_a_visit_becomes_one_event_and_the_changes_it_made_join_it():
    """The watcher looks at changed samples and, while the person is tracked, once a second on
    quiet ones; the change sentences the person explains ("a large black object appeared")
    and the exposure change of its arrival become that one event; a change elsewhere stays its
    own event."""
    import numpy as np

    detector = FakeDetector()
    watcher = ObjectWatcher(W, H, 1.0, look_every=1.0, detector=detector)
    builder = EventBuilder("cam.mp4", W, H, merge_distance=0.08, merge_gap=1)
    pixels = np.zeros((H, W, 3), np.uint8)
    events = []
    for i in range(32):
        t = float(i)
        detector.now = t
        changes = []
        if i in (2, 3, 4, 5, 6, 7, 20, 21, 22, 23, 24, 25):  # walking makes pixel changes
            boxes = visit_sightings(i) or visit_sightings(i - 1)
            changes = [_change(t, boxes[0].box)]
        if i == 3:
            changes.append(
                Detection(t, t - 1, Sentence("the lighting changed", kind="lighting"), None)
            )
        if i == 12:
            changes.append(_change(t, (560, 300, 30, 30), "a bag appeared in the lower right"))
        changed = bool(changes)
        look = None
        if watcher.wants_look(t, changed, changed and not changes_before(i)):
            look = watcher.look(t, pixels, changes)
        detections = watcher.explain(changes, t, t - 1, look)
        for track in watcher.expired(t):
            builder.tell(track, watcher.story(track, to_end=False))
        events += builder.add(i, detections, time=t, live_tracks=watcher.live_ids)
    for track, in_view in watcher.finish():
        builder.tell(track, watcher.story(track, to_end=in_view))
    events += builder.finish()
    texts = [e.text for e in events]
    assert len(events) == 2, texts
    visit = next(e for e in events if e.track)
    assert visit.kind == "visited" and visit.noun == "person"
    assert re.match(r"a person (in \w+ )?walked in from the bottom", visit.text), visit.text
    assert [s.kind for s in visit.sentences] == ["appeared", "stayed", "disappeared"]
    assert visit.track[0][0] == 2.0 and visit.track[-1][0] == 24.0
    assert not any("lighting" in t for t in texts)
    assert any("bag" in t for t in texts)
    assert detector.calls < 32  # quiet samples with nobody tracked are not looked at


def changes_before(i: int) -> bool:
    return i - 1 in (2, 3, 4, 5, 6, 7, 12, 20, 21, 22, 23, 24, 25)


def test_an_object_that_never_changed_anything_is_scenery():
    """A detection at every look that explains no change (a parked car, a sign) is no event."""
    watcher = ObjectWatcher(W, H, 1.0, look_every=1.0, detector=None)
    seen = Sighting(0.0, (10, 10, 50, 40), "car", 0.9)
    watcher.tracker.update(0.0, [seen])
    detections = watcher.explain([], 0.0, 0.0, None)
    assert detections == [] and not watcher.live_ids
    assert SEEN == "seen"


def test_the_room_clip_tells_each_visit_as_one_person_event_with_its_path(tmp_path):
    """Real footage through the console script: every visit of the first 50 s is one event
    about a person, timeline.json carries its path, resumable from the JSON."""
    import json

    from conftest import media
    from console import run_spotdiff

    from spotdiff_cli.report.timeline import timeline_from_dict

    clip = media("intel_one-by-one-person-detection.mp4")
    out = tmp_path / "room"
    proc = run_spotdiff("video", clip, "--every", "1s", "--end", "50", "--out", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "timeline.json").read_text())
    events = data["sources"][0]["events"]
    assert [e["noun"] for e in events] == ["person", "person"], [e["text"] for e in events]
    for e in events:
        assert e["kind"] == "visited" and len(e["track"]) >= 5
        assert re.match(r"a person (in \w+ )?walked in from the bottom", e["text"]), e["text"]
        assert (out / e["picture"]).is_file()
    (result,) = timeline_from_dict(data).values()
    assert result.events[0].track[0][0] == events[0]["track"][0][0]


def test_passes_made_ahead_change_no_event_and_leave_the_captions_few(monkeypatch):
    """The detector's passes made ahead (ObjectWatcher.warm on the first looks' thread, the
    naming passes of ObjectWatcher.look_ahead on a thread of their own) only make answers
    ready: the events are those of a run without them, and the captions' thread makes few
    passes itself (it made every one before). (Answers standing for still frames are off
    here: without passes ahead there are none; they are tested below.)"""
    import threading

    from conftest import media

    from spotdiff_cli import api
    from spotdiff_cli.analysis.detect import ObjectDetector
    from spotdiff_cli.config import Settings, resolve

    clip = media("intel_one-by-one-person-detection.mp4")
    settings = resolve(Settings(), None, video={"every": "1s", "end": "30"})
    passes: list[str] = []
    real = ObjectDetector._detect

    def counted(self, *args):
        passes.append(threading.current_thread().name)
        return real(self, *args)

    monkeypatch.setattr(ObjectDetector, "_detect", counted)
    monkeypatch.setattr(objects_module, "STILL_SHARE", -1.0)

    def run() -> list[tuple]:
        (result,) = api.describe_video([str(clip)], settings)
        return [(e.start, e.end, e.kind, e.noun, e.text, e.track) for e in result.events]

    ahead = run()
    on_captions = passes.count("MainThread")
    total = len(passes)
    passes.clear()
    monkeypatch.setattr(ObjectWatcher, "look_ahead", lambda self, *args: None)
    monkeypatch.setattr(ObjectWatcher, "warm", lambda self, *args: None)
    assert run() == ahead and ahead
    # Without them the captions' thread makes the passes the looker's held-change check did
    # not (that check asks about the changed samples it may carry, on the looker's thread).
    assert on_captions <= 0.2 * total and passes.count("MainThread") > on_captions


def _room_run(monkeypatch, still_share: float) -> tuple[list[tuple], int]:
    """The room clip's first 30 s at 1 s: (events without their tracks' boxes, detector passes)."""
    from conftest import media

    from spotdiff_cli import api
    from spotdiff_cli.analysis.detect import ObjectDetector, default_detector
    from spotdiff_cli.config import Settings, resolve

    passes = []
    real = ObjectDetector._detect

    def counted(self, *args):
        passes.append(1)
        return real(self, *args)

    monkeypatch.setattr(ObjectDetector, "_detect", counted)
    monkeypatch.setattr(objects_module, "STILL_SHARE", still_share)
    settings = resolve(Settings(), None, video={"every": "1s", "end": "30"})
    (result,) = api.describe_video([str(media("intel_one-by-one-person-detection.mp4"))], settings)
    assert not default_detector()._pinned  # the run unpinned its standing answers
    return [(e.start, e.end, e.kind, e.noun, e.text) for e in result.events], len(passes)


def test_a_pass_stands_for_people_standing_still_and_the_events_stay(monkeypatch):
    """Two people visit the room and stand at its table: samples whose changes are only them
    shifting their weight take the last pass's answer (ObjectWatcher.pass_due); the run makes a
    third fewer passes and tells the same visits."""
    standing, fewer = _room_run(monkeypatch, objects_module.STILL_SHARE)
    passing, every = _room_run(monkeypatch, -1.0)
    assert standing == passing and len(standing) == 2
    assert fewer <= 0.75 * every, (fewer, every)


def test_an_answer_stands_only_for_small_changes_on_what_it_found():
    """still_on: every changed pixel on a found person (box grown by HELD_PAD), filling at
    most STILL_SHARE of the box. A change beside them, a change filling their box (walking
    on), or an answer with nobody in it: a pass of its own."""
    person = Found(box=(200, 100, 80, 200), score=0.8, label="person")  # 40x100 in thumb
    changed = np.zeros((180, 320), bool)
    changed[60:70, 110:130] = True  # 200 px: 5 % of the 4000-px box, inside it
    to_thumb = (0.0, 0.0, 0.5, 0.5)  # work pixels (640x360) to the 320x180 thumbnail
    assert still_on([person], changed, to_thumb)
    assert not still_on([], changed, to_thumb)
    weak = Found(box=(200, 100, 80, 200), score=0.2, label="person")
    assert not still_on([weak], changed, to_thumb)
    beside = changed.copy()
    beside[10:14, 10:14] = True
    assert not still_on([person], beside, to_thumb)
    walking = np.zeros_like(changed)
    walking[50:150, 100:140] = True  # the whole box
    assert not still_on([person], walking, to_thumb)


def test_a_vehicle_is_told_with_the_colour_most_looks_agree_on():
    track = ObjectTracker(misses=1, min_hits=1)
    for i, colour in enumerate(["white", "white", "grey", "white"]):
        track.update(
            float(i), [Sighting(float(i), (300, 300 - 60 * i, 60, 40), "car", 0.8, colour)]
        )
    (car,) = track.finish()
    assert car.colour == "white"
    assert tell(car, W, H, from_start=False, to_end=False).text.startswith("a white car ")
    car.sightings[1:3] = [dataclasses.replace(s, colour="grey") for s in car.sightings[1:3]]
    assert car.colour == ""  # two of four: no majority, no colour word
    person = Track(
        9, [Sighting(float(i), (300, 120, 40, 100), "person", 0.8, "black") for i in range(3)]
    )
    assert tell(person, W, H, from_start=False, to_end=False).text.startswith("a person in black ")


def test_the_trail_of_gone_changes_of_someone_walking_out_stays_theirs():
    """Between looks, a person walking out of view leaves "gone" changes, each touching the
    one before; the last is beyond their last box (the room clip at 0.2 s, 87.2 s): it is still
    theirs, not an event of its own."""
    watcher = ObjectWatcher(768, 432, 1.0, 1.0)
    watcher.tracker.update(0.0, [Sighting(0.0, (449, 50, 149, 349), "person", 0.8)])

    def change(t: float, kind: str, box) -> Detection:
        return Detection(t, t - 0.2, Sentence(f"the person {kind}", kind=kind), box, "person")

    steps = [
        (0.2, "moved", (443, 47, 208, 348)),
        (0.4, "disappeared", (629, 290, 139, 142)),  # touches the last box grown by half
        (0.6, "disappeared", (674, 370, 94, 58)),  # beyond it, but on the trail
    ]
    for t, kind, box in steps:
        (said,) = [
            d
            for d in watcher.explain([change(t, kind, box)], t, t - 0.2, None)
            if d.sentence.kind == kind
        ]
        assert said.track == 1, (t, kind)
    watcher.reset()
    watcher.tracker.update(1.0, [Sighting(1.0, (449, 50, 149, 349), "person", 0.8)])
    (alone,) = watcher.explain([change(1.2, "disappeared", (674, 370, 94, 58))], 1.2, 1.0, None)
    assert alone.track is None  # no trail after a checkpoint: a change there is its own


def test_a_change_that_holds_several_detected_things_is_not_one_object():
    """Dense traffic merges into one change cluster; named "a truck" by the pixel analysis it
    was followed as one object that "stayed in the centre" for a whole motorway clip. A change
    holding two or more of the detector's boxes is a group, not a sighting; one holding none
    (a car from above the detector missed) still is."""
    import numpy as np

    from spotdiff_cli.analysis.detect import Detection as Box

    class Cars:
        def detect(self, pixels, region=None, min_score=0.0):
            return [Box((100, 100, 30, 20), "car", 0.6), Box((200, 110, 30, 20), "car", 0.6)]

    watcher = ObjectWatcher(W, H, 1.0, look_every=1.0, detector=Cars())
    pixels = np.zeros((H, W, 3), np.uint8)
    group = Detection(
        1.0, 0.0, Sentence("a large truck appeared", kind="appeared"), (80, 90, 200, 60), "truck"
    )
    lone = Detection(
        1.0, 0.0, Sentence("a car appeared", kind="appeared"), (400, 300, 60, 40), "car"
    )
    look = watcher.look(1.0, pixels, [group, lone])
    boxes = sorted(t.sightings[-1].box for t in look.seen)
    assert boxes == [(100, 100, 30, 20), (200, 110, 30, 20), (400, 300, 60, 40)], boxes


def test_an_event_covers_every_moment_its_story_tells():
    """A car parked from the start whose first explained change comes at 13 s (it drives off):
    its card must not start at 13 s while its text says "from the start" (the motorway clip
    had such a card)."""
    from spotdiff_cli.timeline.tracks import Moment, TrackStory

    builder = EventBuilder("cam.mp4", W, H, merge_distance=0.08, merge_gap=1)
    gone = Detection(13.0, 12.0, Sentence("the car in the centre is gone", kind="disappeared"),
                     (300, 200, 60, 40), "car", track=1)  # fmt: skip
    events = builder.add(13, [gone], time=13.0, live_tracks={1})
    track = Track(1, [Sighting(float(t), (300, 200, 60, 40), "car", 0.8) for t in range(1, 14)])
    told = "a car was in the centre from the start and was gone from the centre 12 s later"
    story = TrackStory("left", told, "car", (Moment(1.0, 1.0, told, "present"),
                                              Moment(13.0, 13.0, told, "disappeared")))  # fmt: skip
    builder.tell(track, story)
    events += builder.finish()
    (car,) = events
    assert car.text == told
    assert car.start <= 1.0 and car.end >= 13.0, (car.start, car.end)
    assert car.track[0][0] == 1.0


def test_event_numbers_follow_start_times_when_a_track_reaches_back():
    """A car in view from 0 s whose first change comes at 3 s starts its event at 0 s (its
    card covers its story); a bag that appeared at 1 s and was gone at 2 s must not take a
    lower number. Numbers follow start times, as every output lists them."""
    from spotdiff_cli.timeline.tracks import Moment, TrackStory

    builder = EventBuilder("cam.mp4", W, H, merge_distance=0.08, merge_gap=1)
    car = Track(7, [Sighting(float(t), (20 + 10 * t, 300, 60, 40), "car", 0.9) for t in range(6)])
    events = []
    for i in range(6):
        t = float(i)
        detections = []
        if i == 1:
            detections.append(_change(t, (500, 50, 30, 30), "a bag appeared", "appeared"))
        if i == 2:
            detections.append(_change(t, (500, 50, 30, 30), "the bag is gone", "disappeared"))
        if i >= 3:
            moved = Detection(t, t - 1, Sentence("a car moved", kind="moved"), car.sightings[i].box)
            detections.append(dataclasses.replace(moved, noun="car", track=7, track_since=0.0))
        events += builder.add(i, detections, time=t, live_tracks={7})
    story = TrackStory(
        "left", "a car was on the left from the start and drove off", "car",
        (Moment(0.0, 3.0, "a car was on the left from the start", "present"),
         Moment(5.0, 5.0, "a car drove off", "left")),
    )  # fmt: skip
    builder.tell(car, story)
    events += builder.add(6, [], time=6.0, live_tracks=set())
    events += builder.finish()
    assert [(e.start, e.noun) for e in events] == [(0.0, "car"), (1.0, "object")]
    assert [e.id for e in events] == [1, 2]


def _room_events(settings, monkeypatch=None, carry: bool = True):
    from conftest import media

    from spotdiff_cli import api
    from spotdiff_cli.timeline import pipeline

    with pytest.MonkeyPatch.context() as m:
        if not carry:  # every changed pair analysed, as before held changes were carried
            m.setattr(pipeline._Looker, "_held", lambda self, *args: False)
        (result,) = api.describe_video(
            [str(media("intel_one-by-one-person-detection.mp4"))], settings
        )
    told = [(e.start, e.end, e.kind, e.noun, e.text, e.sentences, e.track) for e in result.events]
    return result.analysed, told


def test_a_person_standing_where_described_is_carried_not_analysed_again():
    from spotdiff_cli.config import Settings, resolve

    settings = resolve(Settings(), None, video={"every": "1s", "end": "48"})
    analysed, told = _room_events(settings)
    analysed_all, told_all = _room_events(settings, carry=False)
    # Two visits, each a person walking in, standing at the table, leaving: told the same,
    # sentences and track included, from far fewer analysed pairs.
    assert told == told_all and len(told) == 2
    assert analysed <= 0.6 * analysed_all
    # --describe-every 0s asks for every changed pair: nothing is carried.
    every_pair = resolve(
        Settings(), None, video={"every": "1s", "end": "48", "describe_every": "0s"}
    )
    assert _room_events(every_pair)[0] == _room_events(every_pair, carry=False)[0]


def test_a_run_resumed_between_visits_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    """A checkpoint is never taken while a held change could be carried on: a resumed run
    knows nothing of what was described before it, and must decide as the uninterrupted one."""
    import contextlib
    import json

    from conftest import media
    from typer.testing import CliRunner

    from spotdiff_cli.cli import app, render

    clip = media("intel_one-by-one-person-detection.mp4")
    runner = CliRunner()
    args = ["video", str(clip), "--every", "1s", "--end", "48"]

    class StopAfter:  # stands in for the progress bar; Ctrl-C inside the second visit
        def update(self, source, position, duration, samples) -> None:
            if samples >= 34:
                raise KeyboardInterrupt

    full = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(
            render, "timeline_progress", lambda enabled=True: contextlib.nullcontext(StopAfter())
        )
        assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 130
    partial = json.loads((out / "timeline.json").read_text())
    assert partial["sources"][0]["checkpoint"]["at"] < 34
    assert runner.invoke(app, [*args, "--out", str(out), "--resume"]).exit_code == 0
    resumed = json.loads((out / "timeline.json").read_text())

    def told(data):
        return [
            {k: v for k, v in e.items() if k not in ("picture", "clip")}
            for e in data["sources"][0]["events"]
        ]

    assert told(resumed) == told(full) and len(told(full)) == 2


def test_a_run_keeps_as_many_answers_as_it_has_in_flight_and_gives_the_default_back():
    """The pipeline's first looks make passes up to ``in_flight`` samples before the tracker
    asks; the detector keeps that many answers for the run, and its default after."""

    class Kept:
        def __init__(self) -> None:
            self.kept: list[int | None] = []

        def keep_answers(self, count: int | None = None) -> None:
            self.kept.append(count)

        def unpin(self, *args) -> None:
            pass

    detector = Kept()
    watcher = ObjectWatcher(1280, 720, 1.0, look_every=1.0, detector=detector, in_flight=70)
    assert watcher._the_detector() is detector and watcher._the_detector() is detector
    assert detector.kept == [70 + 8]  # asked once, with room for the stages' hands
    watcher.close()
    assert detector.kept == [78, None]  # the default again
    ObjectWatcher(1280, 720, 1.0, look_every=1.0, detector=detector).close()
    assert detector.kept == [78, None]  # a watcher that never asked gives nothing back
