"""The run folder: a new one per run, never a previous run's reused silently."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import OutputError, UsageError
from .recipes import CACHED_DATASETS, TrainConfig


def only_a_refused_run(out: Path) -> bool:
    """Whether ``out`` is empty or holds only what a run refused before its first step wrote
    (a typo in a setting): its config.json and vocab.json. The user fixed the setting and runs
    again into the same folder; anything else in it (a user's file, a log, a checkpoint) keeps
    the folder from being reused."""
    names = {p.name for p in out.iterdir()}
    if not names <= {"config.json", "vocab.json"}:
        return False
    if "config.json" not in names:
        return not names
    try:
        written = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(written, dict) and {"train", "model_config"} <= set(written)


def prepare_out_dir(
    out_dir: str | Path | None, resume: bool, config: TrainConfig, root: Path
) -> Path:
    """The run folder. Never reuses a previous run's folder silently:

    * ``--out DIR`` with ``--resume``: DIR must hold ``last.pt``.
    * ``--out DIR`` without: DIR must be new or empty (or hold only the config.json and
      vocab.json of a run refused before its first step), else an error that says what to do.
    * no ``--out``: ``runs/<model>-<dataset>``; taken -> ``-2``, ``-3``, ... (``--resume`` picks the
      newest of those that holds ``last.pt``).

    The folder is made by the run's first file (``prepare.write_run_files``), not here: a run
    refused before it (a typo in ``val_metric``) leaves no empty folder behind.
    """
    if out_dir is not None:
        out = Path(out_dir).expanduser()
        if resume:
            if not (out / "last.pt").is_file():
                raise UsageError(
                    f"--resume: {out / 'last.pt'} not found; is --out the folder of the run to continue?"
                )
            return out
        if out.exists() and (not out.is_dir() or not only_a_refused_run(out)):
            raise OutputError(
                f"{out} already holds files (a previous run?); pass --resume to continue it, "
                f"or choose a new --out"
            )
        return out
    name = config.data if config.data in CACHED_DATASETS else (root.name or "data")
    base = Path("runs") / f"{config.model}-{name}"
    candidates = [base] + [base.with_name(f"{base.name}-{i}") for i in range(2, 1000)]
    if resume:
        existing = [c for c in candidates if (c / "last.pt").is_file()]
        if not existing:
            raise UsageError(
                f"--resume: no earlier run of {config.model} under {base}*; pass --out DIR of the run"
            )
        return existing[-1]
    for candidate in candidates:
        if not candidate.exists() or (candidate.is_dir() and not any(candidate.iterdir())):
            return candidate
    raise OutputError(f"{base}-2 ... {base}-999 all exist; pass --out DIR")
