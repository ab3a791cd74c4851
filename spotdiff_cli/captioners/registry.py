"""Model registry: names -> factories, with helpful errors.

``FAMILY_MODULES`` is the one list of model families. Importing a family module registers each of
its names with ``@register_model(name, ...)``; the registry keeps no list of names of its own, so
a new family is one new module and one line here. Every family module must be cheap to import
(no torch at import time): listing the models (``spotdiff models``) imports all of them, and the
default ``grounded`` path must never pay for torch. A family whose models need torch registers
factories that import it when a model is built (see ``spot_the_diff/__init__.py``).

A registered model is a :class:`~spotdiff_cli.captioners.base.Captioner`: "model" is the word
for what ``--model`` names, "captioner" for the object a factory returns.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ModelError
from .base import Captioner

FAMILY_MODULES: tuple[str, ...] = (
    "spotdiff_cli.captioners.grounded",
    "spotdiff_cli.captioners.spot_the_diff",
    "spotdiff_cli.captioners.duda",
    "spotdiff_cli.captioners.onediff",
    "spotdiff_cli.captioners.clip4idc",
    "spotdiff_cli.captioners.idc_pcl",
)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    summary: str
    trainable: bool
    needs_torch: bool


Factory = Callable[..., Captioner]
"""``(weights=None, device="cpu", **overrides) -> Captioner``."""

_FACTORIES: dict[str, Factory] = {}
_INFO: dict[str, ModelInfo] = {}


def register_model(
    name: str, *, family: str, summary: str, trainable: bool = False, needs_torch: bool = True
) -> Callable[[Factory], Factory]:
    """Decorator for a factory ``(weights=None, device="cpu", **overrides) -> Captioner``."""

    def decorator(factory: Factory) -> Factory:
        _FACTORIES[name] = factory
        _INFO[name] = ModelInfo(name, family, summary, trainable, needs_torch)
        return factory

    return decorator


def _import_families() -> None:
    """Import every family module (each once: Python caches modules), registering its names."""
    for module in FAMILY_MODULES:
        importlib.import_module(module)


def available_models() -> list[str]:
    """Every registered model name, sorted."""
    _import_families()
    return sorted(_INFO)


def _known(name: str) -> None:
    """Return if ``name`` is registered; else raise with the list and a close match."""
    if name in _INFO:
        return
    names = available_models()
    if name in _INFO:
        return
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ModelError(
        f"unknown model '{name}'{hint} (available: {', '.join(names)}; see `spotdiff models`)"
    )


_CLASSES: dict[str, Callable[[str], type]] = {}


def register_class(name: str, model_class: Callable[[str], type]) -> None:
    """Record how to get model ``name``'s class (``model_class(name)`` imports its module, and so
    torch, only when asked)."""
    _CLASSES[name] = model_class


def image_side(name: str, model_config: dict[str, Any]) -> int | None:
    """The square side of the images model ``name`` reads itself with ``model_config`` (a local
    CLIP's input size with ``vision: PATH``), or None for a model that reads backbone grids:
    what ``spotdiff train`` asks before it loads the data."""
    _known(name)
    if name not in _CLASSES:
        return None
    side = getattr(_CLASSES[name](name), "image_side", None)
    return side(model_config) if callable(side) else None


def model_info(name: str) -> ModelInfo:
    _known(name)
    return _INFO[name]


def create_model(
    name: str, weights: str | None = None, device: str = "auto", **overrides: Any
) -> Captioner:
    """Build a model by name. ``None`` overrides are dropped so unset flags never win."""
    _known(name)
    info = _INFO[name]
    if info.needs_torch:
        from ..device import resolve_device
        from ..extras import require_training_extra

        # Before the factory imports torch: without the extra the user reads which to install,
        # not an ImportError from inside the model's module.
        require_training_extra(f"model '{name}'")

        device = resolve_device(device)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return _FACTORIES[name](weights=weights, device=device, **overrides)


# The names DESIGN.md and earlier code use; the same functions.
create_captioner = create_model
register_captioner = register_model
