"""Decoding only the keyframes, where they are every frame a sampling keeps.

A camera's encoder puts a keyframe (an intra-coded picture) every GOP, often once a second,
and ``spotdiff video --every 1s`` on such footage keeps exactly those frames. Decoding the
others only to throw them away is most of the decoder's work: on the room clip of
``benchmarks/video.py`` (768x432 H.264, an I frame every 10 of 1394, 820 B frames)
``ffmpeg -skip_frame nokey`` takes 0.34 s of CPU where decoding everything took 0.96 s, and
the 140 frames it gives are the same to the bit as the 140 that ``select`` kept of all of them
(an intra picture is reconstructed from its own bits alone).

Whether a sampling may decode keyframes only is read off the container before decoding: one
ffmpeg pass copies the video stream's packets to ``framecrc`` (no decoding; ~30 ms for that
clip), which gives each packet's presentation time and key flag; a long file's first minute is
scanned first, and the whole only where that minute admits a plan; a run that seeks has the
packets from its seek point scanned. :func:`frame_plan` and
:func:`time_plan` say which frames the ordinary pass would keep (the same rules as its
``select`` expressions) and, when every one of them is a keyframe, how to pick them out of a
keyframes-only pass. The reader checks the frames it gets against the plan and falls back to
decoding everything when they differ (a decoder that ignores ``skip_frame``, a container whose
key flags are wrong), so a plan can cost time but never change a result.
"""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass

import numpy as np

from .base import TIME_EPS

# A file longer than LONG_SECONDS is first scanned PREFIX_SECONDS far: a sampling its first
# minute rules out (most) costs that short scan, not a read of the whole file. A shorter one
# is scanned whole at once (ten minutes of packets: ~0.1 s).
LONG_SECONDS = 600.0
PREFIX_SECONDS = 60.0

# Below this share of non-key frames a keyframes-only pass saves too little to pay for the
# scan (an all-intra MJPEG file has none).
MIN_SKIPPED_SHARE = 0.3

_TIME_BASE = re.compile(r"^#tb 0: (\d+)/(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class PacketIndex:
    """A video stream's frames in display order.

    times: (N,) float64 presentation times in seconds, as ffmpeg's ``t`` reads them with
        ``-copyts`` (the container's start time included), ascending.
    keys: (N,) bool, True where the frame is a keyframe.
    """

    times: np.ndarray
    keys: np.ndarray


@dataclass(frozen=True)
class KeyframePlan:
    """What a keyframes-only pass must deliver to equal the ordinary pass.

    times: the presentation times (s, absolute) of the frames the ordinary pass keeps, in order.
    indices: their display indices among the scanned packets (from the start of the stream:
        the ordinary pass's decoded-frame count ``n``).
    select: the ``select`` expression that picks them out of the keyframes (None: all of them).
    """

    times: tuple[float, ...]
    indices: tuple[int, ...]
    select: str | None


def scan_packets(
    exe: str,
    path: str,
    seconds: float | None = None,
    *,
    start: float | None = None,
    timeout: float = 600.0,
) -> PacketIndex | None:
    """The first video stream's packets of ``path``, without decoding them; None where the
    stream does not lend itself to a plan (no timestamps, repeated ones, packets flagged
    other than key / not key - discarded or corrupt ones - or the scan failing).
    ``start``: from the keyframe at or before this many seconds in (as a decoding run's
    ``-ss`` seeks); ``seconds``: only this many seconds of the stream from there. Times stay
    absolute (``-copyts``), as the decoding runs read them."""
    where = ["-ss", f"{start:.6f}"] if start else []
    if seconds is not None:
        where += ["-t", f"{seconds:.6f}"]
    try:
        proc = subprocess.run(
            [exe, "-hide_banner", "-nostdin", "-v", "error", *where, "-copyts", "-i", path]
            + ["-map", "0:v:0", "-c", "copy", "-f", "framecrc", "-"],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.decode("ascii", "replace")
    base = _TIME_BASE.search(text)
    if proc.returncode != 0 or base is None:
        return None
    pts: list[int] = []
    keys: list[bool] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 6 or fields[0] != "0":
            continue
        try:
            pts.append(int(fields[2]))
        except ValueError:  # NOPTS
            return None
        flags = next((f for f in fields[6:] if f.startswith("F=")), None)
        # framecrc writes the flags only when they are not "key" alone.
        if flags is None:
            keys.append(True)
        elif int(flags[2:], 16) == 0:
            keys.append(False)
        else:
            return None
    if not pts:
        return None
    order = np.argsort(np.asarray(pts, np.int64), kind="stable")
    ordered = np.asarray(pts, np.int64)[order]
    if np.any(np.diff(ordered) <= 0):
        return None
    # t as ffmpeg computes it: pts * av_q2d(time_base), in doubles.
    seconds = ordered.astype(np.float64) * (int(base[1]) / int(base[2]))
    return PacketIndex(times=seconds, keys=np.asarray(keys, bool)[order])


def _worth_it(index: PacketIndex) -> bool:
    # The first frame in display order must be a keyframe: leading frames of an open GOP that
    # the decoder drops would shift the ordinary pass's frame count.
    return bool(index.keys[0]) and 1.0 - index.keys.mean() >= MIN_SKIPPED_SHARE


def _plan(index: PacketIndex, kept: np.ndarray, select: str | None) -> KeyframePlan | None:
    """kept: display indices the ordinary pass keeps. select: the ordinary pass's time-based
    ``select``, which keeps the same frames out of the keyframes alone; None: a frame-count
    sampling, whose keyframes-only pass picks them by their count among keyframes."""
    if kept.size == 0 or not index.keys[kept].all():
        return None
    if select is None:
        ordinal = np.cumsum(index.keys) - 1  # each keyframe's count among keyframes
        picked = ordinal[kept]
        step = int(picked[1] - picked[0]) if picked.size > 1 else 1
        if not np.array_equal(picked, np.arange(picked.size) * step):
            return None
        if step > 1:
            select = f"not(mod(n,{step}))"
        elif int(index.keys.sum()) != picked.size:  # keyframes after the last kept frame
            select = f"lt(n,{picked.size})"
    return KeyframePlan(
        times=tuple(float(t) for t in index.times[kept]),
        indices=tuple(int(i) for i in kept),
        select=select,
    )


def _from(index: PacketIndex, time: float | None) -> tuple[PacketIndex, int]:
    """The frames a run that seeks to ``time`` (absolute s; None: no seek) decodes: from the
    first at or after it (ffmpeg's accurate seek drops those before), and where they start."""
    if time is None:
        return index, 0
    first = int(np.searchsorted(index.times, time - 1e-6))
    return PacketIndex(times=index.times[first:], keys=index.keys[first:]), first


def _shifted(plan: KeyframePlan | None, offset: int) -> KeyframePlan | None:
    if plan is None or offset == 0:
        return plan
    return KeyframePlan(plan.times, tuple(i + offset for i in plan.indices), plan.select)


def frame_plan(
    index: PacketIndex, every: int, from_time: float | None = None
) -> KeyframePlan | None:
    """Plan for every ``every``-th frame from the first (``select=not(mod(n,every))``), or
    from the first at or after ``from_time`` (absolute s) for a run that seeks there."""
    index, offset = _from(index, from_time)
    if every < 2 or index.times.size == 0 or not _worth_it(index):
        return None
    return _shifted(_plan(index, np.arange(0, index.times.size, every), None), offset)


def _printed(seconds: float) -> str:
    """A time as the ``select`` expressions print it (six decimals)."""
    return f"{seconds:.6f}"


def time_select(first: float, every: float) -> str:
    """ffmpeg's ``select`` expression keeping the first frame at or after each of
    ``first + k * every`` seconds (absolute, as ``t`` reads them with ``-copyts``). It keeps the
    next target in variable 0, initialised to the first; :func:`time_plan` follows it."""
    f, e = _printed(first), _printed(every)
    return (
        f"if(eq(n,0),st(0,{f}));"
        f"gte(t,ld(0)-{TIME_EPS})*st(0,{f}+{e}*(floor((t+{TIME_EPS}-{f})/{e})+1))"
    )


def time_plan(
    index: PacketIndex,
    first: float,
    every: float,
    select: str,
    from_time: float | None = None,
) -> KeyframePlan | None:
    """Plan for the first frame at or after each of ``first + k * every`` seconds (absolute),
    as the ordinary pass's time-based ``select`` (:func:`time_select`) keeps them: ``first``
    and ``every`` as that expression prints them (six decimals), so the comparisons are the
    same doubles. A frame it keeps is the first at or after a target; when all of those are
    keyframes, the first *keyframe* at or after each target is the same frame, so ``select``
    itself picks them out of a keyframes-only pass. ``from_time``: as :func:`frame_plan`'s."""
    index, offset = _from(index, from_time)
    if every <= 0 or index.times.size == 0 or not _worth_it(index):
        return None
    first, every = float(_printed(first)), float(_printed(every))  # as time_select prints them
    kept = []
    target = first
    for i, t in enumerate(index.times.tolist()):
        if t >= target - TIME_EPS:
            kept.append(i)
        # The select expression stores the next target at every frame, kept or not.
        target = first + every * (math.floor((t + TIME_EPS - first) / every) + 1)
    return _shifted(_plan(index, np.asarray(kept, np.int64), select), offset)
