"""The exceptions the library raises on purpose.

Every error a user can cause is a ``SpotdiffError`` with a message that names the problem and the
fix. The CLI catches them once (``cli/__init__.py``) and prints one line; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations


class SpotdiffError(Exception):
    """Base class: a problem the user can fix. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(SpotdiffError):
    """A bad option value or combination (exit 2, like a usage error)."""

    exit_code = 2


class InputError(SpotdiffError):
    """An input file is missing, unreadable, not an image/video, or unsafe to decode."""


class ModelError(SpotdiffError):
    """Unknown model name, incompatible or corrupt checkpoint."""


class WeightsNotFoundError(ModelError):
    """A weights file could not be found in any of the places searched."""


class MissingExtraError(SpotdiffError):
    """A feature needs an optional part of the install (``pip install 'spotdiff[train]'``);
    see ``extras.py``."""


class DataError(SpotdiffError):
    """A dataset is malformed: missing images, bad JSON, empty split."""


class OutputError(SpotdiffError):
    """An output would overwrite something, or cannot be written."""
