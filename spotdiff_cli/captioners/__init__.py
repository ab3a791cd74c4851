"""Captioners: turn an analysed pair into sentences. One file per model family, registered by
name in ``registry.py``; ``create_captioner(name, ...)`` builds one."""

from .registry import available_models, create_captioner, model_info, register_captioner

__all__ = ["available_models", "create_captioner", "model_info", "register_captioner"]
