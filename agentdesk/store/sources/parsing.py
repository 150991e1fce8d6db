"""Reading the values foreign runtimes store: times, JSON columns, text, composite ids. Once, for all.

Foreign data is shown, never trusted to be well formed: every reader here is
lenient (an unreadable time is None or `UNREADABLE_TIME`, shown as "unreadable time";
unparsable JSON is kept as its text) so one odd row never hides the rest of a view.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

from agentdesk.store import readmodel as rm
from agentdesk.store.text.jsonsafe import loads_bounded
from agentdesk.store.text.times import UNREADABLE_TIME

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAIVE_EPOCH = datetime(1970, 1, 1)
MS_THRESHOLD = 10**11
"""A number above this is Unix milliseconds (10^11 s is the year 5138), below it Unix seconds."""


# -- times ---------------------------------------------------------------------------------
def parse_time(value: object) -> datetime | None:
    """ISO-8601 TEXT (with `Z`, an offset, or naive = UTC) or a Unix time (s or ms), as aware UTC.

    None for a missing or unreadable value.
    """
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, str) and value.endswith("Z"):  # the runtimes' own form (`toISOString()`): fast path
        try:
            return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)
        except ValueError:
            pass
    if isinstance(value, int | float):
        return from_unix(value)
    raw = str(value).strip()
    if raw.isdigit():
        return from_unix(int(raw))
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def from_unix(value: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(value / 1000 if abs(value) > MS_THRESHOLD else value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def from_ms(ms: Any) -> datetime | None:
    """Unix milliseconds (a runtime that stores every time so) → aware UTC; anything else → None."""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def ms_time(ms: Any) -> datetime:
    """Like `from_ms` where the read model needs a value: an unknown time is `UNREADABLE_TIME`."""
    return from_ms(ms) or UNREADABLE_TIME


def time_of(value: object) -> datetime:
    """For NOT NULL columns: an unreadable value is `UNREADABLE_TIME` (it orders as the epoch and every
    view shows it as "unreadable time") rather than breaking the view."""
    return parse_time(value) or UNREADABLE_TIME


def epoch(value: object) -> float:
    """Unix seconds of a stored time (0.0 when unreadable); hot in a 100,000-span timeline."""
    if isinstance(value, str) and value.endswith("Z"):
        try:
            return (datetime.fromisoformat(value[:-1]) - NAIVE_EPOCH).total_seconds()
        except ValueError:
            pass
    return time_of(value).timestamp()


def time_of_epoch(seconds: float) -> datetime:
    """The datetime of a Unix time `epoch()` returned: 0.0 is how it says "unreadable" (no runtime stores
    the first second of 1970), so it becomes `UNREADABLE_TIME` again."""
    return UNREADABLE_TIME if seconds == 0.0 else time_of(seconds)


def iso(moment: datetime) -> str:
    """`new Date().toISOString()`'s form (milliseconds, `Z`), so stored times compare as text."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_now() -> str:
    return iso(datetime.now(UTC))


# -- JSON ----------------------------------------------------------------------------------
def json_value(raw: Any) -> Any:
    """A JSON column's value; None when absent or empty; the text itself when it is not JSON."""
    if raw is None or raw == "" or raw == b"":
        return None
    if not isinstance(raw, str | bytes):
        return raw
    try:
        return loads_bounded(raw)  # deep nesting becomes a marker, huge text stays text: no view recurses
    except ValueError:
        return raw


def json_object(raw: Any) -> dict[str, Any]:
    """A JSON object column, or {} when it is absent, unparsable or not an object."""
    value = json_value(raw)
    return value if isinstance(value, dict) else {}


def as_text(value: Any) -> str | None:
    """A JSON value as the operator reads it: strings as they are, anything else as indented JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def json_text(raw: Any) -> str | None:
    """A JSON column for reading: a JSON string as its text, other JSON re-indented, non-JSON as stored."""
    value = json_value(raw)
    return as_text(value) if not isinstance(value, bytes) else value.decode(errors="replace")


def first_line(value: Any, limit: int = 120) -> str:
    """The first non-blank line of a text, cut to `limit` characters (a title from a message)."""
    text = str(value or "").strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- ids -----------------------------------------------------------------------------------
def joined_id(*parts: str) -> str:
    """A tree id built from a composite natural key (`project/agent`, `session/run`)."""
    return "/".join(parts)


def strip_suffix(node_id: str, suffix: str) -> str | None:
    """The part before `suffix` of a synthetic id (`<project>/task` → `<project>`), None when it has none."""
    return node_id[: -len(suffix)] if node_id.endswith(suffix) else None


# -- vocabularies ----------------------------------------------------------------------------
def approval_status(value: str) -> rm.ApprovalStatus:
    """A runtime's approval status as the read model's enum; a status outside it is shown as stored.

    vgxness, for one, has `cancelled`, which no agentdesk command writes but the queue must show.
    """
    try:
        return rm.ApprovalStatus(value)
    except ValueError:
        return cast(rm.ApprovalStatus, value)
