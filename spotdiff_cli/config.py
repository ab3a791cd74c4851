"""Settings and the one rule for overriding them.

dataclass defaults < YAML ``--config FILE`` < CLI flags. A CLI flag left at ``None`` means "not
given" and never overrides anything (timm's habit of dropping ``None`` kwargs). The resolved
settings are written next to every output, so a report says exactly how it was made.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")

# The reference resolution at which the Spot-the-diff authors' DBSCAN settings were chosen.
REFERENCE_SIDE = 224

# Processes per core that --jobs (one process per source) and --workers (a Dask cluster started
# here) may ask for. Each process loads its own captioner and decodes its own video, so more
# than a few per core only adds memory and start-up time; --jobs 10000 once started ~3,000
# processes in 8 s before the machine gave out.
PROCESSES_PER_CORE = 4


def max_processes() -> int:
    """The most processes ``--jobs`` / ``--workers`` may start here: 4 per core, at least 4."""
    import os

    return max(4, PROCESSES_PER_CORE * (os.cpu_count() or 1))


@dataclass(frozen=True)
class AnalysisConfig:
    """Pixel and object-level analysis (Spot-the-diff §3.1). The paper gives neither delta nor the
    shift range; the defaults below were chosen on the footage in ``shared/media`` (see
    ``docs/analysis.md``)."""

    # Long side, in pixels, the pair is resized to before analysis (0 = full resolution). 640
    # keeps a 1080p pair well under a second and is still 2.9x the paper's 224 px.
    work_size: int = 640
    # "search" = the paper's exhaustive shift search (with sub-pixel refinement), "phase" = OpenCV
    # phase correlation (faster on big shifts), "none" = trust the camera.
    align: str = "search"
    # "auto" = the shift search, and when it leaves the view unexplained, feature matching and a
    # homography for a camera that panned, tilted, rolled or zoomed (then regions that only
    # parallax explains are not changes); "fixed" = the shift search alone (the paper's).
    camera: str = "auto"
    # Largest camera shift searched, in pixels of the analysed image (work_size). 6 px at 640
    # covers the 3-4 px drift of the parking-lot clip at 768 px with room to spare.
    max_shift: int = 6
    # Gaussian blur sigma (analysed pixels) before differencing: suppresses sensor noise, JPEG
    # blocking and the residual of a sub-pixel shift.
    blur_sigma: float = 1.0
    # Per-pixel RGB L2 distance (0-255 scale) above which a pixel is "changed" (delta in §3.1).
    # Video noise after the blur stays below ~15; a person on asphalt is 60+.
    delta: float = 40.0
    # Fit a per-channel tone curve from after to before (robust median per level) so auto
    # exposure, white balance or a cloud do not light up the whole frame.
    normalise_lighting: bool = True
    # A tone-curve correction of more than this many grey levels (mean over the image) is
    # reported as "the lighting changed".
    lighting_levels: float = 8.0
    # A cluster whose before/after grey levels correlate at least this much kept its structure:
    # the light on it changed (sun on foliage, a shadow), not an object. Measured on shared/media:
    # relit regions 0.88-0.99, objects that came, went or moved <= 0.67.
    relit_correlation: float = 0.8
    # If more than this share of the frame still differs after normalisation, the view itself
    # changed (camera knocked, scene cut): say so instead of describing objects.
    scene_fraction: float = 0.5
    # DBSCAN at the paper's 224 px reference (the authors' code: eps=20, min_samples=9). eps
    # scales with the analysed image's short side, min_samples with its area.
    eps: float = 20.0
    min_samples: int = 9
    # Clusters smaller than this share of the frame are dropped as noise even when DBSCAN keeps
    # them (a leaf, a compression artefact).
    min_cluster_fraction: float = 0.0005

    def scaled_dbscan(self, height: int, width: int) -> tuple[float, int]:
        """eps and min_samples for an analysed image of this size (scaled from 224 px)."""
        factor = min(height, width) / REFERENCE_SIDE
        eps = max(1.5, self.eps * factor)
        min_samples = max(3, int(round(self.min_samples * factor * factor)))
        return eps, min_samples

    def validate(self) -> AnalysisConfig:
        _check_finite(self)
        checks = [
            (
                self.work_size == 0 or self.work_size >= 32,
                "--work-size must be 0 (full size) or at least 32",
            ),
            (
                self.align in ("search", "phase", "none"),
                "--align must be one of search, phase, none",
            ),
            (self.camera in ("auto", "fixed"), "--camera must be auto or fixed"),
            (0 <= self.max_shift <= 64, "--max-shift must be between 0 and 64 pixels"),
            (0 <= self.blur_sigma <= 10, "--blur must be between 0 and 10"),
            (0 < self.delta < 442, "--delta must be between 0 and 441 (the largest RGB distance)"),
            (0 < self.scene_fraction <= 1, "--scene-fraction must be in (0, 1]"),
            (0 < self.relit_correlation <= 1.0, "--relit-correlation must be in (0, 1]"),
            (self.eps > 0, "--eps must be positive"),
            (self.lighting_levels >= 0, "--lighting-levels must be 0 or more grey levels"),
            (self.min_samples >= 1, "--min-samples must be at least 1"),
            (0 <= self.min_cluster_fraction < 1, "--min-cluster-fraction must be in [0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        return self


@dataclass(frozen=True)
class CaptionConfig:
    """How a captioner turns clusters into sentences."""

    model: str = "grounded"
    device: str = "auto"
    max_sentences: int = 5
    # grounded: look for people (OpenCV HOG) and vehicles/animals (ImageNet classifier) in the
    # changed regions. Off = colour, size and place only.
    recognise: bool = True
    weights: str | None = None

    def validate(self) -> CaptionConfig:
        device = (self.device or "").lower()
        if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
            raise UsageError(f"--device {self.device!r} is not one of auto, cpu, cuda (or cuda:N)")
        if self.max_sentences < 1:
            raise UsageError("--sentences must be at least 1")
        return self


@dataclass(frozen=True)
class VideoConfig:
    """Sampling a sequence and turning compared pairs into events (``spotdiff video``)."""

    # Time between samples: "30s", "1.5m", "00:00:30.5" or a frame count "25f".
    every: str = "1s"
    start: str | None = None
    end: str | None = None
    # What each sample is compared with: "previous" sample, a fixed "reference" image, or a
    # "background" (per-pixel median of the last `background_samples` samples), which reports a
    # car that parks and stays once, when it arrived.
    compare: str = "previous"
    reference: str | None = None
    background_samples: int = 7
    # Spot-the-diff §2.1's band on pair difference, as the share of a thumbnail's pixels that
    # changed: below `lower` a pair is "no change" and is not analysed in full (this is what
    # keeps a night of footage fast); above `upper`, after lighting correction, the view itself
    # changed (a cut, a knocked camera, lights switched) and is reported as such.
    lower: float = 0.0005
    upper: float = 0.5
    # Detections of the same change (boxes overlapping after growing by this share of the frame
    # diagonal) in samples no more than `merge_gap` samples apart form one event.
    merge_distance: float = 0.08
    merge_gap: int = 1
    # While a change goes on over consecutive samples, describe it (full analysis and
    # captions) at most once per `describe_every` of video; the samples between still take the
    # first look, so an event starts and ends on the exact sample, and they continue the open
    # events with the last description. A motion detector's "every frame" costs a motion
    # detector's time this way: at 25 fps, one pair in five is described. Sampling as sparse
    # as this or sparser describes every changed sample; "0s" always does.
    describe_every: str = "0.2s"
    # Regions: "x,y,w,h" boxes to watch (any number) and/or a mask image (white = watch).
    roi: tuple[str, ...] = ()
    mask: str | None = None
    # Video decoder: "auto" (ffmpeg when a binary is found, else OpenCV), "ffmpeg" or "opencv".
    backend: str = "auto"
    # Folders: "name" (natural sort) or "time" (EXIF date, else file time).
    sort: str = "name"
    # Folders and file lists: frame i is at i / fps seconds (None: capture times from EXIF or
    # the file's modification time).
    fps: float | None = None
    # Folders and file lists: each file's time read from its name with this strptime-style
    # pattern (e.g. "%Y%m%d_%H%M%S" for cam_20240501_120000.jpg; see frames/folder.py).
    time_pattern: str | None = None
    jobs: int = 1
    # Where the work runs: "local" (this process, or `jobs` processes, one per source) or "dask"
    # (dask.distributed: a LocalCluster of `workers` processes here, or the running cluster at
    # `scheduler`, e.g. tcp://10.0.0.5:8786). Dask splits work by source and long videos into
    # `chunk`-long pieces of video time; the merged timeline is the local run's (see
    # timeline/distributed.py). 10 minutes keeps short clips whole and the per-chunk start-up
    # and overlap small next to the chunk's own work.
    engine: str = "local"
    scheduler: str | None = None
    workers: int | None = None  # None: 2 local workers (one per core of a small machine)
    chunk: str = "10m"
    # Events as intervals, DVR-Scan's way (time syntax, as --every). The reported interval is
    # widened by pad_before / pad_after and clipped to the source (DVR-Scan pads 1.5 s / 2 s
    # for its clips; here 0, so a timeline's times are when the change was seen). An event
    # seen for less than min_length (from its first to its last sample, before padding) is
    # dropped, like DVR-Scan's --min-event-length: "0s" keeps a change seen once.
    pad_before: str = "0s"
    pad_after: str = "0s"
    min_length: str = "0s"
    # An arrival and a departure in the same place are one event ("appeared ... and left 5 s
    # later") when the departure comes within max_visit; a longer stay is two events. An
    # arrival waiting for its departure keeps the event open, which delays the --resume
    # checkpoint, so the wait is bounded.
    max_visit: str = "10m"
    # Write each event as a video clip under clips/ (stream copy; needs --out).
    clips: bool = False
    # Find people, vehicles and other things that come and go with the bundled detector and
    # follow each as one track, told as one event ("a person walked in from the bottom, stood
    # in the centre for 20 s and left to the right"); off (or --no-recognise): events from
    # pixel changes alone.
    objects: bool = True
    # While objects are tracked, look for them again at most this often (time syntax): the
    # detector runs only on changed samples and these looks, not on every frame.
    look_every: str = "1s"

    def validate(self) -> VideoConfig:
        _check_finite(self)
        checks = [
            (
                self.compare in ("previous", "reference", "background"),
                "--compare must be previous, reference or background",
            ),
            (
                self.compare != "reference" or self.reference,
                "--compare reference needs --reference IMAGE",
            ),
            (self.background_samples >= 2, "--background-samples must be at least 2"),
            (
                0 <= self.lower < self.upper <= 1,
                "--lower and --upper must satisfy 0 <= lower < upper <= 1",
            ),
            (self.merge_gap >= 0, "--merge-gap must be 0 or more samples"),
            (
                self.merge_distance >= 0,
                "--merge-distance must be 0 or more (a share of the diagonal)",
            ),
            (self.jobs >= 1, "--jobs must be at least 1"),
            (
                self.jobs <= max_processes(),
                f"--jobs {self.jobs} would start {self.jobs} processes; this machine runs at most "
                f"{max_processes()} at once ({PROCESSES_PER_CORE} per core): give --jobs "
                f"{max_processes()} or fewer",
            ),
            (self.engine in ("local", "dask"), "--engine must be local or dask"),
            (
                self.engine == "dask" or (self.scheduler is None and self.workers is None),
                "--scheduler and --workers are for --engine dask; add --engine dask",
            ),
            (
                self.scheduler is None or self.workers is None,
                "--workers sizes the cluster started here; a running cluster (--scheduler) "
                "has its own workers: give one of them",
            ),
            (self.workers is None or self.workers >= 1, "--workers must be at least 1"),
            (
                self.workers is None or self.workers <= max_processes(),
                f"--workers {self.workers} would start {self.workers} processes; this machine "
                f"runs at most {max_processes()} at once ({PROCESSES_PER_CORE} per core): give "
                f"--workers {max_processes()} or fewer (a bigger cluster: start it and give --scheduler)",
            ),
            (
                self.engine == "local" or self.jobs == 1,
                "--jobs is for --engine local; with --engine dask give --workers N",
            ),
            (
                self.backend in ("auto", "ffmpeg", "opencv"),
                "--backend must be auto, ffmpeg or opencv",
            ),
            (self.sort in ("name", "time"), "--sort must be name or time"),
            (
                self.fps is None or self.fps > 0,
                "--fps must be positive, e.g. --fps 2 for a snapshot every 0.5 s",
            ),
            (
                self.fps is None or not self.time_pattern,
                "--fps and --time-pattern both give frame times; give one of them",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        from .frames.timecode import parse_every, parse_time

        for option, value in (
            ("--pad-before", self.pad_before),
            ("--pad-after", self.pad_after),
            ("--min-length", self.min_length),
            ("--max-visit", self.max_visit),
            ("--describe-every", self.describe_every),
        ):
            parse_time(value, what=option)
        chunk = parse_every(self.chunk, what="--chunk")
        if chunk.seconds is None:
            raise UsageError("--chunk is video time, not frames: e.g. --chunk 10m")
        if self.time_pattern:
            from .frames.folder import compile_time_pattern

            compile_time_pattern(self.time_pattern)
        return self


# Settings whose command-line flag is not --<name with dashes>.
_FLAG_NAMES = {"blur_sigma": "--blur"}
# Examples for number settings whose default is None.
_EXAMPLES = {"fps": 2}


def _check_finite(obj: Any) -> None:
    """Every number setting of ``obj`` is finite: ``--fps inf`` put every frame at t = 0 and
    reported "no change"; ``nan`` passes no comparison, so a range check alone cannot be
    trusted to catch it. One line naming the flag."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            flag = _FLAG_NAMES.get(f.name, "--" + f.name.replace("_", "-"))
            example = f.default if isinstance(f.default, float) else _EXAMPLES.get(f.name)
            raise UsageError(
                f"{flag} must be a finite number, not {value}"
                + (f"; e.g. {flag} {_yaml_value(example)}" if example is not None else "")
            )


@dataclass(frozen=True)
class Settings:
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    caption: CaptionConfig = field(default_factory=CaptionConfig)
    video: VideoConfig = field(default_factory=VideoConfig)


def _apply(obj: T, values: dict[str, Any], where: str) -> T:
    """Return ``obj`` with ``values`` applied, recursing into nested dataclasses; unknown keys
    fail with a close-match suggestion, values of the wrong type with the key, the expected type
    and an example (YAML reads ``delta: abc`` as a string and ``recognise: "no"`` as a true-ish
    string: neither may slip through to fail later, or worse, silently mean something else)."""
    names = {f.name: f for f in dataclasses.fields(obj)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(type(obj))
    changes: dict[str, Any] = {}
    for key, value in values.items():
        key_norm = str(key).replace("-", "_")
        if key_norm not in names:
            close = difflib.get_close_matches(key_norm, list(names), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(names)}"
            raise UsageError(f"unknown setting '{key}' in {where}{hint}")
        current = getattr(obj, key_norm)
        if dataclasses.is_dataclass(current):
            if value is None:
                continue
            if not isinstance(value, dict):
                raise UsageError(
                    f"setting '{key_norm}' in {where} must be a mapping of settings, got "
                    f"{_shown(value)}; e.g. {key_norm}: {{{dataclasses.fields(current)[0].name}: ...}}"
                )
            changes[key_norm] = _apply(current, value, f"{where}.{key_norm}")
        elif value is not None:
            changes[key_norm] = _typed(value, hints.get(key_norm, Any), key_norm, where, current)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


class _WrongType(Exception):
    pass


def _typed(value: Any, hint: Any, key: str, where: str, example: Any) -> Any:
    """``value`` checked against the annotation ``hint`` (ints widen to float, lists to tuples)."""
    try:
        return _convert(value, hint)
    except _WrongType:
        raise UsageError(
            f"setting '{key}' in {where} must be {_type_name(hint)}, got {_shown(value)}; e.g. {key}: {_yaml_value(example)}"
        ) from None


def _convert(value: Any, hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arm in args:
            try:
                return _convert(value, arm)
            except _WrongType:
                continue
        raise _WrongType
    if hint is type(None):
        if value is None:
            return None
        raise _WrongType
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _WrongType
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _WrongType
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # YAML 1.1 reads "1e-3" (no dot) as a string; a number written that way is a number.
            try:
                return float(value)
            except ValueError:
                raise _WrongType from None
        raise _WrongType
    if hint is str:
        if isinstance(value, str):
            return value
        raise _WrongType
    if origin is typing.Literal:
        if value in args:
            return value
        raise _WrongType
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _WrongType
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0]) for v in value)
        if args and len(args) != len(value):
            raise _WrongType
        return tuple(_convert(v, a) for v, a in zip(value, args)) if args else tuple(value)
    if origin is list or hint is list:
        if not isinstance(value, (list, tuple)):
            raise _WrongType
        return [_convert(v, args[0]) for v in value] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _WrongType
        return value
    return value  # an annotation this checker does not know: trust the dataclass's own validate()


def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is tuple:
        inner = _type_name(args[0]) if args else "value"
        return (
            f"a list of {inner} values"
            if not args or args[-1] is Ellipsis
            else f"a list of {len(args)} {inner} values"
        )
    if origin is list or hint is list:
        return "a list"
    if origin is dict or hint is dict:
        return "a mapping"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    return {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "text",
        type(None): "empty",
    }.get(hint, str(hint))


def _shown(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({type(value).__name__})"


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value) if value != "" else "''"


def settings_from_dict(values: dict[str, Any], where: str) -> Settings:
    """Settings from a plain dict (a report's or checkpoint's stored settings), type-checked."""
    return _apply(Settings(), values, where)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file into a dict, with one-line errors."""
    import yaml

    from .frames.files import not_a_file_hint, special_kind

    path = Path(path)
    if path.is_dir():
        raise UsageError(
            f"config file {path} is a folder; --config needs a YAML settings file, e.g. the "
            "config.yaml a report carries"
        )
    odd = special_kind(path)
    if odd is not None:
        raise UsageError(f"config file {path} {not_a_file_hint(odd)}")
    if not path.is_file():
        raise UsageError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"config file {path} is not a text file (byte {exc.start} is not UTF-8); give a YAML settings file"
        ) from exc
    except OSError as exc:
        raise UsageError(f"config file {path} cannot be read: {exc.strerror or exc}") from exc
    except RecursionError:
        # 5,000 nested "[": PyYAML's composer recurses once per level. No settings file nests
        # more than two levels.
        raise UsageError(
            f"config file {path} is not a valid settings file: it nests lists or mappings "
            "too deeply to read; give a YAML mapping of settings, e.g. analysis: {delta: 30}"
        ) from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        at = f" (line {line + 1})" if line is not None else ""
        raise UsageError(f"config file {path} is not valid YAML{at}: fix the syntax") from exc
    if not isinstance(data, dict):
        raise UsageError(
            f"config file {path} must hold a mapping of settings, not {type(data).__name__}"
        )
    return data


def resolve(defaults: T, config_file: str | Path | None = None, **flags: Any) -> T:
    """defaults < YAML file < flags (None = not given)."""
    resolved = defaults
    if config_file is not None:
        resolved = _apply(resolved, load_yaml(config_file), str(config_file))
    return _apply(resolved, {k: v for k, v in flags.items() if v is not None}, "the command line")


def apply_mapping(obj: T, values: dict[str, Any], where: str) -> T:
    """``obj`` (a settings dataclass) with ``values`` applied under the rules of :func:`resolve`:
    unknown keys fail with a close match, values of the wrong type with an example. ``where``
    names the source in messages ("training/x.yaml, stage 2")."""
    return _apply(obj, values, where)


def to_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as a plain dict (for JSON reports and checkpoints)."""
    return dataclasses.asdict(obj)
