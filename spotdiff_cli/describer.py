"""The per-pair pipeline, built once and called per pair: load -> align -> diff -> clusters ->
captioner -> ``Report``.

``PairDescriber`` is the one place where that chain is assembled. ``api.describe_pair`` is a
one-shot wrapper around it; ``spotdiff video`` (``timeline/``) and ``spotdiff eval``
(``evaluate/``) keep one describer for a whole run, so a trained captioner's checkpoint is read
once, not once per pair.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .analysis import analyse_pair, make_pair
from .captioners.base import DescribeOptions, Hint
from .captioners.registry import create_model, model_info
from .config import AnalysisConfig, CaptionConfig, to_dict
from .errors import UsageError
from .frames import load_image
from .types import Analysis, Frame, Report

ImageInput = str | Path | np.ndarray | Frame


def as_frame(image: ImageInput, name: str) -> Frame:
    """A path, an (H, W, 3) uint8 RGB array or a Frame, as a Frame."""
    if isinstance(image, Frame):
        return image
    if isinstance(image, np.ndarray):
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise UsageError(
                f"{name} array must be (H, W, 3) uint8 RGB, got {image.shape} {image.dtype}"
            )
        return Frame(image, f"<{name} array>")
    return Frame(load_image(image), str(image))


class PairDescriber:
    """Describe many pairs with one configuration and one captioner.

    analysis / caption: the settings (defaults when None), validated here so a bad value fails
    before any pixel is read. The captioner is built in the constructor: an unknown model, a
    missing checkpoint or a corrupt one fails here, once.
    """

    def __init__(
        self, analysis: AnalysisConfig | None = None, caption: CaptionConfig | None = None
    ) -> None:
        self.analysis = (analysis or AnalysisConfig()).validate()
        self.caption_config = (caption or CaptionConfig()).validate()
        info = model_info(self.caption_config.model)
        # Options a model does not use are said, not silently dropped: a user who passes
        # --weights to the default model believes a trained model is answering.
        if self.caption_config.weights and not info.trainable:
            raise UsageError(
                f"model '{info.name}' takes no weights, so --weights {self.caption_config.weights} would be ignored; "
                "give a trained model too (--model ddla; see `spotdiff models`)"
            )
        self.notes: tuple[str, ...] = ()
        if not info.needs_torch and self.caption_config.device.lower() not in ("auto", "cpu"):
            self.notes = (
                f"model '{info.name}' runs on the CPU; --device {self.caption_config.device} was not used",
            )
        self.captioner = create_model(
            self.caption_config.model,
            weights=self.caption_config.weights,
            device=self.caption_config.device,
        )

    def describe(
        self,
        before: ImageInput,
        after: ImageInput,
        *,
        watch: np.ndarray | None = None,
        hints: tuple[Hint, ...] = (),
        analysis: AnalysisConfig | None = None,
        num_sentences: int | None = None,
    ) -> Report:
        """What changed from ``before`` to ``after`` (paths, (H, W, 3) uint8 RGB arrays or Frames).

        watch: optional (H, W) bool of the before image's size, True where changes count.
        hints: what earlier pairs of the same sequence recognised where (captioners.base.Hint).
        analysis: settings for this pair only (the timeline makes thresholds relative to the
            watched area); the describer's own when None.
        num_sentences: write exactly this many sentences where the model can be told a count
            (the paper's multi-sentence protocol, ``eval --gold-count``); it may exceed
            ``max_sentences``.
        Returns a ``Report``: the analysis, the sentences (most salient first) and timings.
        """
        self.warm_up()  # overlaps the analysis below; once per process
        return self.caption(
            self.analyse(before, after, watch=watch, analysis=analysis),
            hints=hints,
            num_sentences=num_sentences,
        )

    def warm_up(self) -> None:
        """Start the captioner's one-off set-up in the background (loading recognisers)."""
        self.captioner.warm_up(self._options(()))

    def analyse(
        self,
        before: ImageInput,
        after: ImageInput,
        *,
        watch: np.ndarray | None = None,
        analysis: AnalysisConfig | None = None,
        still_background: float | None = None,
    ) -> Analysis:
        """The pixel stages alone (align, diff, clusters): no captioner involved, so a sequence
        can analyse its next pair on another core while this one is being captioned.
        still_background: see ``analysis.analyse_pair``."""
        t0 = time.perf_counter()
        pair = make_pair(as_frame(before, "before"), as_frame(after, "after"))
        loaded = time.perf_counter() - t0
        result = analyse_pair(pair, analysis or self.analysis, watch, still_background)
        result.timings["load"] = loaded
        return result

    def caption(
        self,
        analysis: Analysis,
        *,
        hints: tuple[Hint, ...] = (),
        num_sentences: int | None = None,
    ) -> Report:
        """Sentences for an analysed pair, wrapped in a ``Report`` with the settings and timings."""
        t0 = time.perf_counter()
        sentences = self.captioner.describe(analysis, self._options(hints, num_sentences))
        timings = dict(analysis.timings)
        timings["describe"] = time.perf_counter() - t0
        timings["total"] = sum(v for k, v in timings.items() if k != "total")
        pair = analysis.pair
        return Report(
            before_path=pair.before.source,
            after_path=pair.after.source,
            analysis=analysis,
            sentences=tuple(sentences),
            model=self.caption_config.model,
            settings={
                "analysis": to_dict(analysis.config or self.analysis),
                "caption": to_dict(self.caption_config),
            },
            timings=timings,
            notes=pair.notes + self.notes,
            original=analysis.original,
        )

    def _options(
        self, hints: tuple[Hint, ...], num_sentences: int | None = None
    ) -> DescribeOptions:
        most = self.caption_config.max_sentences
        return DescribeOptions(
            max(most, num_sentences or 0),
            self.caption_config.recognise,
            tuple(hints),
            num_sentences,
        )

    __call__ = describe
