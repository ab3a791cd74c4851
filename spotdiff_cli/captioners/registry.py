"""Captioner registry: names -> factories, with helpful errors.

Each model family's module decorates its factory with ``@register_captioner("name", ...)``. The
registry imports those modules lazily (``_FAMILY_MODULES``) so that listing models or building the
torch-free default never imports torch.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ModelError
from .base import Captioner


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    summary: str
    trainable: bool
    needs_torch: bool


# name -> module that registers it. Listing names here (rather than importing every family)
# keeps `spotdiff models` and the default path free of torch imports.
_FAMILY_MODULES: dict[str, str] = {
    "grounded": "spotdiff_cli.captioners.grounded",
    **{name: "spotdiff_cli.captioners.spot_the_diff"
       for name in ("nn", "nn-multi", "capt", "capt-masked", "capt-multi", "ddla-uniform", "ddla")},
}

_FACTORIES: dict[str, Callable[..., Captioner]] = {}
_INFO: dict[str, ModelInfo] = {}


def register_captioner(
    name: str, *, family: str, summary: str, trainable: bool = False, needs_torch: bool = True
) -> Callable[[Callable[..., Captioner]], Callable[..., Captioner]]:
    """Decorator for a factory ``(weights=None, device="cpu", **overrides) -> Captioner``."""

    def decorator(factory: Callable[..., Captioner]) -> Callable[..., Captioner]:
        _FACTORIES[name] = factory
        _INFO[name] = ModelInfo(name, family, summary, trainable, needs_torch)
        return factory

    return decorator


def available_models() -> list[str]:
    """Every registered model name, sorted."""
    return sorted(_FAMILY_MODULES)


def _load(name: str) -> None:
    if name not in _FAMILY_MODULES:
        close = difflib.get_close_matches(name, available_models(), n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ModelError(
            f"unknown model '{name}'{hint} (available: {', '.join(available_models())}; see `spotdiff models`)"
        )
    if name not in _FACTORIES:
        importlib.import_module(_FAMILY_MODULES[name])


def model_info(name: str) -> ModelInfo:
    _load(name)
    return _INFO[name]


def create_captioner(name: str, weights: str | None = None, device: str = "auto", **overrides: Any) -> Captioner:
    """Build a captioner by name. ``None`` overrides are dropped so unset flags never win."""
    _load(name)
    info = _INFO[name]
    if info.needs_torch:
        from ..device import resolve_device

        device = resolve_device(device)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return _FACTORIES[name](weights=weights, device=device, **overrides)
