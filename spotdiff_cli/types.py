"""The values that flow through the pipeline: frames -> pairs -> align -> mask -> clusters ->
sentences -> report.

All are frozen dataclasses so a stage cannot change what an earlier stage produced. Arrays inside
them are not copied; treat them as read-only. Image arrays are always ``(H, W, 3) uint8 RGB``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BBox = tuple[int, int, int, int]
"""A box as ``(x, y, w, h)`` in pixels of the image it refers to."""


@dataclass(frozen=True)
class Frame:
    """One image and where it came from.

    pixels: (H, W, 3) uint8 RGB.
    timestamp: seconds from the start of the source (presentation time for video), or None.
    index: frame number in the source, or None for stills.
    """

    pixels: np.ndarray
    source: str
    timestamp: float | None = None
    index: int | None = None

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])


@dataclass(frozen=True)
class Pair:
    """Two frames to compare, same size. ``notes`` records anything done to make them comparable
    (e.g. a resize), which the report repeats to the user."""

    before: Frame
    after: Frame
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alignment:
    """The shift that best maps ``after`` onto ``before``: after(x + dx, y + dy) ~ before(x, y).

    dx, dy: pixels of the analysed image, sub-pixel.
    score: mean squared grey-level difference at that shift (lower is better), on normalised
    intensities; ``method`` is "search", "phase" or "none".
    """

    dx: float
    dy: float
    score: float
    method: str

    @property
    def is_identity(self) -> bool:
        return self.dx == 0 and self.dy == 0


@dataclass(frozen=True)
class CameraMotion:
    """How the camera moved between the frames, when a shift could not explain it (a panned,
    tilted, rolled or zoomed camera; analysis/camera.py).

    homography: (3, 3) row-major nested tuples; maps a before pixel (x, y, 1) to where the same
        point of the dominant plane (the ground, a wall) is in the after image, analysed pixels.
    dx, dy: how far the view's centre moved, analysed pixels: the before image's centre is at
        (cx + dx, cy + dy) in the after image (the content moves opposite to the camera's turn).
    rotation: degrees the content turned, clockwise on screen (the camera rolled the other way).
    zoom: apparent size in the after image / in the before image (> 1: the camera zoomed in).
    inliers / matches: feature matches that agree with the homography / all that were kept.
    """

    homography: tuple[tuple[float, float, float], ...]
    dx: float
    dy: float
    rotation: float
    zoom: float
    inliers: int
    matches: int


@dataclass(frozen=True)
class ChangeMask:
    """Pixel-level changes (Spot-the-diff §3.1).

    active: (H, W) bool, True where the RGB L2 distance after photometric normalisation > delta.
    distance: (H, W) float32, that distance (0 outside the valid, overlapping area).
    delta: the threshold used.
    raw_changed_fraction: share of valid pixels above delta *before* photometric normalisation.
    changed_fraction: share of valid pixels above delta after it.
    lighting_changed: True when the global exposure / white balance differed enough to matter.
    lighting_correction: the mean grey-level change the global light fit made (0 when lighting
        normalisation is off): how much the light changed, whether or not it is said.
    """

    active: np.ndarray
    distance: np.ndarray
    delta: float
    raw_changed_fraction: float
    changed_fraction: float
    lighting_changed: bool
    lighting_correction: float = 0.0

    @property
    def n_active(self) -> int:
        return int(self.active.sum())


@dataclass(frozen=True)
class Cluster:
    """One DBSCAN cluster of active pixels: a proxy for one object-level change.

    mask: (H, W) bool, the cluster's pixels (C_k in the paper).
    bbox: (x, y, w, h) of the active pixels.
    features: the paper's prior features g(z): (bbox length, bbox width, bbox area, n_active),
        length = height and width = width of the box, in pixels.
    salience: a score for ordering clusters (higher first); see analysis/cluster.py.
    """

    id: int
    mask: np.ndarray
    bbox: BBox
    n_active: int
    features: tuple[float, float, float, float]
    salience: float = 0.0

    @property
    def area(self) -> int:
        return int(self.bbox[2] * self.bbox[3])


@dataclass(frozen=True)
class Sentence:
    """One reported change. ``cluster_ids`` link it to the clusters it talks about (empty for
    whole-frame statements such as "the lighting changed"); ``kind`` is a machine-readable tag
    ("appeared", "disappeared", "moved", "colour", "changed", "lighting", "no_change", "scene",
    or "generated" for learned captioners)."""

    text: str
    cluster_ids: tuple[int, ...] = ()
    confidence: float = 1.0
    kind: str = "generated"
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Analysis:
    """Everything the pixel and object-level analysis measured for one pair.

    ``pair`` is the pair as analysed: resized to the working resolution, the after frame shifted
    onto the before frame. ``corrected_after`` is that after frame with the global lighting
    change removed (use it to compare colours with the before frame); ``valid`` (H, W) bool marks
    the area both frames cover. ``scale`` maps working coordinates back to the original before
    image (original = working * scale).
    """

    pair: Pair
    alignment: Alignment
    mask: ChangeMask
    clusters: tuple[Cluster, ...]
    corrected_after: np.ndarray
    valid: np.ndarray
    scale: float = 1.0
    # True when most of the view differs even after lighting correction (camera knocked, scene
    # cut): clusters are then not object-level changes. See AnalysisConfig.scene_fraction.
    scene_changed: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    # The pair as given (before any resize), for drawing at full resolution, and the settings
    # the analysis ran with (an ``AnalysisConfig``), for the report.
    original: Pair | None = None
    config: Any = None
    # How the camera moved when the shift search could not explain the view (then ``pair.after``
    # is warped onto the before frame by its homography); None for a fixed camera.
    camera: CameraMotion | None = None


@dataclass(frozen=True)
class Report:
    """The result of describing one pair: what the writers turn into text, JSON, MD, HTML."""

    before_path: str
    after_path: str
    analysis: Analysis
    sentences: tuple[Sentence, ...]
    model: str
    settings: dict[str, Any]
    timings: dict[str, float]
    notes: tuple[str, ...] = ()
    # The pair at its original size (after only resized to match before), for drawing.
    original: Pair | None = None

    @property
    def changed(self) -> bool:
        """Whether the report says something changed (``caption --exit-code`` exits 1): any
        sentence but "there is no visible change". A lighting change counts (the pictures
        differ); a learned captioner's sentences carry no "no change" tag, so each counts."""
        return any(s.kind != "no_change" for s in self.sentences)


@dataclass(frozen=True)
class Detection:
    """One sentence about one compared pair of a frame sequence.

    time / before_time: timestamps (s) of the after / before frame of the pair.
    bbox: the change's box in original pixels (None for whole-frame statements).
    noun: what it is ("person", "car", "object"; "" for whole-frame statements).
    """

    time: float
    before_time: float
    sentence: Sentence
    bbox: BBox | None
    noun: str = ""
    # The tracked object this is about (timeline.tracks), or None for a change no detected
    # object explains: detections of one track make one event, whatever their places.
    track: int | None = None
    # When that object was first seen (s): its event can start no later (its card covers its
    # whole story), which numbering in start order must know before the story is told.
    track_since: float | None = None


@dataclass(frozen=True)
class EventSentence:
    """One sentence inside an event, with when it was said: consecutive detections with the
    same text make one sentence (start / end: the first and last after-frame, s)."""

    start: float
    end: float
    text: str
    kind: str


@dataclass(frozen=True)
class Event:
    """Detections of the same change, merged into one interval: what an operator reads in a
    timeline ("00:00:02.000-00:00:07.000 a red object appeared in the lower right and left 5 s
    later", with the arrival and the departure as its sentences).

    start / end: the reported interval (s): where the change was seen, widened by the
    ``--pad-before`` / ``--pad-after`` settings and clipped to the source. ``seen``: the first
    and last after-frame where it was seen (None: the same as start / end).
    start_frame / end_frame: frame numbers of start / end, counted from 0 (None when the source
    has no frame rate, e.g. a folder timed by file dates).
    boxes: one box per detection, original pixels. picture / clip: paths, relative to the
    report folder, of the annotated frame pair and of the event's video clip, or None.
    track: for an event about one detected object, where it was at each look.
    """

    id: int
    source: str
    start: float
    end: float
    text: str
    kind: str
    noun: str
    boxes: tuple[BBox, ...]
    frames: tuple[float, float]  # (before, after) timestamps of the pictured pair
    detections: int = 1
    picture: str | None = None
    seen: tuple[float, float] | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    sentences: tuple[EventSentence, ...] = ()
    clip: str | None = None
    # A tracked object's path: (time s, x, y, w, h) per sighting, original pixels; empty for
    # an event told from pixel changes alone.
    track: tuple[tuple[float, int, int, int, int], ...] = ()
    # (width, height) of the pixels boxes and track are in: the source's frame size.
    frame_size: tuple[int, int] | None = None

    @property
    def pair_times(self) -> tuple[float, float]:
        """(before, after) timestamps (s) of the pictured pair (``"pair_times"`` in JSON)."""
        return self.frames

    @property
    def seen_span(self) -> tuple[float, float]:
        """(first, last) after-frame times where the change was seen, before any padding."""
        return self.seen if self.seen is not None else (self.start, self.end)
