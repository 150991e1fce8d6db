"""stageflow's approval queue (`agent_approvals`) and the decision write.

A decision is stageflow's own `decideApproval` statement, first-writer-wins on `status = 'pending'`,
with one more guard agentdesk adds: the deadline has not passed (an expired approval cannot be
approved, even before the runtime's sweep marks it). stageflow ignores the statement's row count;
agentdesk checks it and tells the loser who decided and when, from `actor_json`.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import AlreadyDecided, Expired, NotFound
from agentdesk.store.persistence.bus import Change
from agentdesk.store.sources import unreadable
from agentdesk.store.sources.parsing import approval_status, iso_now, json_object, parse_time
from agentdesk.store.sources.sql import Row, one, rows
from agentdesk.store.sources.stageflow.common import CANONICAL_APPROVAL_SQL, DECISION_STATUS, actor_name, missing
from agentdesk.store.sources.stageflow.ids import agent_node_id, task_id

APPROVALS_SQL = f"""
SELECT a.*, s.project_key, s.agent_id, {CANONICAL_APPROVAL_SQL} AS shown_status,
       (SELECT sp.span_id FROM agent_spans sp
         WHERE sp.turn_id = a.turn_id
           AND (CASE WHEN json_valid(sp.attributes_json)
                     THEN json_extract(sp.attributes_json, '$.approval_id') END) = a.approval_id
         ORDER BY sp.started_at LIMIT 1) AS gate_span_id
  FROM agent_approvals a LEFT JOIN agent_sessions s ON s.session_id = a.session_id"""

DECIDE_SQL = """UPDATE agent_approvals SET status = :status, decided_at = :now, actor_json = :actor
 WHERE approval_id = :approval_id AND status = 'pending' AND expires_at > :now"""
"""stageflow's decideApproval, plus `expires_at > now`: the same ISO TEXT comparison its sweep uses."""

EXPIRE_SQL = """UPDATE agent_approvals SET status = 'expired', decided_at = :now, actor_json = NULL
 WHERE approval_id = :approval_id AND status = 'pending'"""
"""What stageflow's expireApprovals runs for each overdue approval (`actor: null` = the runtime)."""


def approvals(conn: Connection, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
    """pending oldest first (the queue), any other status newest first; "all"/None for everything."""
    where, params = "", {"now": iso_now(), "limit": limit}
    if status is not None and status != "all":
        where = f" WHERE {CANONICAL_APPROVAL_SQL} = :status"
        params["status"] = status
    order = "a.created_at" if status == "pending" else "a.created_at DESC"
    found = rows(conn, f"{APPROVALS_SQL}{where} ORDER BY {order}, a.approval_id LIMIT :limit", **params)
    return unreadable.each(found, _approval, _unreadable)


def approval(conn: Connection, approval_id: str) -> rm.Approval:
    found = one(conn, f"{APPROVALS_SQL} WHERE a.approval_id = :aid", aid=approval_id, now=iso_now())
    if found is None:
        return missing("approval", approval_id)
    return unreadable.each([found], _approval, _unreadable)[0]


def _unreadable(r: Row, why: str) -> rm.Approval:
    return unreadable.approval(r, why, id_column="approval_id", created_column="created_at",
                               session_id=r.get("session_id"), run_id=r.get("turn_id"))


def _approval(r: Row) -> rm.Approval:
    """`decided_by` is the actor's name (or id); `null` actor means the runtime expired it."""
    project_key = r["project_key"] or ""
    agent_id = r["agent_id"] or ""
    reason = json_object(r["actor_json"]).get("reason")
    return rm.Approval(
        id=r["approval_id"], tool_call_id=None, project_id=project_key,
        task_id=task_id(project_key, agent_id), session_id=r["session_id"],
        agent_id=agent_node_id(r["session_id"], agent_id), run_id=r["turn_id"] or "",
        span_id=r["gate_span_id"], tool_name=r["tool"], arguments=r["payload_json"],
        payload_hash=r["payload_hash"], status=approval_status(r["shown_status"]),
        created_at=unreadable.required_time(r["created_at"], "created_at"), expires_at=parse_time(r["expires_at"]),
        decided_at=parse_time(r["decided_at"]), decided_by=actor_name(r["actor_json"]),
        reason=reason if isinstance(reason, str) else None,
        edited_arguments=None, edited_hash=None, agent_name=agent_id, project_name=project_key)


def decide(conn: Connection, approval_id: str, approve: bool, actor: str, reason: str | None) -> None:
    """Approve or deny exactly once across processes: the guarded UPDATE, its row count checked."""
    # stageflow's actor shape is inferred ({"kind","id","name"}); the reason rides along because
    # agent_approvals has no column for it, and JSON.parse on the runtime side ignores extra keys.
    actor_json = json.dumps({"kind": "user", "id": actor, "name": actor, "via": "agentdesk",
                             **({"reason": reason} if reason else {})}, ensure_ascii=False)
    now = iso_now()
    status = DECISION_STATUS["approve" if approve else "deny"]
    won = conn.execute(text(DECIDE_SQL), {"status": status, "now": now, "actor": actor_json,
                                          "approval_id": approval_id})
    if won.rowcount != 1:
        _explain_lost(conn, approval_id)


def _explain_lost(conn: Connection, approval_id: str) -> None:
    row = one(conn, "SELECT status, expires_at, decided_at, actor_json FROM agent_approvals WHERE approval_id = :aid",
              aid=approval_id)
    if row is None:
        raise NotFound(f"There is no approval with id {approval_id} in this stageflow database.")
    if row["status"] == "pending" or row["status"] == "expired":
        raise Expired(f"Approval {approval_id} expired at {row['expires_at']}; it can no longer be "
                      "approved or denied.")
    status = "denied" if row["status"] in ("denied", "rejected") else row["status"]
    raise AlreadyDecided(approval_id, status, actor_name(row["actor_json"]), row["decided_at"])


def expire_overdue(conn: Connection) -> list[str]:
    """stageflow's own sweep (expireApprovals): every overdue pending approval, in the caller's transaction."""
    now = iso_now()
    due = [r["approval_id"] for r in rows(
        conn, "SELECT approval_id FROM agent_approvals WHERE status = 'pending' AND expires_at <= :now", now=now)]
    return [aid for aid in due if conn.execute(text(EXPIRE_SQL), {"now": now, "approval_id": aid}).rowcount == 1]


def approval_change(a: rm.Approval) -> Change:
    parents = {"project": a.project_id, "task": a.task_id, "session": a.session_id, "agent": a.agent_id}
    if a.run_id:
        parents["run"] = a.run_id
    return Change("approval", "update", a.id, parents, origin="agentdesk")
