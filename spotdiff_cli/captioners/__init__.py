"""Captioners: turn an analysed pair into sentences. One module per model family, listed in
``registry.FAMILY_MODULES``; each registers its model names; ``create_model(name, ...)`` builds one."""

from .registry import (
    available_models,
    create_model,
    model_info,
    register_model,
)

__all__ = [
    "available_models",
    "create_model",
    "model_info",
    "register_model",
]
