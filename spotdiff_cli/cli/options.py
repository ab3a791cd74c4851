"""The command-line options that set a setting of ``config.py``, each declared once.

``caption`` and ``video`` share many of them (--model, --delta, --camera...). Each is declared
here once, by the name of its dataclass field (``AnalysisConfig``, ``CaptionConfig``,
``VideoConfig``): its flags, help and panel are in ``OPTIONS``; the "[default: ...]" its help
shows is read from the dataclass, so the help cannot drift from what the command does. A command
declares one as ``delta: Optional[float] = setting("delta")``, its parameter named as the field,
and hands the values to ``config.resolve`` grouped with :func:`given`.

Every such option defaults to None, "not given": the YAML ``--config`` file may set the value,
and only a flag the user typed overrides it (``config.resolve``).
``tests/test_cli_options.py`` checks that every default shown in the help is the dataclass's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

import typer

from ..config import AnalysisConfig, CaptionConfig, VideoConfig

# config.resolve's sections: Settings field -> its dataclass.
SECTIONS = {"analysis": AnalysisConfig, "caption": CaptionConfig, "video": VideoConfig}

ANALYSIS, EVENTS, SCALE_OUT = "Analysis", "Events", "Scale out"


class SettingOption(NamedTuple):
    """How one setting is asked for on the command line (its default: the dataclass's)."""

    flags: tuple[str, ...]
    help: str
    panel: Optional[str] = None
    # Shown as the default of a setting whose dataclass default is None (None: show none).
    none_means: Optional[str] = None


def _opt(
    *flags: str, help: str, panel: Optional[str] = None, none_means: Optional[str] = None
) -> SettingOption:
    return SettingOption(flags, help, panel, none_means)


# Field name -> its option. The help says what the option does; the default comes from the field.
OPTIONS: dict[str, SettingOption] = {
    # CaptionConfig
    "model": _opt("--model", "-m", help="Captioner (see `spotdiff models`)."),
    "weights": _opt("--weights", help="Checkpoint for a trained captioner."),
    "device": _opt("--device", help="auto, cpu or cuda (trained captioners)."),
    "max_sentences": _opt("--sentences", "-n", help="At most this many sentences per pair."),
    "recognise": _opt("--recognise/--no-recognise", help="Look for people and vehicles."),
    # AnalysisConfig
    "work_size": _opt(
        "--work-size", help="Analyse at this long side, px (0 = full).", panel=ANALYSIS
    ),
    "align": _opt("--align", help="search, phase or none.", panel=ANALYSIS),
    "camera": _opt(
        "--camera",
        help="auto (follow a camera that panned, tilted, rolled or zoomed) or fixed (a camera "
        "on a wall: never report it moved).",
        panel=ANALYSIS,
    ),
    "max_shift": _opt(
        "--max-shift", help="Largest camera shift searched, analysed px.", panel=ANALYSIS
    ),
    "delta": _opt(
        "--delta", help="RGB distance (0-441) above which a pixel changed.", panel=ANALYSIS
    ),
    "blur_sigma": _opt("--blur", help="Gaussian blur sigma before differencing.", panel=ANALYSIS),
    "normalise_lighting": _opt(
        "--lighting/--no-lighting", help="Correct global lighting changes.", panel=ANALYSIS
    ),
    "eps": _opt("--eps", help="DBSCAN eps at 224 px (scaled).", panel=ANALYSIS),
    "min_samples": _opt(
        "--min-samples", help="DBSCAN min_samples at 224 px (scaled).", panel=ANALYSIS
    ),
    "min_cluster_fraction": _opt(
        "--min-cluster-fraction",
        help="Drop clusters smaller than this share of the frame.",
        panel=ANALYSIS,
    ),
    "scene_fraction": _opt(
        "--scene-fraction", help="Above this changed share, report a view change.", panel=ANALYSIS
    ),
    # VideoConfig
    "every": _opt("--every", "-e", help="Sample spacing: 30s, 1.5m, 00:00:30.5 or 25f."),
    "start": _opt("--start", help="Start here (same syntax)."),
    "end": _opt("--end", help="Stop here (same syntax)."),
    "compare": _opt("--compare", help="previous, reference or background."),
    "reference": _opt(
        "--reference", help="Image every sample is compared with (--compare reference)."
    ),
    "roi": _opt(
        "--roi",
        help="Watch only this box x,y,w,h (repeatable). The rest of the frame is refreshed "
        "once a second (pictures show it as of then).",
    ),
    "mask": _opt("--mask", help="Image: white = watch, black = ignore (trees, clocks)."),
    "jobs": _opt("--jobs", "-j", help="Process this many sources at once."),
    "engine": _opt(
        "--engine",
        help="local, or dask: sources and --chunk pieces of long videos on a Dask cluster "
        "(pip install 'spotdiff\\[scale]').",
        panel=SCALE_OUT,
    ),
    "scheduler": _opt(
        "--scheduler",
        help="Use the running Dask cluster at tcp://HOST:PORT (workers read SOURCE by the "
        "same path or URL).",
        panel=SCALE_OUT,
        none_means="a cluster started on this machine",
    ),
    "workers": _opt(
        "--workers",
        help="Worker processes of the cluster started on this machine.",
        panel=SCALE_OUT,
        none_means="2",  # timeline.distributed.DEFAULT_WORKERS (the test checks it)
    ),
    "chunk": _opt(
        "--chunk",
        help="Cut videos longer than this into pieces of video time described in parallel; "
        "the timeline is the same.",
        panel=SCALE_OUT,
    ),
    "lower": _opt("--lower", help="Changed share below which a pair is 'no change'."),
    "upper": _opt("--upper", help="Changed share above which the view changed."),
    "backend": _opt("--backend", help="Video decoder: auto, ffmpeg or opencv."),
    "sort": _opt("--sort", help="Folders: name (natural) or time (EXIF/mtime)."),
    "fps": _opt(
        "--fps",
        help="Folders: frames per second (frame i at i/fps s).",
        none_means="EXIF or file times",
    ),
    "time_pattern": _opt(
        "--time-pattern",
        help="Folders: read each image's time from its file name, e.g. '%Y%m%d_%H%M%S'.",
    ),
    "pad_before": _opt(
        "--pad-before", help="Widen each event this much earlier (time syntax).", panel=EVENTS
    ),
    "pad_after": _opt(
        "--pad-after", help="Widen each event this much later (time syntax).", panel=EVENTS
    ),
    "min_length": _opt(
        "--min-length",
        help="Drop events seen for less than this (first to last sample).",
        panel=EVENTS,
    ),
    "max_visit": _opt(
        "--max-visit", help="An arrival and its departure within this are one event.", panel=EVENTS
    ),
    "describe_every": _opt(
        "--describe-every",
        help="Describe a change going on at most once per this much video; the samples "
        "between still find where it starts and ends (0s: describe every one).",
        panel=EVENTS,
    ),
    "clips": _opt(
        "--clips/--no-clips",
        help="Write each event as a video clip under --out/clips/.",
        panel=EVENTS,
    ),
    "objects": _opt(
        "--objects/--no-objects",
        help="Follow people, vehicles and other things that come and go with the bundled "
        "detector, one event per object.",
        panel=EVENTS,
    ),
    "look_every": _opt(
        "--look-every",
        help="While objects are followed, run the detector at most this often (time syntax).",
        panel=EVENTS,
    ),
}


@functools.cache
def _fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """Field name -> (its section, the field), over the three settings dataclasses."""
    return {
        f.name: (section, f) for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)
    }


def shown_default(name: str) -> Optional[str]:
    """The default the help shows for the setting ``name``: the dataclass default as a user
    types it (on/off for a switch), what None means for the few that say, else None."""
    default = _fields()[name][1].default
    if default is None:
        return OPTIONS[name].none_means
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, tuple):
        return ", ".join(map(str, default)) or None
    return str(default)


def setting(name: str) -> Any:
    """The ``typer.Option`` of the setting ``name`` (a field of a settings dataclass): None when
    not given, its help ending with the dataclass default."""
    option = OPTIONS[name]
    default = shown_default(name)
    shown = f" \\[default: {default}]" if default is not None else ""
    return typer.Option(None, *option.flags, help=option.help + shown, rich_help_panel=option.panel)


def config_option() -> Any:
    """``--config FILE``: the YAML settings the flags above override."""
    return typer.Option(None, "--config", help="YAML settings (flags override it).")


def given(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings among a command's parameters (``ctx.params``), grouped by section for
    ``config.resolve``. None stays "not given"; so does a repeatable option given no times."""
    fields = _fields()
    flags: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for name, value in params.items():
        if name in OPTIONS:
            if isinstance(value, (list, tuple)):
                value = tuple(value) or None
            flags[fields[name][0]][name] = value
    return flags
