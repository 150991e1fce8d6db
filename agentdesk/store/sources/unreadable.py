"""A foreign row that cannot be mapped costs that row, not the view.

Each runtime maps rows one by one through `each`: a row whose mapping fails (malformed
JSON the mapping needs, an impossible time, a value of the wrong type) becomes a
placeholder the runtime builds from the raw row, marked "unreadable: why", with the
stored values kept for the operator to read. `Unreadable` is what a mapping raises on
purpose; any other exception from one row is treated the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from agentdesk.store import readmodel as rm
from agentdesk.store.sources.parsing import from_ms, parse_time
from agentdesk.store.sources.sql import Row
from agentdesk.store.text.times import UNREADABLE_TIME

T = TypeVar("T")
UNREADABLE = "unreadable"
"""The status an unreadable approval shows (never pending: nobody can decide what could not be read)."""
RAW_LIMIT = 4096
"""How much of one stored value the placeholder keeps (the rest is summarised by its size)."""


class Unreadable(ValueError):
    """A row's value cannot be mapped; the message says which and why, in the operator's words."""


def why(exc: BaseException) -> str:
    """The reason shown after "unreadable:" (an `Unreadable`'s own words, else the error's kind and text)."""
    if isinstance(exc, Unreadable):
        return str(exc)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def each(found: Iterable[Row], mapping: Callable[[Row], T], placeholder: Callable[[Row, str], T]) -> list[T]:
    """`mapping` over every row; a row it cannot map becomes `placeholder(row, why)`."""
    out: list[T] = []
    for row in found:
        try:
            out.append(checked(mapping(row)))
        except (RecursionError, MemoryError) as exc:  # a value too deep or too big to map
            out.append(placeholder(row, why(exc)))
        except Exception as exc:
            out.append(placeholder(row, why(exc)))
    return out


TEXT_FIELDS = ("id", "project_id", "task_id", "session_id", "agent_id", "run_id", "tool_name", "arguments",
               "payload_hash", "status")


def checked(value: T) -> T:
    """An approval whose text fields hold something else (a blob, a number) is unreadable: every view
    downstream treats them as text."""
    if isinstance(value, rm.Approval):
        for name in TEXT_FIELDS:
            found = getattr(value, name)
            if not isinstance(found, str):
                raise Unreadable(f"its {name} is {type(found).__name__} where text is expected")
    return value


def required_time(value: object, column: str) -> datetime:
    """A NOT NULL time the view orders by: an impossible value makes the row unreadable, not the epoch."""
    moment = parse_time(value)
    if moment is None:
        raise Unreadable(f"{column} {shown_value(value, 60)} is not a time agentdesk can read")
    return moment


def required_ms(value: object, column: str) -> datetime:
    """Like `required_time` for a runtime that stores Unix milliseconds."""
    moment = from_ms(value)
    if moment is None:
        raise Unreadable(f"{column} {shown_value(value, 60)} is not a time agentdesk can read")
    return moment


def shown_value(value: object, limit: int = RAW_LIMIT) -> str:
    """One stored value as text for display: bytes escaped, long values cut with their size."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="backslashreplace")
    elif isinstance(value, str):
        text = value
    else:
        text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text):,} characters in all)"
    return text


def raw_row(row: Row) -> str:
    """The stored row as JSON text (every value as shown text), what the operator reads instead."""
    return json.dumps({k: (v if isinstance(v, int | float) or v is None else shown_value(v)) for k, v in row.items()},
                      ensure_ascii=False, indent=2)


def text_or(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def approval(row: Row, reason: str, *, id_column: str, created_column: str, **known: Any) -> rm.Approval:
    """An approval that could not be read: its id, what could be read, the raw row as its arguments."""
    created = parse_time(row.get(created_column)) or UNREADABLE_TIME
    fields: dict[str, Any] = {
        "id": shown_value(row.get(id_column), 200), "tool_call_id": None, "project_id": "", "task_id": "",
        "session_id": "", "agent_id": "", "run_id": "", "span_id": None, "tool_name": f"unreadable: {reason}",
        "arguments": raw_row(row), "payload_hash": "", "status": rm.ApprovalStatus.PENDING,
        "created_at": created, "expires_at": None, "decided_at": None, "decided_by": None,
        "reason": f"unreadable: {reason}", "edited_arguments": None, "edited_hash": None,
        "agent_name": "", "project_name": ""}
    fields.update({k: v for k, v in known.items() if isinstance(v, str)})
    fields["status"] = UNREADABLE
    return rm.Approval(**fields)
