"""The shipped learned captioners on real frame pairs they never saw (skipped without ../shared).

scripts/train_shipped_weights.sh trains ddla, capt, duda, duda-aux, onediff, clip4idc and idc-pcl
on sprites cut from the first part of the two CC BY Intel clips only (parking lot frames < 290,
room frames < 900; the last five also on the rendered 3-D benchmark). The pairs below come
from the held-out rest: the fourth car of the lot (frames ~315-345) and the last two people of the
room (frames ~930-1350), none of whom is in any training image. Each frame number was checked by
looking at the frame: 300, 370, 900, 1230 and 1380 are empty, 330 shows a white car in the upper
left of the lot, 1020 a woman in a grey cardigan at the table, 1290 a man in a grey shirt there.

What is asserted is what a user needs before trusting a sentence, read with the evaluation's
lexicon (evaluate/lexicon.py): the first (most salient) sentence names the right kind of change
(appear vs. leave) and a plausible object (a vehicle in the lot, a person in the room), and no
sentence repeats itself ("there is a a in the in the bottom"). The weights shipped before this
test, trained on procedural scenes only, failed it on every model they had.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import media, video_frame

from spotdiff_cli.config import CaptionConfig
from spotdiff_cli.describer import PairDescriber
from spotdiff_cli.evaluate import lexicon

LOT = "intel_car-detection.mp4"
ROOM = "intel_one-by-one-person-detection.mp4"
# (clip, before frame, after frame, change type in the lexicon's terms, object class)
PAIRS = [
    (LOT, 300, 330, "add", "car"),
    (LOT, 330, 370, "drop", "car"),
    (ROOM, 900, 1020, "add", "person"),
    (ROOM, 1140, 1230, "drop", "person"),
    (ROOM, 1230, 1290, "add", "person"),
    (ROOM, 1290, 1380, "drop", "person"),
]
SHIPPED = ("ddla", "capt", "duda", "duda-aux", "onediff", "clip4idc", "idc-pcl")


def repetition(sentence: str) -> str | None:
    """What is degenerate about a sentence: a word said twice in a row, or a three-word phrase
    said twice (decoders stuck in a loop write "in the bottom right ... in the bottom right")."""
    tokens = lexicon.words(sentence)
    for a, b in zip(tokens, tokens[1:]):
        if a == b:
            return f"'{a} {a}'"
    trigrams = [tuple(tokens[i : i + 3]) for i in range(len(tokens) - 2)]
    for i, gram in enumerate(trigrams):
        if gram in trigrams[i + 1 :]:
            return f"'{' '.join(gram)}' twice"
    return None


def problems(sentences: list[str], change: str, noun: str | tuple[str, ...] | None) -> list[str]:
    """Everything wrong with a model's sentences for a pair whose truth is (change, noun).
    ``noun``: the object, any of several (several things changed alike), or None where no noun
    is fair (a speech bubble pasted on a photo): then only the kind of change is judged."""
    if not sentences:
        return ["no sentence"]
    found = []
    reading = lexicon.read(sentences[0])
    if reading.type != change:
        found.append(f"change type {reading.type}, not {change}")
    nouns = (noun,) if isinstance(noun, str) else noun or ()
    if nouns and not any(lexicon.noun_matches(reading.noun, n) for n in nouns):
        found.append(f"object {reading.noun}, not {' or '.join(nouns)}")
    found += [f"repeats {r}" for r in map(repetition, sentences) if r]
    return found


def test_the_judge_catches_what_the_old_weights_wrote() -> None:
    # Sentences the procedural-only weights wrote for these pairs (weights/README.md).
    assert problems(["the bottom is in a different spot"], "add", "car")
    assert repetition("the bottom is in in in the bottom right of the image")
    assert repetition("the bottom is no longer in the bottom is no")
    assert problems(["the person in black is in a different spot"], "add", "person")
    assert not problems(["a white car has appeared at the top left"], "add", "car")
    assert not problems(["the man in grey has left the room"], "drop", "person")
    # several things moved: any of them may be named; no fair noun: only the change is judged
    assert not problems(
        ["the person on the bicycle moved right"], "move", ("car", "bicycle", "person")
    )
    assert problems(["the silver car is missing"], "move", ("car", "bicycle", "person"))
    assert not problems(["a speech bubble was added"], "add", None)
    assert problems(["the scene is the same as before"], "add", None)


# (model, clip, before, after) -> what the shipped weights get wrong there, as measured when they
# were trained (weights/README.md). strict: a pair that starts passing must be taken off the list.
KNOWN_WRONG: dict[tuple[str, str, int, int], str] = {
    ("ddla", ROOM, 900, 1020): "reads the woman who walks in as moved: 'the person in green "
    "walked to the center'",
    # clip4idc told every arrival here as a departure until its recipe set symmetric_memory
    # (docs/results.md); duda, duda-aux and idc-pcl did until their speakers read the direction
    # objective's answer.
    ("clip4idc", LOT, 300, 330): "reads the arriving car as repainted: 'the silver car is now red'",
}


def _pair_cases(models, pairs, wrong: dict, reason, label) -> list:
    """One case per model and (clip, a, b, change, noun) pair; a pair ``wrong`` lists (keyed
    (model, clip, a, b)) is a strict xfail whose reason is ``reason(entry)``; ids from
    ``label(model, clip, a, b)``."""
    cases = []
    for model in models:
        for clip, a, b, change, noun in pairs:
            said = wrong.get((model, clip, a, b))
            marks = [pytest.mark.xfail(reason=reason(said), strict=True)] if said else []
            cases.append(
                pytest.param(
                    model, clip, a, b, change, noun, marks=marks, id=label(model, clip, a, b)
                )
            )
    return cases


def _cases() -> list:
    return _pair_cases(
        SHIPPED, PAIRS, KNOWN_WRONG, lambda why: why, lambda m, c, a, b: f"{m}-{a}-{b}"
    )


@pytest.fixture(scope="module")
def describers() -> dict[str, PairDescriber]:
    """One describer per model, built on first use. weights=None: the manifest's default for the
    model, i.e. what `spotdiff caption --model M` uses."""
    return {}


def _sentences(describers: dict[str, PairDescriber], model: str, before, after) -> list[str]:
    if model not in describers:
        describers[model] = PairDescriber(None, CaptionConfig(model=model, device="cpu"))
    return [s.text for s in describers[model].describe(before, after).sentences]


@pytest.mark.parametrize("model,clip,a,b,change,noun", _cases())
def test_shipped_weights_name_the_change_and_the_object_on_held_out_real_frames(
    describers: dict[str, PairDescriber],
    model: str,
    clip: str,
    a: int,
    b: int,
    change: str,
    noun: str,
) -> None:
    before, after = video_frame(clip, a), video_frame(clip, b)  # skips without ../shared/media
    texts = _sentences(describers, model, before, after)
    wrong = problems(texts, change, noun)
    assert not wrong, f"{model} on {clip} {a}->{b}: {texts} ({'; '.join(wrong)})"


# Pairs from cameras none of the shipped weights saw any frame of (benchmarks/annotations/
# real_pairs.json, 'held_out'): the Intel GIF's car park, where a car, a cyclist and a pedestrian
# all move between frames 0 and 40, and the tiger photo with a speech bubble pasted on it (an
# addition; no noun is fair); and, annotated 2026-11-27 (tests/data/other_footage/README.md),
# two more cameras of the same CC BY collection, frames kept in this repository: a hall seen
# through a wide lens that a person walks out of (and, read the other way round, into), and a
# store aisle a woman walks into while two shoppers turn along it (and the reverse).
# (name, before, after, change type, object or None); a source is (clip or photo in
# ../shared/media, frame index or None); a Path is a frame kept in tests/data/other_footage.
GIF = "intel_person-bicycle-car-detection.gif"
OTHER_FILES = Path(__file__).parent / "data" / "other_footage"


def _kept(name: str) -> tuple[Path, None]:
    """A frame of tests/data/other_footage, as an OTHER_FOOTAGE source."""
    return OTHER_FILES / f"{name}.png", None


OTHER_FOOTAGE = [
    ("gif", (GIF, 0), (GIF, 40), "move", ("car", "bicycle", "person")),
    ("tiger", ("odiff_tiger.jpg", None), ("odiff_tiger-2.jpg", None), "add", None),
    ("hall-out", _kept("hall-00"), _kept("hall-20"), "drop", "person"),
    ("hall-in", _kept("hall-20"), _kept("hall-00"), "add", "person"),
    ("aisle-in", _kept("aisle-00"), _kept("aisle-36"), "add", "person"),
    ("aisle-out", _kept("aisle-36"), _kept("aisle-00"), "drop", "person"),
]
# The four pairs of the two new cameras: 28 more pairs described, run with -m slow (the default
# run's budget, as for the third camera below).
NEW_CAMERAS = ("hall-out", "hall-in", "aisle-in", "aisle-out")
# What the shipped weights write there, as measured (the GIF and the tiger on 2026-11-26, capt's,
# ddla's, duda-aux's and idc-pcl's 2026-11-27; the two new cameras 2026-11-27, once; strict: a
# pair that starts passing must come off the list). Every model reads the GIF's moves as a
# departure (duda and idc-pcl, since they tell arrivals, as an arrival; clip4idc, retrained, as
# a repaint); only idc-pcl names the tiger's change as an addition ("a new two scenes parked in
# the right": the lexicon reads the type, there is no object to name). On the new cameras ddla
# and capt get three of four, idc-pcl two, duda, onediff and clip4idc one, duda-aux none: the
# families that tell arrivals on the two cameras they were trained on mostly do not on a third.
# Model -> {pair name: its first sentence where it is wrong}.
OTHER_FOOTAGE_SAID: dict[str, dict[str, str]] = {
    "ddla": {
        "gif": "the silver car is no longer in the right side of the image",
        "tiger": "the large brown metallic cylinder is now metallic",
        "aisle-in": "the red car is in a different spot",
    },
    "capt": {
        "gif": "the silver car that was near the left side of the image is missing",
        "tiger": "the large green metallic cylinder is now made of metal",
        "aisle-in": "the person in green is in a different spot",
    },
    "duda": {
        "gif": "the person in black is now standing in the left side of the image",
        "tiger": "the scene is the same as before",
        "hall-out": "the silver car that was at the right side of the image is missing",
        "hall-in": "the small gray matte cylinder changed its color to blue",
        "aisle-in": "the person in green is no longer at the right side",
    },
    "duda-aux": {
        "gif": "the silver sedan that was near the left side of the image is missing",
        "tiger": "the scene is the same as before",
        "hall-out": "the silver car that was near the right side of the image is missing",
        "hall-in": "the silver car that was near the right side of the image is missing",
        "aisle-in": "the person in green that was near the left side of the image is missing",
        "aisle-out": "a new person in black is now standing near the left side",
    },
    "onediff": {
        "gif": "the person in black is no longer in the left side",
        "tiger": "the blue car is no longer at the right side",
        "hall-in": "the person in green is no longer in the left side",
        "aisle-in": "the red car is in a different spot",
        "aisle-out": "a new red car is in the right side",
    },
    "clip4idc": {  # retrained with symmetric_memory; the weights before it: also 1 of 4 there
        "gif": "the silver car is now red",
        "tiger": "the scene is the same as before",
        "hall-in": "the scene is the same as before",
        "aisle-in": "the person in black that was near the left side of the image is missing",
        "aisle-out": "the person in black is in a different spot",
    },
    "idc-pcl": {
        "gif": "the red car is now parked at the left side of the image",
        "aisle-in": "the person in black that was near the right side of the image is missing",
        "aisle-out": "a person in black is now standing at the left side of the image",
    },
}


def _image(source: tuple[str | Path, int | None]):
    """A frame of a clip, or a photo when the index is None (in ../shared/media, or a Path), as
    (H, W, 3) uint8 RGB."""
    import cv2

    name, index = source
    if index is not None:
        return video_frame(str(name), index)
    path = name if isinstance(name, Path) else media(name)
    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


def _other_cases() -> list:
    cases = []
    for model in SHIPPED:
        for name, before, after, change, noun in OTHER_FOOTAGE:
            said = OTHER_FOOTAGE_SAID[model].get(name)
            marks = [pytest.mark.xfail(reason=f"writes '{said}'", strict=True)] if said else []
            if name in NEW_CAMERAS:
                marks.append(pytest.mark.slow)
            cases.append(
                pytest.param(model, before, after, change, noun, marks=marks, id=f"{model}-{name}")
            )
    return cases


@pytest.mark.parametrize("model,before,after,change,noun", _other_cases())
def test_shipped_weights_on_cameras_they_never_saw(
    describers: dict[str, PairDescriber],
    model: str,
    before: tuple[str | Path, int | None],
    after: tuple[str | Path, int | None],
    change: str,
    noun: tuple[str, ...] | None,
) -> None:
    texts = _sentences(describers, model, _image(before), _image(after))
    wrong = problems(texts, change, noun)
    assert not wrong, f"{model} on {before[0]}: {texts} ({'; '.join(wrong)})"


# A third camera, annotated 2026-11-27 after the weights above were chosen and judged once
# (nothing was trained or picked on it): the DVR-Scan motorway seen from above, cut to its
# benchmark's watched box plus 60 px (source pixels x 571-901, y 472-719; two cars each arrive in
# it and leave), and the DVR-Scan brightness clip, where only the light (and a burned-in clock)
# changes between frames 0 and 40 (right is no change named). Those clips carry no licence to
# train on; they are only ever read here and in the benchmarks.
MOTORWAY, BRIGHTNESS = "dvrscan_traffic_camera.mp4", "dvrscan_issue53_brightness_change.avi"
WATCHED = (slice(472, 720), slice(571, 902))
THIRD_CAMERA = [
    (MOTORWAY, 40, 90, "add", "car"),
    (MOTORWAY, 90, 130, "drop", "car"),
    (MOTORWAY, 500, 540, "add", "car"),
    (MOTORWAY, 540, 560, "drop", "car"),
    (BRIGHTNESS, 0, 40, None, None),
]
# What they wrote there when first run (strict: a pair that starts passing comes off the list).
THIRD_CAMERA_WRONG: dict[tuple[str, str, int, int], str] = {
    ("duda", MOTORWAY, 40, 90): "the small gray matte cylinder changed its color to blue",
    ("duda-aux", MOTORWAY, 40, 90): "the silver car that was near the right side of the image "
    "is missing",
    ("onediff", MOTORWAY, 500, 540): "the red car is no longer at the right side",
    # clip4idc-real.pt retrained with symmetric_memory (2026-11-27, third stop), run here once
    # after: the first arrival now told ("a red car is now parked near the right"); before, both
    # read as departures.
    ("clip4idc", MOTORWAY, 500, 540): "the silver car is now red",
}


def _third_cases() -> list:
    return _pair_cases(
        ("grounded", *SHIPPED),
        THIRD_CAMERA,
        THIRD_CAMERA_WRONG,
        lambda said: f"writes '{said}'",
        lambda m, c, a, b: f"{m}-{c[:9]}-{a}-{b}",
    )


# slow: 40 more pairs described (about 20 s) took the default run to 9 min 57 s of its 10;
# run with -m slow.
@pytest.mark.slow
@pytest.mark.parametrize("model,clip,a,b,change,noun", _third_cases())
def test_a_camera_no_model_was_trained_or_picked_on(
    describers: dict[str, PairDescriber],
    model: str,
    clip: str,
    a: int,
    b: int,
    change: str | None,
    noun: str | None,
) -> None:
    box = WATCHED if clip == MOTORWAY else (slice(None), slice(None))
    before = np.ascontiguousarray(video_frame(clip, a)[box])
    after = np.ascontiguousarray(video_frame(clip, b)[box])
    texts = _sentences(describers, model, before, after)
    wrong = problems(texts, change, noun)
    assert not wrong, f"{model} on {clip} {a}->{b}: {texts} ({'; '.join(wrong)})"
