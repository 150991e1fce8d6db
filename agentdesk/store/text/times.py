"""A time that could not be read, carried as a time and shown as words.

Foreign runtimes' rows can hold an impossible timestamp (the year 31 million, a word
where a time belongs). The read model needs a datetime there (views sort and subtract
times), so the readers put `UNREADABLE_TIME` in its place: it orders and computes as
the Unix epoch, but every view shows it as "unreadable time" (`shown_time`), never as a
date in 1970 that looks like data.
"""

from __future__ import annotations

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
