"""What every family of config-built learned models shares: :class:`LearnedFamily` (the
registration of its names, the factory the registry calls, the check of a config) and the
features every config starts from.

A family of this kind (``spot_the_diff``, ``duda``, ...) builds each model as
``cls(config, vocab)``, with ``config`` from the family's ``default_config(name, channels, grid,
tiny)``: plain types, so it goes into a checkpoint as is and rebuilds the model from it. No torch
here: families import this when they register their names, and ``spotdiff models`` lists them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from ..errors import ModelError

DefaultConfig = Callable[..., dict[str, Any]]
"""``default_config(name, channels, grid, tiny=False) -> config``."""
ModelClass = Callable[[], type]
"""The function a family decorates for a model name: returns the model's class (importing it)."""

# feature_config's settings that older checkpoints may lack (the backbone's own input size,
# efficientnet_lite0): never required.
FEATURE_LATER = ("backbone", "input_size", "change_gate")


def check_settings(name: str, config: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ``ModelError`` for the first setting of model ``name`` whose value is not of the kind
    ``defaults`` gives it (a damaged or foreign checkpoint's stored config, a recipe's
    ``model_config``): an int where an int is expected (not a bool), a number for a float, a
    positive (h, w) pair for a list such as ``grid``, a string for a name. Missing keys are the
    class's to name."""
    for key, default in defaults.items():
        if key not in config:
            continue
        value = config[key]
        if isinstance(default, list):
            ok = (
                isinstance(value, (list, tuple))
                and len(value) == len(default)
                and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
            )
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, type(default)) and not isinstance(value, bool)
        if not ok:
            raise ModelError(
                f"'{name}' setting '{key}' is {value!r} ({type(value).__name__}); expected a value "
                f"like {default!r}"
            )


def check_multiples(name: str, config: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    """Raise ``ModelError`` unless each (width, heads) setting pair divides: attention splits a
    width evenly over its heads."""
    for width, heads in pairs:
        if int(config[width]) % int(config[heads]):
            raise ModelError(
                f"'{name}' setting '{width}' ({config[width]}) must be a multiple of "
                f"'{heads}' ({config[heads]})"
            )


class LearnedFamily:
    """A family of config-built learned models: its ``default_config``, the check of a config,
    and the registration of each model name with the decorator :meth:`model`::

        FAMILY = LearnedFamily("duda", default_config)

        @FAMILY.model("duda", "dual attention ... (Robust Change Captioning)")
        def duda() -> type:
            from .model import DUDACaptioner  # torch: only when the model is built

            return DUDACaptioner

    ``later`` names the settings added after the first checkpoints of the family's models: a
    config without them reads as the behaviour of that time, so they are not required. Every
    other key of ``default_config`` is (:meth:`required_keys`): what a model's config must hold
    is its defaults, stated once.
    """

    def __init__(
        self,
        family: str,
        default_config: DefaultConfig,
        check_config: Callable[[str, dict[str, Any]], None] | None = None,
        later: tuple[str, ...] = (),
    ) -> None:
        self.family = family
        self.default_config = default_config
        self.check_config = check_config
        self.later = (*FEATURE_LATER, *later)
        self.names: list[str] = []

    def model(self, name: str, summary: str) -> Callable[[ModelClass], ModelClass]:
        """Register model ``name`` (``summary``: what ``spotdiff models`` says) as trainable; the
        decorated function returns its class, importing its module only when called."""
        from .registry import register_model

        def decorator(model_class: ModelClass) -> ModelClass:
            def create(**kwargs: Any) -> Any:
                return self.create(name, model_class, **kwargs)

            create.__name__ = f"create_{name.replace('-', '_')}"
            # The family's module, not this one: the registry tells families apart by it.
            create.__module__ = model_class.__module__
            self.names.append(name)
            register_model(
                name, family=self.family, summary=summary, trainable=True, model_class=model_class
            )(create)
            return model_class

        return decorator

    def required_keys(self, name: str) -> list[str]:
        """The settings every config of model ``name`` must hold: its defaults, less ``later``."""
        return [k for k in self.default_config(name, 1, (1, 1)) if k not in self.later]

    def check(self, name: str, config: dict[str, Any]) -> None:
        """Raise ``ModelError`` for a config of model ``name`` with a value of the wrong kind
        (``check_config``, default :func:`check_settings` against the default config) or without
        a required setting."""
        if self.check_config is not None:
            self.check_config(name, config)
        else:
            check_settings(name, config, self.default_config(name, 1280, (7, 7)))
        missing = [k for k in self.required_keys(name) if k not in config]
        if missing:
            raise ModelError(
                f"config for '{name}' lacks {', '.join(missing)} (build it with default_config)"
            )

    def create(
        self,
        name: str,
        model_class: ModelClass,
        weights: str | None = None,
        device: str = "cpu",
        config: dict[str, Any] | None = None,
        vocab: Any = None,
        **overrides: Any,
    ) -> Any:
        """The registry factory of model ``name``::

            create(weights=None, device="cpu", config=None, vocab=None, **overrides)

        - ``weights`` (or nothing at all): a checkpoint, else the weights manifest's default for
          this model (``spotdiff caption --model M A B`` on a fresh machine); the lookup error
          names every place searched when there is none;
        - ``vocab`` with ``channels=C, grid=(h, w)`` (and ``tiny=True`` for the test sizes): an
          untrained model with ``default_config``; ``vocab`` with ``config=``: rebuilt from a
          checkpoint's resolved config;
        - other keyword overrides replace config values; an unknown key is an error with a close
          match. The final config is :meth:`check`-ed, then the model is ``cls(config, vocab)``.
        """
        if weights is not None or (vocab is None and config is None and not overrides):
            from .checkpoint import load_checkpoint

            model, _ = load_checkpoint(weights, device, model=name)
            if model.name != name:
                raise ModelError(f"'{weights}' holds a '{model.name}' model, not '{name}'")
            return model
        if vocab is None:
            raise ModelError(
                f"an untrained '{name}' needs a vocabulary: create_model('{name}', vocab=..., "
                "channels=..., grid=...), or pass weights= a trained checkpoint"
            )
        tiny = bool(overrides.pop("tiny", False))
        if config is None:
            if "channels" not in overrides or "grid" not in overrides:
                raise ModelError(
                    f"an untrained '{name}' needs the backbone's feature shape: channels=C, grid=(h, w)"
                )
            config = self.default_config(
                name, overrides.pop("channels"), overrides.pop("grid"), tiny
            )
        config = dict(config)
        for key, value in overrides.items():
            if key not in config:
                close = difflib.get_close_matches(key, list(config), n=1)
                raise ModelError(
                    f"'{name}' has no setting '{key}'"
                    + (f"; did you mean '{close[0]}'?" if close else "")
                    + f" (settings: {', '.join(config)})"
                )
            config[key] = list(value) if key == "grid" else value
        self.check(name, config)
        return model_class()(config, vocab).to(device)


def feature_config(
    family: str, name: str, names: list[str], channels: int, grid: tuple[int, int] | list[int]
) -> dict[str, Any]:
    """What every family's config starts from: the backbone features it reads (channels, the
    h x w grid) and the backbone that makes them. ``name`` must be one of ``names``."""
    if name not in names:
        raise unknown_name(family, name, names)
    h, w = (int(v) for v in grid)
    return {
        "channels": int(channels),
        "grid": [h, w],
        "backbone": "efficientnet_lite0",
        "input_size": 0,  # square side images are resized to for the backbone; 0 = its own
        # "after" / "focus": read the grids through the analysis' change mask
        # (features.gate_by_clusters); "" = off, the papers' models see the whole pair.
        "change_gate": "",
    }


def unknown_name(family: str, name: str, names: list[str]) -> ModelError:
    """The error for a name the family does not have: the list, and a close match."""
    close = difflib.get_close_matches(name, names, n=1)
    return ModelError(
        f"unknown {family} model '{name}'"
        + (f"; did you mean '{close[0]}'?" if close else "")
        + f" (available: {', '.join(names)})"
    )
