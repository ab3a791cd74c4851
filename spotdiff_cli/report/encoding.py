"""Report text as bytes, for file names that are not valid UTF-8.

Python reads such a name (``b"caf\\xe9.jpg"`` from a Latin-1 camera) as a string with lone
surrogates (``"caf\\udce9.jpg"``), which strict UTF-8 cannot encode. Reports must still be
written: JSON escapes them (``\\udce9``, valid JSON that reads back to the same name, which
``os.fsencode`` turns into the same bytes), and the text formats show them as ``\\udce9``.
"""

from __future__ import annotations

import json
from typing import Any


def text_bytes(text: str) -> bytes:
    """UTF-8, with any undecodable character of a file name shown as a backslash escape."""
    return text.encode("utf-8", "backslashreplace")


def json_bytes(data: Any) -> bytes:
    """Indented JSON, UTF-8 and readable where possible; ASCII escapes when a string holds a
    character UTF-8 cannot carry (so the file is always valid JSON)."""
    try:
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data, indent=2, ensure_ascii=True) + "\n").encode("ascii")
