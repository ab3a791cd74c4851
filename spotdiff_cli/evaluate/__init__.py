"""Caption metrics (pycocoevalcap one scorer at a time, plus CIDEr-D), the evaluation protocols of
the IDC literature (single- and multi-sentence, breakdowns, alignment precision), change
detection and attribute accuracy read from the captions, several runs (seeds) and two models
compared with a paired bootstrap."""

from .compare import Bootstrap, Difference, compare, paired_bootstrap, summarise
from .judge import Detection, Judgement, judge
from .metrics import ALL_METRICS, DEFAULT_METRICS, MetricResult, java_available, score_captions
from .output import write_results, write_summary
from .protocols import (
    EvalResult,
    ProtocolResult,
    alignment_precision,
    evaluate_model,
    evaluate_predictions,
    load_predictions,
    perplexity,
    score_dataset,
)
from .runs import Evaluation, evaluate_runs, write_evaluation

__all__ = [
    "ALL_METRICS",
    "DEFAULT_METRICS",
    "Bootstrap",
    "Detection",
    "Difference",
    "EvalResult",
    "Evaluation",
    "Judgement",
    "MetricResult",
    "ProtocolResult",
    "alignment_precision",
    "compare",
    "evaluate_model",
    "evaluate_predictions",
    "evaluate_runs",
    "java_available",
    "judge",
    "load_predictions",
    "paired_bootstrap",
    "perplexity",
    "score_captions",
    "score_dataset",
    "summarise",
    "write_evaluation",
    "write_results",
    "write_summary",
]
