"""Turning a running lensagent's commits into agentdesk `Change` events.

lensagent keeps no change log. Every mutable row carries `updated_at` (insert-only rows
`created_at`), and lensagent writes them in one sortable ISO form, so each watched table has a
high-water mark: the greatest timestamp seen plus the ids seen *at* that timestamp (rows
written in the same millisecond are neither lost nor repeated). A row newer than the mark is
an insert when it was also created since the mark, otherwise an update.

Deletes leave no timestamp: when a hierarchy table's row count drops, or
`instance.state_revision` moved and no watched row changed (a write this map does not know),
the batch is a single reset and every view reloads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.bus import RESET, Change
from agentdesk.store.sources.lensagent import approvals
from agentdesk.store.sources.lensagent.layout import Layout, one, rows

ORIGIN = "lensagent"
AGENT_JOIN = "JOIN agents a ON a.id = {}.agent_id JOIN tasks t ON t.id = a.task_id"
AGENT_COLUMNS = "t.project_id AS project, a.task_id AS task, a.session_id AS session"
COUNTED = ("projects", "tasks", "sessions", "agents", "runs", "context_items")


@dataclass(frozen=True, slots=True)
class Watch:
    table: str
    stamp: str
    """SQL for the row's change time (`x.updated_at`, or an insert-only row's `created_at`)."""
    select: str
    """Columns and joins after `SELECT <key> AS id, <stamp> AS stamp, <created> AS created, `."""
    key: str = "x.id"
    created: str = "x.created_at"


WATCHES = (
    Watch("projects", "x.updated_at", "NULL AS none FROM projects x"),
    Watch("tasks", "x.updated_at", "x.project_id AS project FROM tasks x"),
    Watch(
        "sessions",
        "x.updated_at",
        "t.project_id AS project, x.task_id AS task FROM sessions x JOIN tasks t ON t.id = x.task_id",
    ),
    Watch(
        "agents",
        "x.updated_at",
        f"{AGENT_COLUMNS}, x.parent_agent_id AS parent_agent, x.context_revision "
        f"FROM agents x JOIN agents a ON a.id = x.id JOIN tasks t ON t.id = a.task_id",
    ),
    Watch(
        "runs", "x.updated_at", f"{AGENT_COLUMNS}, x.agent_id AS agent FROM runs x {AGENT_JOIN.format('x')}"
    ),
    Watch(
        "steps",
        "x.updated_at",
        f"{AGENT_COLUMNS}, r.agent_id AS agent, x.run_id AS run FROM steps x "
        f"JOIN runs r ON r.id = x.run_id {AGENT_JOIN.format('r')}",
    ),
    Watch(
        "model_attempts",
        "x.updated_at",
        f"{AGENT_COLUMNS}, x.agent_id AS agent, s.run_id AS run "
        f"FROM model_attempts x LEFT JOIN steps s ON s.id = x.step_id "
        f"{AGENT_JOIN.format('x')}",
    ),
    Watch(
        "calls",
        "x.updated_at",
        "x.project_id AS project, a.task_id AS task, a.session_id AS session, "
        "x.agent_id AS agent, s.run_id AS run, x.state, x.wait_reason "
        "FROM calls x LEFT JOIN agents a ON a.id = x.agent_id "
        "LEFT JOIN steps s ON s.id = x.step_id",
    ),
    Watch(
        "results",
        "x.created_at",
        "c.project_id AS project, a.task_id AS task, a.session_id AS session, "
        "c.agent_id AS agent, s.run_id AS run, x.call_id FROM results x "
        "JOIN calls c ON c.id = x.call_id LEFT JOIN agents a ON a.id = c.agent_id "
        "LEFT JOIN steps s ON s.id = c.step_id",
    ),
    Watch(
        "context_items", "x.updated_at", "x.agent_id AS agent, x.turn_group_id AS grp FROM context_items x"
    ),
    Watch(
        "context_turn_groups",
        "coalesce(x.completed_at, x.created_at)",
        "x.agent_id AS agent FROM context_turn_groups x",
    ),
    Watch("projection_decisions", "x.created_at", "x.agent_id AS agent FROM projection_decisions x"),
    # rows no view shows itself: each is a context update of its agent, so a busy runtime's
    # bookkeeping never looks like an unknown write (which would reset every view)
    Watch("messages", "x.created_at", "x.agent_id AS agent FROM messages x"),
    Watch("pending_messages", "x.updated_at", "x.agent_id AS agent FROM pending_messages x"),
    Watch("context_overrides", "x.updated_at", "x.agent_id AS agent FROM context_overrides x"),
    Watch("agent_plans", "x.updated_at", "x.agent_id AS agent FROM agent_plans x", "x.agent_id", "NULL"),
    Watch(
        "working_contexts",
        "x.updated_at",
        "x.agent_id AS agent FROM working_contexts x",
        "x.agent_id",
        "NULL",
    ),
)


class ChangeTracker:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self._marks: dict[str, tuple[str, set[str]]] = {}
        self._counts: dict[str, int] = {}
        self._context: dict[str, int] = {}
        self._pending: set[str] = set()
        self._state_revision: int | None = None

    def prime(self, conn: Connection) -> None:
        with self._lock:
            for watch in self._watches():
                stamp = f"max({watch.stamp})"
                top = one(conn, f"SELECT {stamp} AS top FROM {watch.table} x")
                mark = top["top"] if top and top["top"] is not None else ""
                ids = {
                    r["id"]
                    for r in rows(
                        conn,
                        f"SELECT {watch.key} AS id FROM {watch.table} x WHERE {watch.stamp} = :m",
                        m=mark,
                    )
                }
                self._marks[watch.table] = (mark, ids)
            self._counts = self._count(conn)
            self._context = {
                r["id"]: r["context_revision"] for r in rows(conn, "SELECT id, context_revision FROM agents")
            }
            self._pending = {
                r["id"] for r in rows(conn, f"SELECT c.id FROM calls c WHERE {approvals.PENDING_WHERE}")
            }
            self._state_revision = self._revision(conn)

    def poll(self, conn: Connection) -> list[Change]:
        with self._lock:
            if not self._marks:
                return []
            counts = self._count(conn)
            shrunk = any(counts[t] < self._counts.get(t, 0) for t in counts)
            self._counts = counts
            changes: list[Change] = []
            for watch in self._watches():
                for row, inserted in self._since(conn, watch):
                    changes += self._convert(watch.table, row, "insert" if inserted else "update")
            revision = self._revision(conn)
            moved = revision is not None and revision != self._state_revision
            self._state_revision = revision
            if shrunk or (moved and not changes):
                return [Change("*", RESET, "*", origin=ORIGIN, at=time.time())]
            return changes

    def _watches(self) -> list[Watch]:
        return [w for w in WATCHES if self.layout.has(w.table)]

    def _count(self, conn: Connection) -> dict[str, int]:
        return {t: one(conn, f"SELECT count(*) AS n FROM {t}")["n"] for t in COUNTED}  # type: ignore[index]

    def _revision(self, conn: Connection) -> int | None:
        if not self.layout.has("instance"):
            return None
        found = one(conn, "SELECT state_revision FROM instance WHERE id = 1")
        return None if found is None else int(found["state_revision"])

    def _since(self, conn: Connection, watch: Watch) -> list[tuple[dict[str, Any], bool]]:
        mark, at_mark = self._marks.get(watch.table, ("", set()))
        found = rows(
            conn,
            f"SELECT {watch.key} AS id, {watch.stamp} AS stamp, {watch.created} AS created, {watch.select} "
            f"WHERE {watch.stamp} >= :m ORDER BY {watch.stamp}",
            m=mark,
        )
        fresh = [r for r in found if not (r["stamp"] == mark and r["id"] in at_mark)]
        if fresh:
            top = max(r["stamp"] for r in found)
            self._marks[watch.table] = (top, {r["id"] for r in found if r["stamp"] == top})
        return [(r, _created_since(r["created"], r["id"], mark, at_mark)) for r in fresh]

    def _convert(self, table: str, r: dict[str, Any], op: str) -> list[Change]:
        parents = {
            k: r[k]
            for k in ("project", "task", "session", "parent_agent", "agent", "run")
            if r.get(k) is not None
        }
        run_parents = {k: v for k, v in parents.items() if k != "parent_agent"}
        entity = {
            "projects": "project",
            "tasks": "task",
            "sessions": "session",
            "agents": "agent",
            "runs": "run",
        }.get(table)
        if entity is not None:
            changes = [Change(entity, op, r["id"], parents, origin=ORIGIN)]
            if table == "agents" and self._context.get(r["id"]) != r["context_revision"]:
                self._context[r["id"]] = r["context_revision"]
                changes.append(
                    Change(
                        "context",
                        "update",
                        r["id"],
                        {"agent": r["id"], "session": r["session"]},
                        r["context_revision"],
                        origin=ORIGIN,
                    )
                )
            return changes
        if table == "steps":
            return [Change("span", op, f"step:{r['id']}", run_parents, origin=ORIGIN)]
        if table == "model_attempts":
            if r["run"] is None:  # a compaction: the agent's context moved
                return [
                    Change(
                        "context",
                        "update",
                        r["agent"],
                        {"agent": r["agent"], "session": r["session"]},
                        origin=ORIGIN,
                    )
                ]
            return [Change("span", op, f"attempt:{r['id']}", run_parents, origin=ORIGIN)]
        if table == "calls":
            return self._call(r, op, run_parents)
        if table == "results":
            return [Change("span", "update", f"call:{r['call_id']}", run_parents, origin=ORIGIN)]
        agent = {"agent": r["agent"]}
        if table == "context_items":
            return [Change("context_item", op, r["id"], agent | {"group": r["grp"]}, origin=ORIGIN)]
        if table == "context_turn_groups":
            return [Change("context_group", op, r["id"], agent, origin=ORIGIN)]
        return [Change("context", "update", r["agent"], agent, origin=ORIGIN)]

    def _call(self, r: dict[str, Any], op: str, parents: dict[str, str]) -> list[Change]:
        changes = [Change("span", op, f"call:{r['id']}", parents, origin=ORIGIN)]
        pending = r["state"] == "WAITING" and r["wait_reason"] == "policy_review"
        if pending and r["id"] not in self._pending:
            self._pending.add(r["id"])
            changes.append(Change("approval", "insert", r["id"], parents, origin=ORIGIN))
        elif r["id"] in self._pending and not pending:
            self._pending.discard(r["id"])
            changes.append(Change("approval", "update", r["id"], parents, origin=ORIGIN))
        return changes


def _created_since(created: str | None, row_id: str, mark: str, at_mark: set[str]) -> bool:
    """New since the mark: created after it, or at it by a row the mark had not seen."""
    if created is None:
        return False
    return created > mark or (created == mark and row_id not in at_mark)
