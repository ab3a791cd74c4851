"""The default captioner's sentences for synthetic changes with known truth."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import draw_box

from spotdiff_cli import api
from spotdiff_cli.config import CaptionConfig


def describe(before, after, **caption):
    caption.setdefault("recognise", False)
    return api.describe_pair(before, after, caption=CaptionConfig(**caption))


def kinds(report):
    return [s.kind for s in report.sentences]


def test_added_object_appeared_in_the_right_place(scene):
    report = describe(scene, draw_box(scene, 230, 170, 50, 40, (220, 40, 40)))
    assert kinds(report) == ["appeared"]
    assert report.sentences[0].text == "a red object appeared in the lower right"
    assert report.sentences[0].cluster_ids == (0,)


def test_removed_object_is_gone(scene):
    with_box = draw_box(scene, 20, 20, 50, 40, (40, 60, 220))
    report = describe(with_box, scene)
    assert report.sentences[0].text == "the blue object in the upper left is gone"


def test_moved_object_is_one_move_not_two_events(scene):
    before = draw_box(scene, 20, 20, 40, 30, (230, 200, 20))
    after = draw_box(scene, 240, 180, 40, 30, (230, 200, 20))
    report = describe(before, after)
    assert kinds(report) == ["moved"]
    assert (
        report.sentences[0].text == "the yellow object in the upper left moved to the lower right"
    )
    assert sorted(report.sentences[0].cluster_ids) == [0, 1]


def test_recoloured_object_changed_colour(scene):
    before = draw_box(scene, 130, 90, 60, 50, (220, 30, 30))
    after = draw_box(scene, 130, 90, 60, 50, (30, 60, 220))
    report = describe(before, after)
    assert kinds(report) == ["colour"]
    assert report.sentences[0].text == "the object in the centre changed colour from red to blue"


def test_brightness_change_says_lighting_only(scene):
    report = describe(scene, np.clip(scene * 1.5, 0, 255).astype(np.uint8))
    assert [s.text for s in report.sentences] == ["the lighting changed"]


def test_identical_images_say_no_change(scene):
    report = describe(scene, scene.copy())
    assert [s.text for s in report.sentences] == ["there is no visible change"]


def test_sentence_limit_keeps_the_most_salient(scene):
    after = scene
    for i, (x, y) in enumerate([(10, 10), (250, 10), (10, 180), (250, 180)]):
        after = draw_box(after, x, y, 30 + 10 * i, 30 + 10 * i, (220, 40, 40))
    report = describe(scene, after, max_sentences=2)
    assert len(report.sentences) == 2
    assert "lower right" in report.sentences[0].text  # the biggest box


def test_unknown_model_suggests_the_close_name(scene):
    from spotdiff_cli.errors import ModelError

    with pytest.raises(ModelError, match="did you mean 'grounded'"):
        describe(scene, scene, model="grounde")


def test_a_hint_follows_an_object_that_moved_part_of_its_length():
    from spotdiff_cli.captioners.base import Hint
    from spotdiff_cli.captioners.grounded import hint_for

    car = Hint((100, 100, 80, 40), "car", "imagenet", 0.9)
    person = Hint((300, 90, 20, 60), "person", "hog", 0.8)
    # Moved 30 px right (IoU 0.45): still the car, not the person.
    assert hint_for((car, person), (130, 102, 80, 40)) is car
    # Far away, or the same place but a much bigger change: recognised afresh.
    assert hint_for((car, person), (400, 300, 80, 40)) is None
    assert hint_for((car, person), (90, 90, 200, 120)) is None
    assert hint_for((), (100, 100, 80, 40)) is None


def test_lab_medians_are_numpys_medians():
    from spotdiff_cli.captioners.grounded import _lab_median

    rng = np.random.default_rng(4)
    for n in (1, 2, 7, 50, 51):
        lab = rng.integers(0, 256, (n, 3, 3)).astype(np.uint8)
        sel = np.zeros((n, 3), bool)
        sel[:, 1] = True
        expected = np.median(lab[sel].astype(np.float32), axis=0)
        found = _lab_median(lab, sel)
        assert found.dtype == np.float32 and np.array_equal(found, expected)
    assert not _lab_median(lab, np.zeros((51, 3), bool)).any()
