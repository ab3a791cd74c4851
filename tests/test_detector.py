"""analysis/detect.py: NanoDet box decoding, letterbox and region mapping, the real model on real
frames, its errors, and the light-install promise (no torch)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, video_frame

from spotdiff_cli.analysis import detect as D
from spotdiff_cli.errors import InputError, ModelError, WeightsNotFoundError
from spotdiff_cli.geometry import box_iou

ROOM = "intel_one-by-one-person-detection.mp4"
# Frame 1320: a man in a grey shirt stands at the table, seen from behind; his box, read off the
# frame (768×432): head at the top edge, feet at y ≈ 395, shoulders x ≈ 355-520.
PERSON_FRAME, PERSON_BOX = 1320, (352, 0, 172, 397)
EMPTY_FRAME = 480  # the same room with nobody in it


def _outputs(
    hits: dict[int, list[tuple[int, int, dict[int, float]]]],
    classes: int = 80,
    size: int | tuple[int, int] = D.INPUT_SIZE,
) -> list[np.ndarray]:
    """Synthetic head outputs [cls_8, cls_16, cls_32, dist_8, dist_16, dist_32] (batch 1).

    ``hits[stride]``: (cell, class, sides) where sides gives, for each side 0-3 (left, top,
    right, bottom), a distance in strides. A whole-number distance is one bin with a huge logit; a
    half-way one (k + 0.5) two equal logits on bins k and k + 1, whose expectation is exactly
    k + 0.5. Scores elsewhere are 0.01, logits elsewhere 0 except the hits'.
    """
    cls_out, dist_out = [], []
    for stride in D.STRIDES:
        h, w = (size, size) if isinstance(size, int) else size
        n = (h // stride) * (w // stride)
        scores = np.full((1, n, classes), 0.01, np.float32)
        dists = np.zeros((1, n, 4, D.REG_MAX + 1), np.float32)
        for cell, cls, sides in hits.get(stride, []):
            scores[0, cell, cls] = 0.9
            dists[0, cell] = -50.0
            for side, distance in sides.items():
                k = int(np.floor(distance))
                dists[0, cell, side, k] = 50.0
                if distance != k:
                    dists[0, cell, side, k + 1] = 50.0
        cls_out.append(scores)
        dist_out.append(dists.reshape(1, n, -1))
    return cls_out + dist_out


def test_coco_classes():
    assert len(D.COCO_CLASSES) == 80 and len(set(D.COCO_CLASSES)) == 80
    assert D.COCO_CLASSES[0] == "person" and D.COCO_CLASSES[2] == "car"
    assert D.COCO_CLASSES[67] == "cell phone" and D.COCO_CLASSES[79] == "toothbrush"


def test_decode_known_boxes():
    # Stride 16, 26×26 grid: cell 5·26 + 7 is column 7, row 5, centre (120, 88).
    # Stride 32, 13×13 grid: cell 12·13 + 0 is column 0, row 12, centre (16, 400).
    outs = _outputs(
        {
            16: [(5 * 26 + 7, 2, {0: 3, 1: 2, 2: 4, 3: 1})],
            32: [(12 * 13 + 0, 0, {0: 0, 1: 2.5, 2: 10, 3: 0.5})],
        }
    )
    boxes, scores, classes = D.decode(outs[:3], outs[3:], min_score=0.5)
    order = np.argsort(classes)  # person (0) first, then car (2)
    np.testing.assert_allclose(boxes[order[0]], [16, 400 - 80, 16 + 320, 400 + 16], atol=1e-3)
    np.testing.assert_allclose(boxes[order[1]], [120 - 48, 88 - 32, 120 + 64, 88 + 16], atol=1e-3)
    assert classes[order].tolist() == [0, 2]
    np.testing.assert_allclose(scores, 0.9)


def test_decode_drops_low_scores_and_checks_grid_size():
    outs = _outputs({8: [(0, 1, {0: 1, 1: 1, 2: 1, 3: 1})]})
    boxes, scores, classes = D.decode(outs[:3], outs[3:], min_score=0.95)
    assert boxes.shape == (0, 4) and scores.shape == (0,) and classes.shape == (0,)
    with pytest.raises(ModelError, match="stride 8"):
        D.decode([outs[0][:, :100]], [outs[3][:, :100]], strides=[8])


def test_nms_is_per_class():
    boxes = np.array([[0, 0, 100, 100], [2, 2, 100, 100], [0, 0, 100, 100]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    classes = np.array([0, 0, 2])
    # The two people overlap: one stays; the car at the same place is another class and stays.
    assert D.nms_per_class(boxes, scores, classes).tolist() == [0, 2]


class _FakeNet(D.ObjectDetector):
    """The real detector's pre- and post-processing around synthetic head outputs."""

    def __init__(self, outs: list[np.ndarray]) -> None:
        self.outs = outs
        self.input_size = D.INPUT_SIZE
        self.blobs: list[np.ndarray] = []
        self._start_answers()

    def _forward(self, blob: np.ndarray) -> list[np.ndarray]:
        self.blobs.append(blob)
        return self.outs


def test_letterbox_is_undone():
    # An 832×468 image scales by 1/2 to 416×234, on a 416×256 canvas (each side rounded up to
    # the stride 32, not the whole 416 square): 11 px of black above, 11 below. Cell (column 7,
    # row 10) of stride 16 (a 26×16 grid) has its centre at (120, 168); the box is input
    # (72, 136)-(184, 184), i.e. image ((72, 136 - 11) · 2, (184, 184 - 11) · 2).
    outs = _outputs({16: [(10 * 26 + 7, 0, {0: 3, 1: 2, 2: 4, 3: 1})]}, size=(256, 416))
    det = _FakeNet(outs)
    image = np.zeros((468, 832, 3), np.uint8)
    [found] = det.detect(image)
    assert found.box == (144, 250, 224, 96) and found.label == "person"
    blob = det.blobs[0]
    assert blob.shape == (1, 3, 256, 416) and blob.dtype == np.float32
    black = (0 - D.MEAN_BGR) / D.STD_BGR
    np.testing.assert_allclose(blob[0, :, 0, 0], black, rtol=1e-6)  # the border is black


def test_the_square_letterbox_is_still_there():
    canvas, placed = D.letterbox(np.zeros((468, 832, 3), np.uint8), 416)
    assert canvas.shape == (416, 416, 3) and (placed.pad_x, placed.pad_y) == (0, 91)
    canvas, placed = D.letterbox(np.zeros((468, 832, 3), np.uint8), 416, square=False)
    assert canvas.shape == (256, 416, 3) and (placed.pad_x, placed.pad_y) == (0, 11)


def test_channel_order():
    # A pure-red RGB image is (0, 0, 255) in BGR: channel 2 of the blob carries the red.
    det = _FakeNet(_outputs({}))
    red = np.zeros((416, 416, 3), np.uint8)
    red[..., 0] = 255
    assert det.detect(red) == []
    det.detect(red[..., ::-1].copy(), order="bgr")
    a, b = det.blobs
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(a[0, :, 200, 200], (np.array([0, 0, 255]) - D.MEAN_BGR) / D.STD_BGR)


def test_region_maps_back_to_the_full_image():
    # The region (300, 50, 224, 224) is looked at on a 224 canvas, pixel for pixel (not blown
    # up to 416): stride 16 is a 14×14 grid, cell 5·14 + 7 has its centre at (120, 88), the box
    # at input (72, 56)-(184, 104) is image (372, 106)-(484, 154).
    outs = _outputs({16: [(5 * 14 + 7, 2, {0: 3, 1: 2, 2: 4, 3: 1})]}, size=224)
    det = _FakeNet(outs)
    image = np.zeros((400, 600, 3), np.uint8)
    [found] = det.detect(image, region=(300, 50, 224, 224))
    assert found.box == (372, 106, 112, 48) and found.label == "car"
    assert det.blobs[0].shape == (1, 3, 224, 224)
    # A region reaching outside the image is clipped; one wholly outside is refused.
    with pytest.raises(InputError, match="outside"):
        det.detect(image, region=(700, 0, 50, 50))
    with pytest.raises(InputError, match="uint8"):
        det.detect(image.astype(np.float32))


# --------------------------------------------------------------------------------------------------
# the real model


@pytest.fixture(scope="module", params=["onnxruntime", "opencv"])
def backend_detector(request):
    """The shipped int8 graph on onnxruntime (the default) and the float one on cv2.dnn (the
    fallback where onnxruntime is absent): both must find what the tests below ask."""
    det = D.ObjectDetector(backend=request.param)
    assert det.backend == request.param
    assert det.path.name == (
        "nanodet_coco_int8.onnx" if request.param == "onnxruntime" else "nanodet_coco.onnx"
    )
    return det


def test_a_person_is_found_in_a_real_frame(backend_detector):
    frame = video_frame(ROOM, PERSON_FRAME)  # RGB, as Frame.pixels
    people = [d for d in backend_detector.detect(frame) if d.label == "person"]
    assert len(people) == 1, people
    assert people[0].score > 0.6
    assert box_iou(people[0].box, PERSON_BOX) > 0.75, people[0]


def test_nobody_in_the_empty_room(backend_detector):
    frame = video_frame(ROOM, EMPTY_FRAME)
    assert [d for d in backend_detector.detect(frame, min_score=0.2) if d.label == "person"] == []


def test_the_int8_graph_finds_what_the_float_one_finds():
    """On frames of the held-out ends of both clips (never used to calibrate the int8 ranges):
    every float detection of 0.4 or more has an int8 one of the same label at IoU >= 0.7 (int8
    scores run up to 0.06 lower on weak detections, hence 0.3 for the int8 side)."""
    fast = D.ObjectDetector(backend="onnxruntime")
    exact = D.ObjectDetector(backend="opencv")
    assert fast.path.stat().st_size < exact.path.stat().st_size / 3
    checked = 0
    car_park = "intel_car-detection.mp4"
    for clip, index in ((ROOM, 950), (ROOM, 1320), (car_park, 330), (car_park, 340)):
        frame = video_frame(clip, index)
        found = fast.detect(frame, min_score=0.3)
        for want in exact.detect(frame, min_score=0.4):
            checked += 1
            assert any(d.label == want.label and box_iou(d.box, want.box) >= 0.7 for d in found), (
                clip,
                index,
                want,
                found,
            )
    assert checked >= 6


def test_real_region_gives_full_image_boxes():
    frame = video_frame(ROOM, PERSON_FRAME)
    det = D.default_detector()
    region = (300, 0, 300, 432)
    people = [d for d in det.detect(frame, region=region) if d.label == "person"]
    assert len(people) == 1
    x, y, w, h = people[0].box
    assert 300 <= x and x + w <= 600  # inside the region, in image coordinates
    assert box_iou(people[0].box, PERSON_BOX) > 0.75, people[0]
    # Outside the region there is nothing of him.
    assert all(d.label != "person" for d in det.detect(frame, region=(0, 0, 300, 432)))


def test_missing_and_corrupt_weights(tmp_path):
    with pytest.raises(WeightsNotFoundError, match="detector-onnx"):
        D.ObjectDetector(tmp_path / "absent.onnx")
    bad = tmp_path / "nanodet.onnx"
    bad.write_bytes((REPO / "weights" / "nanodet_coco.onnx").read_bytes()[:4096])
    with pytest.raises(ModelError, match="not a readable ONNX model") as err:
        D.ObjectDetector(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ModelError, match="lack the outputs"):
        D.ObjectDetector(REPO / "weights" / "efficientnet_lite0_imagenet.onnx")


def test_shipped_weights_match_the_manifest():
    from spotdiff_cli.weights import resolve_weights

    # Resolving checks each file's sha256 against the manifest.
    assert resolve_weights(None, kind=D.WEIGHTS_KIND).name == "nanodet_coco_int8.onnx"
    assert resolve_weights(D.WEIGHTS_NAME, kind=D.WEIGHTS_KIND).name == "nanodet_coco.onnx"
    assert D.default_detector().backend == "onnxruntime"


def test_the_int8_weights_sum_exactly_on_every_cpu():
    """onnxruntime's int8 convolution on CPUs without VNNI (AVX2: AMD Zen 3, older Intel) adds
    each pair of uint8 x int8 products in a saturating 16-bit sum (VPMADDUBSW). With 8-bit
    weights those sums overflow, and the same graph found other boxes there than on a VNNI
    CPU (a car park's car became a kite). Weights within 7 bits keep every pair's sum inside
    int16 (255 * 64 * 2 = 32640), so the integer sums are exact everywhere."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    graph = onnx.load(str(REPO / "weights" / "nanodet_coco_int8.onnx")).graph
    weights = [
        numpy_helper.to_array(t)
        for t in graph.initializer
        if t.data_type == onnx.TensorProto.INT8 and np.prod(t.dims) > 1
    ]
    assert len(weights) >= 30  # every convolution's kernel
    worst = max(int(np.abs(w.astype(np.int32)).max()) for w in weights)
    assert 255 * worst * 2 <= np.iinfo(np.int16).max, worst


class _SlowNet(_FakeNet):
    """A pass that takes a while, counting how many run at once."""

    def __init__(self, outs: list[np.ndarray]) -> None:
        super().__init__(outs)
        import threading

        self.running = 0
        self.most_at_once = 0
        self.count_lock = threading.Lock()

    def _forward(self, blob: np.ndarray) -> list[np.ndarray]:
        import time

        with self.count_lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.05)
        with self.count_lock:
            self.running -= 1
        return super()._forward(blob)


def test_one_pass_per_frame_and_frames_side_by_side():
    """Threads asking about one frame share its pass; a thread asking about another frame
    does not wait for it (the video pipeline's stages ask about different samples at once)."""
    from concurrent.futures import ThreadPoolExecutor

    net = _SlowNet(_outputs({}, size=(256, 416)))
    frames = [np.full((360, 640, 3), v, np.uint8) for v in (10, 200)]
    for f in frames:
        f.flags.writeable = False
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: net.detect(frames[i % 2]), range(6)))
    assert answers == [[]] * 6
    assert len(net.blobs) == 2  # one pass per frame, however many asked
    assert net.most_at_once == 2  # the two frames' passes ran side by side
    # Kept: asking again makes no pass.
    net.detect(frames[0])
    assert len(net.blobs) == 2


def test_a_failed_pass_fails_every_asker_and_is_not_kept():
    net = _FakeNet(_outputs({}, size=(256, 416)))
    calls = []

    def broken(blob):
        calls.append(blob)
        raise RuntimeError("out of memory")

    net._forward = broken
    frame = np.zeros((360, 640, 3), np.uint8)
    frame.flags.writeable = False
    for _ in range(2):
        with pytest.raises(RuntimeError, match="out of memory"):
            net.detect(frame)
    assert len(calls) == 2  # the failure was not kept as an answer
    assert net._making == {}


def test_a_pinned_answer_is_given_without_a_pass_until_unpinned():
    """pin(): an earlier frame's answer stands for a frame (the video pipeline's people standing
    still), for the same question only, however many answers come and go meanwhile."""
    net = _FakeNet(_outputs({}, size=(256, 416)))
    frame = np.zeros((360, 640, 3), np.uint8)
    frame.flags.writeable = False
    person = D.Detection((100, 50, 40, 120), "person", 0.8)
    net.pin(frame, [person], None, 0.3)
    for i in range(20):  # more answers than are kept: the pin is not one of them
        other = np.full((360, 640, 3), i, np.uint8)
        other.flags.writeable = False
        net.detect(other, min_score=0.3)
    assert net.detect(frame, min_score=0.3) == [person]
    assert len(net.blobs) == 20
    net.detect(frame, min_score=0.5)  # another question: a pass of its own
    assert len(net.blobs) == 21
    # In a region: boxes stay in the full image's pixels.
    net.pin(frame, [person], (80, 40, 200, 200), 0.3)
    assert net.detect(frame, region=(80, 40, 200, 200), min_score=0.3) == [person]
    net.unpin(frame, None, 0.3)
    assert net.detect(frame, min_score=0.3) == []  # the fake network finds nothing
    assert len(net.blobs) == 22
    with pytest.raises(InputError, match="read-only"):
        net.pin(np.zeros((360, 640, 3), np.uint8), [person])


def test_a_corrupt_int8_graph_is_one_line(tmp_path):
    bad = tmp_path / "nanodet_int8.onnx"
    bad.write_bytes((REPO / "weights" / "nanodet_coco_int8.onnx").read_bytes()[:4096])
    with pytest.raises(ModelError, match="not a readable ONNX model") as err:
        D.ObjectDetector(bad, backend="onnxruntime")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="backend"):
        D.ObjectDetector(backend="tensorrt")


def test_detect_does_not_import_torch():
    code = (
        "import sys, spotdiff_cli.analysis.detect as d; d.default_detector(); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_a_small_region_is_not_blown_up_to_the_full_input():
    """A 105x63 watched box is looked at on a 224 canvas (the smallest), a 300x280 one on 320
    (its long side rounded up to the coarsest stride), a frame on the full 416 one."""
    assert D.fitted_size((63, 105)) == 224
    assert D.fitted_size((280, 300)) == 320
    assert D.fitted_size((360, 640)) == 416
    assert D.fitted_size((416, 200)) == 416
    assert D.fitted_size((360, 640), largest=320) == 320


def test_the_float_graph_by_name_runs_where_it_can():
    """The float graph declares 416x416, which onnxruntime enforces (a frame's 416x256 canvas
    would fail there): asked for by name it runs on OpenCV, and onnxruntime by force says why."""
    frame = video_frame(ROOM, PERSON_FRAME)
    det = D.ObjectDetector(D.WEIGHTS_NAME)
    assert det.backend == "opencv"
    assert any(d.label == "person" for d in det.detect(frame))
    with pytest.raises(ModelError, match="fixed input size"):
        D.ObjectDetector(D.WEIGHTS_NAME, backend="onnxruntime")


def test_a_frame_asked_about_twice_costs_one_pass():
    # Read-only frames (the video pipeline's) are known by their memory, others by their
    # pixels: either way a second question about the same frame reuses the first answer, and
    # a frame with other pixels gets its own pass.
    outs = _outputs({16: [(10 * 26 + 7, 0, {0: 3, 1: 2, 2: 4, 3: 1})]}, size=(256, 416))
    det = _FakeNet(outs)
    frame = np.zeros((468, 832, 3), np.uint8)
    frame.flags.writeable = False
    assert det.detect(frame) == det.detect(frame) and len(det.blobs) == 1
    other = np.ones((468, 832, 3), np.uint8)
    other.flags.writeable = False
    det.detect(other)
    assert len(det.blobs) == 2
    mutable = np.zeros((468, 832, 3), np.uint8)
    det.detect(mutable)
    det.detect(mutable.copy())  # other memory, the same pixels
    assert len(det.blobs) == 3
    mutable[0, 0] = 7  # changed in place: the same memory, other pixels
    det.detect(mutable)
    assert len(det.blobs) == 4


def test_answers_made_ahead_are_kept_as_long_as_asked():
    # The video pipeline makes a changed sample's pass as many samples ahead as its queues
    # hold; the tracker and the captions ask later. Sixteen answers are kept by default; a
    # caller that asks for more keeps them (never fewer).
    outs = _outputs({16: [(10 * 26 + 7, 0, {0: 3, 1: 2, 2: 4, 3: 1})]}, size=(256, 416))
    det = _FakeNet(outs)
    frames = []
    for i in range(40):
        frame = np.full((468, 832, 3), i, np.uint8)
        frame.flags.writeable = False
        frames.append(frame)
    for frame in frames[:20]:
        det.detect(frame)
    det.detect(frames[0])  # forgotten after sixteen others: a second pass
    assert len(det.blobs) == 21
    det.keep_answers(40)
    for frame in frames:
        det.detect(frame)
    before = len(det.blobs)
    for frame in frames:
        det.detect(frame)
    assert len(det.blobs) == before
    det.keep_answers()  # the default again: the older answers (and their frames) let go
    assert len(det._recent) == D.ANSWERS_KEPT


@pytest.mark.parametrize("shape", [(256, 416, 3), (224, 224, 3)])
def test_the_network_input_is_the_normalised_canvas_to_the_bit(shape) -> None:
    """network_input makes the planar blob without a second copy: the same float32 values as
    normalising the (H, W, 3) canvas and transposing it, bit for bit, so no box moves."""
    canvas = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    expected = ((canvas.astype(np.float32) - D.MEAN_BGR) / D.STD_BGR).transpose(2, 0, 1)[None]
    blob = D.network_input(canvas)
    assert blob.shape == (1, 3, *shape[:2]) and blob.dtype == np.float32
    assert blob.flags.c_contiguous
    assert np.array_equal(blob.view(np.uint32), np.ascontiguousarray(expected).view(np.uint32))


def test_the_video_pipeline_runs_each_pass_on_one_thread_with_the_same_answers(
    monkeypatch, tmp_path
):
    """A caption's networks run a pass on two threads; the video pipeline asks for one (its own
    threads keep the cores busy): networks loaded after that get one, and answer the same."""
    pytest.importorskip("onnxruntime")
    import os

    import cv2
    from conftest import textured_background
    from typer.testing import CliRunner

    from spotdiff_cli.analysis import onnx_runtime
    from spotdiff_cli.cli import app
    from spotdiff_cli.frames.image import load_image

    monkeypatch.setattr(onnx_runtime, "_threads", onnx_runtime.DEFAULT_THREADS)
    two = D.ObjectDetector(threads=None)
    assert two._session.get_session_options().intra_op_num_threads == min(2, os.cpu_count())

    clip = tmp_path / "still.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 5, (160, 120))
    for _ in range(10):
        writer.write(textured_background(120, 160))
    writer.release()
    done = CliRunner().invoke(app, ["video", str(clip), "--every", "1s", "--json"])
    assert done.exit_code == 0, done.output
    assert onnx_runtime.pass_threads() == 1
    one = D.ObjectDetector(threads=None)
    assert one._session.get_session_options().intra_op_num_threads == 1
    frame = load_image(REPO / "examples" / "parking-lot" / "after.jpg")  # a parked car
    found = one.detect(frame, min_score=0.05)
    assert found and found == two.detect(frame, min_score=0.05)
