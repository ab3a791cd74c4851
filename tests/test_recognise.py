"""recognise(): real crops from the Intel clips are named, background and flat patches are not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spotdiff_cli.analysis import recognise as R  # noqa: E402
from spotdiff_cli.errors import InputError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MEDIA = REPO.parent / "shared" / "media"  # <repo>/../shared/media: real footage, not shipped


def _frame(clip: str, index: int) -> np.ndarray:
    """Frame ``index`` of a clip in ``../shared/media`` as RGB, or skip when the media is absent."""
    path = MEDIA / clip
    if not path.is_file():
        pytest.skip(f"real media not found: {path}")
    cap = cv2.VideoCapture(str(path))
    cap.set(cv2.CAP_PROP_POS_FRAMES, index)
    ok, bgr = cap.read()
    cap.release()
    assert ok, f"cannot read frame {index} of {path}"
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


# Boxes measured by differencing against the clip's median background (how the pipeline finds them).
PERSON = (
    "intel_one-by-one-person-detection.mp4",
    300,
    (379, 1, 167, 386),
)  # woman walking to the table
CAR = ("intel_car-detection.mp4", 200, (101, 0, 164, 295))  # silver car seen from above
GIF_CAR = ("intel_person-bicycle-car-detection.gif", 0, (49, 150, 125, 120))  # car leaving its bay
BICYCLE = ("intel_person-bicycle-car-detection.gif", 20, (338, 2, 32, 41))  # cyclist, 32x41 px


def test_a_person_is_a_person():
    clip, index, box = PERSON
    r = R.recognise(_frame(clip, index), box)
    # The COCO detector answers first where its box is the region; HOG stays the fallback.
    assert r is not None and r.noun == "person" and r.source in ("detector", "hog")
    assert r.confidence > 0.8


def test_a_car_is_a_car():
    clip, index, box = CAR
    r = R.recognise(_frame(clip, index), box)
    assert r is not None and r.noun == "car" and r.source in ("detector", "imagenet")


def test_a_car_from_above_is_not_called_a_person():
    # HOG alone says "person" here (SVM margin 1.35); the classifier's vehicle vote overrules it.
    clip, index, box = GIF_CAR
    r = R.recognise(_frame(clip, index), box)
    assert r is not None and r.noun in ("car", "vehicle")


def test_a_small_bicycle_is_a_bicycle():
    clip, index, box = BICYCLE
    r = R.recognise(_frame(clip, index), box)
    assert r is not None and r.noun == "bicycle"


def test_empty_floor_is_not_named():
    image = _frame(PERSON[0], PERSON[1])
    assert R.recognise(image, (0, 250, 300, 180)) is None


def test_flat_grey_patch_gives_none():
    image = np.full((240, 320, 3), 128, np.uint8)
    assert R.recognise(image, (60, 40, 120, 160)) is None


def test_mask_away_from_the_person_keeps_hog_quiet():
    # The changed pixels are an object on the floor to the right of a person who is also inside
    # the box: HOG finds the person, but the change is not them.
    clip, index, (x, y, w, h) = PERSON
    image = _frame(clip, index)
    # Box 217 x 386 (h/w 1.78, tall enough for the people detector); the change sits in its
    # lower right corner, beside the person's legs.
    mask = np.zeros(image.shape[:2], bool)
    mask[320:387, 560:596] = True
    union = (x, y, 596 - x, h)
    assert R.recognise(image, union).noun == "person"  # without the mask: the person
    r = R.recognise(image, union, mask)
    assert r is None or r.noun != "person"


def test_tiny_and_off_image_boxes_give_none():
    image = np.zeros((100, 100, 3), np.uint8)
    assert R.recognise(image, (10, 10, 4, 4)) is None
    assert R.recognise(image, (500, 500, 50, 50)) is None


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError, match="uint8"):
        R.recognise(np.zeros((10, 10, 3), np.float32), (0, 0, 5, 5))
    with pytest.raises(InputError, match="mask shape"):
        R.recognise(np.zeros((10, 10, 3), np.uint8), (0, 0, 5, 5), np.zeros((5, 5), bool))


def test_threshold_is_a_parameter():
    clip, index, box = CAR
    image = _frame(clip, index)
    assert R.recognise(image, box, min_confidence=0.999) is None


def test_module_does_not_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from spotdiff_cli.analysis.recognise import recognise\n"
        "recognise(np.full((64, 64, 3), 128, np.uint8), (8, 8, 40, 40))\n"
        "assert 'torch' not in sys.modules and 'timm' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_imagenet_groups_match_timm_class_names():
    pytest.importorskip("timm")
    from timm.data import ImageNetInfo

    info = ImageNetInfo()
    for group, classes in R.IMAGENET_GROUPS.items():
        for index, name in classes.items():
            if name:
                assert info.index_to_description(index).split(",")[0] == name, (group, index)
    dogs = {info.index_to_description(i) for i in R.IMAGENET_GROUPS["dog"]}
    assert "Chihuahua" in dogs and not any(d.startswith(("timber wolf", "red wolf")) for d in dogs)
    # No class counts for two nouns.
    all_indices = [i for classes in R.IMAGENET_GROUPS.values() for i in classes]
    assert len(all_indices) == len(set(all_indices))


def test_one_batched_forward_names_every_region_as_single_calls_do():
    regions = [
        (_frame(clip, index), box, None) for clip, index, box in (PERSON, CAR, GIF_CAR, BICYCLE)
    ]
    regions.append(
        (regions[0][0], (0, 0, 3, 3), None)
    )  # too small: None, without breaking the batch
    batched = R.recognise_many(regions)
    single = [R.recognise(image, box, mask) for image, box, mask in regions]
    assert (
        [r and r.noun for r in batched]
        == [r and r.noun for r in single]
        == ["person", "car", batched[2].noun, "bicycle", None]
    )
    for a, b in zip(batched[:4], single[:4]):
        assert a.source == b.source and a.confidence == pytest.approx(b.confidence, abs=1e-4)


def test_the_classifier_gives_opencvs_logits_on_onnxruntime():
    """onnxruntime runs the classifier (4x faster than cv2.dnn here) crop by crop, since the
    graph declares a batch of one: the logits of a batch are cv2.dnn's."""
    import cv2

    from spotdiff_cli.analysis import recognise
    from spotdiff_cli.weights import resolve_weights

    batch = np.random.default_rng(0).uniform(-1, 1, (3, 3, 224, 224)).astype(np.float32)
    net = cv2.dnn.readNetFromONNX(str(resolve_weights(None, kind="classifier-onnx")))
    net.setInput(batch)
    np.testing.assert_allclose(recognise._classifier()(batch), net.forward(), atol=1e-3)
