"""What a path names, checked before it is opened: reading a named pipe (FIFO), a terminal or a
socket waits for a writer that may never come, so ``caption fifo.png b.png`` or
``--config FIFO`` would block for ever. Inputs must be regular files (or folders where a
folder is allowed); anything else is refused with one line before it is opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["special_kind", "not_a_file_hint"]

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder ("a named pipe
    (FIFO)", "a character device", "a block device", "a socket"); None for a regular file, a
    folder, or a path that cannot be looked at (missing, no permission: the caller's own
    check or open says why). Follows symbolic links, as opening would."""
    try:
        mode = os.stat(Path(path)).st_mode
    except (OSError, ValueError):  # ValueError: an embedded NUL byte
        return None
    return next((kind for test, kind in _KINDS if test(mode)), None)


def not_a_file_hint(kind: str) -> str:
    """The end of the message for a path that is ``kind`` (see :func:`special_kind`)."""
    return (
        f"is {kind}, not a regular file: reading it could wait for ever; save what it "
        "carries to a file and give that"
    )
