"""``spotdiff models``: list the registered captioners."""

from __future__ import annotations

from . import app
from .state import errors_to_exit


@app.command("models")
@errors_to_exit
def models() -> None:
    """List the captioners you can pass to --model."""
    from ..captioners import available_models, model_info
    from .render import print_models

    print_models([vars(model_info(name)) for name in available_models()])
