"""Where ``project_masks`` used to live: it is now part of ``captioners/features.py`` (everything
a learned model reads, in one module). This name stays importable for existing code."""

from __future__ import annotations

from .features import project_masks

__all__ = ["project_masks"]
