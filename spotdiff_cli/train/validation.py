"""Validation: which numbers a run may pick best.pt by (:func:`check_val_metric`) and how they
are measured on the validation split (:func:`validate`)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..captioners.features import move_batch, with_grids
from ..captioners.learned import LearnedCaptioner
from ..errors import UsageError
from .batches import TrainingData
from .recipes import TrainConfig
from .run import Progress

CHANGED = "changed/"  # val_metric prefix: the metric on the validation pairs that hold a change
UNCHANGED = "unchanged/"  # ... on those that hold none (distractors, "no change" references)
# val_metric prefix: the harmonic mean of the metric on both kinds of pair. Picking by
# ``changed/`` alone swaps one collapse for the other: on the rendered 3-D benchmark, duda-aux's
# best changed/CIDEr (0.47) was its first epoch, which wrote "the big green matte cylinder
# changed its color" for 69 of the 80 test pairs and called every distractor changed
# (docs/results.md). A harmonic mean is low when either kind is answered badly.
BALANCED = "balanced/"
_SPLIT_BY_CHANGE = (CHANGED, BALANCED)


def check_val_metric(config: TrainConfig, model: LearnedCaptioner, val_data: TrainingData) -> None:
    """2. ``val_metric`` must be a number validation reports: a caption metric, one on the pairs
    that hold a change (``changed/CIDEr``), perplexity, or one the model adds
    (``validation_metrics``)."""
    from ..evaluate.metrics import ALL_METRICS

    known = [
        *ALL_METRICS,
        *(f"{CHANGED}{m}" for m in ALL_METRICS),
        *(f"{BALANCED}{m}" for m in ALL_METRICS),
        "perplexity",
        *model.validation_metrics,
    ]
    if config.val_metric in known and config.val_metric.startswith(_SPLIT_BY_CHANGE):
        scored = val_data.pairs[: config.val_limit] if config.val_limit else val_data.pairs
        changed = sum(p.id in val_data.changed_ids for p in scored)
        if not 0 < changed < len(scored):
            raise UsageError(
                f"val_metric '{config.val_metric}' needs validation pairs with and without a "
                "change (labelled distractors or 'no change' references); the "
                f"{len(scored)} scored have "
                + ("none with one" if not changed else "none without one")
                + f": use '{config.val_metric.split('/', 1)[1]}'"
                + (" or a larger val_limit" if config.val_limit else "")
            )
    if config.val_metric not in known:
        import difflib

        lower = {k.lower(): k for k in known}  # "cider" is a typo of "CIDEr"
        close = [lower[c] for c in difflib.get_close_matches(config.val_metric.lower(), lower, n=1)]
        raise UsageError(
            f"val_metric '{config.val_metric}' is not a validation number"
            + (f"; did you mean '{close[0]}'?" if close else "")
            + f" (known: {', '.join(known)})"
        )


def validate(
    model: LearnedCaptioner,
    data: TrainingData,
    config: TrainConfig,
    device: str,
    progress: Progress | None = None,
    with_nll: bool = True,
) -> dict[str, Any]:
    """Validation CIDEr (BLEU-4, ROUGE-L, and ``val_metric`` when it is another caption metric)
    of generated text, perplexity of the gold text, and what the model adds
    (``validation_scores(batches) -> {name: value}``, for ``validation_metrics`` it names).
    ``val_metric`` ``changed/<metric>`` scores only the pairs that hold a change: a model that
    says "no change" to everything scores well on CIDEr over a split with many distractors, but
    not there. ``balanced/<metric>`` is the harmonic mean of the metric on the pairs with a
    change and on those without (``changed/`` and ``unchanged/<metric>``, both recorded): low
    for a model that says "no change" everywhere and for one that names a change everywhere.

    Single protocol: the first generated sentence against every reference sentence of the pair;
    multi protocol: the whole generated description against each annotator's description.
    ``with_nll=False`` skips perplexity (models without ``loss``: nn, nn-multi).
    """
    from ..evaluate.metrics import ScoringSession, score_captions

    model.eval()
    references: dict[str, list[str]] = {}
    hypotheses: dict[str, str] = {}
    nll = tokens = 0.0
    batches = list(data.pair_batches(max(1, config.batch_size), config.val_limit))
    with torch.no_grad():
        for index, batch in enumerate(batches):
            batch = move_batch(batch, device)
            if model.finetuned_backbone is not None:
                # fine-tuning: images -> grids with the backbone being trained
                batch = with_grids(batch, model.finetuned_backbone)
            if with_nll:
                out = model.loss(batch)
                nll += float(out["nll"])
                tokens += float(out["n_tokens"])
            generated = model.generate(
                batch, max_sentences=config.max_sentences, beam=config.beam, max_len=config.max_len
            )
            for pair_id, refs, descs, sents in zip(
                batch["pair_ids"], batch["references"], batch["descriptions"], generated
            ):
                if config.val_protocol == "multi":
                    references[pair_id] = descs or [""]
                    hypotheses[pair_id] = " ".join(s for s in sents if s.strip())
                else:
                    references[pair_id] = refs or [""]
                    hypotheses[pair_id] = sents[0] if sents else ""
            if progress:
                progress("validation", index + 1, len(batches))
    model.train()
    from ..evaluate.metrics import ALL_METRICS

    names = ["BLEU-4", "ROUGE-L", "CIDEr"]
    if config.val_metric in ALL_METRICS and config.val_metric not in names:
        names.append(config.val_metric)
    with ScoringSession(config.val_tokenizer) as session:  # one tokenizer for both scorings
        scores = score_captions(references, hypotheses, tuple(names), session=session)
        record: dict[str, Any] = {k: round(v, 6) for k, v in scores.scores.items()}
        record.setdefault("CIDEr", 0.0)
        if config.val_metric.startswith(_SPLIT_BY_CHANGE):
            metric = config.val_metric.split("/", 1)[1]
            balanced = config.val_metric.startswith(BALANCED)
            groups = {CHANGED: [i for i in hypotheses if i in data.changed_ids]}
            if balanced:
                groups[UNCHANGED] = [i for i in hypotheses if i not in data.changed_ids]
            for group, ids in groups.items():
                if ids:  # CIDEr's document frequencies are the group's own, as in eval
                    subset = score_captions(
                        {i: references[i] for i in ids},
                        {i: hypotheses[i] for i in ids},
                        (metric,),
                        session=session,
                    )
                    record[group + metric] = round(subset.scores.get(metric, 0.0), 6)
            if balanced:
                a, b = record.get(CHANGED + metric, 0.0), record.get(UNCHANGED + metric, 0.0)
                record[config.val_metric] = (
                    round(2 * a * b / (a + b), 6) if a > 0 and b > 0 else 0.0
                )
    if model.validation_metrics:  # what the model adds: validation_scores gives them
        model.eval()
        with torch.no_grad():
            record.update(model.validation_scores([move_batch(b, device) for b in batches]))
        model.train()
    record["perplexity"] = math.exp(min(50.0, nll / tokens)) if tokens else None
    record["pairs"] = len(hypotheses)
    record["example"] = (
        {"id": next(iter(hypotheses)), "generated": next(iter(hypotheses.values()))}
        if hypotheses
        else {}
    )
    return record
