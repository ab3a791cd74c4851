"""The caption path on real footage from ../shared/media (skipped when it is absent)."""

from __future__ import annotations

import pytest
from conftest import media, video_frame

from spotdiff_cli import api
from spotdiff_cli.frames import load_image

OBJECT_KINDS = {"appeared", "disappeared", "moved", "colour", "material", "changed"}


def test_tiger_one_added_region_top_right():
    report = api.describe_pair(media("odiff_tiger.jpg"), media("odiff_tiger-2.jpg"))
    assert len(report.sentences) == 1
    sentence = report.sentences[0]
    assert sentence.kind == "appeared" and "upper right" in sentence.text
    # The box lies on odiff's own reference diff (red pixels), top right of the 1000x667 photo.
    x, y, w, h = (v * report.analysis.scale for v in report.analysis.clusters[0].bbox)
    assert x > 500 and y < 150 and w < 400 and h < 250


def test_cctv_brightness_change_reports_no_objects():
    clip = "dvrscan_issue53_brightness_change.avi"
    report = api.describe_pair(video_frame(clip, 0), video_frame(clip, 58))
    assert [s.kind for s in report.sentences] == ["lighting"]


@pytest.mark.parametrize(
    "first,second,why",
    [
        (0, 25, "3-4 px drift, empty lot"),
        (350, 375, "auto-exposure jump, no car"),
        (125, 150, "empty lot after the exposure settled"),
    ],
)
def test_parking_lot_exposure_and_drift_make_no_phantom_objects(first, second, why):
    clip = "intel_car-detection.mp4"
    report = api.describe_pair(video_frame(clip, first), video_frame(clip, second))
    assert not {s.kind for s in report.sentences} & OBJECT_KINDS, why


def test_parking_lot_drift_is_measured():
    clip = "intel_car-detection.mp4"
    report = api.describe_pair(video_frame(clip, 0), video_frame(clip, 25))
    assert 2.5 <= abs(report.analysis.alignment.dx * report.analysis.scale) <= 4.5


def test_parking_lot_car_that_arrives_is_reported_despite_exposure_jump():
    clip = "intel_car-detection.mp4"
    report = api.describe_pair(video_frame(clip, 300), video_frame(clip, 325))
    assert report.sentences[0].kind == "appeared" and "car" in report.sentences[0].text


@pytest.mark.parametrize("empty,occupied", [(50, 100), (200, 150)])
def test_indoor_person_is_reported_as_a_person_in_the_right_place(empty, occupied):
    clip = "intel_one-by-one-person-detection.mp4"
    report = api.describe_pair(video_frame(clip, empty), video_frame(clip, occupied))
    first = report.sentences[0]
    assert first.kind == "appeared" and first.text.startswith("a person appeared")
    assert "centre" in first.text  # the person stands by the table in the middle of the room
    back = api.describe_pair(video_frame(clip, occupied), video_frame(clip, empty))
    assert back.sentences[0].text.startswith("the person") and "is gone" in back.sentences[0].text


def test_bundled_example_matches_its_shipped_report():
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "examples" / "parking-lot"
    shipped = json.loads((folder / "report" / "report.json").read_text())
    report = api.describe_pair(load_image(folder / "before.jpg"), load_image(folder / "after.jpg"))
    assert [s.text for s in report.sentences] == [s["text"] for s in shipped["sentences"]]
