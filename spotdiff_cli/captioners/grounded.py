"""``grounded``: the default captioner. No learned language model: every sentence states what
the analysis measured about one salient cluster.

For each cluster it decides *what happened* by asking which image looks like background there:
the region is inpainted from its surroundings in both images and compared with the real pixels.
If the before image is predicted well by its surroundings and the after image is not, something
appeared; the reverse, something disappeared; if both differ from the surroundings with the same edges,
it changed colour. An object that disappeared in one place and appeared in another with the same
look and size is reported once, as a move (Spot-the-diff §5 names reporting such a move as two
events as the weakness of cluster-per-sentence models).

*Where* comes from a 3x3 grid, *what* from the recognisers (OpenCV HOG for people, the offline
ImageNet classifier for vehicles and animals) with size and colour words, falling back to an
honest "object". Torch-free, so it runs on a fresh machine in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from ..geometry import box_iou
from ..types import Analysis, Cluster, Sentence
from .base import Captioner, DescribeOptions, Hint
from .registry import register_captioner
from .words import article, colour_name, noun_phrase, region_name, region_phrase, size_word

# A cluster is "like its surroundings" in one image and "unlike" in the other when the two
# inpainting residuals differ by this factor and by this many Lab units (chosen on synthetic rectangles and
# on the footage in shared/media).
_EVENT_RATIO = 1.6
_EVENT_MARGIN = 8.0
# Objects whose colours differ by less than this (Lab distance) and whose sizes are within this
# ratio can be the same object moved.
_MOVE_COLOUR = 22.0
_MOVE_SIZE_RATIO = 2.2
# Edge-structure correlation above which "both differ" is read as a colour change.
_SAME_EDGES = 0.45


@dataclass
class Reading:
    """What the captioner measured about one cluster."""

    cluster: Cluster
    event: str  # appeared | disappeared | colour | changed
    contrast_before: float
    contrast_after: float
    colour_before: str = ""
    colour_after: str = ""
    lab_before: np.ndarray = field(default_factory=lambda: np.zeros(3))
    lab_after: np.ndarray = field(default_factory=lambda: np.zeros(3))
    noun: str = "object"
    recognised_by: str = ""
    recognition_confidence: float = 0.0


def _crop_box(
    bbox: tuple[int, int, int, int], pad: int, width: int, height: int
) -> tuple[int, int, int, int]:
    x, y, w, h = bbox
    return max(0, x - pad), max(0, y - pad), min(width, x + w + pad), min(height, y + h + pad)


def _lab_stats(lab: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, float]:
    pixels = lab[sel]
    if pixels.shape[0] == 0:
        return np.zeros(3), 0.0
    return np.median(pixels, axis=0), float(pixels[:, 0].std())


def _inpaint_residual(crop: np.ndarray, region: np.ndarray) -> float:
    """How badly the region is predicted from its surroundings: inpaint it (OpenCV Telea) and
    take the mean Lab distance to the real pixels. Background continues its surroundings (low
    residual, even on a gradient or texture); an object does not (high residual).

    crop: (h, w, 3) uint8 RGB; region: (h, w) bool.
    """
    # Inpainting cost grows with the hole; a 96 px crop keeps it to a millisecond or two and
    # still separates an object from background.
    factor = 96 / max(crop.shape[:2])
    if factor < 1:
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
        region = cv2.resize(region.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST) > 0
    filled = cv2.inpaint(crop, region.astype(np.uint8), 3, cv2.INPAINT_TELEA)
    real = cv2.cvtColor(crop, cv2.COLOR_RGB2LAB).astype(np.float32)[region]
    guess = cv2.cvtColor(filled, cv2.COLOR_RGB2LAB).astype(np.float32)[region]
    if real.shape[0] == 0:
        return 0.0
    return float(np.linalg.norm(real - guess, axis=1).mean())


def _edge_correlation(a: np.ndarray, b: np.ndarray, sel: np.ndarray) -> float:
    """Correlation of gradient magnitudes of two grey crops over ``sel``: high when the same
    shape is present in both (a repaint), low when one side is plain background."""

    def grad(img: np.ndarray) -> np.ndarray:
        g = img.astype(np.float32)
        return cv2.magnitude(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1))

    ga, gb = grad(a)[sel], grad(b)[sel]
    if ga.size < 8 or ga.std() < 1e-3 or gb.std() < 1e-3:
        return 0.0
    return float(np.corrcoef(ga, gb)[0, 1])


def read_cluster(analysis: Analysis, cluster: Cluster) -> Reading:
    """Measure one cluster: how well each image's region is predicted by its surroundings,
    the colours, and from those the event."""
    before = analysis.pair.before.pixels
    after = analysis.corrected_after
    height, width = before.shape[:2]
    bx, by, bw, bh = cluster.bbox
    pad = max(6, int(0.3 * max(bw, bh)))
    x0, y0, x1, y1 = _crop_box(cluster.bbox, pad, width, height)
    inside = cluster.mask[y0:y1, x0:x1].astype(np.uint8)
    # Close small gaps and grow by 2 px so the region includes the object's soft edges.
    region = (
        cv2.dilate(
            cv2.morphologyEx(inside, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8)),
            np.ones((5, 5), np.uint8),
        )
        > 0
    )
    crop_b, crop_a = before[y0:y1, x0:x1], after[y0:y1, x0:x1]
    c_before = _inpaint_residual(crop_b, region)
    c_after = _inpaint_residual(crop_a, region)
    lab_b = cv2.cvtColor(crop_b, cv2.COLOR_RGB2LAB).astype(np.float32)
    lab_a = cv2.cvtColor(crop_a, cv2.COLOR_RGB2LAB).astype(np.float32)
    med_b, _ = _lab_stats(lab_b, region)
    med_a, _ = _lab_stats(lab_a, region)
    if c_after > max(_EVENT_RATIO * c_before, c_before + _EVENT_MARGIN):
        event = "appeared"
    elif c_before > max(_EVENT_RATIO * c_after, c_after + _EVENT_MARGIN):
        event = "disappeared"
    else:
        grey_b = cv2.cvtColor(crop_b, cv2.COLOR_RGB2GRAY)
        grey_a = cv2.cvtColor(crop_a, cv2.COLOR_RGB2GRAY)
        near = cv2.dilate(region.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
        same_shape = _edge_correlation(grey_b, grey_a, near) > _SAME_EDGES
        chroma_shift = float(np.linalg.norm(med_b[1:] - med_a[1:]))
        event = "colour" if same_shape and chroma_shift > 15 else "changed"
    raw_after = analysis.pair.after.pixels[y0:y1, x0:x1]
    return Reading(
        cluster=cluster,
        event=event,
        contrast_before=c_before,
        contrast_after=c_after,
        colour_before=colour_name(crop_b[region]),
        colour_after=colour_name(raw_after[region]),
        lab_before=med_b,
        lab_after=med_a,
    )


# A hint counts for a cluster when their boxes overlap this much (intersection over union).
_HINT_IOU = 0.5


def _hint_for(hints: tuple[Hint, ...], bbox: tuple[int, int, int, int]) -> Hint | None:
    """The earlier recognition that names this cluster: the hint it overlaps most (IoU of at
    least ``_HINT_IOU``), else one it has travelled from - a box of similar size (within 2x
    in area) whose centre is within half the hint's size of the cluster's centre. The second
    rule follows a moving object over a few frames (``video --describe-every`` describes a
    change in motion once per slot, by when a car has moved a fraction of its length)."""
    if not hints:
        return None
    best = max(hints, key=lambda h: box_iou(h.bbox, bbox))
    if box_iou(best.bbox, bbox) >= _HINT_IOU:
        return best
    x, y, w, h = bbox
    cx, cy, area = x + w / 2, y + h / 2, max(1, w * h)
    near = []
    for hint in hints:
        hx, hy, hw, hh = hint.bbox
        dx, dy = abs(hx + hw / 2 - cx), abs(hy + hh / 2 - cy)
        if dx <= hw / 2 and dy <= hh / 2 and 0.5 <= max(1, hw * hh) / area <= 2:
            near.append((dx * dx + dy * dy, hint))
    return min(near, key=lambda item: item[0])[1] if near else None


def _recognise(analysis: Analysis, readings: list[Reading], hints: tuple[Hint, ...] = ()) -> None:
    """Fill in the nouns from the recognisers, on the image where each object is present - or
    from an earlier pair's recognition of the same place (``hints``), which costs nothing. The
    regions left are classified in one batch."""
    todo = []
    for reading in readings:
        best = _hint_for(hints, reading.cluster.bbox)
        if best is not None:
            reading.noun, reading.recognised_by, reading.recognition_confidence = (
                best.noun,
                best.source,
                best.confidence,
            )
        else:
            todo.append(reading)
    if not todo:
        return
    from ..analysis.recognise import recognise_many

    regions = [
        (
            analysis.pair.before.pixels if r.event == "disappeared" else analysis.pair.after.pixels,
            r.cluster.bbox,
            r.cluster.mask,
        )
        for r in todo
    ]
    for reading, found in zip(todo, recognise_many(regions)):
        if found is not None:
            reading.noun = found.noun
            reading.recognised_by = found.source
            reading.recognition_confidence = found.confidence


def _pair_moves(readings: list[Reading]) -> list[tuple[Reading, Reading]]:
    """Greedy pairing of (disappeared, appeared) readings that look like one moved object."""
    gone = [r for r in readings if r.event == "disappeared"]
    new = [r for r in readings if r.event == "appeared"]
    candidates = []
    for g in gone:
        for n in new:
            colour_gap = float(np.linalg.norm(g.lab_before - n.lab_after))
            ratio = max(g.cluster.n_active, n.cluster.n_active) / max(
                1, min(g.cluster.n_active, n.cluster.n_active)
            )
            if colour_gap < _MOVE_COLOUR and ratio < _MOVE_SIZE_RATIO:
                candidates.append((colour_gap + 10 * np.log(ratio), g, n))
    candidates.sort(key=lambda item: item[0])
    used: set[int] = set()
    moves = []
    for _, g, n in candidates:
        if g.cluster.id in used or n.cluster.id in used:
            continue
        used.update((g.cluster.id, n.cluster.id))
        moves.append((g, n))
    return moves


class GroundedCaptioner(Captioner):
    """See the module docstring."""

    name = "grounded"

    def warm_up(self, options: DescribeOptions) -> None:
        """Start loading the recognisers (once per process; see ``recognise.start_warm_up``)."""
        if options.recognise:
            from ..analysis.recognise import start_warm_up

            start_warm_up()

    def describe(self, analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
        height, width = analysis.pair.before.pixels.shape[:2]
        if analysis.scene_changed:
            return [
                Sentence(
                    "the whole view changed: the camera moved or the scene cut", (), 0.9, "scene"
                )
            ]
        # Read a few more clusters than we will report, so a move's second half is not cut off.
        readings = [
            read_cluster(analysis, c)
            for c in analysis.clusters[: max(1, 2 * options.max_sentences)]
        ]
        if options.recognise:
            # Recognition is the expensive step (~40 ms a region): only for the regions that can
            # reach the report, and not for specks too small to show anything recognisable.
            min_side = max(12, min(height, width) // 40)
            worth = [
                r
                for r in readings[: options.max_sentences + 1]
                if min(r.cluster.bbox[2:]) >= min_side
            ]
            _recognise(analysis, worth, options.hints)

        items: list[tuple[float, Sentence]] = []
        moved_ids: set[int] = set()
        for gone, new in _pair_moves(readings):
            moved_ids.update((gone.cluster.id, new.cluster.id))
            noun = gone.noun if gone.noun != "object" else new.noun
            what = noun_phrase(
                noun, gone.colour_before, size_word(gone.cluster.bbox, width, height)
            )
            src = region_phrase(gone.cluster.bbox, width, height)
            dst = region_phrase(new.cluster.bbox, width, height)
            dst_name = region_name(new.cluster.bbox, width, height)
            text = (
                f"the {what} {src} moved to the {dst_name}"
                if src != dst
                else f"the {what} {src} moved"
            )
            details = {
                "event": "moved",
                "noun": noun,
                "colour": gone.colour_before,
                "from": src,
                "to": dst,
            }
            salience = gone.cluster.salience + new.cluster.salience
            items.append(
                (salience, Sentence(text, (gone.cluster.id, new.cluster.id), 0.8, "moved", details))
            )

        for r in readings:
            if r.cluster.id in moved_ids:
                continue
            where = region_phrase(r.cluster.bbox, width, height)
            size = size_word(r.cluster.bbox, width, height)
            if r.event == "appeared":
                what = noun_phrase(r.noun, r.colour_after, size)
                text = f"{article(what)} {what} appeared {where}"
            elif r.event == "disappeared":
                what = noun_phrase(r.noun, r.colour_before, size)
                text = f"the {what} {where} is gone"
            elif r.event == "colour":
                what = noun_phrase(r.noun, "", size)
                text = (
                    f"the {what} {where} changed colour from {r.colour_before} to {r.colour_after}"
                )
            else:
                what = noun_phrase(r.noun, "", size)
                text = (
                    f"the {what} {where} changed"
                    if r.noun != "object"
                    else f"something {where} changed"
                )
            contrast = abs(r.contrast_after - r.contrast_before) / (
                max(r.contrast_after, r.contrast_before) + 1
            )
            confidence = round(float(min(1.0, 0.4 + 0.6 * contrast)), 2)
            details = {
                "event": r.event,
                "noun": r.noun,
                "recognised_by": r.recognised_by,
                "colour_before": r.colour_before,
                "colour_after": r.colour_after,
                "where": where,
                "recognition_confidence": round(r.recognition_confidence, 3),
            }
            items.append(
                (r.cluster.salience, Sentence(text, (r.cluster.id,), confidence, r.event, details))
            )

        items.sort(key=lambda item: -item[0])
        sentences = [s for _, s in items[: options.max_sentences]]
        if analysis.mask.lighting_changed:
            sentences.append(Sentence("the lighting changed", (), 0.9, "lighting"))
        if not sentences:
            sentences.append(Sentence("there is no visible change", (), 1.0, "no_change"))
        return sentences


@register_captioner(
    "grounded",
    family="grounded",
    summary="describes each salient change from what the analysis measured (default; no downloads, no torch)",
    needs_torch=False,
)
def _create(
    weights: str | None = None, device: str = "cpu", **overrides: object
) -> GroundedCaptioner:
    return GroundedCaptioner()
