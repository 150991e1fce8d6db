"""Which vgxness tables the follower watches, and what each changed row means to the views.

vgxness has no change log, no revision columns and no WAL (so `data_version` moves on every
foreign commit to the rollback-journal file just the same). Declarations:

- `run_events`, `run_checkpoints` are insert-only: rowid;
- `runs` and `agents` (updates set `updated_at`): stamp plus row signature; active runs are
  also re-read by id, in case a status change leaves `updated_at` alone;
- `run_approvals`: new rows by rowid, pending ones re-read by id until resolved (or deleted);
- projects: the small set of distinct `project` texts, compared whole (a new one brings its
  pass-through task and session).

Where an agent sits (its registry project, else its first run's) is read once per poll.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.sources.follow import AppendOnly, Deletes, Follow, RowEvent, UpdatedInPlace
from agentdesk.store.sources.sql import Row
from agentdesk.store.sources.vgxness.common import ACTIVE_RUN_STATUSES, agent_projects, parents, session_id, task_id

ACTIVE = ", ".join(f"'{s}'" for s in ACTIVE_RUN_STATUSES)
RUN_JOIN = "JOIN runs r ON r.id = x.run_id"


def _home(row: Row, event: RowEvent, agent: str, fallback: str) -> str:
    homes: dict[str, str] = event.lookups or {}
    return homes.get(agent, fallback)


def _project(row: Row, event: RowEvent) -> Iterable[Change]:
    if event.op != ChangeOp.INSERT:
        return []
    project = row["key"]
    return [Change(EntityKind.PROJECT, ChangeOp.INSERT, project),
            Change(EntityKind.TASK, ChangeOp.INSERT, task_id(project), {"project": project}),
            Change(EntityKind.SESSION, ChangeOp.INSERT, session_id(project),
                   {"project": project, "task": task_id(project)})]


def _agent(row: Row, event: RowEvent) -> Iterable[Change]:
    """A registry row for an agent already shown (named by a run) is an update of that node."""
    where = parents(row["project"])
    if row["parent_agent_id"]:
        where["parent_agent"] = row["parent_agent_id"]
    op = ChangeOp.INSERT if event.seen.first("agent", row["key"]) else ChangeOp.UPDATE
    return [Change(EntityKind.AGENT, op, row["key"], where)]


def _run(row: Row, event: RowEvent) -> Iterable[Change]:
    agent = row["selected_agent_id"]
    home = _home(row, event, agent, row["project"])
    out = []
    if event.seen.first("agent", agent):  # a run naming an agent the registry does not hold
        out.append(Change(EntityKind.AGENT, ChangeOp.INSERT, agent, parents(home)))
    out.append(Change(EntityKind.RUN, event.op, row["key"], parents(home, agent)))
    return out


def _point(row: Row, event: RowEvent) -> Iterable[Change]:
    agent = row["selected_agent_id"]
    return [Change(EntityKind.SPAN, ChangeOp.INSERT, row["id"],
                   parents(_home(row, event, agent, row["project"]), agent, row["run_id"]))]


def _approval(row: Row, event: RowEvent) -> Iterable[Change]:
    agent = row["selected_agent_id"]
    return [Change(EntityKind.APPROVAL, event.op, row["key"],
                   parents(_home(row, event, agent, row["project"]), agent, row["run_id"]))]


POINT_COLUMNS = "x.id, x.run_id, r.project, r.selected_agent_id"

FOLLOW = Follow("vgxness", (
    UpdatedInPlace("runs", "x.project", _project, key="x.project", rowid=None,
                   source="FROM (SELECT project FROM runs UNION SELECT project FROM agents "
                          "UNION SELECT project FROM sessions) x"),
    UpdatedInPlace("agents", "x.project, x.name, x.mode, x.parent_agent_id", _agent, stamp="x.updated_at",
                   signature=("name", "mode", "parent_agent_id"), prime_all=True),
    UpdatedInPlace("runs", "x.project, x.selected_agent_id, x.status, x.outcome, x.outcome_reason, x.phase, "
                           "x.latest_checkpoint_id, x.completed_at", _run, stamp="x.updated_at",
                   keep=f"x.status IN ({ACTIVE})", prime_all=True,
                   signature=("status", "outcome", "outcome_reason", "phase", "latest_checkpoint_id",
                              "completed_at")),
    AppendOnly("run_events", POINT_COLUMNS, _point, joins=RUN_JOIN),
    AppendOnly("run_checkpoints", POINT_COLUMNS, _point, joins=RUN_JOIN),
    UpdatedInPlace("run_approvals", "x.run_id, x.status, r.project, r.selected_agent_id", _approval,
                   joins=RUN_JOIN, keep="x.status = 'pending'", signature=("status",), deletes=Deletes.DELETE),
), lookups=agent_projects)
