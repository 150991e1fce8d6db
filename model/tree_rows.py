"""Tree rows as plain values: what each row shows, and the batched store reads behind live updates.

Qt-free on purpose: `read_rows` runs on the store runner's threads, and the
display strings are computed here once per change so `data()` only reads them.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from store import readmodel as rm
from store.errors import NotFound
from store.source import Source

Key = tuple[str, str]
LEVELS = ("project", "task", "session", "agent", "run")


def escaped_tooltip(*lines: str) -> str:
    """Agent text for a tooltip: escaped, inside a rich-text marker so Qt never guesses the format."""
    body = "<br>".join(html.escape(line) for line in lines if line)
    return f"<qt>{body}</qt>"


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_time(moment: datetime) -> str:
    return moment.astimezone().strftime("%b %d %H:%M:%S")


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


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


def row_fields(value: Any) -> RowFields:
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
    if isinstance(value, rm.Agent):
        return RowFields(one_line(value.name), value.status, value.pending_approvals, value.model,
                         escaped_tooltip(value.name, f"model {value.model}", f"agent {value.id}"),
                         value.created_at.timestamp(), value.session_id, value.run_count,
                         value.parent_agent_id)
    assert isinstance(value, rm.Run), f"not a tree row: {value!r}"
    tokens = f" · {value.usage.total_tokens:,} tok" if value.usage.total_tokens else ""
    return RowFields(one_line(value.title) or "(untitled run)", value.status, value.pending_approvals,
                     short_time(value.started_at) + tokens,
                     escaped_tooltip(value.title, f"run {value.id}",
                                     f"started {short_time(value.started_at)}",
                                     f"error: {one_line(value.error, 500)}" if value.error else ""),
                     value.started_at.timestamp(), value.agent_id)


def entity_of(value: Any) -> str:
    return {rm.Project: "project", rm.Task: "task", rm.Session: "session", rm.Agent: "agent",
            rm.Run: "run"}[type(value)]


def parents_of(value: Any) -> dict[str, str]:
    """The bus-style parents of a read-model row (to replay a deferred insert)."""
    parents = {level: getattr(value, f"{level}_id") for level in LEVELS[:LEVELS.index(entity_of(value))]}
    if isinstance(value, rm.Agent) and value.parent_agent_id:
        parents["parent_agent"] = value.parent_agent_id
    return parents


def read_rows(source: Source, wanted: Mapping[Key, str]) -> list[tuple[Key, Any]]:
    """Runs on the pool: the current value of every wanted row, one listing per parent, top level first."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (entity, entity_id), group in wanted.items():
        groups[(entity, group)].append(entity_id)
    listings: dict[str, Callable[[str], list[Any]]] = {
        "project": lambda _: list(source.projects()), "task": source.tasks, "session": source.sessions,
        "agent": source.agents}
    found: list[tuple[Key, Any]] = []
    for (entity, group), ids in sorted(groups.items(), key=lambda g: LEVELS.index(g[0][0])):
        if entity == "run":
            found.extend((("run", i), _run_or_none(source, i)) for i in ids)
            continue
        values = {v.id: v for v in listings[entity](group)}
        found.extend(((entity, i), values.get(i)) for i in ids)
    level_order = {level: n for n, level in enumerate(LEVELS)}
    return sorted(found, key=lambda kv: (level_order[kv[0][0]], kv[1].created_at.timestamp()
                                         if isinstance(kv[1], rm.Agent) else 0.0))


def _run_or_none(source: Source, run_id: str) -> Any:
    try:
        return source.node("run", run_id)
    except NotFound:
        return None
