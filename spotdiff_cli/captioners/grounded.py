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

from ..analysis.diff import masked_medians, pixel_distance
from ..analysis.objects3d import ObjectCluster, lab_chroma
from ..geometry import box_iou
from ..types import Analysis, CameraMotion, Cluster, Sentence
from .base import Captioner, DescribeOptions, Hint
from .registry import register_model
from .words import (
    article,
    colour_name,
    noun_phrase,
    region_name,
    region_phrase,
    scene_cast,
    size_word,
)

# A cluster is "like its surroundings" in one image and "unlike" in the other when the two
# inpainting residuals differ by this factor and by this many Lab units (chosen on synthetic rectangles and
# on the footage in shared/media).
_EVENT_RATIO = 1.6
_EVENT_MARGIN = 8.0
# Objects whose colours differ by less than this (Lab distance) and whose sizes are within this
# ratio can be the same object moved.
_MOVE_COLOUR = 22.0
_MOVE_SIZE_RATIO = 2.2
# A distinctive colour (chroma >= _CHROMA) matched within _MOVE_EXACT_COLOUR allows sizes up to
# _MOVE_LOOSE_SIZE_RATIO apart: a shadow or a neighbour's parallax edge joins one half's cluster.
_MOVE_EXACT_COLOUR = 12.0
_MOVE_LOOSE_SIZE_RATIO = 4.0
# Edge-structure correlation above which "both differ" is read as a colour change.
_SAME_EDGES = 0.45
# The object stayed in place (and changed colour or material) when its pixels before and after
# overlap this much (IoU) and the edges around them correlate this much: on CLEVR-style renders
# colour and material changes overlap 0.53-0.95, objects added beside another 0.08-0.42.
_SAME_PLACE = 0.5
_SAME_PLACE_EDGES = 0.3
# A pixel of the region belongs to the object in an image when inpainting from the surroundings
# misses it by more than this (Lab units); a plain floor's noise and gradient stay below 10.
_FOREGROUND = 18.0
# Colour words and the colour / material decision come from the object's pixels when they are
# at least this share of the region (else from the whole region, as a flat box's are).
_MIN_OBJECT_SHARE = 0.15
# Two colours are the same hue within this angle of Lab's (a, b) plane when both are at least
# this colourful (chroma); greys below _GREY_CHROMA have no hue. CLEVR's nearest hues (red and
# brown, cyan and blue) are 30+ degrees apart; a matte and a metal object of one colour stay
# within 15.
_HUE_ANGLE = 25.0
_CHROMA = 12.0
_GREY_CHROMA = 7.0
# One cluster holds a short move when the part where only the before image has an object and
# the part where only the after image has one are of similar size (_MOVE_SIZE_RATIO), the same
# hue (greys: lightness within _MOVE_LIGHTNESS), and their centres _MOVE_APART object sizes
# apart. Parts smaller than _MIN_PART pixels are noise.
_MOVE_APART = 0.35
_MOVE_LIGHTNESS = 30.0
_MIN_PART = 12
# A change whose object pixels are this many times more often new than vanished (or the
# reverse) is an arrival (a departure), even when the rest of its cluster is undecided.
_ONE_SIDED = 3.0


@dataclass
class Reading:
    """What the captioner measured about one cluster."""

    cluster: Cluster
    event: str  # appeared | disappeared | colour | material | moved | changed
    contrast_before: float
    contrast_after: float
    colour_before: str = ""
    colour_after: str = ""
    lab_before: np.ndarray = field(default_factory=lambda: np.zeros(3))
    lab_after: np.ndarray = field(default_factory=lambda: np.zeros(3))
    noun: str = "object"
    recognised_by: str = ""
    recognition_confidence: float = 0.0
    # For a move seen inside one cluster: the object's box before and after (analysed px).
    box_before: tuple[int, int, int, int] | None = None
    box_after: tuple[int, int, int, int] | None = None


def _crop_box(
    bbox: tuple[int, int, int, int], pad: int, width: int, height: int
) -> tuple[int, int, int, int]:
    x, y, w, h = bbox
    return max(0, x - pad), max(0, y - pad), min(width, x + w + pad), min(height, y + h + pad)


def _lab_median(lab: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The median Lab colour (3,) float32 of the ``sel`` pixels of ``lab``, an (h, w, 3)
    uint8 Lab crop (zeros when there are none); read off histograms, as ``np.median``."""
    medians = masked_medians(lab, sel)
    return np.zeros(3) if medians is None else medians


def _inpaint_residual(crop: np.ndarray, region: np.ndarray) -> tuple[float, np.ndarray]:
    """How badly the region is predicted from its surroundings: inpaint it (OpenCV Telea) and
    take the mean Lab distance to the real pixels. Background continues its surroundings (low
    residual, even on a gradient or texture); an object does not (high residual).

    crop: (h, w, 3) uint8 RGB; region: (h, w) bool. Returns the mean and the per-pixel
    distances (h, w) float32 (0 outside the region): where in the region the object is.
    """
    h, w = region.shape
    # Inpainting cost grows with the hole; a 96 px crop keeps it to a millisecond or two and
    # still separates an object from background.
    factor = 96 / max(crop.shape[:2])
    small_region = region
    if factor < 1:
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
        small_region = (
            cv2.resize(region.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST) > 0
        )
    filled = cv2.inpaint(crop, small_region.astype(np.uint8), 3, cv2.INPAINT_TELEA)
    real = cv2.cvtColor(crop, cv2.COLOR_RGB2LAB).astype(np.float32)
    guess = cv2.cvtColor(filled, cv2.COLOR_RGB2LAB).astype(np.float32)
    errors = pixel_distance(guess, real) * small_region  # Lab distance, pixel by pixel
    if not small_region.any():
        return 0.0, np.zeros((h, w), np.float32)
    mean = float(errors[small_region].mean())
    if errors.shape != (h, w):
        errors = cv2.resize(errors, (w, h), interpolation=cv2.INTER_LINEAR) * region
    return mean, errors.astype(np.float32)


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


def read_cluster(
    analysis: Analysis,
    cluster: Cluster,
    casts: tuple[tuple[float, float], tuple[float, float]] | None = None,
) -> Reading:
    """Measure one cluster: how well each image's region is predicted by its surroundings,
    where the object is in each image, its colours, and from those the event.

    The object stayed (its pixels before and after overlap, with the same outline): a new hue
    is a colour change, the same hue a material change (a matte ball turned metal keeps its
    paint, not its shading and reflections). The same paint left one part of the cluster and
    arrived in another: a short move. One image predicted by its surroundings and the other
    not: appeared / disappeared. Else mostly new or mostly vanished object pixels decide, and
    failing that, "changed". casts: the before and after frames' colour casts
    (``frame_casts``), read once per pair; None reads them here.
    """
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
    raw_after = analysis.pair.after.pixels[y0:y1, x0:x1]
    c_before, errors_b = _inpaint_residual(crop_b, region)
    c_after, errors_a = _inpaint_residual(crop_a, region)
    object_b = _object_pixels(errors_b, region)
    object_a = _object_pixels(errors_a, region)
    lab_b = cv2.cvtColor(crop_b, cv2.COLOR_RGB2LAB)
    lab_a = cv2.cvtColor(crop_a, cv2.COLOR_RGB2LAB)
    med_b, med_a = _lab_median(lab_b, object_b), _lab_median(lab_a, object_a)
    measured_b, measured_a = object_b, object_a  # the reading reuses these medians
    grey_b = cv2.cvtColor(crop_b, cv2.COLOR_RGB2GRAY)
    grey_a = cv2.cvtColor(crop_a, cv2.COLOR_RGB2GRAY)
    near = cv2.dilate(region.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    edges = _edge_correlation(grey_b, grey_a, near)
    same_place = _overlap(errors_b > _FOREGROUND, errors_a > _FOREGROUND) >= _SAME_PLACE
    split = _split(errors_b, errors_a)
    box_before = box_after = None
    if same_place and edges > _SAME_PLACE_EDGES:
        # The object is where it was in both images, with its outline: its look changed.
        event = "material" if _same_hue(med_b, med_a) else "colour"
    elif split.is_move(lab_b, lab_a):
        event, object_b, object_a = "moved", split.vacated, split.occupied
        box_before, box_after = (_box(mask, x0, y0) for mask in (split.vacated, split.occupied))
    elif c_after > max(_EVENT_RATIO * c_before, c_before + _EVENT_MARGIN):
        event = "appeared"
    elif c_before > max(_EVENT_RATIO * c_after, c_after + _EVENT_MARGIN):
        event = "disappeared"
    elif edges > _SAME_EDGES and same_place:
        event = "material" if _same_hue(med_b, med_a) else "colour"
    elif edges > _SAME_EDGES and float(np.linalg.norm(med_b[1:] - med_a[1:])) > 15:
        event = "colour"  # the same edges, another colour (a flat box repainted)
    elif split.one_sided(after=True):
        # Mostly new object pixels (an object set down beside another, whose parallax edge
        # joined the cluster): it appeared, and the new pixels name it.
        event, object_a = "appeared", split.occupied
    elif split.one_sided(after=False):
        event, object_b = "disappeared", split.vacated
    else:
        event = "changed"
    cast_before, cast_after = casts or frame_casts(analysis)
    return Reading(
        cluster=cluster,
        event=event,
        contrast_before=c_before,
        contrast_after=c_after,
        colour_before=colour_name(crop_b[object_b], cast=cast_before),
        colour_after=colour_name(raw_after[object_a], cast=cast_after),
        lab_before=med_b if object_b is measured_b else _lab_median(lab_b, object_b),
        lab_after=med_a if object_a is measured_a else _lab_median(lab_a, object_a),
        box_before=box_before,
        box_after=box_after,
    )


def frame_casts(analysis: Analysis) -> tuple[tuple[float, float], tuple[float, float]]:
    """Each frame's own colour cast (``words.scene_cast``): a camera's white balance can drift
    between the two."""
    return scene_cast(analysis.pair.before.pixels), scene_cast(analysis.pair.after.pixels)


def _box(mask: np.ndarray, x0: int, y0: int) -> tuple[int, int, int, int]:
    """The bounding box of a crop's mask, in the full image (the crop starts at x0, y0)."""
    x, y, w, h = cv2.boundingRect(mask.astype(np.uint8))
    return int(x + x0), int(y + y0), int(w), int(h)


def _object_pixels(errors: np.ndarray, region: np.ndarray) -> np.ndarray:
    """(h, w) bool: the region's pixels that belong to the object (inpainting misses them),
    or the whole region when too few do (a flat box's inside is inpainted from its own edge
    colours at the crop's scale; its whole region is the object anyway)."""
    found = errors > _FOREGROUND
    if found.sum() >= max(12, _MIN_OBJECT_SHARE * region.sum()):
        return found
    return region


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boolean masks (0 when both are empty)."""
    union = int((a | b).sum())
    return float((a & b).sum()) / union if union else 0.0


def _same_hue(lab_b: np.ndarray, lab_a: np.ndarray) -> bool:
    """Whether two median Lab colours have the same hue: both grey, or both colourful and
    within _HUE_ANGLE of each other on the (a, b) plane. Lightness does not count: shading,
    a metal's reflections and a matte finish change it without changing the paint."""
    ab_b, ab_a = lab_b[1:] - 128.0, lab_a[1:] - 128.0
    chroma_b, chroma_a = lab_chroma(lab_b), lab_chroma(lab_a)
    if chroma_b < _GREY_CHROMA and chroma_a < _GREY_CHROMA:
        return True
    if min(chroma_b, chroma_a) < _CHROMA:
        # One grey-ish, one colourful: a new colour, unless both are faint.
        return max(chroma_b, chroma_a) < _CHROMA
    cos = float(ab_b @ ab_a) / (chroma_b * chroma_a)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))) <= _HUE_ANGLE


@dataclass(frozen=True)
class _Split:
    """A cluster split by which image holds an object where: ``vacated`` (h, w) bool is
    object-like in the before image only, ``occupied`` in the after image only (each clearly
    more so than in the other image; what both show, or neither, is in neither)."""

    vacated: np.ndarray
    occupied: np.ndarray

    def is_move(self, lab_b: np.ndarray, lab_a: np.ndarray) -> bool:
        """Both parts there, of similar size and the same paint (lab: (h, w, 3) Lab crops),
        their centres apart by more than _MOVE_APART of the object's size: one object left
        one place for another within the cluster."""
        small, big = sorted((int(self.vacated.sum()), int(self.occupied.sum())))
        if small < _MIN_PART or big > _MOVE_SIZE_RATIO * small:
            return False
        paint_b = _lab_median(lab_b, self.vacated)
        paint_a = _lab_median(lab_a, self.occupied)
        if not _same_hue(paint_b, paint_a):
            return False
        # Greys have only their lightness to go by (a chromatic object's shading and shadow
        # change its lightness from place to place; its hue stays).
        grey = max(lab_chroma(paint_b), lab_chroma(paint_a)) < _CHROMA
        if grey and abs(float(paint_b[0] - paint_a[0])) > _MOVE_LIGHTNESS:
            return False
        yb, xb = np.nonzero(self.vacated)
        ya, xa = np.nonzero(self.occupied)
        apart = float(np.hypot(xb.mean() - xa.mean(), yb.mean() - ya.mean()))
        return apart >= _MOVE_APART * np.sqrt(big)

    def one_sided(self, after: bool) -> bool:
        """Whether (nearly) all of the change is new object pixels (after=True) or vanished
        ones (after=False)."""
        mine, other = (self.occupied, self.vacated) if after else (self.vacated, self.occupied)
        n = int(mine.sum())
        return n >= _MIN_PART and n >= _ONE_SIDED * int(other.sum())


def _split(errors_b: np.ndarray, errors_a: np.ndarray) -> _Split:
    """Split a cluster's region by its inpainting errors (h, w) in the two images. Each part is
    its largest blob after an opening: the thin parallax edges of other objects that joined
    the cluster fall away, the object's body stays."""
    margin = _FOREGROUND / 2
    return _Split(
        vacated=_largest_blob((errors_b > _FOREGROUND) & (errors_b > errors_a + margin)),
        occupied=_largest_blob((errors_a > _FOREGROUND) & (errors_a > errors_b + margin)),
    )


def _largest_blob(mask: np.ndarray) -> np.ndarray:
    """(h, w) bool: the largest 8-connected component of ``mask`` opened by a 3x3 square."""
    opened = cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(opened, connectivity=8)
    if n <= 1:
        return np.zeros(mask.shape, bool)
    return labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))


# A hint counts for a cluster when their boxes overlap this much (intersection over union).
_HINT_IOU = 0.5


def hint_for(hints: tuple[Hint, ...], bbox: tuple[int, int, int, int]) -> Hint | None:
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
        best = hint_for(hints, reading.cluster.bbox)
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
    from ..analysis.recognise import recognise_many, watched_area

    regions = [
        (
            analysis.pair.before.pixels if r.event == "disappeared" else analysis.pair.after.pixels,
            r.cluster.bbox,
            r.cluster.mask,
        )
        for r in todo
    ]
    for reading, found in zip(todo, recognise_many(regions, area=watched_area(analysis.valid))):
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
            distinctive = (
                colour_gap < _MOVE_EXACT_COLOUR
                and min(lab_chroma(g.lab_before), lab_chroma(n.lab_after)) >= _CHROMA
            )
            limit = _MOVE_LOOSE_SIZE_RATIO if distinctive else _MOVE_SIZE_RATIO
            if colour_gap < _MOVE_COLOUR and ratio < limit:
                candidates.append((colour_gap + 10 * np.log(ratio), g, n))
            elif _one_named_thing(g, n, gone, new):
                # The only car that left and the only car that came, in one pair: the car moved,
                # whatever the light did to its colour on the way (a white car in the sun turns
                # grey in the shade).
                candidates.append((_MOVE_COLOUR + 10 * np.log(ratio), g, n))
    candidates.sort(key=lambda item: item[0])
    used: set[int] = set()
    moves = []
    for _, g, n in candidates:
        if g.cluster.id in used or n.cluster.id in used:
            continue
        used.update((g.cluster.id, n.cluster.id))
        moves.append((g, n))
    return moves


def _one_named_thing(g: Reading, n: Reading, gone: list[Reading], new: list[Reading]) -> bool:
    """Both readings were named the same by a recogniser, and no other reading that left or
    came has that name."""
    named = g.noun not in ("", "object") and g.noun == n.noun
    return (
        named
        and bool(g.recognised_by)
        and sum(r.noun == g.noun for r in gone) == 1
        and sum(r.noun == g.noun for r in new) == 1
    )


def _move_sentence(
    noun: str,
    colour: str,
    src_box: tuple[int, int, int, int],
    dst_box: tuple[int, int, int, int],
    ids: tuple[int, ...],
    width: int,
    height: int,
) -> Sentence:
    """ "the yellow object in the upper left moved to the lower right" (boxes in analysed px)."""
    what = noun_phrase(noun, colour, size_word(src_box, width, height))
    src = region_phrase(src_box, width, height)
    dst = region_phrase(dst_box, width, height)
    dst_name = region_name(dst_box, width, height)
    text = f"the {what} {src} moved to the {dst_name}" if src != dst else f"the {what} {src} moved"
    details = {"event": "moved", "noun": noun, "colour": colour, "from": src, "to": dst}
    return Sentence(text, ids, 0.8, "moved", details)


def camera_sentence(motion: CameraMotion, scale: float = 1.0) -> Sentence:
    """ "the camera moved: it panned 14 px right, tilted 5 px down, rolled 2° anticlockwise and
    zoomed in 6 %" - the parts that are big enough to see, in the original image's pixels.

    The content moves opposite to the camera: when the view's centre went left (dx < 0) the
    camera panned right; when the content turned clockwise on screen it rolled anticlockwise.
    """
    dx, dy = motion.dx * scale, motion.dy * scale
    parts = []
    if abs(dx) >= 1:
        parts.append(f"panned {abs(dx):.0f} px {'right' if dx < 0 else 'left'}")
    if abs(dy) >= 1:
        parts.append(f"tilted {abs(dy):.0f} px {'down' if dy < 0 else 'up'}")
    if abs(motion.rotation) >= 0.3:
        turn = "anticlockwise" if motion.rotation > 0 else "clockwise"
        parts.append(f"rolled {abs(motion.rotation):.1f}° {turn}")
    if abs(motion.zoom - 1) >= 0.01:
        parts.append(
            f"zoomed {'in' if motion.zoom > 1 else 'out'} {abs(motion.zoom - 1) * 100:.0f} %"
        )
    if not parts:
        text = "the camera moved slightly"
    elif len(parts) == 1:
        text = f"the camera moved: it {parts[0]}"
    else:
        text = f"the camera moved: it {', '.join(parts[:-1])} and {parts[-1]}"
    details = {
        "event": "camera",
        "dx": round(dx, 1),
        "dy": round(dy, 1),
        "rotation": motion.rotation,
        "zoom": motion.zoom,
        "inliers": motion.inliers,
    }
    return Sentence(text, (), 0.9, "camera", details)


def _object_sentences(analysis: Analysis, options: DescribeOptions) -> list[Sentence]:
    """The changes the object-level analysis found (``analysis/objects3d.py``: objects on a plain
    floor seen by a camera that moved), each object named in CLEVR's words - size, colour,
    material, shape - and placed on the 3x3 grid of the view it is seen in: "the small red
    metal cylinder on the left is gone", "a large blue rubber cube appeared in the lower
    right", "the small gray rubber sphere on the left moved to the right", "the large yellow
    metal cube in the centre changed colour to green"."""
    height, width = analysis.pair.before.pixels.shape[:2]
    sentences = []
    for cluster in analysis.clusters[: options.max_sentences]:
        change = getattr(cluster, "change", None)
        if change is not None:
            sentences.append(_object_sentence(change, (cluster.id,), width, height))
    return _with_whole_frame(sentences, analysis)


def _with_whole_frame(sentences: list[Sentence], analysis: Analysis) -> list[Sentence]:
    """The object sentences, then what the whole frame says (the camera moved, the light
    changed), or "there is no visible change" when nothing was said at all."""
    if analysis.camera is not None:
        sentences.append(camera_sentence(analysis.camera, analysis.scale))
    if analysis.mask.lighting_changed:
        sentences.append(Sentence("the lighting changed", (), 0.9, "lighting"))
    if not sentences:
        sentences.append(Sentence("there is no visible change", (), 1.0, "no_change"))
    return sentences


def _object_sentence(change, ids: tuple[int, ...], width: int, height: int) -> Sentence:
    """One sentence for one ``objects3d.ObjectChange`` (boxes in analysed px of the view each
    object is seen in)."""
    subject = change.subject
    what = f"{subject.size} {subject.colour} {subject.material} {subject.shape}"
    where_before = region_phrase(change.before.bbox, width, height) if change.before else ""
    where_after = region_phrase(change.after.bbox, width, height) if change.after else ""
    if change.event == "appeared":
        text = f"{article(what)} {what} appeared {where_after}"
    elif change.event == "disappeared":
        text = f"the {what} {where_before} is gone"
    elif change.event == "moved":
        to = region_name(change.after.bbox, width, height)
        text = (
            f"the {what} {where_before} moved to the {to}"
            if where_before != where_after
            else f"the {what} {where_before} moved"
        )
    elif change.event == "colour":
        text = f"the {what} {where_before or where_after} changed colour to {change.new}"
    else:
        text = f"the {what} {where_before or where_after} changed material to {change.new}"
    details = {
        "event": change.event,
        "noun": subject.shape,
        "size": subject.size,
        "colour": subject.colour,
        "material": subject.material,
        "new": change.new,
        "where": where_before or where_after,
    }
    return Sentence(text, ids, round(float(change.confidence), 2), change.event, details)


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
        if analysis.clusters and isinstance(analysis.clusters[0], ObjectCluster):
            return _object_sentences(analysis, options)
        # Read a few more clusters than we will report, so a move's second half is not cut off.
        casts = frame_casts(analysis)
        readings = [
            read_cluster(analysis, c, casts)
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
            salience = gone.cluster.salience + new.cluster.salience
            ids = (gone.cluster.id, new.cluster.id)
            items.append(
                (
                    salience,
                    _move_sentence(
                        noun,
                        gone.colour_before,
                        gone.cluster.bbox,
                        new.cluster.bbox,
                        ids,
                        width,
                        height,
                    ),
                )
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
            elif r.event == "moved" and r.box_before and r.box_after:
                sentence = _move_sentence(
                    r.noun,
                    r.colour_before,
                    r.box_before,
                    r.box_after,
                    (r.cluster.id,),
                    width,
                    height,
                )
                items.append((r.cluster.salience, sentence))
                continue
            elif r.event == "colour":
                what = noun_phrase(r.noun, "", size)
                if r.colour_before and r.colour_after and r.colour_before != r.colour_after:
                    text = f"the {what} {where} changed colour from {r.colour_before} to {r.colour_after}"
                else:
                    to = f" to {r.colour_after}" if r.colour_after else ""
                    text = f"the {what} {where} changed colour{to}"
            elif r.event == "material":
                what = noun_phrase(r.noun, r.colour_before, size)
                text = f"the {what} {where} kept its colour but changed material"
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
        return _with_whole_frame(sentences, analysis)


@register_model(
    "grounded",
    family="grounded",
    summary="describes each salient change from what the analysis measured (default; no downloads, no torch)",
    needs_torch=False,
)
def _create(
    weights: str | None = None, device: str = "cpu", **overrides: object
) -> GroundedCaptioner:
    return GroundedCaptioner()
