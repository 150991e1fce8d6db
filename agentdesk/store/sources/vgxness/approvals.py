"""vgxness's approval queue (`run_approvals`) and the resolution write.

Each approval hangs on the `run_events` row that raised it (`decision_event_id`, UNIQUE), which is
also its span on the timeline and where its tool and arguments are read from. A decision is one
`BEGIN IMMEDIATE` transaction (vgxness's own convention) with one guarded UPDATE that satisfies the
table's CHECK (resolved_at and resolved_by set together with the new status); a row count of 0 means
someone resolved it first, and the loser is told who and when.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import AlreadyDecided, NotFound
from agentdesk.store.persistence.bus import Change
from agentdesk.store.sources import unreadable
from agentdesk.store.sources.parsing import approval_status, iso_now, json_value, parse_time
from agentdesk.store.sources.sql import Row, one, rows
from agentdesk.store.sources.vgxness.common import APPROVAL_STATUS_SQL, agent_projects, missing, parents

APPROVALS_SQL = f"""
SELECT ap.*, {APPROVAL_STATUS_SQL} AS shown_status, r.project AS run_project, r.selected_agent_id,
       ag.name AS agent_name, e.title AS event_title, e.payload_json AS event_payload
  FROM run_approvals ap JOIN runs r ON r.id = ap.run_id
  LEFT JOIN agents ag ON ag.id = r.selected_agent_id
  LEFT JOIN run_events e ON e.id = ap.decision_event_id"""

RESOLVE_SQL = """UPDATE run_approvals
   SET status = :status, resolved_at = :now, resolved_by = :actor, resolution_reason = :reason
 WHERE id = :approval_id AND status = 'pending'"""

DECISION_STATUS = {True: "approved", False: "rejected"}


def tool_and_arguments(title: str | None, payload_json: str | None) -> tuple[str, str]:
    """The tool and arguments an approval is about, from its event's payload (shape inferred)."""
    payload = json_value(payload_json)
    if isinstance(payload, dict):
        tool = payload.get("tool") if isinstance(payload.get("tool"), str) else None
        args = payload.get("args")
        arguments = json.dumps(args, ensure_ascii=False) if args is not None else (payload_json or "")
        return tool or title or "", arguments
    return title or "", payload_json or ""


def approvals(conn: Connection, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
    """pending oldest first (the queue), any other status newest first; "all"/None for everything."""
    where = f" WHERE {APPROVAL_STATUS_SQL} = :status" if status is not None and status != "all" else ""
    order = "ap.requested_at" if status == "pending" else "ap.requested_at DESC"
    homes = agent_projects(conn)
    found = rows(conn, f"{APPROVALS_SQL}{where} ORDER BY {order}, ap.id LIMIT :limit", limit=limit, status=status)
    return unreadable.each(found, lambda r: _approval(r, homes), _unreadable)


def approval(conn: Connection, approval_id: str) -> rm.Approval:
    found = one(conn, f"{APPROVALS_SQL} WHERE ap.id = :aid", aid=approval_id)
    if found is None:
        return missing("approval", approval_id)
    homes = agent_projects(conn)
    return unreadable.each([found], lambda r: _approval(r, homes), _unreadable)[0]


def _unreadable(r: Row, why: str) -> rm.Approval:
    return unreadable.approval(r, why, id_column="id", created_column="requested_at", run_id=r.get("run_id"),
                               agent_id=r.get("selected_agent_id"))


def _approval(r: Row, homes: dict[str, str]) -> rm.Approval:
    """No deadline (vgxness has none) and no payload hash (it keeps none): both shown as absent."""
    project: str = homes.get(r["selected_agent_id"]) or r["run_project"]
    tool, arguments = tool_and_arguments(r["event_title"], r["event_payload"])
    p = parents(project)
    return rm.Approval(
        id=r["id"], tool_call_id=None, project_id=project, task_id=p["task"], session_id=p["session"],
        agent_id=r["selected_agent_id"], run_id=r["run_id"], span_id=r["decision_event_id"],
        tool_name=tool, arguments=arguments, payload_hash="", status=approval_status(r["shown_status"]),
        created_at=unreadable.required_time(r["requested_at"], "requested_at"),
        expires_at=None, decided_at=parse_time(r["resolved_at"]), decided_by=r["resolved_by"],
        reason=r["resolution_reason"], edited_arguments=None, edited_hash=None,
        agent_name=r["agent_name"] or r["selected_agent_id"], project_name=project)


def decide(conn: Connection, approval_id: str, approve: bool, actor: str, reason: str | None) -> None:
    """Resolve a pending approval exactly once across processes (guard + row count)."""
    won = conn.execute(text(RESOLVE_SQL), {"status": DECISION_STATUS[approve], "now": iso_now(), "actor": actor,
                                           "reason": reason, "approval_id": approval_id})
    if won.rowcount != 1:
        row = one(conn, "SELECT status, resolved_at, resolved_by FROM run_approvals WHERE id = :a", a=approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id} in this vgxness database.")
        shown = "denied" if row["status"] == "rejected" else row["status"]
        raise AlreadyDecided(approval_id, shown, row["resolved_by"], row["resolved_at"])


def approval_change(decided: rm.Approval) -> Change:
    where = parents(decided.project_id, decided.agent_id, decided.run_id)
    return Change("approval", "update", decided.id, where, origin="agentdesk")
