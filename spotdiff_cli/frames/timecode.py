"""The time syntax of ``spotdiff video`` (``--every``, ``--start``, ``--end``) and timecode output.

Accepted forms, all case-insensitive, surrounding spaces ignored:

- seconds with a unit: ``30s``, ``1.5m``, ``2h``, ``250ms`` (``sec``/``min``/``hr`` spellings too);
- a bare number: ``30`` or ``12.5`` (seconds, what most tools assume);
- clock form: ``SS.mmm`` is a bare number; ``MM:SS[.mmm]`` and ``HH:MM:SS[.mmm]``, where the
  leading field may exceed 59 (``90:00`` is an hour and a half, as ffmpeg reads it) but the
  others may not;
- a frame count: ``25f`` (also ``25 frames``), resolved by the frame source (every 25th frame;
  for ``start``/``end``, the 25th frame's time).

Anything else raises :class:`~spotdiff_cli.errors.UsageError` quoting the bad value and an example
of each valid form, so the user can fix the flag without opening the docs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import UsageError

__all__ = ["TimeSpec", "check_seconds", "parse_time", "parse_every", "format_timecode"]

# The longest wait a seconds option (a timeout, a poll interval, an idle time) may ask for: a
# year. Longer is never meant, and the clocks these waits go to overflow (``inf`` became an
# OverflowError in ffmpeg's microsecond timeout and in threading's wait).
MAX_WAIT_SECONDS = 366 * 86400

_EXAMPLES = "e.g. 30s, 1.5m, 2h, 250ms, 00:01:30.5 (HH:MM:SS.mmm) or 25f (frames)"

# Seconds per unit; every spelling a user is likely to type.
_UNITS: dict[str, float] = {
    "ms": 0.001,
    "msec": 0.001,
    "millis": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}
_FRAME_UNITS = {"f", "fr", "frame", "frames"}

_NUMBER_UNIT = re.compile(r"^(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)$")
_CLOCK = re.compile(r"^(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class TimeSpec:
    """A parsed position or interval: either ``seconds`` or a whole number of ``frames``.

    Exactly one of the two is set; which one says how a frame source must resolve it (a frame
    count depends on the source's frame rate, so it cannot become seconds here).
    """

    seconds: float | None = None
    frames: int | None = None

    @property
    def unit(self) -> Literal["seconds", "frames"]:
        return "frames" if self.frames is not None else "seconds"

    def to_seconds(self, fps: float | None) -> float:
        """Seconds for this spec; a frame count needs the source's ``fps`` (exact only for CFR)."""
        if self.seconds is not None:
            return self.seconds
        if not fps or fps <= 0:
            raise UsageError(
                f"{self.frames}f needs a known frame rate and this source has none; give a time instead ({_EXAMPLES})"
            )
        return self.frames / fps  # type: ignore[operator]

    def __str__(self) -> str:
        return (
            f"{self.frames}f" if self.frames is not None else format_timecode(self.seconds or 0.0)
        )


def setting_seconds(value: str, what: str, fps: float | None) -> float:
    """A duration setting (time syntax) in seconds, for a source of this frame rate; errors
    name the option (``what``), e.g. "--min-length: 5f needs a known frame rate ..."."""
    spec = parse_time(value, what=what)
    try:
        return spec.to_seconds(fps)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from exc


def parse_time(value: str | float | int | TimeSpec, *, what: str = "time") -> TimeSpec:
    """Parse ``value`` (see the module docstring for the forms) into a :class:`TimeSpec`.

    Numbers pass through as seconds so the Python API accepts ``start=12.5``. ``what`` names the
    option in error messages (``--every``, ``--start``...). Negative values are rejected: every
    position is counted from the start of the source.
    """
    if isinstance(value, TimeSpec):
        return value
    if isinstance(value, bool):  # bool is an int subclass; True seconds is surely a mistake
        raise UsageError(f"{what}: {value!r} is not a time; {_EXAMPLES}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(
                f"{what}: {value!r} must be a finite number of seconds >= 0; {_EXAMPLES}"
            )
        return TimeSpec(seconds=float(value))
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected a time string, got {type(value).__name__}; {_EXAMPLES}")

    text = value.strip().lower()
    if text.startswith("-"):
        raise UsageError(
            f"{what}: {value!r} is negative; times count from the start of the source ({_EXAMPLES})"
        )

    match = _NUMBER_UNIT.match(text)
    if match:
        number, unit = match["num"], match["unit"]
        if unit in _FRAME_UNITS:
            if "." in number:
                raise UsageError(f"{what}: {value!r} is not a whole number of frames; e.g. 25f")
            return TimeSpec(frames=int(number))
        if unit == "" or unit in _UNITS:
            return TimeSpec(seconds=float(number) * _UNITS.get(unit, 1.0))
        raise UsageError(
            f"{what}: unknown unit {unit!r} in {value!r}; use ms, s, m, h or f ({_EXAMPLES})"
        )

    match = _CLOCK.match(text)
    if match:
        hours = int(match["h"]) if match["h"] is not None else None
        minutes, seconds = int(match["m"]), float(match["s"])
        # Only the leading field may overflow: "01:75:00" is almost certainly a typo.
        if seconds >= 60 or (hours is not None and minutes >= 60):
            raise UsageError(
                f"{what}: {value!r} has minutes or seconds >= 60; write HH:MM:SS.mmm, e.g. 01:15:00"
            )
        return TimeSpec(seconds=(hours or 0) * 3600.0 + minutes * 60.0 + seconds)

    raise UsageError(f"{what}: cannot read {value!r} as a time; {_EXAMPLES}")


def parse_every(value: str | float | int | TimeSpec, *, what: str = "--every") -> TimeSpec:
    """Like :func:`parse_time` but for an interval, which must be strictly positive."""
    spec = parse_time(value, what=what)
    if (spec.frames is not None and spec.frames < 1) or (
        spec.seconds is not None and spec.seconds <= 0
    ):
        raise UsageError(f"{what}: the interval must be greater than zero, e.g. 30s or 25f")
    return spec


def check_seconds(value: float, flag: str, hint: str = "") -> float:
    """``value`` as seconds for a wait-like option (``--stream-timeout``, ``--watch-poll``...):
    above 0, finite and at most :data:`MAX_WAIT_SECONDS`, else a UsageError naming ``flag``.
    ``hint``: what to do instead, added to the message (e.g. "leave it out to wait for ever")."""
    if not (isinstance(value, (int, float)) and 0 < value <= MAX_WAIT_SECONDS):
        shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
        raise UsageError(
            f"{flag} must be a number of seconds above 0 and at most {MAX_WAIT_SECONDS} "
            f"(a year), not {shown}" + (f"; {hint}" if hint else "")
        )
    return float(value)


def format_timecode(seconds: float, *, millis: bool | None = None) -> str:
    """``HH:MM:SS`` or ``HH:MM:SS.mmm`` for reports.

    ``millis=None`` (default) shows milliseconds only when the time has a fractional part worth a
    millisecond, so whole-second samples read cleanly while VFR times stay exact. Hours are not
    wrapped at 24 (a 30-hour recording reads ``30:00:00``). Rounding is to the nearest
    millisecond *before* splitting fields, so 59.9996 s gives ``00:01:00.000``, never ``00:00:60``.
    """
    if not math.isfinite(seconds):
        raise ValueError(f"cannot format {seconds!r} as a timecode")
    sign = "-" if seconds < 0 else ""
    total_ms = int(round(abs(seconds) * 1000))
    if millis is None:
        millis = total_ms % 1000 != 0
    if not millis:
        total_ms = int(round(abs(seconds))) * 1000
    hours, rest = divmod(total_ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, ms = divmod(rest, 1000)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{ms:03d}" if millis else text
