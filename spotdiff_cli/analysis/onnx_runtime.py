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
# detector pass takes 13 ms instead of 18 and its classifier crops 10 instead of 17; the video
# rows of benchmarks/video.py measured the same with one or two (the passes run beside the
# pipeline's other stages there, and idle pool threads do not spin: ort_session).
DEFAULT_THREADS = min(2, os.cpu_count() or 1)


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
