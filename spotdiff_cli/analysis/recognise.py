"""Naming what a changed region shows ("a person", "a car"), without torch.

The grounded captioner calls :func:`recognise` once per salient cluster. It must stay cheap and
torch-free, because the default ``spotdiff caption`` has to answer in well under a second and
importing torch alone takes longer. Two recognisers, neither needing torch:

- **people**: OpenCV's HOG + linear-SVM pedestrian detector (Dalal & Triggs 2005,
  ``cv2.HOGDescriptor_getDefaultPeopleDetector``). It sees upright people whose window is at
  least 64×128 px with ~16 px of margin, so the crop around the box is padded and rescaled until
  the box is ``_HOG_BOX_HEIGHT`` px tall. It is skipped for boxes much wider than tall.
- **vehicles and animals**: the efficientnet-lite0 ImageNet classifier exported to ONNX
  (``weights/efficientnet_lite0_imagenet.onnx``, see ``scripts/export_classifier.py``) run by
  onnxruntime (or, where it is absent, ``cv2.dnn``) on a padded square crop. ImageNet has no
  "car" class but ten kinds of car, so the softmax probabilities of the classes in each group
  of :data:`IMAGENET_GROUPS` are summed.

The higher of the two confidences wins, if it reaches ``min_confidence``, with two refinements
measured on the Intel clips: HOG's "person" is ignored when the classifier sees a vehicle (HOG
fires on cars seen from above), and when car, van and truck split the vote, their sum may still
name a "vehicle". Below ``min_confidence`` the region is not named (``None``): a caption that
says "something appeared" is better than a wrong noun.

Both models load on first use and stay cached for the process (``cv2.dnn.Net`` is not
thread-safe: its passes are serialised by a lock).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import cv2
import numpy as np

from ..errors import InputError
from ..geometry import box_iou
from ..weights import resolve_weights
from .once import built_once

if TYPE_CHECKING:  # imported lazily at run time, as elsewhere in this module
    from .detect import Detection

Source = Literal["hog", "imagenet", "detector"]

# Tuned on 19 real crops of the three Intel clips: people score 0.51-1.0 (HOG), cars seen from
# above 0.35-0.50 (classifier; "vehicle" at 0.35), floor, wall, tarmac and flat grey at most 0.12.
DEFAULT_MIN_CONFIDENCE = 0.35
# The detector's evidence (see _detected): its boxes of people and vehicles are trusted from
# this score; its odd names for cars seen from above from a lower one, with the size check.
_DETECTOR_MIN = 0.4
_DETECTOR_LOW = 0.3
_DETECTOR_SHARED = 0.5

# ImageNet-1k class index -> name, grouped into the nouns a caption uses. Generated once from
# timm's bundled ``ImageNetInfo`` (first synonym of each class); tests check it against timm so a
# typo cannot slip in. Left out on purpose: "passenger car" (705) is a railway coach, "freight car"
# (565) a goods wagon, "tank" (847) and "tractor" (866) are not what "vehicle" suggests in a car
# park, and wolves, foxes and big cats (a tiger is not "a cat" in a caption).
IMAGENET_GROUPS: dict[str, dict[int, str]] = {
    "car": {
        436: "beach wagon",
        468: "cab",
        511: "convertible",
        609: "jeep",
        627: "limousine",
        656: "minivan",
        661: "Model T",
        751: "racer",
        817: "sports car",
        # Car parts win often on crops that cut a car: they still mean "car".
        475: "car mirror",
        479: "car wheel",
        581: "grille",
    },
    "van": {407: "ambulance", 654: "minibus", 734: "police van", 757: "recreational vehicle"},
    "truck": {
        555: "fire engine",
        569: "garbage truck",
        675: "moving van",
        717: "pickup",
        864: "tow truck",
        867: "trailer truck",
    },
    "bus": {779: "school bus", 874: "trolleybus"},
    "bicycle": {444: "bicycle-built-for-two", 671: "mountain bike", 870: "tricycle"},
    "motorcycle": {665: "moped", 670: "motor scooter"},
    # 151-268 are the 118 dog breeds, in one contiguous block of ImageNet-1k.
    "dog": {i: "" for i in range(151, 269)},
    "cat": {
        281: "tabby",
        282: "tiger cat",
        283: "Persian cat",
        284: "Siamese cat",
        285: "Egyptian cat",
    },
    # Birds sit in three blocks: 7-24 (cock … great grey owl), 80-100 (black grouse … black swan),
    # 127-146 (white stork … albatross).
    "bird": {i: "" for i in (*range(7, 25), *range(80, 101), *range(127, 147))},
}

# Groups that together mean "a motor vehicle": the fallback noun when none of them wins alone.
VEHICLE_GROUPS: tuple[str, ...] = ("car", "van", "truck", "bus", "motorcycle")
NOUNS: tuple[str, ...] = ("person", *IMAGENET_GROUPS, "vehicle")
# Vehicle probability above which HOG's "person" is not believed (people score < 0.05).
_VEHICLE_VETO = 0.2

# Classifier input (see scripts/export_classifier.py): 224×224 RGB, (x/255 - 0.5) / 0.5.
_INPUT = 224
# Context around the box for the classifier: ImageNet objects fill most of the frame, with some
# margin; 15 % per side keeps a whole car in view when the diff box clips a bumper.
_CLS_PAD = 0.15

# HOG: the default people detector's window is 64×128 with the person ~96 px tall inside it.
_HOG_BOX_HEIGHT = 144  # the box becomes this tall: people of 96-144 px fit the pyramid's range
_HOG_PAD_Y, _HOG_PAD_X = 0.15, 0.35  # margins the window needs around a person, as box fractions
# h/w below this is not one standing person: people on the Intel clips measure 1.3-2.9, while
# boxes around cars seen from above measure 1.06-1.27 and get HOG margins up to 1.35 (a white car
# entering the car park, frame 75, was called a person at 1.2). Calling a car a person misleads
# an operator more than calling a crouching person "an object", so the gate sits above cars.
_HOG_MIN_ASPECT = 1.45
_HOG_MIN_OVERLAP = 0.3  # IoU between a detection and the box for the detection to count
# SVM margin -> confidence: a logistic with its midpoint at margin 0.3, where (measured on the
# Intel clips) false positives on walls and floors stop and real people start.
_HOG_MID, _HOG_SLOPE = 0.3, 4.0

_MIN_SIDE = 8  # px: smaller boxes carry nothing to recognise


@dataclass(frozen=True)
class Recognition:
    """What a region shows: a caption noun, how sure we are (0-1) and which recogniser said so."""

    noun: str
    confidence: float
    source: Source


def recognise(
    image_rgb: np.ndarray,
    bbox: tuple[int, int, int, int],
    mask: np.ndarray | None = None,
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
) -> Recognition | None:
    """Name the object in ``bbox`` of ``image_rgb``, or return ``None`` when unsure.

    Args:
        image_rgb: (H, W, 3) uint8, RGB order (not OpenCV's BGR).
        bbox: (x, y, w, h) in pixels; parts outside the image are clipped.
        mask: optional (H, W) array, non-zero where the region changed (the cluster mask).
            A person detection then counts only if it covers at least half of the changed
            pixels, so a changed bag beside a person who stood still is not called "person".
        min_confidence: below this, return ``None``.

    Returns:
        The best :class:`Recognition`, or ``None`` if the box is tiny, off the image, or no
        recogniser reaches ``min_confidence``.

    Raises:
        InputError: the image is not (H, W, 3) uint8, or the mask does not match it.
        WeightsNotFoundError: the ONNX classifier cannot be found (see ``resolve_weights``).
    """
    return recognise_many([(image_rgb, bbox, mask)], min_confidence=min_confidence)[0]


Region = tuple[np.ndarray, tuple[int, int, int, int], "np.ndarray | None"]  # (image, bbox, mask)


def recognise_many(
    regions: list[Region],
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    area: tuple[int, int, int, int] | None = None,
) -> list[Recognition | None]:
    """:func:`recognise` for several regions (of one or several images) with one classifier
    forward pass for all of them: a batch of N costs much less than N passes on a CPU.
    ``area``: the (x, y, w, h) part of the images that was watched (``--roi``), the only part
    the object detector needs to look at; None: the whole image."""
    boxes: list[tuple[int, int, int, int] | None] = []
    for image_rgb, bbox, mask in regions:
        if image_rgb.ndim != 3 or image_rgb.shape[2] != 3 or image_rgb.dtype != np.uint8:
            raise InputError(
                f"recognise() needs an (H, W, 3) uint8 RGB image, got {image_rgb.shape} {image_rgb.dtype}"
            )
        if mask is not None and mask.shape[:2] != image_rgb.shape[:2]:
            raise InputError(
                f"mask shape {mask.shape} does not match image shape {image_rgb.shape[:2]}"
            )
        box = _clip_box(bbox, image_rgb.shape[1], image_rgb.shape[0])
        boxes.append(box if box is not None and min(box[2], box[3]) >= _MIN_SIDE else None)
    detected = _detected(regions, boxes, min_confidence, area)
    wanted = [
        (regions[i][0], box)
        for i, box in enumerate(boxes)
        if box is not None and detected[i] is None
    ]
    groups = iter(_group_masses(_imagenet_probs(wanted)) if wanted else [])
    return [
        None if box is None else found or _decide(image, box, mask, next(groups), min_confidence)
        for (image, _, mask), box, found in zip(regions, boxes, detected)
    ]


def _detected(
    regions: list[Region],
    boxes: list[tuple[int, int, int, int] | None],
    min_confidence: float,
    watched: tuple[int, int, int, int] | None = None,
) -> list[Recognition | None]:
    """The COCO detector's word for each region (analysis/detect.py), where one of its boxes
    is the changed thing: the box and the region's share most of the smaller of them. One
    forward pass per distinct image. A car seen from above comes out of NanoDet as a "cell
    phone" or a "kite": inside a changed region (the thing moved) and car-sized for the frame,
    it is a car. None where the detector found nothing that fits (HOG and the classifier then
    decide, as before). With a mask, the detected thing must hold at least half of the changed
    pixels, as HOG's person must: a bag that changed beside a person standing still is no
    person."""
    from .detect import CAR_SIZE, NOUNS, TOP_VIEW_CAR

    found: dict[int, list] = {}
    out: list[Recognition | None] = []
    for (image, _, mask), box in zip(regions, boxes):
        if box is None:
            out.append(None)
            continue
        if id(image) not in found:
            found[id(image)] = detect_for_naming(image, watched)
        area = image.shape[0] * image.shape[1]
        best: Recognition | None = None
        for d in found[id(image)]:
            if _shared(d.box, box) < _DETECTOR_SHARED or d.score < min_confidence:
                continue
            if mask is not None and not _holds_changes(d.box, mask):
                continue
            if d.label in NOUNS and d.score >= _DETECTOR_MIN:
                noun = NOUNS[d.label]
            elif (
                d.label in TOP_VIEW_CAR and CAR_SIZE[0] <= d.box[2] * d.box[3] / area <= CAR_SIZE[1]
            ):
                noun = "car"
            else:
                continue
            if best is None or d.score > best.confidence:
                best = Recognition(noun, d.score, "detector")
        out.append(best)
    return out


def detect_for_naming(
    image: np.ndarray, watched: tuple[int, int, int, int] | None = None
) -> list[Detection]:
    """The detector's answer that naming a changed region of ``image`` ((H, W, 3) uint8 RGB)
    uses: its objects in the ``watched`` (x, y, w, h) box, or the whole image. The video
    pipeline asks this ahead, on its own thread, for each pair it analysed, so that the
    captions find the answer ready (``ObjectDetector`` keeps the last few)."""
    from .detect import default_detector

    return default_detector().detect(image, region=watched, min_score=_DETECTOR_LOW)


def watched_area(valid: np.ndarray) -> tuple[int, int, int, int] | None:
    """The (x, y, w, h) box of a pair's compared area (``Analysis.valid``, (H, W) bool) when a
    ``--roi`` or mask made it a part of the frame; None for the whole frame. The detector then
    looks at that part only: a 105x63 box of a motorway costs a tenth of a pass over the
    frame."""
    rows, cols = np.flatnonzero(valid.any(axis=1)), np.flatnonzero(valid.any(axis=0))
    h, w = valid.shape
    if rows.size == 0:
        return None
    box = (int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1))
    # A fixed camera's shift leaves a border of a few pixels: that is still the whole frame.
    return None if box[2] * box[3] >= 0.8 * h * w else box


def _holds_changes(box: tuple[int, int, int, int], mask: np.ndarray) -> bool:
    """Whether ``box`` holds at least half of the changed pixels of ``mask``."""
    x, y, w, h = box
    total = int(np.count_nonzero(mask))
    return total > 0 and np.count_nonzero(mask[y : y + h, x : x + w]) >= 0.5 * total


def _shared(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection of two (x, y, w, h) boxes over the smaller one's area."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(0, w) * max(0, h) / max(1, min(a[2] * a[3], b[2] * b[3]))


def _decide(
    image_rgb: np.ndarray,
    box: tuple[int, int, int, int],
    mask: np.ndarray | None,
    groups: dict[str, float],
    min_confidence: float,
) -> Recognition | None:
    """The noun for one region, from the classifier's group masses and (maybe) HOG."""
    vehicle_mass = sum(groups[g] for g in VEHICLE_GROUPS)
    candidates: list[Recognition] = []
    # HOG fires on cars seen from above (windscreen and roof edges look like a torso: margins up to
    # 1.35 on the Intel car park), while on real people the classifier's vehicle mass stays < 0.05.
    # So a crop the classifier sees as a vehicle is never called a person.
    if vehicle_mass < _VEHICLE_VETO:
        person = _detect_person(image_rgb, box, mask)
        if person is not None:
            candidates.append(person)
    noun = max(groups, key=groups.__getitem__)
    candidates.append(Recognition(noun, groups[noun], "imagenet"))
    if groups[noun] < min_confidence <= vehicle_mass:
        # Car, van and truck split the vote on odd views (top-down): together they still say "vehicle".
        candidates.append(Recognition("vehicle", vehicle_mass, "imagenet"))
    best = max(candidates, key=lambda r: r.confidence)
    return best if best.confidence >= min_confidence else None


def classify_groups(image_rgb: np.ndarray, bbox: tuple[int, int, int, int]) -> dict[str, float]:
    """The summed ImageNet probability of every noun group for ``bbox`` (for tuning and tests)."""
    box = _clip_box(bbox, image_rgb.shape[1], image_rgb.shape[0])
    if box is None:
        return {g: 0.0 for g in IMAGENET_GROUPS}
    return _group_masses(_imagenet_probs([(image_rgb, box)]))[0]


def _group_masses(probs: np.ndarray) -> list[dict[str, float]]:
    """(N, 1000) softmax rows -> per row, the summed probability of each noun group."""
    return [
        {group: float(row[list(classes)].sum()) for group, classes in IMAGENET_GROUPS.items()}
        for row in probs
    ]


# --------------------------------------------------------------------------------------------------
# the classifier


def _imagenet_probs(items: list[tuple[np.ndarray, tuple[int, int, int, int]]]) -> np.ndarray:
    """Softmax over the 1000 ImageNet classes for a padded square crop around each (image, box),
    in one forward pass: (N, 1000)."""
    logits = _classifier()(classifier_blob(items)).reshape(len(items), -1).astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


def classifier_blob(items: list[tuple[np.ndarray, tuple[int, int, int, int]]]) -> np.ndarray:
    """The classifier's input for each (RGB image, box): a square crop around the box with
    ``_CLS_PAD`` of context, scaled to 224 and mapped to [-1, 1]: (N, 3, 224, 224) float32."""
    crops = []
    for image_rgb, (x, y, w, h) in items:
        side = int(round(max(w, h) * (1 + 2 * _CLS_PAD)))
        cx, cy = x + w / 2, y + h / 2
        crop = _crop_padded(
            image_rgb, int(round(cx - side / 2)), int(round(cy - side / 2)), side, side
        )
        # INTER_AREA when shrinking (anti-aliased, like the bicubic+antialias timm used in training).
        interp = cv2.INTER_AREA if side > _INPUT else cv2.INTER_CUBIC
        crops.append(cv2.resize(crop, (_INPUT, _INPUT), interpolation=interp))
    return cv2.dnn.blobFromImages(
        crops, 1 / 127.5, (_INPUT, _INPUT), (127.5, 127.5, 127.5), swapRB=False
    )


_NET_LOCK = threading.Lock()


def warm_up() -> None:
    """Load the object detector, the classifier and the people detector, and run one forward
    pass of each network (the first one sets it up: ~50 ms for the detector, ~20 ms for the
    classifier), so the first real region is fast. Idempotent: the work is done once per
    process, however often this is called."""
    global _warm
    with _WARM_LOCK:
        if _warm:
            return
        # OpenCV builds its 8-bit Lab tables on the first RGB->Lab conversion (~30 ms idle, 80
        # on a busy machine); the analysis (the floor test) and the colour words need them soon.
        # Should the analysis get there while they are being built, it builds them too: OpenCV
        # writes the same final values into the same tables (and swaps in fully built ones), so
        # results cannot differ; it only costs the time the warm-up meant to save.
        cv2.cvtColor(np.zeros((1, 1, 3), np.uint8), cv2.COLOR_RGB2LAB)
        # Then the detector: recognise_many asks it before the classifier. Its first pass sets
        # the network up (~50 ms, whatever the input size); a pass at a new input size costs
        # ~50 ms more once. A 64x64 blank costs only the set-up, which every later size shares,
        # so a watched region's smaller input gains as much as a whole frame.
        from .detect import default_detector

        default_detector().detect(np.zeros((64, 64, 3), np.uint8))
        _hog()
        _classifier()(np.zeros((1, 3, _INPUT, _INPUT), np.float32))
        _warm = True


def start_warm_up() -> None:
    """Run :func:`warm_up` in a background thread, at most once per process, so it overlaps the
    pixel analysis (OpenCV releases the GIL).

    The thread is *not* a daemon, on purpose: a daemon thread still inside OpenCV when the
    interpreter finalises is torn down by ``pthread_exit`` through C++ frames, and the C++
    runtime answers with ``std::terminate`` - the process aborts (exit 134) after having printed
    a perfectly good answer. A normal thread is joined by the interpreter before finalisation,
    which costs at most the ~115 ms of the warm-up itself. A failure here is not reported: the
    same load inside ``recognise`` raises it properly.
    """
    global _warm_thread
    with _START_LOCK:
        if _warm or _warm_thread is not None:
            return

        def load() -> None:
            try:
                warm_up()
            except Exception:  # noqa: BLE001 - resurfaces, with its message, in recognise()
                pass

        _warm_thread = threading.Thread(target=load, name="spotdiff-recognisers", daemon=False)
        _warm_thread.start()


_WARM_LOCK = threading.Lock()  # held while warming: a second caller waits, then returns
_START_LOCK = threading.Lock()  # held only to start the thread: never waits on the warm-up
_warm = False
_warm_thread: threading.Thread | None = None


@built_once
def _classifier() -> Callable[[np.ndarray], np.ndarray]:
    """The classifier as a function (N, 3, 224, 224) float32 -> (N, 1000) logits, loaded once
    per process (~60 ms): on onnxruntime where it is installed (10 ms a crop on one thread,
    against 35-40 on ``cv2.dnn``, whose depthwise convolutions are slow; the same logits to
    ~1e-5; ``onnx_runtime.pass_threads()`` threads), else on ``cv2.dnn``. The graph declares
    a batch of one, which onnxruntime holds it to: the crops go through one at a time, at the
    same cost per crop as a batch."""
    from .onnx_runtime import onnxruntime_module, ort_session, pass_threads

    path = resolve_weights(None, kind="classifier-onnx")
    if onnxruntime_module() is not None:
        session = ort_session(path, pass_threads(), "classifier", "scripts/export_classifier.py")
        return lambda blob: np.concatenate(
            [session.run(["logits"], {"input": blob[i : i + 1]})[0] for i in range(len(blob))]
        )
    net = cv2.dnn.readNetFromONNX(str(path))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)

    def forward(blob: np.ndarray) -> np.ndarray:
        with _NET_LOCK:  # cv2.dnn.Net is not thread-safe
            net.setInput(blob)
            return net.forward()

    return forward


# --------------------------------------------------------------------------------------------------
# the people detector


@built_once
def _hog() -> cv2.HOGDescriptor:
    hog = cv2.HOGDescriptor()  # the defaults are the 64×128 pedestrian window
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    return hog


def _detect_person(
    image_rgb: np.ndarray, box: tuple[int, int, int, int], mask: np.ndarray | None
) -> Recognition | None:
    x, y, w, h = box
    if h / w < _HOG_MIN_ASPECT:
        return None
    px, py = int(round(w * _HOG_PAD_X)), int(round(h * _HOG_PAD_Y))
    cx0, cy0, cw, ch = x - px, y - py, w + 2 * px, h + 2 * py
    scale = _HOG_BOX_HEIGHT / h
    crop = _crop_padded(image_rgb, cx0, cy0, cw, ch)
    crop = cv2.resize(
        crop,
        (max(64, round(cw * scale)), max(128, round(ch * scale))),
        interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR,
    )
    gray = cv2.cvtColor(
        crop, cv2.COLOR_RGB2GRAY
    )  # HOG uses the strongest channel; grey is ~2× faster
    rects, weights = _hog().detectMultiScale(
        gray, hitThreshold=0.0, winStride=(4, 4), padding=(8, 8), scale=1.05
    )
    if len(rects) == 0:
        return None

    sy, sx = crop.shape[0] / ch, crop.shape[1] / cw
    target = (px * sx, py * sy, w * sx, h * sy)  # the box, in crop coordinates
    if mask is not None:
        m = _crop_padded((mask != 0).astype(np.uint8), cx0, cy0, cw, ch)
        m = cv2.resize(m, (crop.shape[1], crop.shape[0]), interpolation=cv2.INTER_NEAREST) > 0
        total = int(m.sum())
    best = 0.0
    for (rx, ry, rw, rh), weight in zip(rects, np.asarray(weights).reshape(-1)):
        if box_iou((rx, ry, rw, rh), target) < _HOG_MIN_OVERLAP:
            continue
        if mask is not None and total > 0 and m[ry : ry + rh, rx : rx + rw].sum() < 0.5 * total:
            continue
        best = max(best, float(weight))
    if best <= 0:
        return None
    return Recognition("person", 1 / (1 + math.exp(-_HOG_SLOPE * (best - _HOG_MID))), "hog")


# --------------------------------------------------------------------------------------------------
# geometry


def _clip_box(
    bbox: tuple[int, int, int, int], width: int, height: int
) -> tuple[int, int, int, int] | None:
    x, y, w, h = (int(round(v)) for v in bbox)
    x0, y0, x1, y1 = max(0, x), max(0, y), min(width, x + w), min(height, y + h)
    return (x0, y0, x1 - x0, y1 - y0) if x1 > x0 and y1 > y0 else None


def _crop_padded(image: np.ndarray, x: int, y: int, w: int, h: int) -> np.ndarray:
    """``image[y:y+h, x:x+w]``, where parts outside the image are mid-grey.

    Grey (127) is 0 after the classifier's normalisation, the least informative fill; replicating
    the border instead smears edge pixels into stripes that both models read as texture.
    """
    H, W = image.shape[:2]
    x0, y0, x1, y1 = max(0, x), max(0, y), min(W, x + w), min(H, y + h)
    inner = image[y0:y1, x0:x1]
    top, left, bottom, right = y0 - y, x0 - x, (y + h) - y1, (x + w) - x1
    if top or left or bottom or right:
        fill = (127, 127, 127) if image.ndim == 3 else 0  # masks are padded with "unchanged"
        inner = cv2.copyMakeBorder(inner, top, bottom, left, right, cv2.BORDER_CONSTANT, value=fill)
    return inner
