"""Which stageflow tables the follower watches, and what each changed row means to the views.

stageflow has no change log and no revision columns, so each table gets the cheapest mark that
is still correct for how the runtime writes it:

- spans and messages are insert-only: their rowid is the whole story;
- sessions and definitions (every update sets `updated_at`), eval scores (upserts set
  `recorded_at`): stamp plus row signature;
- turns (`finishTurn`, `setTurnStatus` and `setTurnOutcome` touch no stamp): the signature of
  every active turn plus the newest `TURN_WINDOW` turns (an outcome is changed "after the fact"
  only for a turn that just ended);
- approvals: pending ones are re-read by id until decided, and one whose deadline passes is
  announced as changed (it now reads as expired) although nothing was committed: its `due`
  time makes the watcher poll then.

Projects and tasks have no rows of their own: the first definition or session naming one
brings it into the tree (`Seen`).
"""

from __future__ import annotations

from collections.abc import Iterable

from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.sources.follow import AppendOnly, Deletes, Follow, RowEvent, Seen, UpdatedInPlace
from agentdesk.store.sources.sql import Row
from agentdesk.store.sources.stageflow.ids import agent_node_id, parents_of, task_id

TURN_WINDOW = 2_000
SESSION_JOIN = "LEFT JOIN agent_sessions s ON s.session_id = {}.session_id"
TURN_JOIN = "LEFT JOIN agent_turns t ON t.turn_id = x.turn_id " + SESSION_JOIN.format("t")


def _project_and_task(seen: Seen, project_key: str, agent_id: str | None) -> list[Change]:
    out = []
    if seen.first("project", project_key):
        out.append(Change(EntityKind.PROJECT, ChangeOp.INSERT, project_key))
    if agent_id is not None and seen.first("task", task_id(project_key, agent_id)):
        out.append(Change(EntityKind.TASK, ChangeOp.INSERT, task_id(project_key, agent_id), {"project": project_key}))
    return out


def _definition(row: Row, event: RowEvent) -> Iterable[Change]:
    known = event.seen.has("task", task_id(row["project_key"], row["agent_id"]))
    out = _project_and_task(event.seen, row["project_key"], row["agent_id"])
    if known:  # a definition already shown changed
        out.append(Change(EntityKind.TASK, ChangeOp.UPDATE, task_id(row["project_key"], row["agent_id"]),
                          {"project": row["project_key"]}))
    return out


def _session(row: Row, event: RowEvent) -> Iterable[Change]:
    out = _project_and_task(event.seen, row["project_key"], row["agent_id"])
    parents = {"project": row["project_key"], "task": task_id(row["project_key"], row["agent_id"])}
    out.append(Change(EntityKind.SESSION, event.op, row["key"], parents))
    out.append(Change(EntityKind.AGENT, event.op, agent_node_id(row["key"], row["agent_id"]),
                      parents | {"session": row["key"]}))
    return out


def _turn(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.RUN, event.op, row["key"],
                   parents_of(row["project_key"], row["agent_id"], row["session_id"]))]


def _score(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.RUN, ChangeOp.UPDATE, row["turn_id"],
                   parents_of(row["project_key"], row["agent_id"], row["session_id"]))]


def _span(row: Row, event: RowEvent) -> Iterable[Change]:
    parents = parents_of(row["project_key"], row["agent_id"], row["session_id"], row["turn_id"])
    return [Change(EntityKind.SPAN, ChangeOp.INSERT, row["span_id"], parents)]


def _message(row: Row, event: RowEvent) -> Iterable[Change]:
    parents = parents_of(row["project_key"], row["agent_id"], row["session_id"], row["turn_id"])
    if "agent" not in parents:
        return []
    agent = {"agent": parents["agent"], "session": row["session_id"]}
    group = row["turn_id"] or f"{row['session_id']}/no-turn"
    return [Change(EntityKind.CONTEXT_ITEM, ChangeOp.INSERT, row["message_id"], agent | {"group": group}),
            Change(EntityKind.CONTEXT, ChangeOp.UPDATE, parents["agent"], agent)]


def _approval(row: Row, event: RowEvent) -> Iterable[Change]:
    parents = parents_of(row["project_key"], row["agent_id"], row["session_id"], row["turn_id"])
    return [Change(EntityKind.APPROVAL, event.op, row["key"], parents)]


FOLLOW = Follow("stageflow", (
    UpdatedInPlace("agent_definitions", "x.project_key, x.agent_id, x.current_revision, x.archived", _definition,
                   key="x.project_key || '/' || x.agent_id", stamp="x.updated_at", rowid=None,
                   signature=("current_revision", "archived"), prime_all=True),
    UpdatedInPlace("agent_sessions", "x.project_key, x.agent_id, x.status, x.title, x.backend", _session,
                   key="x.session_id", stamp="x.updated_at", signature=("status", "title", "backend"),
                   prime_all=True),
    UpdatedInPlace("agent_turns", "x.session_id, x.status, x.error_code, x.ended_at, x.input_tokens, "
                                  "x.output_tokens, x.cost_usd, s.project_key, s.agent_id", _turn,
                   key="x.turn_id", joins=SESSION_JOIN.format("x"), keep="x.status IN ('running', 'waiting')",
                   window=TURN_WINDOW,
                   signature=("status", "error_code", "ended_at", "input_tokens", "output_tokens", "cost_usd")),
    UpdatedInPlace("agent_eval_scores", "x.turn_id, x.score, t.session_id, s.project_key, s.agent_id", _score,
                   key="x.turn_id || '/' || x.metric", stamp="x.recorded_at", rowid=None, joins=TURN_JOIN,
                   signature=("score",)),
    AppendOnly("agent_spans", "x.span_id, x.turn_id, t.session_id, s.project_key, s.agent_id", _span,
               joins=TURN_JOIN),
    AppendOnly("agent_messages", "x.message_id, x.turn_id, x.session_id, s.project_key, s.agent_id", _message,
               joins=SESSION_JOIN.format("x")),
    UpdatedInPlace("agent_approvals", "x.session_id, x.turn_id, x.status, s.project_key, s.agent_id", _approval,
                   key="x.approval_id", joins=SESSION_JOIN.format("x"), keep="x.status = 'pending'",
                   signature=("status",), due="(julianday(x.expires_at) - 2440587.5) * 86400.0",
                   deletes=Deletes.DELETE),
))
