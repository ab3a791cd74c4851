"""The time syntax users type for --every/--start/--end, and the timecodes reports print."""

from __future__ import annotations

import pytest

from spotdiff_cli.errors import UsageError
from spotdiff_cli.frames.timecode import TimeSpec, format_timecode, parse_every, parse_time


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30.0),
        ("1.5m", 90.0),
        ("2h", 7200.0),
        ("250ms", 0.25),
        ("30", 30.0),
        ("12.5", 12.5),
        (" 45 S ", 45.0),
        ("10 sec", 10.0),
        ("3 minutes", 180.0),
        ("00:00:30.5", 30.5),
        ("01:02:03.250", 3723.25),
        ("02:30", 150.0),
        ("90:00", 5400.0),  # the leading field may exceed 59, as in ffmpeg
        (".5s", 0.5),
    ],
)
def test_times_in_every_form(text: str, seconds: float) -> None:
    spec = parse_time(text)
    assert spec.unit == "seconds"
    assert spec.seconds == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text, frames", [("25f", 25), ("1 frame", 1), ("300 frames", 300), ("0f", 0)]
)
def test_frame_counts(text: str, frames: int) -> None:
    spec = parse_time(text)
    assert spec == TimeSpec(frames=frames)
    assert spec.to_seconds(25.0) == pytest.approx(frames / 25.0)


def test_numbers_pass_through_for_the_python_api() -> None:
    assert parse_time(12.5).seconds == 12.5
    assert parse_time(3).seconds == 3.0
    spec = TimeSpec(frames=4)
    assert parse_time(spec) is spec


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "30x",
        "1.5f",
        "-5s",
        "1:2:3:4",
        "00:75:00",
        "00:00:61",
        "s",
        "1..5s",
        "nan",
        "--every",
        "1e3s",
    ],
)
def test_bad_syntax_is_a_usage_error_with_an_example(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_time(bad, what="--start")
    message = str(info.value)
    assert "--start" in message
    assert any(example in message for example in ("30s", "25f", "01:15:00"))


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, None])
def test_bad_numbers_are_usage_errors(bad: object) -> None:
    with pytest.raises(UsageError):
        parse_time(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["0s", "0f", "00:00:00", 0])
def test_every_must_be_positive(bad: object) -> None:
    with pytest.raises(UsageError, match="greater than zero"):
        parse_every(bad)  # type: ignore[arg-type]


def test_frame_count_without_frame_rate_says_what_to_do() -> None:
    with pytest.raises(UsageError, match="give a time instead"):
        TimeSpec(frames=10).to_seconds(None)


@pytest.mark.parametrize(
    "seconds, kwargs, text",
    [
        (0, {}, "00:00:00"),
        (30, {}, "00:00:30"),
        (30.5, {}, "00:00:30.500"),
        (3723.25, {}, "01:02:03.250"),
        (3723.25, {"millis": False}, "01:02:03"),
        (5, {"millis": True}, "00:00:05.000"),
        (59.9996, {}, "00:01:00"),  # rounds up to a whole second: never "00:00:60"
        (59.9996, {"millis": True}, "00:01:00.000"),
        (30 * 3600, {}, "30:00:00"),  # hours do not wrap at a day
        (-1.5, {}, "-00:00:01.500"),
    ],
)
def test_format_timecode(seconds: float, kwargs: dict, text: str) -> None:
    assert format_timecode(seconds, **kwargs) == text


def test_formatted_timecodes_parse_back() -> None:
    for seconds in (0.0, 0.04, 17.2, 3599.999, 86400.5):
        assert parse_time(format_timecode(seconds)).seconds == pytest.approx(seconds, abs=5e-4)
