"""Which lensagent tables the follower watches, and what each changed row means to the views.

lensagent keeps no change log. Every mutable row carries `updated_at` (insert-only rows
`created_at`) in one sortable ISO form, so mutable tables are followed by stamp plus row
signature and insert-only ones by rowid. Deletes leave no stamp: when a hierarchy table's
row count drops, or `instance.state_revision` moved and no watched row changed (a write this
map does not know), the batch is a single reset and every view reloads. Rows no view shows
itself (messages, plans, overrides...) are each a context update of their agent, so a busy
runtime's bookkeeping never looks like an unknown write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.sources.follow import AppendOnly, Deletes, Follow, RowChanges, RowEvent, UpdatedInPlace
from agentdesk.store.sources.lensagent.approvals import PENDING_WHERE
from agentdesk.store.sources.sql import Row

ORIGIN = "lensagent"
AGENT_JOIN = "JOIN agents a ON a.id = {}.agent_id JOIN tasks t ON t.id = a.task_id"
AGENT_COLUMNS = "t.project_id AS project, a.task_id AS task, a.session_id AS session"
PENDING = PENDING_WHERE.replace("c.", "x.")
LEVELS = ("project", "task", "session", "parent_agent", "agent", "run")


def _parents(row: Row, *, run: bool = False) -> dict[str, str]:
    """`Change.parents` from the row's parent columns (a span's parents name no parent agent)."""
    return {k: row[k] for k in LEVELS if row.get(k) is not None and not (run and k == "parent_agent")}


def _node(entity: EntityKind) -> RowChanges:
    def changes(row: Row, event: RowEvent) -> Iterable[Change]:
        return [Change(entity, event.op, row["key"], _parents(row))]
    return changes


def _context_of(agent_column: str) -> RowChanges:
    def changes(row: Row, event: RowEvent) -> Iterable[Change]:
        return [Change(EntityKind.CONTEXT, ChangeOp.UPDATE, row[agent_column], {"agent": row[agent_column]})]
    return changes


def _context_revision(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.CONTEXT, ChangeOp.UPDATE, row["key"], {"agent": row["key"], "session": row["session"]},
                   row["context_revision"])]


def _run(row: Row, event: RowEvent) -> Iterable[Change]:
    """The run, and its own (root) span, whose status and end are the run row's."""
    parents = _parents(row, run=True)
    return [Change(EntityKind.RUN, event.op, row["key"], _parents(row)),
            Change(EntityKind.SPAN, event.op, f"run:{row['key']}", parents | {"run": row["key"]})]


def _step(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.SPAN, event.op, f"step:{row['key']}", _parents(row, run=True))]


def _attempt(row: Row, event: RowEvent) -> Iterable[Change]:
    if row["run"] is None:  # a compaction: the agent's context moved
        return [Change(EntityKind.CONTEXT, ChangeOp.UPDATE, row["agent"],
                       {"agent": row["agent"], "session": row["session"]})]
    return [Change(EntityKind.SPAN, event.op, f"attempt:{row['key']}", _parents(row, run=True))]


def _call(row: Row, event: RowEvent) -> Iterable[Change]:
    """The call's span; and its approval and review (`gate:`) span, when it entered or left policy review."""
    parents = _parents(row, run=True)
    changes = [Change(EntityKind.SPAN, event.op, f"call:{row['key']}", parents)]
    was_pending = bool(event.before and event.before.get("pending"))
    if row["pending"] and not was_pending:
        changes.append(Change(EntityKind.APPROVAL, ChangeOp.INSERT, row["key"], parents))
        changes.append(Change(EntityKind.SPAN, ChangeOp.INSERT, f"gate:{row['key']}", parents))
    elif was_pending and not row["pending"]:
        changes.append(Change(EntityKind.APPROVAL, ChangeOp.UPDATE, row["key"], parents))
        changes.append(Change(EntityKind.SPAN, ChangeOp.UPDATE, f"gate:{row['key']}", parents))
    return changes


def _result(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.SPAN, ChangeOp.UPDATE, f"call:{row['call_id']}", _parents(row, run=True))]


def _item(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.CONTEXT_ITEM, event.op, row["key"], {"agent": row["agent"], "group": row["grp"]})]


def _group(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.CONTEXT_GROUP, event.op, row["key"], {"agent": row["agent"]})]


def _mutable(table: str, columns: str, changes: RowChanges, *, joins: str = "", key: str = "x.id",
             stamp: str = "x.updated_at", deletes: Deletes = Deletes.IGNORE, **extra: Any) -> UpdatedInPlace:
    """A lensagent table rows change in: by `updated_at` (or another stamp) and signature."""
    return UpdatedInPlace(table, columns, changes, key=key, stamp=stamp, joins=joins, deletes=deletes, **extra)


def _context_table(table: str, *, key: str = "x.id", stamp: str = "x.updated_at") -> UpdatedInPlace:
    return _mutable(table, "x.agent_id AS agent", _context_of("agent"), key=key, stamp=stamp)


FOLLOW = Follow(
    ORIGIN,
    (
        _mutable("projects", "x.revision", _node(EntityKind.PROJECT), deletes=Deletes.RESET,
                 signature=("revision",)),
        _mutable("tasks", "x.project_id AS project, x.revision", _node(EntityKind.TASK), deletes=Deletes.RESET,
                 signature=("revision",)),
        _mutable("sessions", "t.project_id AS project, x.task_id AS task, x.revision", _node(EntityKind.SESSION),
                 joins="JOIN tasks t ON t.id = x.task_id", deletes=Deletes.RESET, signature=("revision",)),
        _mutable("agents", f"{AGENT_COLUMNS}, x.parent_agent_id AS parent_agent, x.revision",
                 _node(EntityKind.AGENT), joins="JOIN agents a ON a.id = x.id JOIN tasks t ON t.id = a.task_id",
                 deletes=Deletes.RESET,
                 signature=("revision",)),
        # the context revision of every agent, compared whole: a move is a context update
        UpdatedInPlace("agents", "x.session_id AS session, x.context_revision", _context_revision,
                       signature=("context_revision",), rowid=None),
        _mutable("runs", f"{AGENT_COLUMNS}, x.agent_id AS agent, x.revision", _run,
                 joins=AGENT_JOIN.format("x"), deletes=Deletes.RESET, signature=("revision",)),
        _mutable("steps", f"{AGENT_COLUMNS}, r.agent_id AS agent, x.run_id AS run", _step,
                 joins=f"JOIN runs r ON r.id = x.run_id {AGENT_JOIN.format('r')}"),
        _mutable("model_attempts", f"{AGENT_COLUMNS}, x.agent_id AS agent, s.run_id AS run", _attempt,
                 joins=f"LEFT JOIN steps s ON s.id = x.step_id {AGENT_JOIN.format('x')}"),
        _mutable("calls", "x.project_id AS project, a.task_id AS task, a.session_id AS session, "
                          f"x.agent_id AS agent, s.run_id AS run, x.revision, ({PENDING}) AS pending", _call,
                 joins="LEFT JOIN agents a ON a.id = x.agent_id LEFT JOIN steps s ON s.id = x.step_id",
                 signature=("revision", "pending"), keep=PENDING),
        AppendOnly("results", "c.project_id AS project, a.task_id AS task, a.session_id AS session, "
                              "c.agent_id AS agent, s.run_id AS run, x.call_id", _result,
                   joins="JOIN calls c ON c.id = x.call_id LEFT JOIN agents a ON a.id = c.agent_id "
                         "LEFT JOIN steps s ON s.id = c.step_id"),
        _mutable("context_items", "x.agent_id AS agent, x.turn_group_id AS grp, x.revision", _item,
                 deletes=Deletes.RESET, signature=("revision",)),
        _mutable("context_turn_groups", "x.agent_id AS agent, x.revision", _group,
                 stamp="coalesce(x.completed_at, x.created_at)", signature=("revision",)),
        AppendOnly("projection_decisions", "x.agent_id AS agent", _context_of("agent")),
        AppendOnly("messages", "x.agent_id AS agent", _context_of("agent")),
        _context_table("pending_messages"),
        _context_table("context_overrides"),
        _context_table("agent_plans", key="x.agent_id"),
        _context_table("working_contexts", key="x.agent_id"),
    ),
    revision="SELECT state_revision FROM instance WHERE id = 1",
    revision_table="instance",
)
