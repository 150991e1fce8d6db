"""What each tree row shows, as plain values computed once per store read.

Qt-free on purpose: `row_fields` runs on the store runner's threads (see
`reads`), so the display strings are ready before a row reaches the GUI
thread and `data()` only reads attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentdesk.model.text import escaped_tooltip, one_line, plural
from agentdesk.store import readmodel as rm
from agentdesk.store.text.times import UNREADABLE_TIME_TEXT, is_unreadable

Key = tuple[str, str]
LEVELS = ("project", "task", "session", "agent", "run")
NAME, STATUS, PENDING, INFO = range(4)
HEADERS = ("Name", "Status", "Pending", "Info")
ENTITIES: dict[type, str] = {rm.Project: "project", rm.Task: "task", rm.Session: "session", rm.Agent: "agent",
                             rm.Run: "run"}


def short_time(moment: datetime) -> str:
    """`time.strftime`, not `datetime.strftime`: the latter imports `time` on every call, through
    shiboken's import hook (several µs a row when paging thousands of runs). A foreign row's time that
    could not be read shows as "unreadable time", not as a date in 1970."""
    if is_unreadable(moment):
        return UNREADABLE_TIME_TEXT
    return time.strftime("%b %d %H:%M:%S", moment.astimezone().timetuple())


@dataclass(frozen=True, slots=True)
class RowFields:
    """What a row shows, precomputed so `data()` only reads attributes."""

    name: str
    status: str
    pending: int
    info: str
    tooltip: str
    sort_key: float
    group: str
    """The id the store lists this row under (its task's project, its run's agent...)."""
    total: int | None = None
    """Known number of children before they are loaded (tasks of a project, runs of an agent)."""
    parent_agent: str | None = None
    control: str = "running"
    """A run's control state (store/control): running, paused, stopping or stopped; "running" for other rows."""


CONTROL_MARKS = {"paused": "‖ paused", "stopping": "■ stopping", "stopped": "■ stopped"}
"""The words a held run shows first in its Info column; its name starts with the symbol alone, so a paused run
is seen even where the tree is too narrow for the other columns."""

NO_FIELDS = RowFields("", "", 0, "", "", 0.0, "")


def entity_of(value: Any) -> str:
    return ENTITIES[type(value)]


def row_fields(value: Any) -> RowFields:
    if isinstance(value, rm.Run):  # by far the most common row: first
        return _run_fields(value)
    if isinstance(value, rm.Project):
        return RowFields(one_line(value.name), value.status, value.pending_approvals,
                         plural(value.task_count, "task"), escaped_tooltip(value.name, f"project {value.id}"),
                         value.created_at.timestamp(), "", value.task_count)
    if isinstance(value, rm.Task):
        return RowFields(one_line(value.title), value.status, value.pending_approvals, "",
                         escaped_tooltip(value.title, f"task {value.id}"), value.created_at.timestamp(),
                         value.project_id)
    if isinstance(value, rm.Session):
        return RowFields(one_line(value.title), value.status, value.pending_approvals,
                         f"started {short_time(value.created_at)}",
                         escaped_tooltip(value.title, f"session {value.id}"), value.created_at.timestamp(),
                         value.task_id)
    assert isinstance(value, rm.Agent), f"not a tree row: {value!r}"
    return RowFields(one_line(value.name), value.status, value.pending_approvals, value.model,
                     escaped_tooltip(value.name, f"model {value.model}", f"agent {value.id}"),
                     value.created_at.timestamp(), value.session_id, value.run_count, value.parent_agent_id)


def _run_fields(value: rm.Run) -> RowFields:
    started = short_time(value.started_at)
    tokens = f" · {value.usage.total_tokens:,} tok" if value.usage.total_tokens else ""
    mark = CONTROL_MARKS.get(value.control)
    name = one_line(value.title) or "(untitled run)"
    return RowFields(f"{mark.split()[0]} {name}" if mark else name, value.status, value.pending_approvals,
                     (f"{mark} · " if mark else "") + started + tokens,
                     escaped_tooltip(value.title, f"run {value.id}", f"started {started}",
                                     f"error: {one_line(value.error, 500)}" if value.error else "",
                                     one_line(value.control_note, 500) if value.control_note else ""),
                     value.started_at.timestamp(), value.agent_id, control=value.control)
