"""Starting a run from another checkpoint (``init_from``) and keeping parameters fixed (``freeze``).

``partial_load(model, source_state, ...)`` copies into ``model`` exactly the tensors of
``source_state`` whose name (after ``rename``'s prefix changes) and shape match one of the
model's, and reports the rest, so a DUDA run can start from a trained CAPT's word embeddings,
or a captioner from a retrieval pre-training, and say what it took:

* matched: loaded (the model's names);
* missing: the model's tensors nothing was loaded into (they keep their fresh initialisation);
* unexpected: the source's tensors with no tensor of that name in the model;
* mismatched: the same name, another shape (``name: source shape -> model shape``).

``freeze_parameters(named, patterns)`` switches ``requires_grad`` off for the parameters whose
names match a pattern (``fnmatch``: ``encoder.*``, ``decoder.embed.weight``) and on for the others
(of those the model trains at all); an optimizer then skips the frozen ones (their gradient stays
None), so their values do not move. A pattern that matches nothing is an error that lists the
model's top-level modules: a typo must not silently train everything.

Frozen also means eval mode: a part whose parameters are all frozen keeps no dropout and fixed
norm statistics while the rest trains (``LearnedCaptioner.train`` calls
``captioners/learned.py: keep_frozen_in_eval`` after every switch to training, whoever switches:
the loop, validation, ``generate``, DDP). Without it a frozen encoder gave other features at every
pass, and the parts after it learned from that noise.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UsageError


@dataclass
class InitReport:
    """What ``partial_load`` did (module docstring); ``source`` names the checkpoint."""

    source: str
    matched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the run log."""
        return (
            f"init_from {self.source}: {len(self.matched)} tensor(s) loaded, "
            f"{len(self.missing)} kept fresh, {len(self.unexpected)} unused, "
            f"{len(self.mismatched)} of another shape"
            + (f" (e.g. {self.mismatched[0]})" if self.mismatched else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _renamed(key: str, rename: dict[str, str]) -> str:
    """``key`` with the first matching source prefix replaced by its target prefix."""
    for old, new in rename.items():
        if key.startswith(old):
            return new + key[len(old) :]
    return key


def partial_load(
    model: Any,
    source_state: dict[str, Any],
    source: str = "checkpoint",
    keys: Sequence[str] = (),
    rename: dict[str, str] | None = None,
) -> InitReport:
    """Load the matching tensors of ``source_state`` into ``model`` (module docstring).

    keys: fnmatch patterns over the *model's* names; only those are considered (empty: all).
    rename: source-name prefix -> model-name prefix, applied before matching
    (``{"encoder.": "pair_encoder."}``).
    """
    import torch

    target = model.state_dict()
    rename = dict(rename or {})
    report = InitReport(source)
    chosen: dict[str, Any] = {}
    for key, value in source_state.items():
        name = _renamed(key, rename)
        if keys and not any(fnmatch.fnmatchcase(name, p) for p in keys):
            continue
        if name not in target:
            report.unexpected.append(key)
        elif not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(target[name].shape):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            report.mismatched.append(f"{key}: {shape} -> {tuple(target[name].shape)}")
        else:
            chosen[name] = value.to(dtype=target[name].dtype)
    report.matched = sorted(chosen)
    report.missing = sorted(
        k for k in target if k not in chosen and (not keys or _matches(k, keys))
    )
    model.load_state_dict(chosen, strict=False)
    return report


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def freeze_parameters(
    named: Iterable[tuple[str, Any]], patterns: Sequence[str], trainable: set[str] | None = None
) -> list[str]:
    """Freeze the parameters whose names match ``patterns``; unfreeze the rest of ``trainable``
    (the names that trained before any stage froze them; default: all). Returns the frozen names.
    """
    params = list(named)
    names = [n for n, _ in params]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            tops = sorted({n.split(".")[0] for n in names})
            close = difflib.get_close_matches(pattern.split(".")[0], tops, n=1)
            hint = f"; did you mean '{close[0]}.*'?" if close else ""
            raise UsageError(
                f"freeze pattern '{pattern}' matches no parameter{hint} "
                f"(top-level modules: {', '.join(tops)})"
            )
    frozen = []
    for name, param in params:
        if _matches(name, patterns):
            param.requires_grad_(False)
            param.grad = None
            frozen.append(name)
        elif trainable is None or name in trainable:
            param.requires_grad_(True)
    return frozen


__all__ = ["InitReport", "freeze_parameters", "partial_load"]
