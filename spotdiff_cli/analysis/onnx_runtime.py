"""onnxruntime for the networks of ``analysis/`` (the detector, the classifier), where installed.

Both also run on ``cv2.dnn``, so a platform without an onnxruntime wheel still works, slower
(and the detector in float); this module is the one place that knows how a session is made.
"""

from __future__ import annotations

import functools
import os
import platform
import threading
import time
from pathlib import Path
from types import ModuleType

from ..errors import ModelError
from ..weights import file_key, user_cache_dir

# Threads for one pass of either network: two (one on a one-core machine). A 720p caption's
# detector pass takes 13 ms instead of 18 and its classifier crops 10 instead of 17.
DEFAULT_THREADS = min(2, os.cpu_count() or 1)
# ... unless a run of many passes beside threads of its own asked for one (``one_thread_per_pass``).
_threads = DEFAULT_THREADS


def pass_threads() -> int:
    """Threads for one pass of a network made now: ``DEFAULT_THREADS``, or one after
    ``one_thread_per_pass``."""
    return _threads


def one_thread_per_pass() -> None:
    """Make the networks loaded from now on run each pass on one thread. For the video pipeline,
    whose decoding, analysis and naming threads keep every core busy: a second thread finishes
    a pass sooner only by taking a core from them, and a pass on one costs 20 % less CPU (13
    against 15.5 ms at 224, 27 against 33 at 416x234), with the same answers to the bit. On
    the rows of `benchmarks/video.py` the gain is a few per cent, inside the noise of a 2-core
    machine (docs/video.md, eleventh stop). A network already loaded keeps its threads."""
    global _threads
    _threads = 1


def onnxruntime_module() -> ModuleType | None:
    """The onnxruntime module, or None where it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def ort_session(path: Path, threads: int, what: str, rebuild: str):
    """An ``InferenceSession`` for ``path`` on the CPU with ``threads`` intra-op threads.

    The graph onnxruntime optimises for this CPU is kept in the user's cache
    (``optimised_copy``) and loaded from there the next time: a process then builds the
    detector's session in 28-38 ms instead of 57-77 and the classifier's in 75-80 instead of
    86-109, with the same outputs to the bit; the recognisers' warm-up, which the first caption
    waits for, is mostly these two builds. A copy that cannot be read is made again; one that
    cannot be written is done without.

    what / rebuild: the network's name and the script that makes its file, for the one-line
    error a corrupt file gets. Raises ModelError when onnxruntime cannot read the file.
    """
    ort = onnxruntime_module()
    if ort is None:
        raise ModelError(
            f"the {what}'s onnxruntime backend is not installed: pip install onnxruntime"
        )
    copy = optimised_copy(path, ort.__version__)
    if copy is not None and copy.is_file():
        try:
            return ort.InferenceSession(
                str(copy), _options(ort, threads), providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - damaged, or cut short: made again below
            copy.unlink(missing_ok=True)
    options = _options(ort, threads)
    saving = None
    if copy is not None:
        try:
            copy.parent.mkdir(parents=True, exist_ok=True)
            saving = copy.with_name(f".{copy.name}.{os.getpid()}.{threading.get_ident()}")
            options.optimized_model_filepath = str(saving)
            options.add_session_config_entry("session.save_model_format", "ORT")
        except OSError:  # a cache that cannot be written (read-only home): no copy
            saving = None
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail...)
        if saving is not None:
            saving.unlink(missing_ok=True)
        why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ModelError(
            f"{what} weights {path} are not a readable ONNX model ({why}): "
            f"re-fetch the file or rebuild it with {rebuild}"
        ) from None
    if saving is not None:
        # onnxruntime writes the file itself, so atomic.py's helpers (which take the bytes)
        # cannot: it is renamed into place here, whole or not at all.
        try:
            os.replace(saving, copy)
        except OSError:
            saving.unlink(missing_ok=True)
        else:
            _prune(copy)
    return session


# Copies of one network kept in the cache: every checkout, install or onnxruntime version
# makes its own (18 MB for the classifier), and nothing else would ever remove them.
_KEPT_COPIES = 3
# A temporary file this old was left by a process killed while saving.
_ABANDONED_S = 3600


def _prune(made: Path) -> None:
    """After ``made`` was saved: remove the older copies of the same network beyond the
    ``_KEPT_COPIES`` newest, and temporary files that killed processes left. A removed copy
    still in use elsewhere is made again there, once."""
    stem, _, _ = made.name.rpartition("-")
    try:
        entries = list(made.parent.iterdir())
    except OSError:
        return
    copies, now = [], time.time()
    for entry in entries:
        try:
            modified = entry.stat().st_mtime
        except OSError:  # removed by another process meanwhile
            continue
        name = entry.name
        if name.startswith(f"{stem}-") and name.endswith(".ort") and len(name) == len(made.name):
            copies.append((modified, entry))
        elif name.startswith(f".{stem}-") and now - modified > _ABANDONED_S:
            entry.unlink(missing_ok=True)
    for _, old in sorted(copies, reverse=True)[_KEPT_COPIES:]:
        if old != made:
            old.unlink(missing_ok=True)


def _options(ort: ModuleType, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads spin for a while by default, burning the core that the video
    # pipeline's other stages need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # no warnings on stderr (unused initialisers and such)
    return options


def optimised_copy(path: Path, version: str) -> Path | None:
    """Where the graph of ``path`` as onnxruntime ``version`` optimises it for this CPU is kept:
    ``<user cache>/onnxruntime/<name>-<key>.ort``, the key made of the file (path, size, time)
    and of the CPU (its model and instruction sets: the optimised graph holds layouts chosen for
    them, and onnxruntime says such a graph is for the machine that made it). None when the
    file cannot be read or ``SPOTDIFF_ORT_CACHE=0``."""
    if os.environ.get("SPOTDIFF_ORT_CACHE", "").strip() == "0":
        return None
    key = file_key(path, version, _cpu())
    return None if key is None else user_cache_dir() / "onnxruntime" / f"{path.stem}-{key}.ort"


@functools.cache
def _cpu() -> str:
    """This CPU as far as an optimised graph cares: its model and feature flags (Linux), else
    what ``platform`` knows. ``platform.processor()`` is asked only without /proc/cpuinfo: on
    Linux it runs ``uname -p`` in a subprocess (a fork of a process that has loaded
    onnxruntime, 2-10 ms on the recognisers' warm-up, which the first caption waits for), and
    there the model name says more."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            lines = info.read().splitlines()
    except OSError:
        lines = []
    wanted = ("model name", "flags", "Features", "CPU part")
    seen = {}
    for line in lines:
        name, _, value = line.partition(":")
        name = name.strip()
        if name in wanted and name not in seen:
            seen[name] = value.strip()
    if not seen:
        return "|".join([platform.machine(), platform.processor()])
    return "|".join([platform.machine(), *seen.values()])
