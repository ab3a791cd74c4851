"""Choosing where tensors live: ``--device auto|cpu|cuda``."""

from __future__ import annotations

from .errors import UsageError

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str = "auto") -> str:
    """Turn a user's device choice into a torch device string.

    ``auto`` picks CUDA when a GPU is visible, else the CPU. Asking for ``cuda`` on a machine
    without one is an error rather than a silent fallback, because the user asked for speed they
    will not get.
    """
    requested = (requested or "auto").lower()
    if requested not in DEVICE_CHOICES and not requested.startswith("cuda:"):
        raise UsageError(f"unknown device '{requested}': use one of {', '.join(DEVICE_CHOICES)}")
    if requested == "cpu":
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    if not has_cuda:
        raise UsageError(
            "--device cuda was asked for but no CUDA GPU is visible: use --device cpu or auto"
        )
    return requested
