"""What the CLI calls, and what a Python user calls: ``from spotdiff_cli import api``.

Each function takes plain values and settings dataclasses, returns typed results, and never
prints. Long work reports progress through an optional callback.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .analysis import analyse_pair, make_pair
from .captioners import create_captioner
from .captioners.base import DescribeOptions, Hint
from .config import AnalysisConfig, CaptionConfig, Settings, to_dict
from .errors import UsageError
from .frames import load_image
from .types import Frame, Report

ImageInput = str | Path | np.ndarray


def _as_frame(image: ImageInput, name: str) -> Frame:
    if isinstance(image, np.ndarray):
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise UsageError(f"{name} array must be (H, W, 3) uint8 RGB, got {image.shape} {image.dtype}")
        return Frame(image, f"<{name} array>")
    return Frame(load_image(image), str(image))


def describe_pair(
    before: ImageInput,
    after: ImageInput,
    analysis: AnalysisConfig | None = None,
    caption: CaptionConfig | None = None,
    watch: np.ndarray | None = None,
    hints: tuple[Hint, ...] = (),
) -> Report:
    """Describe what changed from ``before`` to ``after`` (paths or (H, W, 3) uint8 RGB arrays).

    watch: optional (H, W) bool of the before image's size, True where changes count.
    hints: what earlier pairs of the same sequence recognised where (see captioners.base.Hint).
    Returns a ``Report`` with the analysis, the sentences (most salient first) and timings.
    """
    analysis = (analysis or AnalysisConfig()).validate()
    caption = (caption or CaptionConfig()).validate()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    pair = make_pair(_as_frame(before, "before"), _as_frame(after, "after"))
    timings["load"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    captioner = create_captioner(caption.model, weights=caption.weights, device=caption.device)
    options = DescribeOptions(caption.max_sentences, caption.recognise, tuple(hints))
    captioner.warm_up(options)  # overlaps the analysis below
    timings["model"] = time.perf_counter() - t1

    result = analyse_pair(pair, analysis, watch)
    timings.update(result.timings)

    t2 = time.perf_counter()
    sentences = captioner.describe(result, options)
    timings["describe"] = time.perf_counter() - t2
    timings["total"] = time.perf_counter() - t0
    return Report(
        before_path=pair.before.source,
        after_path=pair.after.source,
        analysis=result,
        sentences=tuple(sentences),
        model=caption.model,
        settings={"analysis": to_dict(analysis), "caption": to_dict(caption)},
        timings=timings,
        notes=pair.notes,
        original=pair,
    )


def describe_video(sources: list, settings: Settings | None = None, **callbacks):
    """Describe videos, folders or file lists as timelines of events (one ``SourceResult`` per
    source; see ``timeline.pipeline.describe_sources`` for the callbacks and ``resume``)."""
    from .timeline import describe_sources

    return describe_sources(list(sources), settings or Settings(), **callbacks)


# Datasets, evaluation (and training, when present) are part of the same API, imported on first
# use so that `from spotdiff_cli import api` stays as light as the caption path needs.
_LAZY = {
    "evaluate_predictions": "spotdiff_cli.evaluate.protocols",
    "evaluate_model": "spotdiff_cli.evaluate.protocols",
    "synthesize": "spotdiff_cli.data.synth",
    "dataset_stats": "spotdiff_cli.data.stats",
    "prepare_dataset": "spotdiff_cli.data.cache",
    "load_dataset": "spotdiff_cli.data.readers",
    "train": "spotdiff_cli.train.loop",
    "cut_sprites": "spotdiff_cli.data.synth",
    "write_results": "spotdiff_cli.evaluate",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spotdiff_cli.api' has no attribute {name!r}")
