"""Caption metrics (pycocoevalcap one scorer at a time, plus CIDEr-D) and the evaluation
protocols of the IDC literature (single- and multi-sentence, breakdowns, alignment precision)."""

from .metrics import ALL_METRICS, DEFAULT_METRICS, MetricResult, java_available, score_captions
from .protocols import (
    EvalResult,
    ProtocolResult,
    alignment_precision,
    evaluate_model,
    evaluate_predictions,
    load_predictions,
    perplexity,
    score_dataset,
    write_results,
)

__all__ = [
    "ALL_METRICS",
    "DEFAULT_METRICS",
    "EvalResult",
    "MetricResult",
    "ProtocolResult",
    "alignment_precision",
    "evaluate_model",
    "evaluate_predictions",
    "java_available",
    "load_predictions",
    "perplexity",
    "score_captions",
    "score_dataset",
    "write_results",
]
