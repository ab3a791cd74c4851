"""Which part of the frame to watch: ``--roi x,y,w,h`` boxes and ``--mask image.png``."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np

from ..analysis import window_margin
from ..config import AnalysisConfig
from ..errors import UsageError

_ROI = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*$")


def parse_roi(text: str) -> tuple[int, int, int, int]:
    """ "631,532,210,127" -> (x, y, w, h); one-line UsageError otherwise."""
    match = _ROI.match(text)
    if not match:
        raise UsageError(f"--roi {text!r} is not x,y,w,h in pixels, e.g. --roi 631,532,210,127")
    x, y, w, h = (int(v) for v in match.groups())
    if w == 0 or h == 0:
        raise UsageError(f"--roi {text!r} has zero width or height")
    return x, y, w, h


def watch_mask(
    width: int, height: int, rois: tuple[str, ...] = (), mask_path: str | None = None
) -> np.ndarray | None:
    """(H, W) bool, True where changes count; None when the whole frame is watched.

    Boxes are unioned; a mask image (white = watch, black = ignore, resized to the frame) is
    intersected with them.
    """
    watch = None
    if rois:
        watch = np.zeros((height, width), dtype=bool)
        for text in rois:
            x, y, w, h = parse_roi(text)
            if x >= width or y >= height:
                raise UsageError(f"--roi {text} lies outside the {width}x{height} frame")
            watch[y : y + h, x : x + w] = True
    if mask_path:
        from ..frames import load_image
        from ..frames.files import not_a_file_hint, special_kind

        odd = special_kind(mask_path)
        if odd is not None:  # a named pipe would be waited on for ever
            raise UsageError(f"--mask {mask_path} {not_a_file_hint(odd)}")
        if Path(mask_path).is_dir():
            raise UsageError(f"--mask {mask_path} is a folder; give an image (white = watch)")
        if not Path(mask_path).is_file():
            raise UsageError(f"--mask {mask_path}: no such file")
        grey = cv2.cvtColor(load_image(mask_path), cv2.COLOR_RGB2GRAY)
        grey = cv2.resize(grey, (width, height), interpolation=cv2.INTER_NEAREST)
        from_mask = grey > 127
        if not from_mask.any():
            raise UsageError(
                f"--mask {mask_path} is black everywhere: white marks the area to watch"
            )
        watch = from_mask if watch is None else watch & from_mask
    return watch


# Room around a change for the recognisers' crops (a car's box is widened by up to 35 % a side,
# analysis/recognise.py): a third of the watched box's longer side, beyond the analysis margin.
_CROP_ROOM = 0.4


def watched_focus(
    watch: np.ndarray, work_scale: float, analysis: AnalysisConfig
) -> tuple[int, int, int, int] | None:
    """The part of each frame a watched run reads, (x, y, w, h) in the source's pixels: the
    watched pixels' box, grown by the margin the analysis window adds around it
    (``analysis.window_margin``, in working pixels: ``work_scale`` source pixels each) and room
    for the recognisers' crops of a change at its edge. The first look, the analysis, the
    detector and the names read nothing else; the pictures and a frame's colour cast read the
    whole frame, for which a refresh once a second is enough (``FrameSource.focus``). None when
    nothing is watched."""
    rows, cols = np.flatnonzero(watch.any(axis=1)), np.flatnonzero(watch.any(axis=0))
    if rows.size == 0:
        return None
    height, width = watch.shape
    work = (max(1, round(height / work_scale)), max(1, round(width / work_scale)))
    eps, _ = analysis.scaled_dbscan(*work)
    box_w, box_h = int(cols[-1] + 1 - cols[0]), int(rows[-1] + 1 - rows[0])
    margin = int(
        np.ceil(
            window_margin(eps, analysis.max_shift) * work_scale + _CROP_ROOM * max(box_w, box_h)
        )
    )
    x0, y0 = max(0, int(cols[0]) - margin), max(0, int(rows[0]) - margin)
    x1, y1 = min(width, int(cols[-1]) + 1 + margin), min(height, int(rows[-1]) + 1 + margin)
    return x0, y0, x1 - x0, y1 - y0
