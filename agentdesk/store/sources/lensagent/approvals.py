"""lensagent approvals: a `calls` row held in `WAITING` with `wait_reason='policy_review'`.

There is no approvals table (reference §1.1, §4.2). The approval's id is the call's id. What
happened after review is read from where the call went, since lensagent keeps no decision row:
- still `WAITING`/`policy_review` → pending (no expiry: lensagent has no deadline, `expires_at=None`);
- it went on (`QUEUED`, `RUNNING`, waiting for user input, or TERMINAL `success`/`failed`) → approved;
- TERMINAL `cancelled` without running → denied;
- TERMINAL `interrupted` before anyone approved → expired (closed without a decision);
- otherwise the review record decides (`auto_review_json.approved`, else `auto_review_passed`).
Calls never reviewed (no review record, never pending) are not approvals.
Who decided: agentdesk's own decisions carry the operator's name in `auto_review_json`
(0.1.2); a review record that agrees with the outcome reads "auto-review"; anything else
(every 0.1.0 decision, a human decision taken through lensagent itself) is unknown (None).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources import unreadable
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.sql import Row, rows
from agentdesk.store.validation import payload_hash

PENDING_WHERE = "c.state = 'WAITING' AND c.wait_reason = 'policy_review'"


def select(layout: Layout, pending_only: bool = False) -> str:
    review = layout.col("calls", "auto_review_json", "c")
    reviewed = "c.auto_review_passed IS NOT NULL" + (
        " OR c.auto_review_json IS NOT NULL" if layout.has("calls", "auto_review_json") else ""
    )
    where = PENDING_WHERE if pending_only else f"({PENDING_WHERE}) OR {reviewed}"
    return f"""
SELECT c.id, c.project_id, c.agent_id, c.step_id, c.capability_id, c.input_json, c.state, c.wait_reason,
       c.outcome, c.auto_review_passed, {review}, c.revision, c.created_at, c.updated_at,
       a.name AS agent_name, a.task_id, a.session_id, s.run_id, p.name AS project_name,
       m.context_revision AS attempt_context_revision, r.error_message AS result_error
FROM calls c
JOIN projects p ON p.id = c.project_id
LEFT JOIN agents a ON a.id = c.agent_id
LEFT JOIN steps s ON s.id = c.step_id
LEFT JOIN model_attempts m ON m.id = c.attempt_id
LEFT JOIN results r ON r.call_id = c.id
WHERE {where}"""


def status_of(c: dict[str, Any]) -> str:
    if c["state"] == "WAITING" and c["wait_reason"] == "policy_review":
        return "pending"
    review = parse.json_object(c["auto_review_json"])
    approved = (
        review["approved"] if isinstance(review.get("approved"), bool) else c["auto_review_passed"] == 1
    )
    if c["state"] in ("QUEUED", "RUNNING", "WAITING") or c["outcome"] in ("success", "failed"):
        return "approved"
    if c["outcome"] == "cancelled":
        return "denied"
    if c["outcome"] == "interrupted" and not approved:
        return "expired"
    return "approved" if approved else "denied"


def value(c: dict[str, Any]) -> rm.Approval:
    status = parse.approval_status(status_of(c))
    review = parse.json_object(c["auto_review_json"])
    ours = review.get("reviewer") == "operator"
    automatic = bool(review) and not ours and review.get("approved") is (status == "approved")
    decided_by = review.get("actor") if ours else ("auto-review" if automatic else None)
    reason = review.get("reason") or review.get("rationale") or None
    if status == "denied" and not reason:
        reason = c["result_error"]
    return rm.Approval(
        c["id"],
        c["id"],
        c["project_id"],
        c["task_id"] or "",
        c["session_id"] or "",
        c["agent_id"] or "",
        c["run_id"] or "",
        f"call:{c['id']}",
        c["capability_id"],
        c["input_json"],
        payload_hash(c["capability_id"], c["input_json"]),
        status,
        unreadable.required_time(c["created_at"], "created_at"),
        None,
        parse.parse_time(review.get("decided_at")) if status != "pending" and ours else None,
        None if status == "pending" else decided_by,
        None if status == "pending" else reason,
        None,
        None,
        c["agent_name"] or "",
        c["project_name"] or "",
        c["attempt_context_revision"],
    )


def approvals(conn: Connection, layout: Layout, status: str | None, limit: int) -> list[rm.Approval]:
    """Pending oldest first (the queue's order); any other selection newest first."""
    sql = select(layout, pending_only=status == "pending")
    found = unreadable.each(rows(conn, sql + " ORDER BY c.created_at, c.id"), value, _unreadable)
    if status not in (None, "all"):  # an unreadable row stays in every selection: its real status is unknown
        found = [a for a in found if a.status in (status, unreadable.UNREADABLE)]
    if status != "pending":
        found.reverse()
    return found[:limit]


def approval(conn: Connection, layout: Layout, approval_id: str) -> rm.Approval:
    found = rows(conn, f"SELECT * FROM ({select(layout)}) WHERE id = :i", i=approval_id)
    if not found:
        raise NotFound(
            f"There is no approval with id {approval_id} (no call of that id was held for review)."
        )
    return unreadable.each(found[:1], value, _unreadable)[0]


def _unreadable(c: Row, why: str) -> rm.Approval:
    return unreadable.approval(c, why, id_column="id", created_column="created_at", project_id=c.get("project_id"),
                               agent_id=c.get("agent_id"), run_id=c.get("run_id"))
