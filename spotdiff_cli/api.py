"""What the CLI calls, and what a Python user calls: ``from spotdiff_cli import api``.

Each function takes plain values and settings dataclasses, returns typed results, and never
prints. Long work reports progress through an optional callback.
"""

from __future__ import annotations

import numpy as np

from .captioners.base import Hint
from .config import AnalysisConfig, CaptionConfig, Settings
from .describer import ImageInput, PairDescriber
from .types import Report


def describe_pair(
    before: ImageInput,
    after: ImageInput,
    analysis: AnalysisConfig | None = None,
    caption: CaptionConfig | None = None,
    watch: np.ndarray | None = None,
    hints: tuple[Hint, ...] = (),
) -> Report:
    """Describe what changed from ``before`` to ``after`` (paths or (H, W, 3) uint8 RGB arrays),
    once. For many pairs build one ``PairDescriber`` and call it per pair.

    watch: optional (H, W) bool of the before image's size, True where changes count.
    hints: what earlier pairs of the same sequence recognised where (see captioners.base.Hint).
    Returns a ``Report`` with the analysis, the sentences (most salient first) and timings.
    """
    return PairDescriber(analysis, caption).describe(before, after, watch=watch, hints=hints)


def describe_video(sources: list, settings: Settings | None = None, **callbacks):
    """Describe videos, folders or file lists as timelines of events (one ``SourceResult`` per
    source; see ``timeline.runs.describe_sources`` for the callbacks and ``resume``)."""
    from .timeline import describe_sources

    return describe_sources(list(sources), settings or Settings(), **callbacks)


# Datasets, evaluation (and training, when present) are part of the same API, imported on first
# use so that `from spotdiff_cli import api` stays as light as the caption path needs.
_LAZY = {
    "evaluate_predictions": "spotdiff_cli.evaluate.protocols",
    "evaluate_model": "spotdiff_cli.evaluate.protocols",
    "evaluate_runs": "spotdiff_cli.evaluate.runs",
    "write_evaluation": "spotdiff_cli.evaluate.runs",
    "synthesize": "spotdiff_cli.data.synth",
    "render_clevr_change": "spotdiff_cli.data.clevr_render",
    "dataset_stats": "spotdiff_cli.data.stats",
    "prepare_dataset": "spotdiff_cli.data.cache",
    "load_dataset": "spotdiff_cli.data.readers",
    "train": "spotdiff_cli.train.loop",
    "cut_sprites": "spotdiff_cli.data.synth",
    "write_results": "spotdiff_cli.evaluate",
    "write_event_clips": "spotdiff_cli.report.clips",
}


# Names whose module imports torch at the top: without the training extra, asking for one says
# which extra to install rather than failing with an ImportError from inside the module.
_NEEDS_TRAINING_EXTRA = {"train"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        if name in _NEEDS_TRAINING_EXTRA:
            from .extras import require_training_extra

            require_training_extra(f"spotdiff_cli.api.{name}")

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spotdiff_cli.api' has no attribute {name!r}")
