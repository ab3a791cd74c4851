"""CLEVR-Change-style scenes: sampling, cameras, gold boxes and captions (pure Python + numpy).

A *triplet* is one scene seen three times, as in CLEVR-Change (Park et al., "Robust Change
Captioning", ICCV 2019; summarised in papers/duda-aux-composed-retrieval-2021.txt):

* ``default``: the before image;
* ``semantic``: one object-level change of CLEVR-Change's five kinds (``color``, ``material``,
  ``add``, ``drop``, ``move``), seen from a slightly moved camera, so that pixel differencing
  alone cannot find the change;
* ``nonsemantic``: the distractor, the same objects with only the camera moved (translation,
  pan/tilt, roll and zoom) and/or the light changed; its truth is "no change".

Objects follow CLEVR (Johnson et al., CVPR 2017): spheres, cubes and cylinders, CLEVR's eight
colours, rubber or metal, two sizes (bounding radius 0.7 or 0.35, cubes with half-side r/sqrt 2
so that every shape has the same footprint radius), standing on a ground plane without
overlapping, every object visible (not mostly hidden, fully inside the frame) in all three views.

This module decides *what* is rendered and what the truth is; ``clevr_render.py`` renders it with
Mitsuba. Gold boxes are the objects' 3-D outlines (sphere surface points, cube corners, cylinder
rims) projected through each view's camera, with the same camera matrix the renderer gets, so
they are exact up to a pixel and amodal (they include parts hidden behind other objects).

Everything is drawn from generators seeded by ``(seed, index)``: a triplet is the same whatever
the number of triplets, the order or the number of worker processes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

import cv2
import numpy as np

from ..errors import UsageError

# CLEVR's vocabulary and its sRGB colours (clevr-dataset-gen, data/properties.json).
COLORS: dict[str, tuple[int, int, int]] = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (255, 238, 51),
}
SHAPES = ("cube", "sphere", "cylinder")
MATERIALS = ("rubber", "metal")
SIZES: dict[str, float] = {"large": 0.7, "small": 0.35}  # footprint radius, CLEVR's units
CHANGE_TYPES = ("color", "material", "add", "drop", "move")  # CLEVR-Change's type_mapping keys
# What the distractor changes: the camera always in CLEVR-Change; we add the light as well.
DISTRACTORS: dict[str, float] = {"viewpoint": 0.6, "viewpoint+lighting": 0.3, "lighting": 0.1}

# File names of the real dataset, so that its readers and ours load both.
VIEW_FOLDERS = {"default": "images", "semantic": "sc_images", "nonsemantic": "nsc_images"}


def image_name(view: str, index: int) -> str:
    """``CLEVR_default_000123.png`` and friends: the real CLEVR-Change file names."""
    return f"CLEVR_{view}_{index:06d}.png"


# Scene layout (CLEVR's): objects in [-3, 3]^2, 0.25 between footprints, the camera about 11
# units away looking down 26 degrees with a 49.1 degree horizontal field of view (35 mm lens on
# a 32 mm sensor; CLEVR's data/base_scene.blend).
AREA = 3.0
MIN_GAP = 0.25
CAMERA_EYE = (7.36, -6.93, 4.96)
CAMERA_FOV = 49.1
# CLEVR's three area lamps (data/base_scene.blend; the positions as Kubric's CLEVR reproduction,
# kubric/assets/utils.py get_clevr_lights, lists them), each aimed at the origin.
LAMP_KEY = (6.44671, -2.90517, 4.2584)
LAMP_FILL = (-4.67112, -4.0136, 3.01122)
LAMP_BACK = (-1.1685, 2.64602, 5.81574)


@dataclass(frozen=True)
class Preset:
    """How far the views of a triplet differ, how they are lit and how big they are.

    camera: "look_at" (the eye moves and the camera turns to keep the origin in view, then pans,
    tilts, rolls and zooms: the ``easy`` look) or "fixed" (CLEVR's camera keeps its orientation
    wherever its eye is jittered: CLEVR-Change's viewpoint change is a pure translation, which
    makes zooms, perspective and parallax; ``view_yaw``/``view_pitch``/``view_roll`` turn it on
    top of that). camera_jitter: the before view's eye, per axis; view_shift: the other views' eye
    relative to it, per axis (scene units). lights: "sun" (one sun and a sky, hard shadows) or
    "lamps" (CLEVR's key, fill and back area lamps, soft shadows, each jittered by
    ``light_jitter`` per axis).
    """

    name: str
    width: int
    height: int
    min_objects: int
    max_objects: int
    camera: str
    camera_jitter: float
    view_shift: float
    view_yaw: float  # pan, degrees
    view_pitch: float  # tilt, degrees
    view_roll: float  # degrees
    view_zoom: float  # lens zoom factor in [1 - z, 1 + z]
    lights: str
    light_jitter: float = 0.0


PRESETS: dict[str, Preset] = {
    # The look of the first renderer (``spotdiff clevr v1``): a small viewpoint change (eye up to
    # 0.4 per axis, pan 3, tilt 2, roll 2 degrees, zoom 10 %: our choice), a sun and a sky,
    # 320x240 (CLEVR's render_images.py default size), 3-6 objects.
    "easy": Preset("easy", 320, 240, 3, 6, "look_at", 0.5, 0.4, 3.0, 2.0, 2.0, 0.1, "sun"),
    # CLEVR-Change's (Park et al. 2019; its generator github.com/Seth-Park/clevr-dataset-gen,
    # image_generation/render_sc_images.py and render.sh): 480x320, --camera_jitter 1.0 for the
    # before view's eye and again, independently, for each changed view's (so up to 1 unit per
    # axis between views, about a tenth of the camera's distance) with the camera's orientation
    # kept; CLEVR's lamps jittered by 1.0 per axis (render_images.py defaults), the same in all
    # three views; CLEVR's 3-10 objects (its defaults, which render.sh keeps).
    "clevr": Preset("clevr", 480, 320, 3, 10, "fixed", 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, "lamps", 1.0),
    # The untouched test split: wider than CLEVR-Change on every axis (ours): the eye 1.5 per
    # axis between views, and the camera also pans 3, tilts 2 and rolls 4 degrees; lamps
    # jittered by 1.5.
    "wide": Preset("wide", 480, 320, 3, 10, "fixed", 1.0, 1.5, 3.0, 2.0, 4.0, 0.0, "lamps", 1.5),
}
DEFAULT_PRESET = "clevr"

MOVE_MIN = 1.0  # a moved object goes at least this far (scene units)
# Visibility: the share of an object's outline not hidden by nearer objects (estimated by
# painting outlines far to near on a coarse grid), and the margin to the frame edge.
MIN_VISIBLE = 0.5
MIN_VISIBLE_CHANGED = 0.65
EDGE_MARGIN = 0.02  # of the image width


# ----------------------------------------------------------------------------------------------
# settings and values


@dataclass(frozen=True)
class ClevrConfig:
    """Settings of a rendered CLEVR-Change-style benchmark; written to ``clevr.json``.

    width, height, min_objects, max_objects: None takes the preset's (``PRESETS``)."""

    pairs: int = 3000  # scenes; each gives a change pair and a distractor pair
    seed: int = 0
    width: int | None = None
    height: int | None = None
    spp: int = 16  # path-tracing samples per pixel (multi-jittered)
    min_objects: int | None = None  # objects in the before image
    max_objects: int | None = None
    captions: int = 6  # phrasings per change pair, and per distractor pair
    train: float = 0.85  # CLEVR-Change's shares: 67,660 / 3,976 / 7,970 scenes
    val: float = 0.05
    preset: str = DEFAULT_PRESET

    def __post_init__(self) -> None:
        look = PRESETS.get(self.preset)
        if look is None:
            return  # validate() says which presets there are
        for name in ("width", "height", "min_objects", "max_objects"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(look, name))

    @property
    def look(self) -> Preset:
        return PRESETS[self.preset]

    def validate(self) -> ClevrConfig:
        if self.preset not in PRESETS:
            raise UsageError(f"--preset must be one of {', '.join(PRESETS)} (got '{self.preset}')")
        assert self.width is not None and self.height is not None
        assert self.min_objects is not None and self.max_objects is not None
        checks = [
            (1 <= self.pairs <= 999_999, "--pairs must be between 1 and 999999 (6-digit names)"),
            (32 <= self.width <= 4096 and 32 <= self.height <= 4096, "--size must be 32-4096 px"),
            (1 <= self.spp <= 4096, "--spp must be between 1 and 4096"),
            (
                1 <= self.min_objects < self.max_objects <= 10,
                "objects per scene: need 1 <= min < max <= 10 (a drop needs one more than min)",
            ),
            (1 <= self.captions <= 20, "--captions must be between 1 and 20"),
            (
                0 <= self.train and 0 <= self.val and self.train + self.val <= 1,
                "split shares must be in [0, 1] and sum to at most 1",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        return self

    @property
    def size(self) -> tuple[int, int]:
        assert self.width is not None and self.height is not None
        return self.width, self.height

    def image_settings(self) -> dict[str, Any]:
        """What the pixels and annotations depend on (everything but how many scenes)."""
        settings = asdict(self)
        settings.pop("pairs")
        return settings


@dataclass(frozen=True)
class Obj:
    """One CLEVR object: attributes, footprint centre (x, y) on the ground, turn about z."""

    shape: str
    size: str
    color: str
    material: str
    x: float
    y: float
    rotation: float  # degrees

    @property
    def radius(self) -> float:
        return SIZES[self.size]

    def attributes(self) -> dict[str, str]:
        return {
            "size": self.size,
            "color": self.color,
            "material": self.material,
            "shape": self.shape,
        }

    def key(self) -> tuple[str, str, str, str]:
        return (self.size, self.color, self.material, self.shape)

    def outline(self) -> np.ndarray:
        """(N, 3) points on the object's surface whose projection spans its silhouette."""
        r = self.radius
        if self.shape == "sphere":
            return _SPHERE * r + np.array([self.x, self.y, r])
        if self.shape == "cube":
            s = r / math.sqrt(2.0)
            local = np.array([[sx, sy] for sx in (-s, s) for sy in (-s, s)])
            t = math.radians(self.rotation)
            rot = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
            xy = local @ rot.T + np.array([self.x, self.y])
            return np.vstack((_lift(xy, 0.0), _lift(xy, 2 * s)))
        rim = _CIRCLE * r + np.array([self.x, self.y])
        return np.vstack((_lift(rim, 0.0), _lift(rim, 2 * r)))


def _lift(xy: np.ndarray, z: float) -> np.ndarray:
    """Ground points (N, 2) at height ``z``: (N, 3)."""
    return np.column_stack((xy, np.full(len(xy), z)))


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product of two 3-vectors (np.cross costs 20x more for one pair)."""
    return np.array(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )


def _fibonacci_sphere(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = i * math.pi * (3 - math.sqrt(5))
    rho = np.sqrt(1 - z * z)
    return np.column_stack((rho * np.cos(phi), rho * np.sin(phi), z))


_SPHERE = _fibonacci_sphere(400)  # silhouette error below 0.2 % of the radius
_ANGLES = np.linspace(0, 2 * math.pi, 96, endpoint=False)
_CIRCLE = np.column_stack((np.cos(_ANGLES), np.sin(_ANGLES)))  # cylinder rims


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: eye, the point it looks at, roll about the viewing axis, horizontal fov."""

    eye: tuple[float, float, float]
    target: tuple[float, float, float]
    roll: float = 0.0  # degrees
    fov: float = CAMERA_FOV  # degrees, horizontal

    @cached_property
    def matrix(self) -> np.ndarray:
        """4x4 camera-to-world matrix in Mitsuba's ``look_at`` convention (columns: left, up,
        forward, eye), the matrix the renderer is given: boxes and pixels share one camera."""
        eye = np.array(self.eye, dtype=np.float64)
        forward = np.array(self.target, dtype=np.float64) - eye
        forward /= np.linalg.norm(forward)
        left = _cross(np.array([0.0, 0.0, 1.0]), forward)
        left /= np.linalg.norm(left)
        up = _cross(forward, left)
        t = math.radians(self.roll)
        left, up = math.cos(t) * left + math.sin(t) * up, -math.sin(t) * left + math.cos(t) * up
        m = np.eye(4)
        m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = left, up, forward, eye
        return m

    def project(self, points: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
        """World points (N, 3) -> pixel coordinates (N, 2) (x right, y down, pixel (i, j) covers
        [i, i+1) x [j, j+1)) and depth along the viewing axis (N,)."""
        m = self.matrix
        d = np.asarray(points, dtype=np.float64) - m[:3, 3]
        xc, yc, zc = d @ m[:3, 0], d @ m[:3, 1], d @ m[:3, 2]
        f = (width / 2) / math.tan(math.radians(self.fov) / 2)
        safe = np.maximum(zc, 1e-6)
        return np.column_stack((width / 2 - f * xc / safe, height / 2 - f * yc / safe)), zc


@dataclass(frozen=True)
class Light:
    """A round key light (soft shadows) at azimuth/elevation, plus uniform ambient sky light."""

    azimuth: float  # degrees
    elevation: float  # degrees
    intensity: float  # multiplies the key light's radiance
    ambient: float  # radiance of the surrounding sky


@dataclass(frozen=True)
class Lamps:
    """CLEVR's lighting: the key, fill and back area lamps at (x, y, z), each aimed at the
    origin, and a gain on all three (1 in CLEVR; a lighting distractor changes it)."""

    key: tuple[float, float, float]
    fill: tuple[float, float, float]
    back: tuple[float, float, float]
    gain: float = 1.0


@dataclass(frozen=True)
class View:
    """Everything one image depends on."""

    objects: tuple[Obj, ...]
    camera: Camera
    light: Light | Lamps
    render_seed: int  # the path tracer's sampler seed


@dataclass(frozen=True)
class Change:
    """The semantic change: its kind, the object as it was (``before``; None for add) and as it
    is (``after``; None for drop)."""

    type: str
    before: Obj | None
    after: Obj | None

    @property
    def subject(self) -> Obj:
        """The object the captions name: as it was, or the added one."""
        subject = self.before or self.after
        assert subject is not None, "a change has an object before or after"
        return subject


@dataclass(frozen=True)
class Triplet:
    """One scene of the benchmark: three views, the change, the distractor and the captions."""

    index: int
    split: str
    default: View
    semantic: View
    nonsemantic: View
    change: Change
    distractor: str  # one of DISTRACTORS
    captions: tuple[str, ...]  # describe the semantic change
    no_change_captions: tuple[str, ...]  # the distractor's truth
    motion: dict[str, dict[str, float]] = field(default_factory=dict)  # per changed view

    def views(self) -> dict[str, View]:
        return {"default": self.default, "semantic": self.semantic, "nonsemantic": self.nonsemantic}


# ----------------------------------------------------------------------------------------------
# boxes and visibility


def box_of(obj: Obj, camera: Camera, width: int, height: int) -> tuple[int, int, int, int]:
    """The object's (x, y, w, h) box in the image, from its projected 3-D outline (amodal,
    clipped to the frame; integer pixels covering the outline)."""
    uv, _ = camera.project(obj.outline(), width, height)
    x0 = int(np.clip(math.floor(uv[:, 0].min()), 0, width))
    y0 = int(np.clip(math.floor(uv[:, 1].min()), 0, height))
    x1 = int(np.clip(math.ceil(uv[:, 0].max()), 0, width))
    y1 = int(np.clip(math.ceil(uv[:, 1].max()), 0, height))
    return (x0, y0, x1 - x0, y1 - y0)


def _inside(obj: Obj, camera: Camera, width: int, height: int) -> bool:
    uv, depth = camera.project(obj.outline(), width, height)
    m = EDGE_MARGIN * width
    return bool(
        depth.min() > 0.1
        and uv[:, 0].min() >= m
        and uv[:, 1].min() >= m
        and uv[:, 0].max() <= width - m
        and uv[:, 1].max() <= height - m
    )


def visible_fractions(
    objects: tuple[Obj, ...], camera: Camera, width: int, height: int
) -> list[float]:
    """Share of each object's silhouette not hidden by nearer objects: outlines (convex hulls of
    the projected surface points) painted far to near on a grid 160 px wide (whatever the image
    size, so a small test render shows the same scenes as a full one). Convex objects standing on
    one plane without overlapping are ordered correctly by their centres' depth."""
    scale = 160.0 / max(width, height)
    w, h = max(1, round(width * scale)), max(1, round(height * scale))
    hulls, depths = [], []
    for obj in objects:
        uv, depth = camera.project(obj.outline(), width, height)
        hulls.append(cv2.convexHull(np.round(uv * scale * 4).astype(np.int32)))
        centre = np.array([[obj.x, obj.y, obj.radius]])
        depths.append(float(camera.project(centre, width, height)[1][0]))
    canvas = np.zeros((h, w), np.uint8)
    areas = []
    for i in sorted(range(len(objects)), key=lambda k: -depths[k]):
        alone = np.zeros((h, w), np.uint8)
        cv2.fillConvexPoly(alone, hulls[i], 1, lineType=cv2.LINE_8, shift=2)
        areas.append((i, int(alone.sum())))
        cv2.fillConvexPoly(canvas, hulls[i], i + 1, lineType=cv2.LINE_8, shift=2)
    out = [0.0] * len(objects)
    for i, area in areas:
        out[i] = float((canvas == i + 1).sum()) / area if area else 0.0
    return out


def _view_ok(view: View, changed: Obj | None, width: int, height: int) -> bool:
    """Every object fully in the frame and mostly unhidden; the changed one more so."""
    if not all(_inside(o, view.camera, width, height) for o in view.objects):
        return False
    seen = visible_fractions(view.objects, view.camera, width, height)
    for obj, fraction in zip(view.objects, seen):
        need = MIN_VISIBLE_CHANGED if changed is not None and obj == changed else MIN_VISIBLE
        if fraction < need:
            return False
    return True


# ----------------------------------------------------------------------------------------------
# sampling


def _r(value: float, digits: int = 4) -> float:
    """Round what goes into a scene: the JSON shows exactly what was rendered."""
    return round(float(value), digits)


def _sample_object(rng: np.random.Generator, taken: set[tuple[str, str, str, str]]) -> Obj | None:
    """Attributes unique in the scene (so "the small red metal cube" names one object)."""
    for _ in range(50):
        obj = Obj(
            shape=str(rng.choice(SHAPES)),
            size=str(rng.choice(list(SIZES))),
            color=str(rng.choice(list(COLORS))),
            material=str(rng.choice(MATERIALS)),
            x=0.0,
            y=0.0,
            rotation=_r(rng.uniform(0, 360), 2),
        )
        if obj.key() not in taken:
            return obj
    return None


def _free(x: float, y: float, r: float, others: list[Obj] | tuple[Obj, ...]) -> bool:
    return all(math.hypot(x - o.x, y - o.y) >= r + o.radius + MIN_GAP for o in others)


def _place(
    rng: np.random.Generator,
    obj: Obj,
    others: list[Obj] | tuple[Obj, ...],
    avoid: tuple[float, float] | None = None,
) -> Obj | None:
    """A spot on the ground clear of ``others`` (and at least MOVE_MIN from ``avoid``)."""
    for _ in range(100):
        x, y = _r(rng.uniform(-AREA, AREA)), _r(rng.uniform(-AREA, AREA))
        if avoid is not None and math.hypot(x - avoid[0], y - avoid[1]) < MOVE_MIN:
            continue
        if _free(x, y, obj.radius, others):
            return replace(obj, x=x, y=y)
    return None


def _base_camera(rng: np.random.Generator, look: Preset) -> Camera:
    eye = tuple(_r(c + rng.uniform(-look.camera_jitter, look.camera_jitter)) for c in CAMERA_EYE)
    if look.camera == "look_at":
        return Camera(eye=eye, target=(0.0, 0.0, 0.0))  # type: ignore[arg-type]
    # CLEVR's camera keeps the orientation it has at its nominal eye (looking at the origin):
    # the target moves with the eye.
    target = tuple(_r(e - c) for e, c in zip(eye, CAMERA_EYE))
    return Camera(eye=eye, target=target)  # type: ignore[arg-type]


def _rotate(v: np.ndarray, axis: np.ndarray, degrees: float) -> np.ndarray:
    """Rodrigues' rotation of ``v`` about the unit ``axis``."""
    t = math.radians(degrees)
    return v * math.cos(t) + _cross(axis, v) * math.sin(t) + axis * (axis @ v) * (1 - math.cos(t))


def move_camera(
    camera: Camera, rng: np.random.Generator, look: Preset = PRESETS["easy"]
) -> tuple[Camera, dict[str, float]]:
    """CLEVR-Change's viewpoint change: translate the eye, pan/tilt the viewing direction, roll,
    zoom (each as far as the preset says). Returns the new camera and how much it moved (for
    the gold and the "camera moved" sentence of a viewpoint-robust captioner)."""
    shift = rng.uniform(-look.view_shift, look.view_shift, 3)
    yaw = rng.uniform(-look.view_yaw, look.view_yaw)
    pitch = rng.uniform(-look.view_pitch, look.view_pitch)
    roll = rng.uniform(-look.view_roll, look.view_roll)
    zoom = rng.uniform(1 - look.view_zoom, 1 + look.view_zoom)
    eye = np.array(camera.eye) + shift
    direction = np.array(camera.target) - np.array(camera.eye)
    left = camera.matrix[:3, 0]
    direction = _rotate(_rotate(direction, np.array([0.0, 0.0, 1.0]), yaw), left, pitch)
    target = eye + direction
    fov = math.degrees(2 * math.atan(math.tan(math.radians(camera.fov) / 2) / zoom))
    moved = Camera(
        eye=tuple(_r(v) for v in eye),  # type: ignore[arg-type]
        target=tuple(_r(v) for v in target),  # type: ignore[arg-type]
        roll=_r(camera.roll + roll, 3),
        fov=_r(fov, 4),
    )
    motion = {
        "translation": _r(float(np.linalg.norm(shift)), 3),
        "pan": _r(yaw, 3),
        "tilt": _r(pitch, 3),
        "roll": _r(roll, 3),
        "zoom": _r(zoom, 4),
    }
    return moved, motion


def _base_light(rng: np.random.Generator, camera: Camera, look: Preset) -> Light | Lamps:
    if look.lights == "lamps":
        return _jittered_lamps(rng, look.light_jitter, 1.0)
    # From the camera's side (within 80 degrees of it), so the objects' visible faces are lit.
    camera_azimuth = math.degrees(math.atan2(camera.eye[1], camera.eye[0]))
    return Light(
        azimuth=_r(camera_azimuth + rng.uniform(-80, 80), 2),
        elevation=_r(rng.uniform(35, 65), 2),
        intensity=_r(rng.uniform(0.85, 1.15), 3),
        ambient=_r(rng.uniform(0.85, 1.15), 3),
    )


def _jittered_lamps(rng: np.random.Generator, jitter: float, gain: float) -> Lamps:
    """CLEVR's lamps, each moved by up to ``jitter`` per axis (render_images.py's rand(L))."""

    def place(base: tuple[float, float, float]) -> tuple[float, float, float]:
        return tuple(_r(c + rng.uniform(-jitter, jitter)) for c in base)  # type: ignore[return-value]

    return Lamps(key=place(LAMP_KEY), fill=place(LAMP_FILL), back=place(LAMP_BACK), gain=gain)


def change_light(
    light: Light | Lamps, rng: np.random.Generator, jitter: float = 1.0
) -> Light | Lamps:
    """A lighting distractor. The sun: it swings 20-50 degrees, rises or sinks, dims or
    brightens by 25-40 %, the sky by up to 25 %. CLEVR's lamps (ours: CLEVR-Change keeps them):
    all three drawn again around CLEVR's positions (``jitter`` per axis) and 25-40 % brighter or
    dimmer together."""
    if isinstance(light, Lamps):
        gain = rng.uniform(1.25, 1.4) ** rng.choice((-1.0, 1.0))
        return _jittered_lamps(rng, jitter, _r(light.gain * gain, 3))
    swing = rng.uniform(20, 50) * rng.choice((-1.0, 1.0))
    gain = rng.uniform(1.25, 1.4) ** rng.choice((-1.0, 1.0))
    return Light(
        azimuth=_r(light.azimuth + swing, 2),
        elevation=_r(float(np.clip(light.elevation + rng.uniform(-10, 10), 30, 70)), 2),
        intensity=_r(light.intensity * gain, 3),
        ambient=_r(light.ambient * rng.uniform(0.75, 1.25), 3),
    )


def change_type_of(index: int, seed: int) -> str:
    """The change kind of scene ``index``: every block of five consecutive scenes holds each
    kind once, in a shuffled order, so any run of scenes is balanced (CLEVR-Change is)."""
    order = np.random.default_rng([seed, 1, index // len(CHANGE_TYPES)]).permutation(
        len(CHANGE_TYPES)
    )
    return CHANGE_TYPES[int(order[index % len(CHANGE_TYPES)])]


def split_of(index: int, config: ClevrConfig) -> str:
    """Consecutive blocks: the first ``train`` share of scenes, then val, then test."""
    n_train = int(round(config.pairs * config.train))
    n_val = int(round(config.pairs * config.val))
    return "train" if index < n_train else "val" if index < n_train + n_val else "test"


def _apply_change(
    rng: np.random.Generator, kind: str, objects: list[Obj]
) -> tuple[list[Obj], Change] | None:
    """The after-scene's objects and the change record (None: try another scene)."""
    taken = {o.key() for o in objects}
    if kind == "add":
        new = _sample_object(rng, taken)
        new = _place(rng, new, objects) if new else None
        return (objects + [new], Change("add", None, new)) if new else None
    i = int(rng.integers(len(objects)))
    old, rest = objects[i], objects[:i] + objects[i + 1 :]
    if kind == "drop":
        return rest, Change("drop", old, None)
    if kind == "move":
        new = _place(rng, old, rest, avoid=(old.x, old.y))
    elif kind == "color":
        choices = [c for c in COLORS if c != old.color and replace(old, color=c).key() not in taken]
        new = replace(old, color=str(rng.choice(choices))) if choices else None
    else:  # material: rubber <-> metal
        flipped = "metal" if old.material == "rubber" else "rubber"
        new = replace(old, material=flipped)
        new = None if new.key() in taken else new
    if new is None:
        return None
    return objects[:i] + [new] + objects[i + 1 :], Change(kind, old, new)


def _render_seed(seed: int, index: int, view: int) -> int:
    return int(np.random.default_rng([seed, 3, index, view]).integers(2**31 - 1))


def _sample_objects(rng: np.random.Generator, count: int) -> list[Obj] | None:
    """``count`` objects with unique attributes, placed without overlaps (None: no room)."""
    objects: list[Obj] = []
    for _ in range(count):
        obj = _sample_object(rng, {o.key() for o in objects})
        obj = _place(rng, obj, objects) if obj else None
        if obj is None:
            return None
        objects.append(obj)
    return objects


def _other_view(
    rng: np.random.Generator,
    objects: list[Obj] | tuple[Obj, ...],
    base: View,
    render_seed: int,
    changed: Obj | None,
    size: tuple[int, int],
    move: bool,
    relight: bool,
    look: Preset,
) -> tuple[View, dict[str, float]] | None:
    """``objects`` seen from a moved camera and/or under a changed light, passing the visibility
    rules. Several draws before giving up: a scene that fits the frame once mostly fits it from
    a nearby viewpoint too."""
    for _ in range(20):
        camera, motion = move_camera(base.camera, rng, look) if move else (base.camera, {})
        light = change_light(base.light, rng, look.light_jitter) if relight else base.light
        view = View(tuple(objects), camera, light, render_seed)
        if _view_ok(view, changed, *size):
            return view, motion
    return None


def sample_triplet(index: int, config: ClevrConfig) -> Triplet:
    """Scene ``index`` of the benchmark: the same for the same ``(config.seed, index)``.

    Scenes are drawn until one satisfies every constraint (unique attributes, no overlaps, every
    object in the frame and mostly visible in all three views); a few draws usually suffice.
    """
    kind = change_type_of(index, config.seed)
    rng = np.random.default_rng([config.seed, 0, index])
    size, look = config.size, config.look
    assert config.min_objects is not None and config.max_objects is not None
    seeds = [_render_seed(config.seed, index, view) for view in range(3)]
    low = config.min_objects + (1 if kind == "drop" else 0)
    high = config.max_objects - (1 if kind == "add" else 0)
    # CLEVR draws the object count once and then places that many; the easy preset (v1) drew it
    # again with every attempt, which favours small scenes (they pass the visibility rules more
    # often).
    count = int(np.random.default_rng([config.seed, 4, index]).integers(low, high + 1))
    for _ in range(1000):
        camera = _base_camera(rng, look)
        light = _base_light(rng, camera, look)
        n = int(rng.integers(low, high + 1))
        objects = _sample_objects(rng, n if look.name == "easy" else count)
        changed = _apply_change(rng, kind, objects) if objects else None
        if objects is None or changed is None:
            continue
        after, change = changed
        default = View(tuple(objects), camera, light, seeds[0])
        if not _view_ok(default, change.before, *size):
            continue
        semantic = _other_view(rng, after, default, seeds[1], change.after, size, True, False, look)
        distractor = str(rng.choice(list(DISTRACTORS), p=list(DISTRACTORS.values())))
        nonsemantic = _other_view(
            rng,
            objects,
            default,
            seeds[2],
            None,
            size,
            move="viewpoint" in distractor,
            relight="lighting" in distractor,
            look=look,
        )
        if semantic is None or nonsemantic is None:
            continue
        words = np.random.default_rng([config.seed, 2, index])
        return Triplet(
            index=index,
            split=split_of(index, config),
            default=default,
            semantic=semantic[0],
            nonsemantic=nonsemantic[0],
            change=change,
            distractor=distractor,
            captions=change_captions(change, words, config.captions),
            no_change_captions=no_change_captions(words, config.captions),
            motion={"semantic": semantic[1], "nonsemantic": nonsemantic[1]},
        )
    raise RuntimeError(  # pragma: no cover - the constraints leave plenty of room
        f"no valid scene for index {index} in 1000 draws; {size[0]}x{size[1]} may be too narrow"
    )


# ----------------------------------------------------------------------------------------------
# captions (CLEVR-Change's style: lower case, no full stop, the object named by all four
# attributes, several phrasings and synonyms per change)

_SIZE_WORDS = {"small": ("small", "tiny"), "large": ("large", "big")}
_MATERIAL_WORDS = {"rubber": ("rubber", "matte"), "metal": ("metal", "metallic", "shiny")}
_SHAPE_WORDS = {"cube": ("cube", "block"), "sphere": ("sphere", "ball"), "cylinder": ("cylinder",)}

_TEMPLATES: dict[str, tuple[str, ...]] = {
    "color": (
        "the {obj} changed to {new}",
        "the {obj} turned {new}",
        "the {obj} changed its color to {new}",
        "the {obj} became {new}",
        "the {obj} is now {new}",
        "the {obj} was painted {new}",
        "the {obj} changed its color",
    ),
    "material": (
        "the {obj} changed to {new}",
        "the {obj} became {new}",
        "the {obj} is now {new}",
        "the {obj} is now made of {noun}",
        "the {obj} changed its material",
        "the {obj} changed its texture",
    ),
    "add": (
        "a {obj} has been added",
        "someone added a {obj}",
        "there is a new {obj}",
        "a {obj} has appeared",
        "a {obj} was added to the scene",
        "a new {obj} is in the scene",
    ),
    "drop": (
        "the {obj} has disappeared",
        "the {obj} was removed",
        "the {obj} is missing",
        "the {obj} is no longer there",
        "someone removed the {obj}",
        "the {obj} has been taken away",
    ),
    "move": (
        "the {obj} changed its location",
        "the {obj} has been moved",
        "the {obj} moved",
        "someone moved the {obj}",
        "the {obj} is in a different location",
        "the {obj} was moved to a new place",
    ),
}
NO_CHANGE = (
    "no change was made",
    "there is no change",
    "the scene is the same as before",
    "nothing has changed",
    "the two scenes seem identical",
    "no change has occurred",
    "there is no difference",
    "the scene remains the same",
)


def _pick(rng: np.random.Generator, words: tuple[str, ...]) -> str:
    return words[int(rng.integers(len(words)))]


def noun_phrase(obj: Obj, rng: np.random.Generator) -> str:
    """ "small red metal cube", with a synonym drawn for size, material and shape."""
    return " ".join(
        (
            _pick(rng, _SIZE_WORDS[obj.size]),
            obj.color,
            _pick(rng, _MATERIAL_WORDS[obj.material]),
            _pick(rng, _SHAPE_WORDS[obj.shape]),
        )
    )


def change_captions(change: Change, rng: np.random.Generator, n: int) -> tuple[str, ...]:
    """``n`` different sentences describing ``change`` (fewer only if the templates and synonyms
    cannot make that many)."""
    out: list[str] = []
    for _ in range(50 * n):
        template = _pick(rng, _TEMPLATES[change.type])
        new = noun = ""
        if change.type == "color" and change.after is not None:
            new = change.after.color
        elif change.type == "material" and change.after is not None:
            new, noun = _pick(rng, _MATERIAL_WORDS[change.after.material]), change.after.material
        sentence = template.format(obj=noun_phrase(change.subject, rng), new=new, noun=noun)
        if sentence not in out:
            out.append(sentence)
            if len(out) == n:
                break
    return tuple(out)


def no_change_captions(rng: np.random.Generator, n: int) -> tuple[str, ...]:
    """``n`` different "no change" sentences (at most as many as there are)."""
    order = rng.permutation(len(NO_CHANGE))[: min(n, len(NO_CHANGE))]
    return tuple(NO_CHANGE[int(i)] for i in order)


# ----------------------------------------------------------------------------------------------
# gold


def _view_gold(view: View, width: int, height: int) -> dict[str, Any]:
    seen = visible_fractions(view.objects, view.camera, width, height)
    return {
        "camera": {
            k: list(v) if isinstance(v, tuple) else v for k, v in asdict(view.camera).items()
        },
        "light": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(view.light).items()},
        "objects": [
            {
                **o.attributes(),
                "position": [o.x, o.y],
                "rotation": o.rotation,
                "bbox": list(box_of(o, view.camera, width, height)),
                "visible": round(fraction, 3),
            }
            for o, fraction in zip(view.objects, seen)
        ],
    }


def gold_record(triplet: Triplet, config: ClevrConfig) -> dict[str, Any]:
    """The truth of one scene: change type, the object's attributes (and what changed), its box
    in the before and after image (None where it is absent), the distractor, how the camera
    moved, and every object of every view with its box."""
    w, h = config.size
    change = triplet.change
    new: dict[str, Any] = {}
    if change.type == "color" and change.after:
        new = {"color": change.after.color}
    elif change.type == "material" and change.after:
        new = {"material": change.after.material}
    elif change.type == "move" and change.after:
        new = {"position": [change.after.x, change.after.y]}
    return {
        "index": triplet.index,
        "split": triplet.split,
        "type": change.type,
        "object": change.subject.attributes(),
        "new": new,
        "bbox_before": list(box_of(change.before, triplet.default.camera, w, h))
        if change.before
        else None,
        "bbox_after": list(box_of(change.after, triplet.semantic.camera, w, h))
        if change.after
        else None,
        "distractor": triplet.distractor,
        "camera_motion": triplet.motion,
        "views": {name: _view_gold(view, w, h) for name, view in triplet.views().items()},
    }


def annotation_files(triplets: list[Triplet], config: ClevrConfig) -> dict[str, Any]:
    """CLEVR-Change's annotation files (file name -> JSON value), plus our ``gold.json``:

    * ``change_captions.json`` / ``no_change_captions.json``: before-image file name -> sentences;
    * ``splits.json``: split -> scene numbers;
    * ``type_mapping.json``: change type -> ``["000123.png", ...]`` (the ids RCC's evaluation
      scripts use: the before image's name after its last underscore).
    """
    change, no_change, gold = {}, {}, {}
    splits: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    types: dict[str, list[str]] = {t: [] for t in CHANGE_TYPES}
    for t in triplets:
        name = image_name("default", t.index)
        change[name] = list(t.captions)
        no_change[name] = list(t.no_change_captions)
        splits[t.split].append(t.index)
        types[t.change.type].append(name.split("_")[-1])
        gold[name] = gold_record(t, config)
    return {
        "change_captions.json": change,
        "no_change_captions.json": no_change,
        "splits.json": splits,
        "type_mapping.json": types,
        "gold.json": gold,
    }
