"""The project tree of a lensagent database: projects > tasks > sessions > agents (+sub-agents) > runs.

lensagent is the one seed runtime with the whole tree natively (reference §1.1), so every
level is a real row; nothing is synthesised. Status roll-ups and pending-approval counts are
one query per level, never one per row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.queries import roll_up
from agentdesk.store.readmodel import Page
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent import stopped
from agentdesk.store.sources.lensagent import values as v
from agentdesk.store.sources.sql import marks, one, parent_chain, rows

DEFAULT_CONTEXT_BUDGET = 128_000
"""lensagent stores no context-window size; the editor's budget bar uses this common one."""
PENDING_SQL = """
SELECT c.project_id AS project, a.task_id AS task, a.session_id AS session, c.agent_id AS agent,
       s.run_id AS run
FROM calls c LEFT JOIN agents a ON a.id = c.agent_id LEFT JOIN steps s ON s.id = c.step_id
WHERE c.state = 'WAITING' AND c.wait_reason = 'policy_review'"""
RUN_SQL = """
SELECT r.*, a.name AS agent_name, a.session_id, a.task_id, t.project_id
FROM runs r JOIN agents a ON a.id = r.agent_id JOIN tasks t ON t.id = a.task_id"""


def pending(conn: Connection) -> Counter[tuple[str, str]]:
    """Pending approvals per (level, id): a call waiting in policy review counts at every level above it."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in rows(conn, PENDING_SQL):
        counts.update((level, value) for level, value in row.items() if value is not None)
    return counts


def _statuses(conn: Connection, level: str, where: str = "", **params: Any) -> dict[str, str]:
    grouped: dict[str, list[str]] = {}
    for row in rows(
        conn,
        "SELECT a.state, a.session_id AS session, a.task_id AS task, t.project_id AS project "
        f"FROM agents a JOIN tasks t ON t.id = a.task_id {where}",
        **params,
    ):
        grouped.setdefault(row[level], []).append(v.agent_status(row["state"]))
    return {key: roll_up(found) for key, found in grouped.items()}


def _status(row: dict[str, Any], rolled: dict[str, str]) -> str:
    return "archived" if row.get("archived_at") else rolled.get(row["id"], "idle")


def projects(conn: Connection) -> list[rm.Project]:
    found = rows(conn, "SELECT * FROM projects ORDER BY created_at, id")
    counts, rolled = pending(conn), _statuses(conn, "project")
    tasks = {
        r["project_id"]: r["n"] for r in rows(conn, "SELECT project_id, count(*) AS n FROM tasks GROUP BY 1")
    }
    return [
        rm.Project(
            r["id"],
            r["name"],
            _status(r, rolled),
            parse.time_of(r["created_at"]),
            r["revision"],
            counts[("project", r["id"])],
            tasks.get(r["id"], 0),
        )
        for r in found
    ]


def tasks(conn: Connection, project_id: str) -> list[rm.Task]:
    found = rows(conn, "SELECT * FROM tasks WHERE project_id = :p ORDER BY created_at, id", p=project_id)
    counts, rolled = pending(conn), _statuses(conn, "task", "WHERE t.project_id = :p", p=project_id)
    return [
        rm.Task(
            r["id"],
            r["project_id"],
            r["title"],
            _status(r, rolled),
            parse.time_of(r["created_at"]),
            r["revision"],
            counts[("task", r["id"])],
        )
        for r in found
    ]


def sessions(conn: Connection, task_id: str) -> list[rm.Session]:
    found = rows(
        conn,
        "SELECT s.*, t.project_id FROM sessions s JOIN tasks t ON t.id = s.task_id "
        "WHERE s.task_id = :t ORDER BY s.created_at, s.id",
        t=task_id,
    )
    counts, rolled = pending(conn), _statuses(conn, "session", "WHERE a.task_id = :t", t=task_id)
    return [
        rm.Session(
            r["id"],
            r["project_id"],
            r["task_id"],
            r["title"],
            _status(r, rolled),
            parse.time_of(r["created_at"]),
            parse.parse_time(r["archived_at"]),
            r["revision"],
            counts[("session", r["id"])],
        )
        for r in found
    ]


def agents(conn: Connection, session_id: str) -> list[rm.Agent]:
    """All agents of a session, each parent before its sub-agents (siblings by creation)."""
    found = rows(
        conn,
        "SELECT a.*, t.project_id FROM agents a JOIN tasks t ON t.id = a.task_id "
        "WHERE a.session_id = :s ORDER BY a.created_at, a.id",
        s=session_id,
    )
    ids, params = marks("a", [r["id"] for r in found])
    runs = {
        r["agent_id"]: r["n"]
        for r in rows(
            conn, f"SELECT agent_id, count(*) AS n FROM runs WHERE agent_id IN ({ids}) GROUP BY 1", **params
        )
    }
    counts = pending(conn)
    return [_agent(r, counts[("agent", r["id"])], runs.get(r["id"], 0)) for r in parents_first(found)]


def _agent(r: dict[str, Any], pending_count: int, run_count: int) -> rm.Agent:
    return rm.Agent(
        r["id"],
        r["project_id"],
        r["task_id"],
        r["session_id"],
        r["parent_agent_id"],
        r["name"],
        r["model"],
        v.agent_status(r["state"]),
        r["context_revision"],
        DEFAULT_CONTEXT_BUDGET,
        parse.time_of(r["created_at"]),
        r["revision"],
        pending_count,
        run_count,
    )


def parents_first(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Depth-first from the roots; an agent whose parent is elsewhere (or in a cycle) counts as a root."""
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    present = {r["id"] for r in found}
    for r in found:
        parent = r["parent_agent_id"] if r["parent_agent_id"] in present else None
        by_parent.setdefault(parent, []).append(r)
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()
    stack = list(reversed(by_parent.get(None, [])))
    while stack:
        r = stack.pop()
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        ordered.append(r)
        stack.extend(reversed(by_parent.get(r["id"], [])))
    return ordered + [r for r in found if r["id"] not in seen]


def runs(conn: Connection, agent_id: str, offset: int, limit: int) -> Page[rm.Run]:
    """Newest first: the run an operator wants is almost always the latest."""
    total = one(conn, "SELECT count(*) AS n FROM runs WHERE agent_id = :a", a=agent_id)
    found = rows(
        conn,
        f"{RUN_SQL} WHERE r.agent_id = :a ORDER BY r.created_at DESC, r.id LIMIT :l OFFSET :o",
        a=agent_id,
        l=limit,
        o=offset,
    )
    return Page(tuple(run_values(conn, found)), offset, total["n"] if total else 0)


def run_values(conn: Connection, found: list[dict[str, Any]]) -> list[rm.Run]:
    usage = run_usage(conn, found)
    counts = pending(conn)
    titles = goal_titles(conn, found)
    stops = stopped.stops(conn, [r["id"] for r in found])
    return [
        _run(r, titles.get(r["id"]), usage.get(r["id"], rm.Usage()), counts[("run", r["id"])], stops.get(r["id"]))
        for r in found
    ]


def _run(r: dict[str, Any], title: str | None, usage: rm.Usage, pending_count: int,
         stop: rm.RunControl | None = None) -> rm.Run:
    error = r["error_code"]
    if r["state"] == "TERMINAL" and r["outcome"] == "interrupted":
        error = f"interrupted: {error}" if error else "interrupted"
    return rm.Run(
        r["id"],
        r["project_id"],
        r["task_id"],
        r["session_id"],
        r["agent_id"],
        title or f"Run {r['id']}",
        v.run_status(r["state"], r["outcome"]),
        parse.time_of(r["created_at"]),
        v.ended(r["state"], r["updated_at"]),
        error,
        usage,
        r["revision"],
        pending_count,
        control=stop.state.value if stop is not None else "running",
        control_note=stop.describe() if stop is not None else "",
    )


def goal_titles(conn: Connection, found: list[dict[str, Any]]) -> dict[str, str]:
    """A run's title is the first line of its first goal message (`goal_message_ids_json`)."""
    firsts: dict[str, str] = {}
    for r in found:
        goal = parse.json_value(r["goal_message_ids_json"])
        if isinstance(goal, list) and goal and isinstance(goal[0], str):
            firsts[r["id"]] = goal[0]
    ids, params = marks("m", sorted(set(firsts.values())))
    texts = {
        m["id"]: m["content"]
        for m in rows(conn, f"SELECT id, content FROM messages WHERE id IN ({ids})", **params)
    }
    return {run: parse.first_line(texts[msg]) for run, msg in firsts.items() if texts.get(msg, "").strip()}


def run_usage(conn: Connection, found: list[dict[str, Any]]) -> dict[str, rm.Usage]:
    """Tokens of every model attempt in each run, compaction attempts (no step) by the run's time window."""
    ids, params = marks("r", [r["id"] for r in found])
    totals: dict[str, rm.Usage] = {}
    for row in rows(
        conn,
        "SELECT s.run_id, m.usage_json FROM model_attempts m JOIN steps s ON s.id = m.step_id "
        f"WHERE s.run_id IN ({ids})",
        **params,
    ):
        totals[row["run_id"]] = v.add(totals.get(row["run_id"], rm.Usage()), v.usage_of(row["usage_json"]))
    for agent_id in {r["agent_id"] for r in found}:
        for row in compaction_attempts(conn, agent_id):
            run = window_run(found, agent_id, row["created_at"])
            if run is not None:
                totals[run] = v.add(totals.get(run, rm.Usage()), v.usage_of(row["usage_json"]))
    return totals


def compaction_attempts(
    conn: Connection, agent_id: str, columns: str = "id, created_at, usage_json"
) -> list[dict[str, Any]]:
    return rows(
        conn,
        f"SELECT {columns} FROM model_attempts WHERE agent_id = :a AND step_id IS NULL "
        "ORDER BY created_at, id",
        a=agent_id,
    )


def window_run(found: Iterable[dict[str, Any]], agent_id: str, at: str) -> str | None:
    """The agent's run that was live at `at` (a run ends at `updated_at` once TERMINAL)."""
    moment = parse.time_of(at)
    for r in found:
        end = v.ended(r["state"], r["updated_at"])
        if (
            r["agent_id"] == agent_id
            and parse.time_of(r["created_at"]) <= moment
            and (end is None or moment <= end)
        ):
            return str(r["id"])
    return None


def run_row(conn: Connection, run_id: str) -> dict[str, Any]:
    found = one(conn, f"{RUN_SQL} WHERE r.id = :r", r=run_id)
    if found is None:
        raise NotFound(f"There is no run with id {run_id}.")
    return found


def agent_runs(conn: Connection, agent_id: str) -> list[dict[str, Any]]:
    return rows(conn, f"{RUN_SQL} WHERE r.agent_id = :a", a=agent_id)


def agent_chain(conn: Connection, agent_id: str) -> tuple[str, ...]:
    return parent_chain(conn, agent_id, "SELECT parent_agent_id AS parent FROM agents WHERE id = :id")


def goal_ids(raw: str | None) -> list[str]:
    value = parse.json_value(raw)
    return [str(x) for x in value] if isinstance(value, list) else []


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
