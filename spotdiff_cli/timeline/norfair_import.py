"""Importing norfair without the 0.85 s of SciPy (and the Rich) it never uses here.

norfair's package import pulls in ``scipy.stats`` (~0.45 s on this machine) for one name,
``multivariate_normal``, used only by the Kalman filter's log-likelihood, which its ``Tracker``
never computes; and ``scipy.spatial`` (~0.3 s with its own imports) for ``cdist``, used only by
the vectorised distances, which spotdiff's scalar box distance does not use. DVR-Scan's whole
run over the one-by-one person clip takes ~1.1 s, so a video run that paid this at every start
spent most of a motion detector's budget on imports. Its ``utils`` module likewise imports Rich
for a table it never draws here (``_DEFERRED``).

:func:`import_norfair` imports the one module of norfair a tracker needs, ``norfair.tracker``
(with what it imports), with stand-ins for those modules in ``sys.modules`` for the length
of the import only: not the package's ``__init__`` (drawing, video, metrics and a version read
through ``importlib.metadata``), nor SciPy's own package (32-46 ms of a video run's CPU on a
2-core machine, against 5-7 ms now). The names norfair binds are lazy: the first call of
``cdist`` or use of ``multivariate_normal`` imports the real SciPy module. Any other name asked
of a stand-in during that window (another thread importing ``scipy.stats``) is the real
module's, so the stand-ins are invisible to other code except for the import time they save;
a later ``import norfair`` is the whole package, with the same classes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

# module -> the names norfair binds from it at import time and uses only later (if ever)
_DEFERRED: dict[str, tuple[str, ...]] = {
    "scipy.stats": ("multivariate_normal",),
    "scipy.spatial": (),  # the parent package of the next: its __init__ is the slow part
    "scipy.spatial.distance": ("cdist",),
    # norfair.utils draws a table of tracked objects with Rich (``print_objects_as_table``,
    # never called here): 15-25 ms of imports in a run that draws nothing (``--json``, the
    # Python API); a run that draws has imported Rich already and norfair binds the real names.
    "rich": (),
    "rich.console": ("Console",),
    "rich.table": ("Table",),
}
_lock = threading.Lock()


def import_norfair() -> types.ModuleType:
    """norfair's ``Tracker`` and ``Detection``: the module ``norfair.tracker``, imported with
    what it imports and no more, and without importing the SciPy modules of :data:`_DEFERRED`
    (already imported ones are used as they are).

    The package's own ``__init__`` is not run: it imports the drawing, video and metrics
    modules and reads its version through ``importlib.metadata``, none of which a tracker
    uses. For the length of the import
    a bare package stands in ``sys.modules["norfair"]`` (the real package's folder, so its
    submodules are found); it is taken out after, so a later ``import norfair`` runs the real
    ``__init__``, which finds the submodules already imported and binds the same classes."""
    if "norfair.tracker" in sys.modules:
        return sys.modules["norfair.tracker"]
    with _lock:
        stand_ins: dict[str, types.ModuleType] = {}
        try:
            # The parents first (``_DEFERRED``'s order): importing ``scipy.spatial.distance``
            # must find ``scipy.spatial`` as its stand-in, or the real one (0.2 s) comes along.
            # All made before any is put in place: making one looks up its package's folders,
            # which a stand-in for that package (``rich`` for ``rich.console``) would hide.
            made = {
                name: _StandIn(name, deferred)
                for name, deferred in _DEFERRED.items()
                if name not in sys.modules
            }
            for name, stand_in in made.items():
                stand_ins[name] = sys.modules[name] = stand_in
            if "norfair" not in sys.modules:
                stand_ins["norfair"] = sys.modules["norfair"] = _bare_package("norfair")
            tracker = importlib.import_module("norfair.tracker")
        finally:
            for name, stand_in in stand_ins.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]
    return tracker


def _package_folders(name: str) -> list[str]:
    """Where the package ``name``'s submodules are, found without importing it or (for a
    dotted name) its parents: ``importlib.util.find_spec("scipy.stats")`` would import
    ``scipy`` itself (~0.03 s) just to read its ``__path__``."""
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [os.path.join(folder, *rest) for folder in spec.submodule_search_locations]


def _bare_package(name: str) -> types.ModuleType:
    """An empty package module for ``name`` whose submodules are the real package's."""
    module = types.ModuleType(name)
    module.__path__ = _package_folders(name)
    return module


def _real(name: str) -> types.ModuleType:
    """The real module ``name`` (imported now if it is not yet)."""
    module = sys.modules.get(name)
    if isinstance(module, _StandIn):
        del sys.modules[name]
        try:
            module = importlib.import_module(name)
        except BaseException:
            sys.modules[name] = module  # put back: the window's import is still running
            raise
    return module if module is not None else importlib.import_module(name)


class _StandIn(types.ModuleType):
    """A module in ``sys.modules`` while norfair is imported: the deferred names are lazy
    handles; every other attribute is the real module's."""

    def __init__(self, name: str, deferred: tuple[str, ...]) -> None:
        super().__init__(name)
        self.__deferred = deferred
        # Where the real package's submodules are, so that another thread importing one of
        # them (``scipy.spatial.transform``) during the window still finds it.
        self.__path__ = [p for p in _package_folders(name) if os.path.isdir(p)]

    def __getattr__(self, attr: str) -> Any:
        if attr in self.__deferred:
            return _Lazy(self.__name__, attr)
        return getattr(_real(self.__name__), attr)


class _Lazy:
    """``module.attr``, imported at its first use (a call, or an attribute of it)."""

    def __init__(self, module: str, attr: str) -> None:
        self._module, self._attr = module, attr
        self._target: Any = None

    def _resolve(self) -> Any:
        if self._target is None:
            self._target = getattr(_real(self._module), self._attr)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._resolve()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._resolve(), attr)
