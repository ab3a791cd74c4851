"""The evaluation's tables as plain data, for one model or several, one run or several seeds.

The CLI draws them with Rich (``cli/render.py``) and ``results.md`` / ``summary.md`` hold the
same tables in Markdown, so the terminal and the files never disagree. A cell is one run's
number, or "mean ± std" over a model's runs (seeds). The tables, in the order printed:

* per protocol, scores by group in the form of the DUDA+Aux paper's Table 2: all pairs, changed
  pairs only, distractor pairs only (distractors said "no change" inflate the all-pairs score);
* per protocol, scores by change type in the form of its Table 5 (one column per type);
* change detection: accuracy, precision, recall (changes reported), specificity (distractors
  reported as "no change") and specificity per distractor kind;
* attribute accuracy from gold labels, for all changes and per change type;
* with two models, the paired-bootstrap differences (``compare.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .compare import Difference, measure, spread
from .judge import type_order
from .protocols import PROTOCOLS, EvalResult

Model = tuple[str, list[EvalResult]]  # (name, runs)
SUMMARY_GROUPS = ("all", "changed", "distractor")
GROUP_LABELS = {"all": "all", "changed": "changed only", "distractor": "distractor only"}
DETECTION_COLUMNS = (
    ("accuracy", "accuracy"),
    ("precision", "precision"),
    ("recall", "changes reported"),
    ("specificity", "distractors: no change"),
)


@dataclass
class Table:
    """A titled table of strings; ``notes`` are lines printed under it."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    right_from: int = 1  # columns from this index on are numbers (right-aligned)

    def to_markdown(self, level: int = 2) -> str:
        align = ["---" if i < self.right_from else "---:" for i in range(len(self.columns))]
        lines = [
            f"{'#' * level} {self.title}",
            "",
            "| " + " | ".join(self.columns) + " |",
            "|" + "|".join(align) + "|",
            *("| " + " | ".join(row) + " |" for row in self.rows),
        ]
        if self.notes:
            lines += [""] + self.notes
        return "\n".join(lines) + "\n"


def cell(values: list[float | None], digits: int = 4) -> str:
    """One run: the number; several: "mean ± std"; no value: "-"."""
    s = spread(values)
    if s is None:
        return "-"
    if s.std is None:
        return f"{s.mean:.{digits}f}"
    short = min(digits, 3)
    return f"{s.mean:.{short}f} ± {s.std:.{short}f}"


def _cells(runs: list[EvalResult], key: str, digits: int = 4) -> str:
    return cell([measure(r, key) for r in runs], digits)


def _count(runs: list[EvalResult], key: str) -> str:
    value = measure(runs[0], key)
    return "-" if value is None else str(int(value))


def _metric_names(models: list[Model], protocol: str) -> list[str]:
    names: list[str] = []
    for _, runs in models:
        for result in runs:
            for r in result.results:
                if r.protocol == protocol:
                    names += [m for m in r.scores if m not in names]
    return names


def _groups(models: list[Model], protocol: str) -> list[str]:
    seen: list[str] = []
    for _, runs in models:
        for r in runs[0].results:
            if r.protocol == protocol and r.group not in seen:
                seen.append(r.group)
    return seen


def _model_rows(
    models: list[Model], label: str, make: Callable[[list[EvalResult]], list[str]]
) -> list[list[str]]:
    """Rows of one block: with one model, [label, ...]; with several, the label on the first
    row only and a model column."""
    if len(models) == 1:
        return [[label, *make(models[0][1])]]
    return [[label if i == 0 else "", name, *make(runs)] for i, (name, runs) in enumerate(models)]


def protocol_tables(models: list[Model], protocol: str, title: str) -> list[Table]:
    """Table-2 form (all / changed only / distractor only) and Table-5 form (per change type)."""
    metrics = _metric_names(models, protocol)
    if not metrics:
        return []
    extra = ["LenRatio"] if protocol == "multi" else []
    lead = ["group"] + (["model"] if len(models) > 1 else [])
    groups = _groups(models, protocol)
    summary = Table(title, [*lead, "pairs", *metrics, *extra], right_from=len(lead))
    for group in (g for g in SUMMARY_GROUPS if g in groups):
        summary.rows += _model_rows(
            models,
            GROUP_LABELS[group],
            lambda runs, g=group: [
                _count(runs, f"{protocol}/{g}/pairs"),
                *(_cells(runs, f"{protocol}/{g}/{m}") for m in metrics),
                *([_cells(runs, f"{protocol}/{g}/LenRatio", 3)] if extra else []),
            ],
        )
    tables = [summary]
    types = sorted((g for g in groups if g not in SUMMARY_GROUPS), key=type_order)
    if types:
        lead = ["metric"] + (["model"] if len(models) > 1 else [])
        per_type = Table(
            f"{protocol}-sentence scores per change type", [*lead, *types], right_from=len(lead)
        )
        per_type.rows.append(
            [
                "pairs",
                *([""] if len(models) > 1 else []),
                *(_count(models[0][1], f"{protocol}/{t}/pairs") for t in types),
            ]
        )
        for m in metrics + extra:
            digits = 3 if m == "LenRatio" else 4
            per_type.rows += _model_rows(
                models,
                m,
                lambda runs, m=m, d=digits: [_cells(runs, f"{protocol}/{t}/{m}", d) for t in types],
            )
        tables.append(per_type)
    return tables


def detection_table(models: list[Model]) -> Table | None:
    """Change detection per model, with the no-change rate per distractor kind."""
    firsts = [runs[0].detection for _, runs in models if runs[0].detection is not None]
    if not firsts:
        return None
    kinds: list[str] = []
    for d in firsts:
        kinds += [k for k in d.specificity_by_distractor if k not in kinds]
    d0 = firsts[0]
    table = Table(
        f"change detection ({d0.changed} changed pairs, {d0.distractors} distractors)",
        ["model", *(label for _, label in DETECTION_COLUMNS), *(f"no change: {k}" for k in kinds)],
    )
    for name, runs in models:
        table.rows.append(
            [
                name,
                *(_cells(runs, f"detection/{key}", 3) for key, _ in DETECTION_COLUMNS),
                *(_cells(runs, f"detection/specificity/{k}", 3) for k in kinds),
            ]
        )
    table.notes.append(
        'A prediction reports a change when a sentence describes an object change (not "no '
        'change", not only the camera or the light); precision: reported changes that are '
        "real; specificity: distractors said to be unchanged."
    )
    return table


def attribute_table(models: list[Model]) -> Table | None:
    """Attribute accuracy from gold labels, all changes and per change type, with the share of
    pairs of each type reported as changed."""
    attributes: list[str] = []
    groups: list[str] = []
    for _, runs in models:
        for a, by_group in runs[0].attributes.items():
            attributes += [a] if a not in attributes else []
            groups += [g for g in by_group if g not in groups]
    if not attributes:
        return None
    groups = ["all"] + sorted((g for g in groups if g != "all"), key=type_order)
    lead = ["changes"] + (["model"] if len(models) > 1 else [])
    table = Table(
        "attribute accuracy (gold labels)",
        [*lead, "n", "change reported", *(f"{a} named" for a in attributes)],
        right_from=len(lead),
    )
    for group in groups:
        n = max(
            runs[0].attributes.get(attributes[0], {}).get(group, [0, 0])[1] for _, runs in models
        )
        reported = "detection/recall" if group == "all" else f"detection/recall/{group}"
        table.rows += _model_rows(
            models,
            "all" if group == "all" else group,
            lambda runs, g=group, key=reported, n=n: [
                str(n),
                _cells(runs, key, 3),
                *(_cells(runs, f"attributes/{a}/{g}", 3) for a in attributes),
            ],
        )
    table.notes.append(
        "Each gold change is matched to one of the prediction's first k change sentences (k = "
        "the pair's gold changes); a word-level lexicon reads type, object, colour and place "
        "(docs/data.md)."
    )
    return table


def comparison_table(a: str, b: str, differences: list[Difference]) -> Table | None:
    if not differences:
        return None
    first = differences[0].bootstrap
    table = Table(
        f"{a} vs {b}: paired bootstrap ({first.resamples:,} resamples of the pairs)",
        ["measure", "pairs", a, b, "A - B", f"{first.confidence:.0%} interval", "share A > B"],
    )
    for d in differences:
        x = d.bootstrap
        table.rows.append(
            [
                d.measure,
                str(x.n),
                f"{x.a:.4f}",
                f"{x.b:.4f}",
                f"{x.difference:+.4f}",
                f"[{x.low:+.4f}, {x.high:+.4f}]",
                f"{x.share_a_greater:.2f}",
            ]
        )
    table.notes.append(
        "A = the first model, B = --compare. An interval that excludes 0 is a difference larger "
        "than the test split's noise; with several seeds, per-pair scores are averaged over "
        "them first."
    )
    return table


def tables(
    models: list[Model],
    split: str,
    protocols: tuple[str, ...] = PROTOCOLS,
    differences: list[Difference] | None = None,
) -> list[Table]:
    """Every table of an evaluation of ``models`` (see the module docstring)."""
    name = models[0][0] if len(models) == 1 else " vs ".join(n for n, _ in models)
    runs = models[0][1]
    seeds = f", mean ± std over {len(runs)} runs" if len(models) == 1 and len(runs) > 1 else ""
    out: list[Table] = []
    for protocol in protocols:
        title = f"{protocol}-sentence protocol: {name} on {split} ({runs[0].n_pairs} pairs{seeds})"
        out += protocol_tables(models, protocol, title)
    for table in (detection_table(models), attribute_table(models)):
        if table is not None:
            out.append(table)
    if differences and len(models) == 2:
        table = comparison_table(models[0][0], models[1][0], differences)
        if table is not None:
            out.append(table)
    return out
