""""Since when" for the shift view and `agentdesk notes --since`: `8h`, `30m`, `2d`, `1w`, `45s`, or a UTC time.

One parser for the window and the CLI, so `--since 8h` and the view's default mean the same thing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from agentdesk.store.errors import InvalidInput

DEFAULT_SINCE = "8h"
"""A shift: what the next person reads by default."""
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
LONGEST_S = 3650 * 86400


def seconds_of(text: str) -> float:
    """`8h` as 28800.0; `InvalidInput` with an example for anything else."""
    found = SPAN.match(text)
    if found is None:
        raise InvalidInput(f"{text!r} is not a duration such as 8h, 30m, 2d or 1w.")
    seconds = float(found.group(1)) * UNITS[found.group(2).lower()]
    if seconds > LONGEST_S:
        raise InvalidInput(f"{text!r} reaches back more than ten years; give a shorter duration or a time.")
    return seconds


def since_time(text: str, now: float) -> float:
    """The moment `text` names: a duration back from `now`, or an ISO 8601 time (UTC unless it says)."""
    if SPAN.match(text):
        return now - seconds_of(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"{text!r} is neither a duration (8h, 30m, 2d) nor a time (2026-12-06T08:00).") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
