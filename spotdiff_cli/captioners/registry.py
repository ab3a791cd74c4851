"""Model registry: names -> factories, with helpful errors.

``FAMILY_MODULES`` is the one list of model families. Importing a family module registers each of
its names with a decorator on the function that makes it, so a model name leads to its code in
one hop (timm's ``@register_model``): grep ``"duda"`` and land on ::

    @FAMILY.model("duda", "dual attention ...")       # captioners/duda/__init__.py
    def duda() -> type:
        from .model import DUDACaptioner
        return DUDACaptioner

(a learned family's ``FAMILY.model``, ``captioners/configured.py``, registers here with
:func:`register_model`; ``grounded`` decorates its factory with :func:`register_model` itself).
The registry keeps no list of names of its own, so a new family is one new module and one line
here. Every family module must be cheap to import (no torch at import time): listing the models
(``spotdiff models``) imports all of them, and the default ``grounded`` path must never pay for
torch; a learned model's module (and torch) is imported when the model is built.

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
_CLASSES: dict[str, Callable[[], type]] = {}


def register_model(
    name: str,
    *,
    family: str,
    summary: str,
    trainable: bool = False,
    needs_torch: bool = True,
    model_class: Callable[[], type] | None = None,
) -> Callable[[Factory], Factory]:
    """Decorator for a factory ``(weights=None, device="cpu", **overrides) -> Captioner``.
    ``model_class()`` returns the model's class (importing its module, and so torch, only when
    called): what :func:`image_side` asks before a model is built."""

    def decorator(factory: Factory) -> Factory:
        _FACTORIES[name] = factory
        _INFO[name] = ModelInfo(name, family, summary, trainable, needs_torch)
        if model_class is not None:
            _CLASSES[name] = model_class
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


def model_class(name: str) -> type | None:
    """The class of model ``name`` (imports its module, and so torch), or None for a model
    registered by its factory alone (``grounded``)."""
    _known(name)
    return _CLASSES[name]() if name in _CLASSES else None


def image_side(name: str, model_config: dict[str, Any]) -> int | None:
    """The square side of the images model ``name`` reads itself with ``model_config`` (a local
    CLIP's input size with ``vision: PATH``), or None for a model that reads backbone grids:
    what ``spotdiff train`` asks before it loads the data (the class's ``image_side``)."""
    cls = model_class(name)
    return cls.image_side(model_config) if cls is not None else None  # type: ignore[attr-defined]


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
