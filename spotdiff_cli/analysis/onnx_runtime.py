"""onnxruntime for the networks of ``analysis/`` (the detector, the classifier), where installed.

Both also run on ``cv2.dnn``, so a platform without an onnxruntime wheel still works, slower
(and the detector in float); this module is the one place that knows how a session is made.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from ..errors import ModelError

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
    against 15.5 ms at 224, 27 against 33 at 416x234). The answers are the same to the bit.
    `benchmarks/video.py`, interleaved on a 2-core machine whose speed drifts by a few per cent
    between minutes, over four comparisons: the person row 4.38 s against 4.67, 4.86 against
    5.09, 4.77 against 4.41 and 4.82 against 4.84 (nine rounds); the motorway ROI row 2.61
    against 2.78, 2.77 against 2.68 and 2.85 against 2.94 (nine rounds): a few per cent, within
    the noise of any one comparison, and CPU left for other work. A network already loaded keeps
    its threads."""
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

    what / rebuild: the network's name and the script that makes its file, for the one-line
    error a corrupt file gets. Raises ModelError when onnxruntime cannot read the file.
    """
    ort = onnxruntime_module()
    if ort is None:
        raise ModelError(
            f"the {what}'s onnxruntime backend is not installed: pip install onnxruntime"
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads spin for a while by default, burning the core that the video
    # pipeline's other stages need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # no warnings on stderr (unused initialisers and such)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail...)
        why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ModelError(
            f"{what} weights {path} are not a readable ONNX model ({why}): "
            f"re-fetch the file or rebuild it with {rebuild}"
        ) from None
