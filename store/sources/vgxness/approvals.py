"""vgxness's approval queue (`run_approvals`) and the resolution write.

Each approval hangs on the `run_events` row that raised it (`decision_event_id`, UNIQUE), which is
also its span on the timeline and where its tool and arguments are read from. A decision is one
`BEGIN IMMEDIATE` transaction (vgxness's own convention) with one guarded UPDATE that satisfies the
table's CHECK (resolved_at and resolved_by set together with the new status); a row count of 0 means
someone resolved it first, and the loser is told who and when.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from agentdesk.store import readmodel as rm
from agentdesk.store.bus import Change
from agentdesk.store.errors import AlreadyDecided, NotFound
from agentdesk.store.sources.vgxness.common import (
    APPROVAL_STATUS_SQL,
    VgxnessBase,
    agent_projects,
    iso_now,
    json_any,
    parents,
    parse_time,
    time_of,
)

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
    payload = json_any(payload_json)
    if isinstance(payload, dict):
        tool = payload.get("tool") if isinstance(payload.get("tool"), str) else None
        args = payload.get("args")
        arguments = json.dumps(args, ensure_ascii=False) if args is not None else (payload_json or "")
        return tool or title or "", arguments
    return title or "", payload_json or ""


class ApprovalMixin(VgxnessBase):
    def approvals(self, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
        """pending oldest first (the queue), any other status newest first; "all"/None for everything."""
        where, params = "", {"limit": limit, "status": status}
        if status is not None and status != "all":
            where = f" WHERE {APPROVAL_STATUS_SQL} = :status"
        order = "ap.requested_at" if status == "pending" else "ap.requested_at DESC"
        with self.reading() as conn:
            homes = agent_projects(conn)
            rows = conn.execute(text(f"{APPROVALS_SQL}{where} ORDER BY {order}, ap.id LIMIT :limit"),
                                params).mappings().all()
        return [self._approval(dict(r), homes) for r in rows]

    def approval(self, approval_id: str) -> rm.Approval:
        with self.reading() as conn:
            homes = agent_projects(conn)
            row = conn.execute(text(f"{APPROVALS_SQL} WHERE ap.id = :aid"),
                               {"aid": approval_id}).mappings().first()
        return self._approval(dict(row), homes) if row else self._missing("approval", approval_id)

    @staticmethod
    def _approval(r: dict[str, Any], homes: dict[str, str]) -> rm.Approval:
        """No deadline (vgxness has none) and no payload hash (it keeps none): both shown as absent."""
        project = homes.get(r["selected_agent_id"], r["run_project"])
        tool, arguments = tool_and_arguments(r["event_title"], r["event_payload"])
        p = parents(project)
        return rm.Approval(
            id=r["id"], tool_call_id=None, project_id=project, task_id=p["task"], session_id=p["session"],
            agent_id=r["selected_agent_id"], run_id=r["run_id"], span_id=r["decision_event_id"],
            tool_name=tool, arguments=arguments, payload_hash="", status=r["shown_status"],
            created_at=time_of(r["requested_at"]),
            expires_at=None, decided_at=parse_time(r["resolved_at"]), decided_by=r["resolved_by"],
            reason=r["resolution_reason"], edited_arguments=None, edited_hash=None,
            agent_name=r["agent_name"] or r["selected_agent_id"], project_name=project)

    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        """Resolve a pending approval exactly once across processes (guard + row count)."""
        capability, actor, reason = self.check_decision(approve, actor, reason, edited_arguments)
        with self.writing(capability) as conn:
            self.guard_shown(approval_id, expected_arguments_hash)
            won = conn.execute(text(RESOLVE_SQL), {
                "status": DECISION_STATUS[approve], "now": iso_now(), "actor": actor, "reason": reason,
                "approval_id": approval_id})
            if won.rowcount != 1:
                row = conn.execute(text("SELECT status, resolved_at, resolved_by FROM run_approvals"
                                        " WHERE id = :a"), {"a": approval_id}).mappings().first()
                if row is None:
                    raise NotFound(f"There is no approval with id {approval_id} in this vgxness database.")
                shown = "denied" if row["status"] == "rejected" else row["status"]
                raise AlreadyDecided(approval_id, shown, row["resolved_by"], row["resolved_at"])
        decided = self.approval(approval_id)
        where = parents(decided.project_id, decided.agent_id, decided.run_id)
        self.bus.publish([Change("approval", "update", approval_id, where, origin="agentdesk")])
        return decided
