"""Change detection and attribute accuracy: does a caption say the right thing?

Caption metrics reward wording; on a benchmark with distractors they also reward saying "no
change" fluently. These two scores read what the predictions *say* (``lexicon.py``) and check
it against the truth:

* **change detection**: a prediction reports a change when any of its sentences describes an
  object change (not "no change", not only a camera or lighting remark). Truth: a distractor
  pair has none; a pair with change types or gold changes has one; a pair without labels has
  one unless all its references say "no change". Reported as accuracy, precision (reported
  changes that are real), recall (real changes reported) and specificity (distractors reported
  as "no change"), with recall per change type and specificity per distractor kind.
* **attribute accuracy** (pairs with gold changes): for each gold change, whether the
  prediction names its type, its object, its colour and its place - each only where the gold
  has it (the place needs a box and the image size). A pair with k gold changes is judged on the
  prediction's first k change sentences (most salient first), so saying more buys nothing; each
  gold change is matched to the sentence that agrees with it on the most attributes (greedy,
  one sentence per change). A change no sentence is matched to counts as wrong on all its
  attributes. Colour is right when the sentence names colours and all of them are the change's
  (its colour, and for a colour change the new one too); place is right when it names a place
  and every place word fits a gold box of the change (before or after; a third of the frame,
  widened by ``PLACE_TOLERANCE`` so a box on a border may be named either way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.readers import DatasetPair
from .lexicon import Reading, colour_word, gold_type, noun_matches, read, same_colour

ATTRIBUTES = ("type", "object", "colour", "place")
TYPE_ORDER = ("colour", "material", "add", "drop", "move")
PLACE_TOLERANCE = 0.04  # of the frame's width / height, on both sides of each third
Predictions = dict[str, list[str]]


@dataclass(frozen=True)
class GoldChange:
    """The attributes of one gold change the judge can check (None / empty: not known).
    ``type`` is one of lexicon.TYPES; ``label`` the dataset's own name for it ("appear")."""

    label: str
    type: str | None
    noun: str | None
    colours: frozenset[str]
    columns: frozenset[str]  # acceptable column words for its place
    rows: frozenset[str]

    def attributes(self) -> tuple[str, ...]:
        have = {
            "type": self.type is not None,
            "object": self.noun is not None,
            "colour": bool(self.colours),
            "place": bool(self.columns or self.rows),
        }
        return tuple(a for a in ATTRIBUTES if have[a])


@dataclass(frozen=True)
class PairJudgement:
    """What the judge found for one pair (``judgements.json`` holds one per pair)."""

    id: str
    changed: bool  # the truth
    said_change: bool  # what the prediction says
    types: tuple[str, ...] = ()  # the dataset's change types of the pair
    distractor: str | None = None
    attributes: dict[str, list[int]] = field(default_factory=dict)  # name -> [right, judged]


@dataclass
class Detection:
    """Change detection over a set of pairs ("change" is the positive class)."""

    pairs: int
    changed: int
    distractors: int
    true_positives: int
    false_positives: int
    false_negatives: int
    true_negatives: int
    accuracy: float
    precision: float | None  # None when nothing was reported as a change
    recall: float | None  # None without changed pairs
    specificity: float | None  # None without distractor pairs
    recall_by_type: dict[str, list[float]] = field(default_factory=dict)  # type -> [share, n]
    specificity_by_distractor: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Judgement:
    """Change detection, attribute accuracy (attribute -> group -> [right, judged], groups "all"
    and each change type) and the per-pair records they were counted from."""

    detection: Detection
    attributes: dict[str, dict[str, list[int]]]
    pairs: list[PairJudgement]


# ----------------------------------------------------------------------------------------------
# the truth


def _thirds(centre: float, low: str, mid: str, high: str) -> set[str]:
    out = set()
    if centre < 1 / 3 + PLACE_TOLERANCE:
        out.add(low)
    if 1 / 3 - PLACE_TOLERANCE <= centre <= 2 / 3 + PLACE_TOLERANCE:
        out.add(mid)
    if centre > 2 / 3 - PLACE_TOLERANCE:
        out.add(high)
    return out


def gold_change(record: dict[str, Any], image_size: tuple[int, int] | None) -> GoldChange:
    """One gold record of the synthetic benchmark (type, kind, colour, new_colour, boxes) or of
    the rendered CLEVR set (type, object {shape, color, ...}, new {color, ...}, boxes)."""
    obj = record.get("object") if isinstance(record.get("object"), dict) else {}
    new = record.get("new") if isinstance(record.get("new"), dict) else {}
    noun = record.get("kind") or obj.get("shape")
    names = (record.get("colour"), record.get("new_colour"), obj.get("color"), new.get("color"))
    colours = frozenset(c for c in (colour_word(n) for n in names if isinstance(n, str)) if c)
    columns: set[str] = set()
    rows: set[str] = set()
    if image_size:
        width, height = image_size
        for key in ("bbox_before", "bbox_after"):
            box = record.get(key)
            if box and width and height:
                x, y, w, h = (float(v) for v in box)
                columns |= _thirds((x + w / 2) / width, "left", "centre", "right")
                rows |= _thirds((y + h / 2) / height, "top", "middle", "bottom")
    kind = record.get("type")
    return GoldChange(
        str(kind or "other"),
        gold_type(kind) if isinstance(kind, str) else None,
        str(noun) if noun else None,
        colours,
        frozenset(columns),
        frozenset(rows),
    )


def is_changed(pair: DatasetPair) -> bool:
    """The truth: does the pair hold a change? (see the module docstring)"""
    if "distractor" in pair.change_types:
        return False
    if pair.change_types or pair.gold:
        return True
    readings = [read(s) for s in pair.sentences if s.strip()]
    return not readings or any(r.kind == "change" for r in readings)


# ----------------------------------------------------------------------------------------------
# one pair


def _agrees(reading: Reading, gold: GoldChange, attribute: str) -> bool:
    if attribute == "type":
        return reading.type == gold.type
    if attribute == "object":
        return gold.noun is not None and noun_matches(reading.noun, gold.noun)
    if attribute == "colour":
        return bool(reading.colours) and all(
            any(same_colour(c, g) for g in gold.colours) for c in reading.colours
        )
    named = reading.column | reading.row
    return bool(named) and reading.column <= gold.columns and reading.row <= gold.rows


def judge_attributes(readings: list[Reading], golds: list[GoldChange]) -> list[dict[str, bool]]:
    """Per gold change, attribute -> right? (only the attributes the gold has)."""
    candidates = [r for r in readings if r.kind == "change"][: len(golds)]
    scored = sorted(
        (
            (-sum(_agrees(r, g, a) for a in g.attributes()), si, gi)
            for si, r in enumerate(candidates)
            for gi, g in enumerate(golds)
        )
    )
    matched: dict[int, Reading] = {}
    used: set[int] = set()
    for _, si, gi in scored:
        if si not in used and gi not in matched:
            matched[gi] = candidates[si]
            used.add(si)
    return [
        {a: gi in matched and _agrees(matched[gi], g, a) for a in g.attributes()}
        for gi, g in enumerate(golds)
    ]


def judge_pair(
    pair: DatasetPair, sentences: list[str]
) -> tuple[PairJudgement, list[tuple[GoldChange, dict[str, bool]]]]:
    """The pair's judgement, and per gold change its attribute verdicts."""
    readings = [read(s) for s in sentences]
    changed = is_changed(pair)
    golds = [gold_change(g, pair.image_size) for g in pair.gold] if changed else []
    verdicts = judge_attributes(readings, golds)
    attributes: dict[str, list[int]] = {}
    for verdict in verdicts:
        for name, right in verdict.items():
            counts = attributes.setdefault(name, [0, 0])
            counts[0] += int(right)
            counts[1] += 1
    types = tuple(dict.fromkeys(t for t in pair.change_types if t != "distractor"))
    said = any(r.kind == "change" for r in readings)
    judged = PairJudgement(pair.id, changed, said, types, pair.distractor, attributes)
    return judged, list(zip(golds, verdicts))


# ----------------------------------------------------------------------------------------------
# a split


def _share(right: int, total: int) -> float | None:
    return right / total if total else None


def type_order(name: str) -> tuple[int, str]:
    """Sort key for change types: colour, material, add, drop, move (the DUDA+Aux paper's
    Table 5 order: C, T, A, D, M), then any other, by name."""
    kind = gold_type(name)
    return (TYPE_ORDER.index(kind) if kind in TYPE_ORDER else len(TYPE_ORDER), name)


def _type_order(item: tuple[str, Any]) -> tuple[int, str]:
    return type_order(item[0])


def detection(judged: list[PairJudgement]) -> Detection:
    tp = sum(j.changed and j.said_change for j in judged)
    fp = sum(not j.changed and j.said_change for j in judged)
    fn = sum(j.changed and not j.said_change for j in judged)
    tn = sum(not j.changed and not j.said_change for j in judged)
    by_type: dict[str, list[int]] = {}
    by_kind: dict[str, list[int]] = {}
    for j in judged:
        if j.changed:
            for t in j.types:
                counts = by_type.setdefault(t, [0, 0])
                counts[0] += int(j.said_change)
                counts[1] += 1
        elif j.distractor:  # unlabelled "no change" pairs (references only) have no kind
            counts = by_kind.setdefault(j.distractor, [0, 0])
            counts[0] += int(not j.said_change)
            counts[1] += 1
    return Detection(
        pairs=len(judged),
        changed=tp + fn,
        distractors=fp + tn,
        true_positives=tp,
        false_positives=fp,
        false_negatives=fn,
        true_negatives=tn,
        accuracy=(tp + tn) / len(judged) if judged else 0.0,
        precision=_share(tp, tp + fp),
        recall=_share(tp, tp + fn),
        specificity=_share(tn, tn + fp),
        recall_by_type={k: [r / n, n] for k, (r, n) in sorted(by_type.items(), key=_type_order)},
        specificity_by_distractor={k: [r / n, n] for k, (r, n) in sorted(by_kind.items())},
    )


def judge(pairs: list[DatasetPair], predictions: Predictions) -> Judgement:
    """Change detection and attribute accuracy of ``predictions`` (id -> sentences, most salient
    first) on ``pairs``."""
    judged: list[PairJudgement] = []
    attributes: dict[str, dict[str, list[int]]] = {}
    for pair in pairs:
        one, verdicts = judge_pair(pair, predictions.get(pair.id, []))
        judged.append(one)
        for gold, verdict in verdicts:
            for name, right in verdict.items():
                for group in ("all", gold.label):
                    counts = attributes.setdefault(name, {}).setdefault(group, [0, 0])
                    counts[0] += int(right)
                    counts[1] += 1
    ordered = {
        a: dict(sorted(attributes[a].items(), key=lambda kv: (kv[0] != "all", type_order(kv[0]))))
        for a in ATTRIBUTES
        if a in attributes
    }
    return Judgement(detection(judged), ordered, judged)
