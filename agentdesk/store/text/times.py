"""A time that could not be read, carried as a time and shown as words.

Foreign runtimes' rows can hold an impossible timestamp (the year 31 million, a word
where a time belongs). The read model needs a datetime there (views sort and subtract
times), so the readers put `UNREADABLE_TIME` in its place: it orders and computes as
the Unix epoch, but every view shows it as "unreadable time" (`shown_time`), never as a
date in 1970 that looks like data.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

UNREADABLE_TIME_TEXT = "unreadable time"


class UnreadableTime(datetime):
    """The epoch, marked: a stored time that could not be read."""

    def __repr__(self) -> str:
        return "UNREADABLE_TIME"


UNREADABLE_TIME: datetime = UnreadableTime(1970, 1, 1, tzinfo=UTC)


def is_unreadable(moment: object) -> bool:
    return isinstance(moment, UnreadableTime)


def shown_time(moment: datetime | None, fmt: str, *, local: bool = True, empty: str = "") -> str:
    """`moment` formatted with `fmt` (in local time unless `local=False`), "unreadable time" for the marker.

    `time.strftime` rather than `datetime.strftime`: the latter imports `time` on every call
    through shiboken's import hook (several µs a row when paging thousands of rows)."""
    if moment is None:
        return empty
    if isinstance(moment, UnreadableTime):
        return UNREADABLE_TIME_TEXT
    shown = moment.astimezone() if local else moment.astimezone(UTC)
    text = time.strftime(fmt.replace("%f", f"{shown.microsecond:06d}"), shown.timetuple())
    return text


EARLIEST_S = -62_135_596_800.0 + 86_400
"""2 January of the year 1, in Unix seconds: a day inside what `datetime` holds, whatever the local zone."""
LATEST_S = 253_402_300_799.0 - 86_400
"""30 December 9999, likewise."""
UNREADABLE_SECONDS = 0.0
"""An unreadable time where seconds are needed (span columns): the epoch, as the foreign readers give it."""


def readable_seconds(value: object) -> float | None:
    """A stored time in Unix seconds when it is one a datetime can hold, else None: ±1e300, 9.2e18, NaN,
    a word or a blob where a number belongs."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if EARLIEST_S <= seconds <= LATEST_S else None  # NaN fails both comparisons


def moment(value: object) -> datetime:
    """The datetime of a stored Unix time, `UNREADABLE_TIME` when it cannot be one."""
    seconds = readable_seconds(value)
    return UNREADABLE_TIME if seconds is None else datetime.fromtimestamp(seconds, UTC)


def seconds_column(values: object, *, open_ends: bool = False) -> list[float | None]:
    """Stored times as seconds, each unreadable one `UNREADABLE_SECONDS`; with `open_ends` a NULL stays None
    (an open span)."""
    out: list[float | None] = []
    for value in values:  # type: ignore[attr-defined]
        if value is None and open_ends:
            out.append(None)
            continue
        seconds = readable_seconds(value)
        out.append(UNREADABLE_SECONDS if seconds is None else seconds)
    return out


NS_PER_S = 1_000_000_000
UNREADABLE_NS = -1
"""A span time that could not be read, in integer nanoseconds (spans.started_at / ended_at, migration
0023): one nanosecond before the epoch. No OTLP time is negative (the importer takes 1970-2200) and a
runtime's clock never is, so every negative time reads as unreadable; -1 keeps `x - t0` inside int64
for every readable x and t0, where int64's minimum made the timeline's packed read overflow."""
READABLE_NS_BELOW = 9 * 10**18
"""Span times at or past this (the year 2255) are unreadable: beyond what the timeline packs."""


def readable_ns(value: object) -> float | None:
    """A stored span time (integer nanoseconds since the epoch) in seconds when it is a readable one, else
    None: negative (`UNREADABLE_NS`), past `READABLE_NS_BELOW`, NaN, a word or a blob."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value / NS_PER_S if 0 <= value < READABLE_NS_BELOW else None  # NaN fails the comparison


def moment_ns(value: object) -> datetime:
    """The datetime of a stored span time (nanoseconds), `UNREADABLE_TIME` when it cannot be one."""
    seconds = readable_ns(value)
    return UNREADABLE_TIME if seconds is None else datetime.fromtimestamp(seconds, UTC)


def ns_column(values: object, *, open_ends: bool = False) -> list[float | None]:
    """Stored span times (nanoseconds) as seconds, each unreadable one `UNREADABLE_SECONDS`; with
    `open_ends` a NULL stays None (an open span)."""
    out: list[float | None] = []
    for value in values:  # type: ignore[attr-defined]
        if value is None and open_ends:
            out.append(None)
            continue
        seconds = readable_ns(value)
        out.append(UNREADABLE_SECONDS if seconds is None else seconds)
    return out


def ns_of_seconds(seconds: float) -> int:
    """The nanosecond nearest the time a float of Unix seconds holds (half up), as migration 0023 converts.

    Not `round(seconds * 1e9)`: near 1.7e18 a double's step is 256, so that product is off by up to 128 ns;
    the whole seconds and the fraction are exact doubles, and the fraction's product errs by < 1e-6 ns."""
    whole = math.floor(seconds)
    return whole * NS_PER_S + math.floor((seconds - whole) * 1e9 + 0.5)
