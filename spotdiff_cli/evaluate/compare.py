"""Several runs of a model (seeds), and two models compared with a paired bootstrap.

* ``paired_bootstrap(a, b)``: the test split's noise on a difference. Pairs are resampled with
  replacement (10,000 times); each resample's statistic is the (weighted) mean over its pairs for
  model A minus that for model B; the interval is the 2.5th-97.5th percentile of those
  differences; ``share_a_greater`` is the share of resamples where A is ahead. This is the
  bootstrap docs/results.md uses ("How large is the noise?"), moved here from
  scripts/reproduce_results.sh so that ``spotdiff eval --compare`` and the script share it.
* ``measure(result, key)`` / ``spread(values)``: one number of an ``EvalResult`` by a stable key
  ("single/all/CIDEr", "detection/accuracy", "attributes/type/all"), and its mean ± sample
  standard deviation over runs.
* ``compare(a_runs, b_runs)``: per-pair scores of each model averaged over its runs (seeds), then
  the paired bootstrap of A - B over the pairs both scored, for CIDEr per protocol on all /
  changed / distractor pairs, change-detection accuracy and change-type accuracy. The interval is
  the split's sampling noise of the seed-averaged models; the spread over seeds is reported
  beside it (mean ± std), not folded in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from .protocols import EvalResult

RESAMPLES = 10_000
CONFIDENCE = 0.95
# Metrics whose corpus score is the mean of the per-pair scores, so the bootstrap of per-pair
# means is the bootstrap of the score itself (BLEU and METEOR are corpus statistics: it is not).
BOOTSTRAP_METRICS = ("CIDEr", "CIDEr-D", "ROUGE-L")
_CHUNK = 500  # resamples drawn at a time (a 16,000-pair split would need 1.3 GB at once)


@dataclass(frozen=True)
class Bootstrap:
    """A - B with its bootstrap interval over ``n`` paired items."""

    a: float
    b: float
    difference: float
    low: float
    high: float
    share_a_greater: float
    n: int
    resamples: int
    confidence: float


def paired_bootstrap(
    a: np.ndarray | list[float],
    b: np.ndarray | list[float],
    weights: np.ndarray | list[float] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> Bootstrap:
    """Paired bootstrap of mean(a) - mean(b) (see the module docstring).

    a, b: (N,) per-item values of two models on the same items, in the same order.
    weights: (N,) item weights, for a statistic that is a ratio (accuracy over the k gold
        changes of each pair: a = the pair's share right, weight = k); None = plain means.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise UsageError(
            f"paired bootstrap needs two equal-length lists, got {x.shape} and {y.shape}"
        )
    if not len(x):
        raise UsageError("paired bootstrap over zero items")
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != x.shape or (w < 0).any() or w.sum() <= 0:
        raise UsageError("bootstrap weights must be non-negative, one per item, not all zero")
    rng = np.random.default_rng(seed)
    diffs: list[np.ndarray] = []
    for start in range(0, resamples, _CHUNK):
        index = rng.integers(0, len(x), (min(_CHUNK, resamples - start), len(x)))
        weight = w[index].sum(axis=1)
        keep = weight > 0  # a resample of zero-weight items only says nothing
        diffs.append(
            ((x * w)[index].sum(axis=1)[keep] - (y * w)[index].sum(axis=1)[keep]) / weight[keep]
        )
    d = np.concatenate(diffs)
    mean_a, mean_b = float((x * w).sum() / w.sum()), float((y * w).sum() / w.sum())
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(d, [tail, 100 - tail])
    return Bootstrap(
        mean_a,
        mean_b,
        mean_a - mean_b,
        float(low),
        float(high),
        float(np.mean(d > 0)),
        len(x),
        resamples,
        confidence,
    )


# ----------------------------------------------------------------------------------------------
# runs (seeds) of one model


@dataclass(frozen=True)
class Spread:
    """Mean and sample standard deviation (None for one run) of one number over runs."""

    mean: float
    std: float | None
    values: tuple[float, ...]


def spread(values: list[float | None]) -> Spread | None:
    """Mean ± sample std of the known values (None when no run has one)."""
    known = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not known:
        return None
    std = float(np.std(known, ddof=1)) if len(known) > 1 else None
    return Spread(float(np.mean(known)), std, tuple(known))


def measure(result: EvalResult, key: str) -> float | None:
    """One number of a result by key (None when the result has none):

    ``<protocol>/<group>/<metric>`` (metric may be "LenRatio" or "pairs"),
    ``detection/<accuracy|precision|recall|specificity>``,
    ``detection/recall/<change type>``, ``detection/specificity/<distractor kind>``,
    ``attributes/<type|object|colour|place>/<all|change type>``,
    ``retrieval/<reference|generated> R@1[ hard]`` (models with a retrieval head).
    """
    parts = key.split("/")
    if parts[0] == "retrieval":
        return result.retrieval.get(parts[1])
    if parts[0] == "detection":
        d = result.detection
        if d is None:
            return None
        if len(parts) == 3:
            table = d.recall_by_type if parts[1] == "recall" else d.specificity_by_distractor
            return table[parts[2]][0] if parts[2] in table else None
        value = getattr(d, parts[1], None)
        return float(value) if value is not None else None
    if parts[0] == "attributes":
        return result.attribute_accuracy(parts[1], parts[2])
    protocol, group, metric = parts
    for r in result.results:
        if r.protocol == protocol and r.group == group:
            if metric == "LenRatio":
                return r.len_ratio
            if metric == "pairs":
                return float(r.n_pairs)
            return r.scores.get(metric)
    return None


def summarise(runs: list[EvalResult]) -> dict[str, Spread]:
    """Every number the runs have, as mean ± std over the runs (key: see ``measure``)."""
    keys: list[str] = []
    for result in runs:
        for r in result.results:
            keys += [f"{r.protocol}/{r.group}/{m}" for m in r.scores]
            if r.len_ratio is not None:
                keys.append(f"{r.protocol}/{r.group}/LenRatio")
        if result.detection is not None:
            d = result.detection
            keys += [f"detection/{k}" for k in ("accuracy", "precision", "recall", "specificity")]
            keys += [f"detection/recall/{t}" for t in d.recall_by_type]
            keys += [f"detection/specificity/{k}" for k in d.specificity_by_distractor]
        keys += [f"attributes/{a}/{g}" for a, groups in result.attributes.items() for g in groups]
        keys += [f"retrieval/{k}" for k in result.retrieval if "R@1" in k]
    out = {}
    for key in dict.fromkeys(keys):
        value = spread([measure(r, key) for r in runs])
        if value is not None:
            out[key] = value
    return out


# ----------------------------------------------------------------------------------------------
# two models


@dataclass(frozen=True)
class Difference:
    """One measure compared: what it is, and the bootstrap of A - B."""

    measure: str  # human-readable: "single-sentence CIDEr, changed pairs only"
    key: str  # the ``measure`` key of the per-run numbers
    bootstrap: Bootstrap


def _per_pair_metric(runs: list[EvalResult], protocol: str, group: str, metric: str) -> dict:
    """pair id -> the metric averaged over the runs that scored that pair."""
    sums: dict[str, list[float]] = {}
    for result in runs:
        for r in result.results:
            if r.protocol == protocol and r.group == group:
                for pair_id, value in r.per_pair.get(metric, {}).items():
                    sums.setdefault(pair_id, []).append(value)
    return {k: float(np.mean(v)) for k, v in sums.items() if len(v) == len(runs)}


def _per_pair_judged(runs: list[EvalResult], what: str) -> dict[str, tuple[float, float]]:
    """pair id -> (value averaged over runs, weight): detection right (weight 1) or the share
    of its gold changes whose type was named (weight = number of changes)."""
    values: dict[str, list[float]] = {}
    weights: dict[str, float] = {}
    for result in runs:
        for j in result.judged:
            if what == "detection":
                values.setdefault(j.id, []).append(float(j.changed == j.said_change))
                weights[j.id] = 1.0
            elif what in j.attributes and j.attributes[what][1]:
                right, judged = j.attributes[what]
                values.setdefault(j.id, []).append(right / judged)
                weights[j.id] = float(judged)
    return {k: (float(np.mean(v)), weights[k]) for k, v in values.items() if len(v) == len(runs)}


_GROUP_WORDS = {
    "all": "all pairs",
    "changed": "changed pairs only",
    "distractor": "distractors only",
}


def compare(
    a_runs: list[EvalResult],
    b_runs: list[EvalResult],
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> list[Difference]:
    """Paired bootstraps of A - B: CIDEr (or the first of ``BOOTSTRAP_METRICS`` both have) per
    protocol on all / changed / distractor pairs, change-detection accuracy and change-type
    accuracy; only over the pairs every run of both models scored."""
    if not a_runs or not b_runs:
        raise UsageError("comparing needs at least one run of each model")
    out: list[Difference] = []

    def add(label: str, key: str, a: dict, b: dict, weighted: bool = False) -> None:
        common = [k for k in a if k in b]
        if not common:
            return
        if weighted:
            x = [a[k][0] for k in common]
            y = [b[k][0] for k in common]
            w: list[float] | None = [a[k][1] for k in common]
        else:
            x, y, w = [a[k] for k in common], [b[k] for k in common], None
        boot = paired_bootstrap(x, y, w, resamples, seed, confidence)
        out.append(Difference(label, key, boot))

    groups = [
        (r.protocol, r.group) for r in a_runs[0].results if r.group in _GROUP_WORDS and r.per_pair
    ]
    for protocol, group in groups:
        a_metrics = next(
            r.per_pair for r in a_runs[0].results if (r.protocol, r.group) == (protocol, group)
        )
        metric = next((m for m in BOOTSTRAP_METRICS if m in a_metrics), None)
        if metric is None:
            continue
        add(
            f"{protocol}-sentence {metric}, {_GROUP_WORDS[group]}",
            f"{protocol}/{group}/{metric}",
            _per_pair_metric(a_runs, protocol, group, metric),
            _per_pair_metric(b_runs, protocol, group, metric),
        )
    add(
        "change detection accuracy",
        "detection/accuracy",
        _per_pair_judged(a_runs, "detection"),
        _per_pair_judged(b_runs, "detection"),
        weighted=True,
    )
    add(
        "change type named",
        "attributes/type/all",
        _per_pair_judged(a_runs, "type"),
        _per_pair_judged(b_runs, "type"),
        weighted=True,
    )
    return out


def comparison_dict(differences: list[Difference]) -> list[dict[str, Any]]:
    """The comparison as JSON-ready dicts."""
    from dataclasses import asdict

    return [{"measure": d.measure, "key": d.key, **asdict(d.bootstrap)} for d in differences]
