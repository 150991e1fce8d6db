"""How approvals read as text: names, arguments, ages, deadlines and times.

Qt-free so the table models, the details pane and the dialogs say the same thing
the same way, and so the wording can be tested without a display.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache

from agentdesk.model.text import one_line
from agentdesk.store import readmodel as rm
from agentdesk.store.text.jsonsafe import loads
from agentdesk.store.text.render import Budget, render
from agentdesk.store.text.times import is_unreadable, shown_time

Clock = Callable[[], datetime]
TOOLTIP_CHARS = 3000
"""Tooltips show at most this much of an argument or reason: the details pane has the rest."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def agent_label(approval: rm.Approval) -> str:
    """Sources without agent names still identify the agent."""
    return approval.agent_name or approval.agent_id


def project_label(approval: rm.Approval) -> str:
    return approval.project_name or approval.project_id


def pretty_arguments(text: str, lines: int = 60) -> str:
    """Arguments for a tooltip: the pane's rendering (hidden characters marked, never recursing),
    cut to a few dozen lines."""
    return "\n".join(render(text, Budget(total_lines=lines, width=100)))


def tooltip_lines(text: str) -> list[str]:
    """Long agent text cut to what a tooltip can show, one entry per line."""
    return text[:TOOLTIP_CHARS].splitlines()


PREVIEW_PARSE_CHARS = 100_000
"""Arguments up to this size are previewed as compact JSON; larger ones as their text."""
PREVIEW_SCAN_CHARS = 1_000_000
"""Beyond this, only the head and the tail are looked at: a 5 MB argument costs its row nothing."""


@lru_cache(maxsize=2048)
def arguments_preview(text: str, limit: int = 160) -> str:
    """One line for the table cell; compact JSON when it parses and is small enough to reprint."""
    if len(text) > PREVIEW_SCAN_CHARS:
        text = f"{text[:limit * 20]} … {text[-limit * 4:]}"
    elif len(text) <= PREVIEW_PARSE_CHARS:
        with contextlib.suppress(ValueError, RecursionError):
            text = json.dumps(loads(text), ensure_ascii=False, separators=(", ", ": "))
    return one_line(text, limit)


def format_age(seconds: float) -> str:
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{minutes // (24 * 60)} d"


def format_left(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds <= 0:
        return "expired"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}:{whole % 60:02d}"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def local_time(moment: datetime | None) -> str:
    return shown_time(moment, "%Y-%m-%d %H:%M:%S")


def short_local_time(moment: datetime | None, now: datetime) -> str:
    """The time alone for today, the date and minute otherwise: fits a narrow column."""
    if moment is None or is_unreadable(moment):
        return shown_time(moment, "")
    local = moment.astimezone()
    same_day = local.date() == now.astimezone().date()
    return local.strftime("%H:%M:%S" if same_day else "%b %d %H:%M")
