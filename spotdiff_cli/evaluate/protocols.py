"""Evaluation protocols of the IDC literature, over a dataset split and a set of predictions.

* single-sentence (Spot-the-diff Table 4): one hypothesis per pair - the first (most salient)
  predicted sentence - against *all* reference sentences of the pair (every annotator merged).
* multi-sentence (Spot-the-diff Table 5): the whole predicted description (sentences joined)
  against each annotator's whole description, plus LenRatio = mean tokens per prediction / mean
  tokens per reference description.
* breakdowns (CLEVR-Change tables; DUDA+Aux Table 2): the same metrics on the pairs of each
  change type, on all changed pairs and on the distractor ("no change") pairs.
* change detection and attribute accuracy (``judge.py``): does the prediction report a change
  where there is one (and "no change" on distractors), and name the gold change's type, object,
  colour and place.
* retrieval R@1 (DUDA+AUX's auxiliary network): for models with a retrieval head
  (``retrieval_embeddings``), the composed query (before image + caption) must find its pair's
  after image among every after image of the split, and again with its own before image added
  (the hard set); with the reference captions and with the model's own first sentence.
* perplexity: exp(total negative log-likelihood / total tokens) of the references, for models
  that expose ``log_likelihood(analysis, sentence) -> (nll, n_tokens)``; for any other model the
  result says "n/a" and why (``perplexity_note``) instead of leaving the reader guessing.
* alignment precision (Spot-the-diff §5): the share of sentence->region alignments that point at
  the gold change; a predicted box hits when its IoU with the change's before box, after box or
  their union is at least 0.3 (a cluster of a moved object covers both places).

``evaluate_predictions`` scores a file and needs only the annotations; ``evaluate_model`` runs a
captioner over a split first. Both return an ``EvalResult`` that ``write_results`` saves as
JSON and Markdown next to the resolved settings (``output.py``). Several runs (seeds) of one model
and two models side by side are ``compare.py``'s.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..data.readers import Dataset, DatasetPair, load_dataset
from ..errors import DataError, InputError, UsageError
from ..geometry import box_iou
from .judge import Detection, Judgement, PairJudgement, judge
from .metrics import (
    DEFAULT_METRICS,
    MetricResult,
    ScoringSession,
    python_tokenize,
    score_captions,
)

PROTOCOLS = ("single", "multi")
ALIGNMENT_IOU = 0.3
Predictions = dict[str, list[str]]
Box = tuple[float, float, float, float]


@dataclass
class ProtocolResult:
    """Scores of one protocol on one group of pairs."""

    protocol: str
    group: str  # "all", a change type, "changed" or "distractor"
    n_pairs: int
    scores: dict[str, float]
    tokenizer: str
    skipped: dict[str, str] = field(default_factory=dict)
    len_ratio: float | None = None
    # metric -> pair id -> that pair's score (not saved; the paired bootstrap reads it)
    per_pair: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)


@dataclass
class EvalResult:
    """Everything one evaluation produced; ``to_dict`` is the saved JSON."""

    dataset: str
    format: str
    split: str
    n_pairs: int
    results: list[ProtocolResult]
    model: str | None = None
    predictions_file: str | None = None
    perplexity: float | None = None
    perplexity_note: str | None = None  # why there is no perplexity ("n/a" in tables)
    # Perplexity of the changed and of the distractor pairs' references (datasets with both):
    # whether a model learned the change captions shows here even when greedy decoding writes
    # the majority answer ("no change") for every pair.
    perplexity_groups: dict[str, float] = field(default_factory=dict)
    alignment_precision: float | None = None
    alignment_count: int = 0
    # Models with a retrieval head: R@1 per candidate set and caption source (retrieval_recall).
    retrieval: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    predictions: Predictions = field(default_factory=dict)
    # The single-sentence protocol's own predictions, when the model's one-sentence description
    # is not the first sentence of its longer one (ddla-uniform's random cluster, §4); empty: the
    # single protocol scores the first sentence of ``predictions``.
    single_predictions: Predictions = field(default_factory=dict)
    seconds: float = 0.0
    detection: Detection | None = None
    # attribute -> group ("all" or a change type) -> [right, judged]
    attributes: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    judged: list[PairJudgement] = field(default_factory=list, repr=False)

    def get(self, protocol: str = "single", group: str = "all") -> ProtocolResult:
        for result in self.results:
            if result.protocol == protocol and result.group == group:
                return result
        raise KeyError(f"no {protocol}-sentence result for group '{group}'")

    def to_dict(self, include_predictions: bool = False) -> dict[str, Any]:
        data = asdict(self)
        data.pop("judged")  # judgements.json
        for result in data["results"]:
            result.pop("per_pair")
        if not include_predictions:
            data.pop("predictions")
            data.pop("single_predictions")
        return data

    def attribute_accuracy(self, name: str, group: str = "all") -> float | None:
        """Share of gold changes whose ``name`` (type, object, colour, place) was right."""
        right, judged = self.attributes.get(name, {}).get(group, (0, 0))
        return right / judged if judged else None


# ----------------------------------------------------------------------------------------------
# predictions files


def _texts(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                out.append(item["text"])
            else:
                raise InputError(
                    f"{where}: sentences must be strings or {{text: ...}} objects, got {str(item)[:60]}"
                )
        return out
    raise InputError(
        f"{where}: expected a caption string or a list of sentences, got {type(value).__name__}"
    )


def _entry_id(entry: dict[str, Any]) -> str | None:
    for key in ("image_id", "img_id", "id", "pair_id"):
        if key in entry:
            return str(entry[key])
    # A `spotdiff caption` report names its images; Spot-the-diff ids are the before file's stem.
    inputs = entry.get("inputs")
    image = inputs.get("before") if isinstance(inputs, dict) else None
    before = image.get("path") if isinstance(image, dict) else None
    before = before or entry.get("before") or entry.get("before_path")
    return Path(before).stem if isinstance(before, str) else None


def load_predictions(path: str | Path) -> Predictions:
    """Read predictions as ``{pair id: [sentence, ...]}`` (order kept: first = most salient).

    Accepts a COCO-style list of ``{image_id, caption}`` (several entries with one id are several
    sentences), a list of ``{image_id|img_id|id, sentences}``, our report JSON (one object with
    ``sentences`` of ``{text}``, or ``{"reports": [...]}`` / ``{"predictions": [...]}``).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: predictions file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:  # a binary file (an image, a checkpoint) given by mistake
        raise InputError(
            f"{path}: not a JSON text file (byte {exc.start} is not UTF-8); --predictions takes "
            'JSON such as [{"image_id": "12", "caption": "..."}]'
        ) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: malformed JSON at line {exc.lineno} ({exc.msg})") from exc
    except RecursionError as exc:  # json's parser recurses once per nesting level
        raise InputError(f"{path}: JSON nested too deeply to be predictions") from exc
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the predictions file ({exc.strerror or exc})"
        ) from exc
    if isinstance(data, dict):
        for key in ("predictions", "reports", "results"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            if isinstance(data.get("annotations"), list):
                data = data["annotations"]  # a COCO results/gt-style object
            else:
                data = [data]
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of predictions, got {type(data).__name__}")
    out: Predictions = {}
    for index, entry in enumerate(data):
        where = f"{path}: entry {index}"
        if not isinstance(entry, dict):
            raise InputError(
                f'{where}: expected an object like {{"image_id": "12", "caption": "..."}}'
            )
        pair_id = _entry_id(entry)
        if pair_id is None:
            raise InputError(
                f"{where}: no image_id (or img_id / id); each prediction must name its pair"
            )
        if "caption" in entry:
            sentences = _texts(entry["caption"], where)
        elif "sentences" in entry:
            sentences = _texts(entry["sentences"], where)
        else:
            raise InputError(f"{where}: no 'caption' or 'sentences'")
        out.setdefault(pair_id, []).extend(sentences)
    if not out:
        raise InputError(f"{path}: holds no predictions")
    return out


# ----------------------------------------------------------------------------------------------
# protocols


def _groups(pairs: list[DatasetPair]) -> dict[str, list[DatasetPair]]:
    """Per change type, plus "changed" vs "distractor" when the dataset has both."""
    groups: dict[str, list[DatasetPair]] = {}
    for pair in pairs:
        for kind in dict.fromkeys(pair.change_types):
            if kind != "distractor":
                groups.setdefault(kind, []).append(pair)
    distractors = [p for p in pairs if "distractor" in p.change_types]
    changed = [p for p in pairs if p.change_types and "distractor" not in p.change_types]
    if distractors and changed:
        groups["changed"] = changed
        groups["distractor"] = distractors
    return groups


def _single_inputs(
    pairs: list[DatasetPair], predictions: Predictions
) -> tuple[dict[str, list[str]], dict[str, str]]:
    refs = {p.id: list(p.sentences) for p in pairs}
    hyps = {p.id: (predictions[p.id][0] if predictions[p.id] else "") for p in pairs}
    return refs, hyps


def _multi_inputs(
    pairs: list[DatasetPair], predictions: Predictions
) -> tuple[dict[str, list[str]], dict[str, str]]:
    refs = {p.id: [d for d in p.descriptions if d] or [""] for p in pairs}
    hyps = {p.id: " ".join(s.strip() for s in predictions[p.id] if s.strip()) for p in pairs}
    return refs, hyps


# What each protocol compares: protocol -> (references per pair, one hypothesis per pair).
_INPUTS: dict[str, Callable[..., tuple[dict[str, list[str]], dict[str, str]]]] = {
    "single": _single_inputs,
    "multi": _multi_inputs,
}


def score_protocol(
    protocol: str,
    pairs: list[DatasetPair],
    predictions: Predictions,
    metrics: tuple[str, ...],
    tokenizer: str,
    group: str = "all",
    session: ScoringSession | None = None,
) -> ProtocolResult:
    """Score ``pairs`` under one protocol: "single" (the first sentence against all the pair's
    reference sentences) or "multi" (the whole description against each annotator's whole
    description, plus LenRatio)."""
    refs, hyps = _INPUTS[protocol](pairs, predictions)
    result = score_captions(refs, hyps, metrics, tokenizer, session)
    return ProtocolResult(
        protocol,
        group,
        len(pairs),
        result.scores,
        result.tokenizer,
        result.skipped,
        len_ratio=len_ratio(refs, hyps) if protocol == "multi" else None,
        per_pair=_per_pair(result),
    )


def single_sentence(
    pairs: list[DatasetPair],
    predictions: Predictions,
    metrics: tuple[str, ...],
    tokenizer: str,
    group: str = "all",
    session: ScoringSession | None = None,
) -> ProtocolResult:
    """One hypothesis (the first sentence) against all the pair's reference sentences."""
    return score_protocol("single", pairs, predictions, metrics, tokenizer, group, session)


def multi_sentence(
    pairs: list[DatasetPair],
    predictions: Predictions,
    metrics: tuple[str, ...],
    tokenizer: str,
    group: str = "all",
    session: ScoringSession | None = None,
) -> ProtocolResult:
    """The whole description against each annotator's whole description, plus LenRatio."""
    return score_protocol("multi", pairs, predictions, metrics, tokenizer, group, session)


def _per_pair(result: MetricResult) -> dict[str, dict[str, float]]:
    return {name: dict(zip(result.ids, values)) for name, values in result.per_item.items()}


def len_ratio(references: dict[str, list[str]], hypotheses: dict[str, str]) -> float:
    """Spot-the-diff Table 5: mean tokens per prediction / mean tokens per reference description
    (tokens after the Python tokenizer, so LenRatio never needs java)."""
    hyp = python_tokenize({k: [v] for k, v in hypotheses.items()})
    ref = python_tokenize(references)
    hyp_len = [len(v[0].split()) for v in hyp.values()]
    ref_len = [len(r.split()) for v in ref.values() for r in v]
    mean_ref = sum(ref_len) / max(1, len(ref_len))
    return (sum(hyp_len) / max(1, len(hyp_len))) / mean_ref if mean_ref else 0.0


def perplexity(nll_and_tokens: Iterable[tuple[float, int]]) -> float:
    """exp(sum of negative log-likelihoods (nats) / number of tokens)."""
    total_nll = 0.0
    total_tokens = 0
    for nll, n in nll_and_tokens:
        total_nll += nll
        total_tokens += n
    if total_tokens == 0:
        raise DataError("perplexity over zero tokens: the references are empty")
    return math.exp(total_nll / total_tokens)


def _change_boxes(change: dict[str, Any]) -> list[Box]:
    boxes = [tuple(change[k]) for k in ("bbox_before", "bbox_after") if change.get(k)]
    if len(boxes) == 2:
        (x0, y0, w0, h0), (x1, y1, w1, h1) = boxes
        x, y = min(x0, x1), min(y0, y1)
        boxes.append((x, y, max(x0 + w0, x1 + w1) - x, max(y0 + h0, y1 + h1) - y))
    return boxes  # type: ignore[return-value]


def alignment_hit(box: Box, change: dict[str, Any], iou: float = ALIGNMENT_IOU) -> bool:
    """Whether a predicted region is the gold change's region (see module docstring)."""
    return any(box_iou(box, gold) >= iou for gold in _change_boxes(change))


def alignment_precision(
    aligned: dict[str, list[tuple[int | None, Box]]], dataset: Dataset, iou: float = ALIGNMENT_IOU
) -> tuple[float, int]:
    """Share of predicted (sentence index, box) alignments that hit the gold change.

    With a sentence index (a gold sentence scored against clusters, the paper's setting) the box
    must hit *that* sentence's change; with None (a generated sentence) any change of the pair.
    Returns (precision, number of alignments); pairs without gold are ignored.
    """
    pairs = dataset.by_id()
    hits = total = 0
    for pair_id, items in aligned.items():
        pair = pairs.get(pair_id)
        if pair is None or not pair.gold:
            continue
        by_sentence = {c.get("sentence"): c for c in pair.gold}
        for sentence_index, box in items:
            total += 1
            candidates = (
                [by_sentence[sentence_index]] if sentence_index in by_sentence else list(pair.gold)
            )
            hits += any(alignment_hit(box, c, iou) for c in candidates)
    return (hits / total if total else 0.0), total


# ----------------------------------------------------------------------------------------------
# entry points


def _resolve_split(
    dataset: Dataset, predictions: Predictions, allow_partial: bool
) -> tuple[list[DatasetPair], list[str]]:
    notes = []
    extra = [k for k in predictions if k not in dataset.by_id()]
    pairs = [p for p in dataset.pairs if p.id in predictions]
    missing = len(dataset.pairs) - len(pairs)
    if not pairs:
        example = next(iter(predictions))
        raise DataError(
            f"none of the {len(predictions)} predictions is a pair of {dataset.source} (e.g. id '{example}'); "
            "check --split and --dataset"
        )
    if missing and not allow_partial:
        first = next(p.id for p in dataset.pairs if p.id not in predictions)
        raise DataError(
            f"{missing} of {len(dataset.pairs)} pairs of split '{dataset.split}' have no prediction (e.g. id '{first}'); "
            "predict every pair, or pass --allow-partial to score only the predicted ones"
        )
    if missing:
        notes.append(f"scored {len(pairs)} of {len(dataset.pairs)} pairs (--allow-partial)")
    if extra:
        notes.append(
            f"{len(extra)} prediction(s) for ids not in split '{dataset.split}' were ignored (e.g. '{extra[0]}')"
        )
    return pairs, notes


def score_dataset(
    dataset: Dataset,
    predictions: Predictions,
    protocols: tuple[str, ...] = PROTOCOLS,
    metrics: tuple[str, ...] | None = None,
    tokenizer: str = "auto",
    breakdown: bool = True,
    allow_partial: bool = False,
    single_predictions: Predictions | None = None,
) -> EvalResult:
    """Score predictions on a loaded split with the chosen protocols (and per-group breakdowns).
    ``single_predictions``: what the single-sentence protocol scores instead of the first
    sentence of ``predictions`` (see ``EvalResult.single_predictions``)."""
    start = time.perf_counter()
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or not protocols:
        raise UsageError(
            f"unknown protocol {', '.join(bad) or '(none)'}; use single, multi or both"
        )
    metrics = tuple(metrics) if metrics else DEFAULT_METRICS
    pairs, notes = _resolve_split(dataset, predictions, allow_partial)
    scored = {"single": single_predictions or predictions, "multi": predictions}
    results = []
    # One session for every protocol and group: all captions go through the tokenizer in one Java
    # run and METEOR keeps one process, instead of ~3 Java starts per group (see metrics.py).
    with ScoringSession(tokenizer) as session:
        captions: list[str] = []
        for protocol in protocols:
            refs, hyps = _INPUTS[protocol](pairs, scored[protocol])
            captions += [*(r for v in refs.values() for r in v), *hyps.values()]
        session.prepare(captions)
        for protocol in protocols:
            given = scored[protocol]
            results.append(
                score_protocol(protocol, pairs, given, metrics, tokenizer, session=session)
            )
            if breakdown:
                for group, members in _groups(pairs).items():
                    if len(members) >= 2:
                        results.append(
                            score_protocol(
                                protocol, members, given, metrics, tokenizer, group, session
                            )
                        )
    if any(r.tokenizer == "python" for r in results):
        why = "--tokenizer python" if tokenizer == "python" else "java not found"
        notes.append(
            f"{why}: Python tokenizer used instead of PTB; scores may differ slightly from published ones"
        )
    judgement: Judgement = judge(pairs, predictions)
    return EvalResult(
        dataset=str(dataset.root),
        format=dataset.format,
        split=dataset.split,
        n_pairs=len(pairs),
        results=results,
        notes=notes,
        predictions={p.id: predictions[p.id] for p in pairs},
        single_predictions={p.id: single_predictions[p.id] for p in pairs}
        if single_predictions
        else {},
        seconds=time.perf_counter() - start,
        detection=judgement.detection,
        attributes=judgement.attributes,
        judged=judgement.pairs,
    )


def evaluate_predictions(
    predictions: str | Path | Predictions,
    dataset: str | Path,
    split: str = "test",
    format: str = "auto",
    protocols: tuple[str, ...] = PROTOCOLS,
    metrics: tuple[str, ...] | None = None,
    tokenizer: str = "auto",
    breakdown: bool = True,
    allow_partial: bool = False,
) -> EvalResult:
    """Score a predictions file (or ``{id: [sentences]}``) against a split's annotations.

    Needs no images: ``dataset`` may be just the annotations folder of Spot-the-diff. A
    ``predictions-single.json`` beside a ``predictions.json`` (what ``spotdiff eval --model``
    writes when the single-sentence protocol decoded its own sentence) is what that protocol
    scores.
    """
    data = load_dataset(dataset, split, format, require_images=False)
    preds = predictions if isinstance(predictions, dict) else load_predictions(predictions)
    single = None
    if not isinstance(predictions, dict):
        beside = Path(predictions).with_name(SINGLE_PREDICTIONS)
        if Path(predictions).name == "predictions.json" and beside.is_file():
            single = load_predictions(beside)
    result = score_dataset(
        data, preds, protocols, metrics, tokenizer, breakdown, allow_partial, single
    )
    result.predictions_file = None if isinstance(predictions, dict) else str(predictions)
    result.settings = {
        "dataset": str(dataset),
        "split": split,
        "format": data.format,
        "protocols": list(protocols),
        "metrics": list(metrics or DEFAULT_METRICS),
        "tokenizer": tokenizer,
        "breakdown": breakdown,
        "allow_partial": allow_partial,
        "predictions": result.predictions_file,
    }
    return result


# Written beside predictions.json when the single-sentence protocol had predictions of its own.
SINGLE_PREDICTIONS = "predictions-single.json"


def gold_sentence_count(pair: DatasetPair) -> int:
    """The number of sentences a pair's description has (Spot-the-diff §3.3: "we use the gold
    number of sentences T"): the median over its annotators of their non-empty sentences, halves
    rounded up, at least 1. (The synthetic annotators all write one sentence per change.)"""
    counts = sorted(sum(1 for s in a if s.strip()) for a in pair.annotations) or [1]
    middle = len(counts) // 2
    median = counts[middle] if len(counts) % 2 else (counts[middle - 1] + counts[middle] + 1) // 2
    return max(1, median)


def evaluate_model(
    model: str,
    dataset: str | Path,
    split: str = "test",
    weights: str | None = None,
    device: str = "auto",
    format: str = "auto",
    analysis: Any = None,
    max_sentences: int = 5,
    limit: int | None = None,
    protocols: tuple[str, ...] = PROTOCOLS,
    metrics: tuple[str, ...] | None = None,
    tokenizer: str = "auto",
    breakdown: bool = True,
    progress: Callable[[int, int], None] | None = None,
    gold_count: bool = False,
) -> EvalResult:
    """Run captioner ``model`` over a split's image pairs and score what it says.

    analysis: an ``AnalysisConfig`` (defaults when None). limit: only the first N pairs (a quick
    look; scores of a subset are not comparable to published ones, and the result says so).
    gold_count: tell the model each pair's gold number of sentences (:func:`gold_sentence_count`),
    the paper's multi-sentence protocol (it conditions DDLA on it, §3.3; CAPT-MULTI is never told,
    footnote 2); models that cannot take a count (``takes_sentence_count``) are noted, not told.
    Alignment precision is reported when the split has gold alignments (the synthetic benchmark).
    """
    from ..captioners.base import DescribeOptions
    from ..config import AnalysisConfig, CaptionConfig, to_dict
    from ..describer import PairDescriber

    config = analysis or AnalysisConfig()
    data = load_dataset(dataset, split, format, require_images=True)
    pairs = list(data.pairs[:limit] if limit else data.pairs)
    # The same pipeline `spotdiff caption` runs, built once for the split.
    describer = PairDescriber(
        config,
        CaptionConfig(model=model, weights=weights, device=device, max_sentences=max_sentences),
    )
    captioner = describer.captioner
    # Perplexity needs the model's probability of the references; only models that define
    # log_likelihood (the trainable ones) can give it.
    scores_sentences = captioner.scores_sentences
    predictions: Predictions = {}
    aligned: dict[str, list[tuple[int | None, Box]]] = {}
    nll: list[tuple[float, int]] = []
    nll_of: dict[str, list[tuple[float, int]]] = {}  # pair id -> its references' (nll, tokens)
    told = gold_count and bool(captioner.takes_sentence_count)
    # The paper's single-sentence setting generates one sentence; for a model whose one sentence
    # is not the first of its longer description (ddla-uniform: a random cluster, §4), decode
    # that sentence on its own for the single protocol.
    apart = "single" in protocols and bool(captioner.single_sentence_differs)
    # Models with a retrieval head (duda-aux) give each pair's composed queries and candidates.
    retrieves = captioner.retrieves
    # What its candidates are: duda-aux's after images, or clip4idc's pairs (text -> pair).
    retrieval = RetrievalTally(captioner.retrieval_candidates)
    single: Predictions = {}
    for index, pair in enumerate(pairs):
        count = gold_sentence_count(pair) if told else None
        report = describer.describe(pair.before, pair.after, num_sentences=count)  # type: ignore[arg-type]
        result, sentences = report.analysis, report.sentences
        predictions[pair.id] = [s.text for s in sentences] or [""]
        if apart:
            one = captioner.describe(result, DescribeOptions(max_sentences=1))
            single[pair.id] = [s.text for s in one[:1]] or [""]
        boxes = {c.id: c.bbox for c in result.clusters}
        aligned[pair.id] = [
            (None, tuple(v * result.scale for v in boxes[s.cluster_ids[0]]))  # type: ignore[misc]
            for s in sentences
            if s.cluster_ids and s.cluster_ids[0] in boxes
        ]
        if scores_sentences:
            refs = [ref for ref in pair.sentences if ref.strip()]
            scores = [_nll_pair(captioner.log_likelihood(result, ref)) for ref in refs]
            nll.extend(scores)
            nll_of[pair.id] = scores
        if retrieves:
            # The analysis_batch describe() just built: no second backbone pass.
            refs = [ref for ref in pair.sentences if ref.strip()]
            own = predictions[pair.id][:1]
            queries, after, before = captioner.retrieval_embeddings(result, refs + own)
            retrieval.add(queries[: len(refs)], queries[len(refs) :], after, before)
        if progress:
            progress(index + 1, len(pairs))
    subset = Dataset(
        data.root, data.format, data.split, tuple(pairs), data.source, data.n_annotations
    )
    scored = score_dataset(
        subset, predictions, protocols, metrics, tokenizer, breakdown, single_predictions=single
    )
    scored.model = model
    if apart:
        scored.notes.append(
            f"single-sentence protocol: '{model}' decoded one sentence per pair on its own "
            f"({SINGLE_PREDICTIONS}); the multi-sentence protocol scores predictions.json"
        )
    if gold_count:
        scored.notes.append(
            "--gold-count: each pair's gold number of sentences was given to the model"
            if told
            else f"--gold-count: model '{model}' does not take a sentence count; not given"
        )
    if limit and limit < len(data.pairs):
        scored.notes.append(
            f"--limit {limit}: scored the first {len(pairs)} of {len(data.pairs)} pairs only"
        )
    if not scores_sentences:
        scored.perplexity_note = f"model '{model}' has no log_likelihood(analysis, sentence)"
    elif not nll or sum(n for _, n in nll) == 0:
        scored.perplexity_note = "the references of this split are empty"
    else:
        scored.perplexity = perplexity(nll)
        groups = _groups(list(pairs))
        for group in ("changed", "distractor"):
            scores = [x for p in groups.get(group, []) for x in nll_of.get(p.id, [])]
            if scores and sum(n for _, n in scores):
                scored.perplexity_groups[group] = perplexity(scores)
    if any(p.gold for p in pairs):
        scored.alignment_precision, scored.alignment_count = alignment_precision(aligned, subset)
    if retrieves:
        scored.retrieval = retrieval.recall()
    scored.settings = {
        "model": model,
        "weights": weights,
        "device": device,
        "dataset": str(dataset),
        "split": split,
        "format": data.format,
        "max_sentences": max_sentences,
        "gold_count": told,
        "limit": limit,
        "protocols": list(protocols),
        "metrics": list(metrics or DEFAULT_METRICS),
        "tokenizer": tokenizer,
        "analysis": to_dict(config),
    }
    return scored


class RetrievalTally:
    """The composed queries and candidates of a split, gathered pair by pair, then R@1 over the
    whole split (``captioners/retrieval.py``): the easy set (every after image) and the hard
    set (plus the query's own before image), for reference and for generated captions."""

    def __init__(self, candidates: str = "after images") -> None:
        # "after images" (duda-aux: g(B) vs g(A)) or "pairs" (clip4idc: v(A, B) vs v(A, A)).
        self.candidates = candidates
        self.references: list[Any] = []
        self.generated: list[Any] = []
        self.after: list[Any] = []
        self.before: list[Any] = []

    def add(self, references: Any, generated: Any, after: Any, before: Any) -> None:
        """references, generated: (Q, d) queries of one pair; after, before: (d,) its g(B), g(A)."""
        self.references.append(references)
        self.generated.append(generated)
        self.after.append(after)
        self.before.append(before)

    def recall(self) -> dict[str, float]:
        import torch

        from ..captioners.retrieval import recall_at_1

        if not self.after:
            return {}
        after, before = torch.stack(self.after), torch.stack(self.before)
        out: dict[str, float] = {
            "candidates": float(len(self.after)),
            "pair candidates": float(self.candidates == "pairs"),
        }
        for source, queries in (("reference", self.references), ("generated", self.generated)):
            pair_of = torch.cat([torch.full((len(q),), i) for i, q in enumerate(queries)])
            recall = recall_at_1(torch.cat(queries), pair_of.long(), after, before)
            out[f"{source} R@1"] = recall.easy
            out[f"{source} R@1 hard"] = recall.hard
            out[f"{source} queries"] = float(recall.queries)
        return out


def _nll_pair(value: Any) -> tuple[float, int]:
    """(nll, n_tokens) as plain numbers: trainable models may return 0-d tensors."""
    nll, n = value
    return float(nll), int(n)
