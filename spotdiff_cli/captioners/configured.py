"""What every family of config-built models shares: the factory the registry calls, and the check
of a config's value types.

A family of this kind (``spot_the_diff``, ``duda``) builds each model as ``cls(config, vocab)``,
with ``config`` from the family's ``default_config(name, channels, grid, tiny)``: plain types, so
it goes into a checkpoint as is and rebuilds the model from it. No torch here: families import
this when they register their names.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from ..errors import ModelError

DefaultConfig = Callable[..., dict[str, Any]]
"""``default_config(name, channels, grid, tiny=False) -> config``."""


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


def make_factory(
    name: str,
    default_config: DefaultConfig,
    model_class: Callable[[str], type],
    check_config: Callable[[str, dict[str, Any]], None] | None = None,
) -> Callable[..., Any]:
    """The registry factory of model ``name``::

        create(weights=None, device="cpu", config=None, vocab=None, **overrides)

    - ``weights`` (or nothing at all): a checkpoint, else the weights manifest's default for this
      model (``spotdiff caption --model M A B`` on a fresh machine); the lookup error names every
      place searched when there is none;
    - ``vocab`` with ``channels=C, grid=(h, w)`` (and ``tiny=True`` for the test sizes): an
      untrained model with ``default_config``; ``vocab`` with ``config=``: rebuilt from a
      checkpoint's resolved config;
    - other keyword overrides replace config values; an unknown key is an error with a close match.

    ``check_config(name, config)`` (default: :func:`check_settings` against the default config)
    runs on the final config.
    """

    def check(config: dict[str, Any]) -> None:
        if check_config is not None:
            check_config(name, config)
        else:
            check_settings(name, config, default_config(name, 1280, (7, 7)))

    def create(
        weights: str | None = None,
        device: str = "cpu",
        config: dict[str, Any] | None = None,
        vocab: Any = None,
        **overrides: Any,
    ) -> Any:
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
            config = default_config(name, overrides.pop("channels"), overrides.pop("grid"), tiny)
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
        check(config)
        return model_class(name)(config, vocab).to(device)

    create.__name__ = f"create_{name.replace('-', '_')}"
    # The family's module, not this one: the registry tells families apart by it.
    create.__module__ = model_class.__module__
    return create


def register_family(
    family: str,
    models: dict[str, tuple[str, str, str]],
    default_config: DefaultConfig,
    model_class: Callable[[str], type],
    check_config: Callable[[str, dict[str, Any]], None] | None = None,
) -> None:
    """Register every model of ``models`` (name -> (module, class, summary)) as trainable, each
    with :func:`make_factory`."""
    from .registry import register_class, register_model

    for name, (_, _, summary) in models.items():
        register_model(name, family=family, summary=summary, trainable=True)(
            make_factory(name, default_config, model_class, check_config)
        )
        register_class(name, model_class)


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
    }


def unknown_name(family: str, name: str, names: list[str]) -> ModelError:
    """The error for a name the family does not have: the list, and a close match."""
    close = difflib.get_close_matches(name, names, n=1)
    return ModelError(
        f"unknown {family} model '{name}'"
        + (f"; did you mean '{close[0]}'?" if close else "")
        + f" (available: {', '.join(names)})"
    )


def lazy_classes(
    package: str, models: dict[str, tuple[str, str, str]], others: dict[str, str] | None = None
) -> tuple[Callable[[str], type], Callable[[str], Any]]:
    """A family package's ``model_class(name)`` and module ``__getattr__``, importing a model's
    module (and so torch) only when its class is first asked for.

    models: {name: (module, class name, description)} as the family's ``MODELS``.
    others: further class names the package offers lazily, {class name: module}.
    ``__getattr__`` also gives ``MODEL_CLASSES`` ({name: class})."""

    def model_class(name: str) -> type:
        """The class of model ``name`` (imports its module, and so torch)."""
        module, cls_name, _ = models[name]
        return getattr(importlib.import_module(f"{package}.{module}"), cls_name)

    def module_getattr(attr: str) -> Any:
        if attr == "MODEL_CLASSES":
            return {name: model_class(name) for name in models}
        if others and attr in others:
            return getattr(importlib.import_module(f"{package}.{others[attr]}"), attr)
        for name, (_, cls_name, _) in models.items():
            if attr == cls_name:
                return model_class(name)
        raise AttributeError(f"module {package!r} has no attribute {attr!r}")

    # They belong to the family's package (the registry names a factory's family by module).
    model_class.__module__ = module_getattr.__module__ = package
    return model_class, module_getattr
