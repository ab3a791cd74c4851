"""Render the CLEVR-Change-style benchmark with Mitsuba 3 and write CLEVR-Change's layout.

``render_clevr_change(out, pairs=N)`` samples N scenes (``clevr_scene.py``), renders each
scene's three views with Mitsuba's path tracer and writes exactly the files of the real
CLEVR-Change release (Park et al., ICCV 2019), so ``data.readers.read_clevr_change`` and RCC's own
scripts read either::

    OUT/images/CLEVR_default_000123.png          before
    OUT/sc_images/CLEVR_semantic_000123.png      one semantic change, camera slightly moved
    OUT/nsc_images/CLEVR_nonsemantic_000123.png  distractor: camera moved and/or light changed
    OUT/change_captions.json                     {"CLEVR_default_000123.png": [sentences]}
    OUT/no_change_captions.json                  {"CLEVR_default_000123.png": [sentences]}
    OUT/splits.json                              {"train": [0, ...], "val": [...], "test": [...]}
    OUT/type_mapping.json                        {"color": ["000123.png", ...], "material": ...}
    OUT/gold.json                                ours: type, attributes, boxes, cameras, lights
    OUT/clevr.json                               ours: the settings (a resumed run must match)

Rendering: Mitsuba's ``scalar_rgb`` variant (the ``llvm_ad_rgb`` JIT fails on this project's
machines), one render thread per process and one process per core (``jobs``), each image's
sampler seeded from ``(seed, index, view)``: the same seed gives byte-identical files whatever
``jobs`` is. Images are written atomically (temp file + rename), so after an interruption every
image on disk is whole; a re-run with the same settings skips the scenes already rendered.
The annotation files are written last, from the scene descriptions (cheap to recompute).

Mitsuba is imported only here, inside functions: ``spotdiff --help`` and the caption path never
load it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..atomic import LOCK_NAME, atomic_write_bytes, atomic_write_text, folder_lock
from ..errors import DataError, OutputError, UsageError
from .clevr_scene import (
    COLORS,
    VIEW_FOLDERS,
    ClevrConfig,
    Lamps,
    Light,
    Obj,
    Triplet,
    View,
    annotation_files,
    image_name,
    sample_triplet,
)

VARIANT = "scalar_rgb"
GENERATOR = "spotdiff clevr v1"
SETTINGS_FILE = "clevr.json"
ANNOTATION_FILES = (
    "change_captions.json",
    "no_change_captions.json",
    "splits.json",
    "type_mapping.json",
    "gold.json",
)
INSTALL_HINT = "pip install 'spotdiff[render]' (or pip install mitsuba)"

# Light and materials. The key light is a sun (a directional light): its direct light is exact
# at any sample count, and no path can hit it by chance, so polished metals throw no caustic
# fireflies onto the ground (a round area light did, at 32 samples). The irradiance puts the lit
# ground near mid-grey after sRGB encoding; the sky fills the shadows as CLEVR's fill and back
# lights do.
KEY_IRRADIANCE = 3.0
SKY_RADIANCE = 0.3
GROUND_ALBEDO = 0.35
# GGX alpha. CLEVR's metals are polished; at 0.12 the ground under them caught caustic speckles
# (the sun reflected via the metal, found by chance at 16 samples), at 0.25 few are left and the
# metals still read as metal.
METAL_ROUGHNESS = 0.25
# Under CLEVR's lamps (``clevr``, ``wide``) the metals are CLEVR's: polished (Blender's Principled
# roughness 0.2, GGX alpha 0.04, as Kubric's reproduction of CLEVR's metal sets it), a little
# rougher here (the caustic speckles a mirror throws at 16 samples are the denoiser's to take);
# at 0.25 a metal cube's faces looked like matte paint.
LAMPS_METAL_ROUGHNESS = 0.06
# CLEVR's lamps (the ``clevr`` and ``wide`` presets): key, fill and back in CLEVR's proportions
# of power (100 : 30 : 50 W in base_scene.blend, as Kubric's reproduction lists them), scaled so
# the lit ground is near CLEVR's light grey. The three are one emitter of one radiance (Mitsuba
# lists separate emitters in an order that varies from load to load, and the order decides
# which lamp a random number samples: the pixels would not be reproducible), so each lamp's
# power is its area: squares of side 2, 1.1 and 1.41 (CLEVR's key and fill are 0.5 units; at that
# size the polished metals threw caustic speckles onto the ground at 16 samples, and the shadows
# stay soft either way). WORLD_RADIANCE: the ambient light of CLEVR's world (Cycles samples it
# as a light).
LAMP_RADIANCE = 37.5
KEY_SIDE, FILL_SIDE, BACK_SIDE = 2.0, 1.1, 1.41
WORLD_RADIANCE = 0.05
MAX_DEPTH = 4  # camera -> metal -> ground -> light: enough bounces for reflections
PNG = [cv2.IMWRITE_PNG_COMPRESSION, 3]


@dataclass
class ClevrSummary:
    """What a run did. ``scenes_per_second``: scenes rendered per second (three images and two
    pairs each; scenes skipped because they were already there do not count)."""

    out: Path
    pairs: int
    rendered: int
    skipped: int
    splits: dict[str, int]
    seconds: float
    scenes_per_second: float
    jobs: int
    settings: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Mitsuba


def mitsuba_available() -> bool:
    """Whether Mitsuba 3 is installed (without importing it)."""
    return importlib.util.find_spec("mitsuba") is not None


def _mitsuba() -> Any:
    """The ``mitsuba`` module set to ``scalar_rgb`` with one render thread (parallelism comes
    from processes, one per core, which is also what makes the pixels independent of ``jobs``)."""
    try:
        import drjit as dr
        import mitsuba as mi
    except ImportError as exc:
        raise DataError(f"rendering the CLEVR benchmark needs Mitsuba 3: {INSTALL_HINT}") from exc
    if mi.variant() != VARIANT:
        if VARIANT not in mi.variants():
            raise DataError(
                f"this Mitsuba build has no '{VARIANT}' variant (it has {', '.join(mi.variants())}); "
                f"reinstall it: {INSTALL_HINT}"
            )
        mi.set_variant(VARIANT)
        # Mitsuba's own warnings ("winding down" on Ctrl-C) would break the progress bar; its
        # errors still raise Python exceptions.
        mi.set_log_level(mi.LogLevel.Error)
    dr.set_thread_count(1)
    return mi


def _linear(srgb: tuple[int, int, int]) -> list[float]:
    """sRGB 0-255 -> linear reflectance, what Mitsuba's ``rgb`` values mean."""
    c = np.asarray(srgb, dtype=np.float64) / 255.0
    return [float(v) for v in np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)]


def _bsdf(obj: Obj, polished: bool = False) -> dict[str, Any]:
    rgb = {"type": "rgb", "value": _linear(COLORS[obj.color])}
    if obj.material == "metal":
        # material "none" = a perfect mirror tinted by specular_reflectance: a coloured metal.
        return {
            "type": "roughconductor",
            "material": "none",
            "alpha": LAMPS_METAL_ROUGHNESS if polished else METAL_ROUGHNESS,
            "specular_reflectance": rgb,
        }
    return {"type": "diffuse", "reflectance": rgb}


def _shapes(mi: Any, obj: Obj, name: str, polished: bool = False) -> dict[str, Any]:
    """Mitsuba shapes of one object, with the dimensions ``Obj.outline`` uses for its boxes."""
    T = mi.ScalarTransform4f
    r, bsdf = obj.radius, _bsdf(obj, polished)
    if obj.shape == "sphere":
        return {name: {"type": "sphere", "center": [obj.x, obj.y, r], "radius": r, "bsdf": bsdf}}
    if obj.shape == "cube":
        s = r / np.sqrt(2.0)
        t = np.radians(obj.rotation)
        c, n = np.cos(t) * s, np.sin(t) * s
        # Mitsuba's cube spans [-1, 1]^3: scale by s, turn about z, lift onto the ground.
        matrix = [[c, -n, 0, obj.x], [n, c, 0, obj.y], [0, 0, s, s], [0, 0, 0, 1]]
        return {name: {"type": "cube", "to_world": T(matrix), "bsdf": bsdf}}
    # Mitsuba's cylinder is an open tube: close it with a disk on top (the bottom is on the floor).
    cap = [[r, 0, 0, obj.x], [0, r, 0, obj.y], [0, 0, 1, 2 * r], [0, 0, 0, 1]]
    return {
        name: {
            "type": "cylinder",
            "p0": [obj.x, obj.y, 0.0],
            "p1": [obj.x, obj.y, 2 * r],
            "radius": r,
            "bsdf": bsdf,
        },
        f"{name}_cap": {"type": "disk", "to_world": T(cap), "bsdf": bsdf},
    }


def _lamp_corners(position: tuple[float, float, float], side: float) -> np.ndarray:
    """(4, 3) corners of a square lamp of ``side`` at ``position`` facing the origin, wound so
    that its front (the side that emits) faces the origin."""
    centre = np.asarray(position, dtype=np.float64)
    forward = -centre / np.linalg.norm(centre)
    u = np.cross(forward, [0.0, 0.0, 1.0])
    u /= np.linalg.norm(u)
    v = np.cross(u, forward)
    h = side / 2
    # (c1 - c0) x (c2 - c0) = (2h v) x (2h (u + v)) ~ v x u = forward (v = u x forward): the
    # normal faces the origin.
    return np.array([centre + h * (a * u + b * v) for a, b in ((-1, -1), (-1, 1), (1, 1), (1, -1))])


def _lamps_mesh(mi: Any, lamps: Lamps) -> Any:
    """CLEVR's three lamps as one emitting mesh (see LAMP_RADIANCE), invisible to the camera
    (a null surface, and the integrator hides emitters the camera sees directly)."""
    props = mi.Properties()
    radiance = [LAMP_RADIANCE * lamps.gain] * 3
    props["emitter"] = mi.load_dict(
        {"type": "area", "radiance": {"type": "rgb", "value": radiance}}
    )
    props["bsdf"] = mi.load_dict({"type": "null"})
    mesh = mi.Mesh("lamps", 12, 6, props=props)
    corners = [
        _lamp_corners(lamps.key, KEY_SIDE),
        _lamp_corners(lamps.fill, FILL_SIDE),
        _lamp_corners(lamps.back, BACK_SIDE),
    ]
    params = mi.traverse(mesh)
    params["vertex_positions"] = np.concatenate(corners).astype(np.float32).ravel()
    faces = [(4 * i, 4 * i + 1, 4 * i + 2, 4 * i, 4 * i + 2, 4 * i + 3) for i in range(3)]
    params["faces"] = np.array(faces, dtype=np.uint32).ravel()
    params.update()
    return mesh


def _lights(mi: Any, light: Light | Lamps) -> dict[str, Any]:
    """The light of one view: a sun and a sky (the easy preset) or CLEVR's lamps."""
    if isinstance(light, Lamps):
        return {
            "lamps": _lamps_mesh(mi, light),
            "world": {
                "type": "constant",
                "radiance": {"type": "rgb", "value": [WORLD_RADIANCE * light.gain] * 3},
            },
        }
    az, el = np.radians(light.azimuth), np.radians(light.elevation)
    key = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    return {
        "key": {
            "type": "directional",
            "direction": (-key).tolist(),
            "irradiance": {"type": "rgb", "value": [KEY_IRRADIANCE * light.intensity] * 3},
        },
        "sky": {
            "type": "constant",
            "radiance": {"type": "rgb", "value": [SKY_RADIANCE * light.ambient] * 3},
        },
    }


def scene_dict(mi: Any, view: View, width: int, height: int, spp: int) -> dict[str, Any]:
    """The Mitsuba scene of one view: ground, lights, objects, camera."""
    T = mi.ScalarTransform4f
    lamps = isinstance(view.light, Lamps)
    scene: dict[str, Any] = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": MAX_DEPTH, "hide_emitters": lamps},
        "sensor": {
            "type": "perspective",
            "fov": view.camera.fov,
            "fov_axis": "x",
            "to_world": T(view.camera.matrix.tolist()),
            # Multi-jittered samples: at 16 per pixel the ground's grain (sky light, half of it
            # below the horizon) is far lower than with independent ones, for ~20 % more time.
            "sampler": {"type": "multijitter", "sample_count": spp, "seed": view.render_seed},
            "film": {
                "type": "hdrfilm",
                "width": width,
                "height": height,
                "pixel_format": "rgb",
                "rfilter": {"type": "gaussian"},
            },
        },
        "ground": {
            "type": "rectangle",
            "to_world": T([[100, 0, 0, 0], [0, 100, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]),
            "bsdf": {
                "type": "diffuse",
                "reflectance": {"type": "rgb", "value": [GROUND_ALBEDO] * 3},
            },
        },
        **_lights(mi, view.light),
    }
    for i, obj in enumerate(view.objects):
        scene.update(_shapes(mi, obj, f"object{i}", polished=lamps))
    return scene


def _to_srgb8(linear: np.ndarray) -> np.ndarray:
    """Linear float RGB -> sRGB uint8 (the standard transfer curve, rounded)."""
    c = np.clip(linear, 0.0, 1.0)
    encoded = np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.power(c, 1 / 2.4) - 0.055)
    return np.round(encoded * 255).astype(np.uint8)


def render_view(view: View, width: int, height: int, spp: int) -> np.ndarray:
    """Render one view: (height, width, 3) uint8 sRGB."""
    mi = _mitsuba()
    # Loaded on one thread, so that nothing in the scene depends on the order threads finish
    # in (see LAMP_RADIANCE for the one thing found to).
    scene = mi.load_dict(scene_dict(mi, view, width, height, spp), parallel=False)
    image = np.array(mi.render(scene, seed=view.render_seed, spp=spp))
    if scene.integrator().should_stop():
        # Mitsuba catches Ctrl-C itself during a render, stops early and returns the part it
        # has; that image must not be saved as if it were whole.
        raise KeyboardInterrupt
    rgb = _to_srgb8(image[:, :, :3])
    return _denoised(rgb) if isinstance(view.light, Lamps) else rgb


# Path-tracing noise the lamps bring at a few samples per pixel, which CLEVR's Cycles renders
# (512 samples, blur_glossy 2.0) do not have: polished metals throw caustics of the small lamps
# onto the floor, found by chance (bright, coloured speckles), and the floor's grain carries
# colour. So the lamps' presets denoise, a median filter being the simplest that keeps edges in
# place: brightness (YCrCb's Y) takes its 3x3 median, colour (Cr, Cb) its 5x5 median.
LUMA_MEDIAN = 3
CHROMA_MEDIAN = 5


def _denoised(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 sRGB with caustic speckles and grain reduced (deterministic)."""
    ycc = cv2.cvtColor(rgb, cv2.COLOR_RGB2YCrCb)
    for c, k in ((0, LUMA_MEDIAN), (1, CHROMA_MEDIAN), (2, CHROMA_MEDIAN)):
        ycc[:, :, c] = cv2.medianBlur(np.ascontiguousarray(ycc[:, :, c]), k)
    return cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)


def _png(rgb: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), PNG)
    if not ok:  # pragma: no cover - encoding a uint8 array does not fail
        raise OutputError("PNG encoding failed")
    return data.tobytes()


def _image_path(out: Path, view: str, index: int) -> Path:
    return out / VIEW_FOLDERS[view] / image_name(view, index)


def render_triplet(
    triplet: Triplet, out: Path, width: int, height: int, spp: int, views: tuple[str, ...]
) -> int:
    """Render ``views`` of one scene into ``out`` (each image written atomically); returns the
    scene's index. What a worker process runs."""
    for name in views:
        pixels = render_view(triplet.views()[name], width, height, spp)
        atomic_write_bytes(_image_path(out, name, triplet.index), _png(pixels))
    return triplet.index


def _init_worker() -> None:
    _mitsuba()  # import and set the variant once per process, not once per scene


# ----------------------------------------------------------------------------------------------
# a whole benchmark


def default_jobs() -> int:
    """One process per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


# Render cost, from ``benchmarks/clevr.py`` on this project's 2-core machine (docs/data.md):
# one process renders 0.22 scenes/s at 320x240 and 16 spp and 0.39 at 8 spp, i.e. about 0.57 s
# per scene plus 0.25 s per sample per pixel; the cost grows with the pixel count; two processes
# were 1.74x one (0.87 per process: they share memory bandwidth with each other).
SECONDS_PER_SCENE = 0.57
SECONDS_PER_SAMPLE = 0.249
PARALLEL_EFFICIENCY = 0.87


def estimate_seconds(
    scenes: int, width: int = 320, height: int = 240, spp: int = 16, jobs: int = 1
) -> float:
    """Roughly how long rendering ``scenes`` scenes takes with ``jobs`` processes (see above;
    a busier or faster machine differs: it is an estimate to decide whether to wait)."""
    per_scene = (SECONDS_PER_SCENE + SECONDS_PER_SAMPLE * spp) * (width * height) / (320 * 240)
    return scenes * per_scene / max(1.0, jobs * PARALLEL_EFFICIENCY)


def format_duration(seconds: float) -> str:
    """ "40 s", "14 min", "2.2 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def scenes_done(out: str | Path, pairs: int) -> int:
    """How many of the first ``pairs`` scenes already have all three images in ``out``."""
    out = Path(out)
    return sum(not _missing(out, i) for i in range(pairs)) if out.is_dir() else 0


def _missing(out: Path, index: int) -> tuple[str, ...]:
    return tuple(v for v in VIEW_FOLDERS if not _image_path(out, v, index).is_file())


def _clear(out: Path) -> None:
    """Remove what an earlier run of this generator wrote (only files with its names)."""
    for view, folder in VIEW_FOLDERS.items():
        for path in (out / folder).glob(f"CLEVR_{view}_*.png"):
            path.unlink()
    for name in (*ANNOTATION_FILES, SETTINGS_FILE):
        (out / name).unlink(missing_ok=True)


def _remove_partial_writes(out: Path) -> None:
    """Temp files of images whose write was cut off (a killed worker cannot clean up)."""
    for folder in VIEW_FOLDERS.values():
        for path in (out / folder).glob(".CLEVR_*.tmp"):
            path.unlink(missing_ok=True)


def _prepare_folder(out: Path, config: ClevrConfig, overwrite: bool) -> None:
    """Make ``out`` ready: new, or an earlier run with the same settings (resume), or replaced
    with ``overwrite``. Anything else is refused with what to do."""
    settings_path = out / SETTINGS_FILE
    wanted = {"generator": GENERATOR, **config.image_settings()}
    if settings_path.is_file():
        try:
            found = json.loads(settings_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            found = {}
        # Folders from before presets existed hold the easy look.
        found = {k: found.get(k, "easy" if k == "preset" else None) for k in wanted}
        if found != wanted and not overwrite:
            diff = ", ".join(
                f"{k} {found[k]} (now {wanted[k]})" for k in wanted if found[k] != wanted[k]
            )
            raise OutputError(
                f"{out} holds a CLEVR benchmark made with other settings: {diff}; rerun with the "
                f"same settings to resume it, or pass --overwrite to replace it"
            )
    elif any(p.name != LOCK_NAME for p in out.iterdir()) and not overwrite:
        raise OutputError(f"{out} is not empty; choose a new folder or pass --overwrite")
    if overwrite:
        _clear(out)
    _remove_partial_writes(out)
    for folder in VIEW_FOLDERS.values():
        (out / folder).mkdir(exist_ok=True)
    atomic_write_text(settings_path, json.dumps({**wanted, "pairs": config.pairs}, indent=2) + "\n")


def render_clevr_change(
    out: str | Path,
    pairs: int = 3000,
    seed: int = 0,
    width: int | None = None,
    height: int | None = None,
    spp: int = 16,
    jobs: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> ClevrSummary:
    """Render ``pairs`` CLEVR-Change-style scenes into ``out`` (layout: module docstring).

    jobs: render processes (default: one per core); 1 renders in this process.
    overwrite: replace what is in ``out``; without it a folder holding an earlier run with the
        same settings is resumed (scenes whose three images exist are skipped) and any other
        non-empty folder is refused.
    progress: called with (scenes done, scenes in total) as scenes finish (skipped ones count).
    width, height: None takes the preset's (480x320 for the default ``clevr``).
    options: any other ``ClevrConfig`` field (preset, min_objects, max_objects, captions, train,
        val).
    """
    config = ClevrConfig(
        pairs=pairs, seed=seed, width=width, height=height, spp=spp, **options
    ).validate()
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if not mitsuba_available():
        raise DataError(f"rendering the CLEVR benchmark needs Mitsuba 3: {INSTALL_HINT}")
    out = Path(out)
    start = time.perf_counter()
    with folder_lock(out):
        _prepare_folder(out, config, overwrite)
        triplets, rendered = _render_all(out, config, jobs, progress)
        for name, value in annotation_files(triplets, config).items():
            atomic_write_text(out / name, json.dumps(value) + "\n")
    seconds = time.perf_counter() - start
    counts = {s: sum(t.split == s for t in triplets) for s in ("train", "val", "test")}
    return ClevrSummary(
        out=out,
        pairs=config.pairs,
        rendered=rendered,
        skipped=config.pairs - rendered,
        splits=counts,
        seconds=seconds,
        scenes_per_second=rendered / seconds if seconds else 0.0,
        jobs=jobs,
        settings={"generator": GENERATOR, **config.image_settings()},
    )


def _render_all(
    out: Path, config: ClevrConfig, jobs: int, progress: Callable[[int, int], None] | None
) -> tuple[list[Triplet], int]:
    """Sample every scene, render the missing images; returns the scenes and how many were
    rendered. Scenes are sampled here while the workers render (sampling is ~10 ms, rendering
    seconds); at most a few scenes per worker wait in the queue."""
    total, done, rendered = config.pairs, 0, 0
    triplets: list[Triplet] = []
    size = (*config.size, config.spp)

    def scenes() -> Iterator[tuple[Triplet, tuple[str, ...]]]:
        """Each scene with the views it still lacks."""
        for index in range(total):
            triplets.append(sample_triplet(index, config))
            yield triplets[-1], _missing(out, index)

    def finished() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    if jobs == 1:
        for triplet, missing in scenes():
            if missing:
                render_triplet(triplet, out, *size, missing)
                rendered += 1
            finished()
        return triplets, rendered

    import multiprocessing

    # spawn, not fork: the caller may hold threads (torch, Mitsuba's pool) that fork would copy
    # in a locked state.
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
    )
    pending: set[Future[int]] = set()
    try:
        for triplet, missing in scenes():
            if not missing:
                finished()
                continue
            pending.add(pool.submit(render_triplet, triplet, out, *size, missing))
            while len(pending) >= 2 * jobs:
                completed, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in completed:
                    future.result()  # a worker's error surfaces here
                    rendered += 1
                    finished()
        for future in as_completed(pending):
            future.result()
            rendered += 1
            finished()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return triplets, rendered
