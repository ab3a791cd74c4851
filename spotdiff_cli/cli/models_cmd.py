"""``spotdiff models``: list the registered captioners."""

from __future__ import annotations

from .root import app
from .state import errors_to_exit


@app.command("models")
@errors_to_exit
def models() -> None:
    """List the captioners you can pass to --model, which have shipped weights, what those were
    trained on and scored, and where each is weak."""
    from ..captioners import available_models, model_info
    from ..weights import shipped_default, unshipped_notes
    from .render import print_models

    notes = unshipped_notes()
    rows = []
    for name in available_models():
        row = vars(model_info(name)).copy()
        # Only the manifest is read (no torch): a default entry whose file is in weights/.
        entry = shipped_default(name) if row["trainable"] else None
        row["weights"] = entry.file if entry else None
        row["trained_on"] = entry.trained_on if entry else None
        row["checks"] = entry.checks if entry else None
        row["warning"] = entry.warning if entry else None
        row["note"] = notes.get(name) if row["trainable"] and not entry else None
        rows.append(row)
    print_models(rows)
