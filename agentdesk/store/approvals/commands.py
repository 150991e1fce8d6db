"""Operator commands on approvals: decide, withdraw, expire.

Each is one transaction guarded by compare-and-set on the approval's status, appends an audit record and
records its changes; a failed guard raises a typed `Conflict` and writes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text, update

from agentdesk.store import readmodel as rm
from agentdesk.store.approvals.reads import read_approval
from agentdesk.store.errors import AlreadyDecided, Expired, InvalidInput, NotFound
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import ts_opt
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.text.arguments import arguments_hash, check_expected_hash, guard_arguments
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected, on_server
from agentdesk.store.validation import (
    canonical_arguments,
    check_name,
    parse_json_arguments,
    payload_hash,
)

SERVER_DECIDE = text("SELECT * FROM agentdesk_decide(:id, :approve, :actor, :reason, :edited, :expected, :origin)")
SERVER_WITHDRAW = text("SELECT * FROM agentdesk_withdraw(:id, :actor, :reason, :origin)")
SERVER_EXPIRE = text("SELECT * FROM agentdesk_expire_overdue(:actor, :origin)")
"""On PostgreSQL (migration 0008) approvals are decided only through these SECURITY DEFINER functions: the server
does the compare-and-set, the hashes, the audit and the change log, so a hand-written client gets exactly what
agentdesk does or nothing. The checks of the caller's input stay here, shared by both backends; the SQLite path
below does the same work in Python."""


def approval_parents(row: sc.ApprovalRow) -> dict[str, str]:
    return {"project": row.project_id, "task": row.task_id, "session": row.session_id,
            "agent": row.agent_id, "run": row.run_id}


def decide(store: Store, approval_id: str, approve: bool, actor: str, reason: str | None = None,
           edited_arguments: str | None = None, *, expected_arguments_hash: str | None = None) -> rm.Approval:
    """Approve or deny a pending, unexpired approval, exactly once even across processes.

    `expected_arguments_hash` is the hash of the arguments the operator was shown: when the stored
    arguments no longer hash to it, the decision is refused as stale. The hash of what was stored
    is recorded with the decision (`approved_hash`, and in the audit record).
    """
    actor = check_name("actor name", actor)
    expected = check_expected_hash(expected_arguments_hash)
    reason = check_name("reason", reason, required=not approve) or None
    edited = edited_hash = None
    if edited_arguments is not None:
        if not approve:
            raise InvalidInput("Arguments can only be edited when approving.")
        edited = canonical_arguments(parse_json_arguments(edited_arguments))
    A = sc.ApprovalRow
    status = "approved" if approve else "denied"
    if store.is_postgres:
        require(store.login, "operator", "deciding")
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_DECIDE, {
                "id": approval_id, "approve": approve, "actor": actor, "reason": reason, "edited": edited,
                "expected": expected, "origin": store.origin}).one()
            _server_outcome(uow, approval_id, found, expected)
        return read_approval(store, approval_id)
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        if edited is not None:
            edited_hash = payload_hash(row.tool_name, edited)
        shown_hash = arguments_hash(row.arguments)
        guard_arguments(approval_id, shown_hash, expected)
        won = affected(uow.session.execute(
            update(A).where(A.id == approval_id, A.status == "pending",
                            (A.expires_at.is_(None)) | (A.expires_at > uow.now))
            .values(status=status, decided_at=uow.now, decided_by=actor, reason=reason,
                    edited_arguments=edited, edited_hash=edited_hash, approved_hash=shown_hash,
                    revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain_lost_decision(uow, approval_id)
        if row.tool_call_id:
            uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == row.tool_call_id)
                                .values(status=status))
        uow.audit(actor, f"approval.{status}", "approval", approval_id, {
            "reason": reason, "tool": row.tool_name, "original_arguments": row.arguments,
            "payload_hash": row.payload_hash, "edited_arguments": edited, "edited_hash": edited_hash,
            "shown_arguments_hash": shown_hash})
        uow.record("approval", "update", approval_id, approval_parents(row), row.revision + 1)
    return read_approval(store, approval_id)


def withdraw(store: Store, approval_id: str, actor: str, reason: str | None = None) -> rm.Approval:
    """The requesting agent takes back its pending approval (it stopped waiting): exactly once.

    Compare-and-set on status `pending` (a deadline already passed does not matter:
    nobody can decide it any more); a decision or expiry that came first wins and raises
    `AlreadyDecided` / `Expired`. Audited as `approval.withdrawn`, change-logged so the
    queue drops the row.
    """
    actor = check_name("actor name", actor)
    reason = check_name("reason", reason, required=False) or None
    A = sc.ApprovalRow
    if store.is_postgres:
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_WITHDRAW, {"id": approval_id, "actor": actor, "reason": reason,
                                                          "origin": store.origin}).one()
            _server_outcome(uow, approval_id, found, None)
        return read_approval(store, approval_id)
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        won = affected(uow.session.execute(
            update(A).where(A.id == approval_id, A.status == "pending")
            .values(status="withdrawn", decided_at=uow.now, decided_by=actor, reason=reason,
                    revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain_lost_decision(uow, approval_id)
        if row.tool_call_id:
            uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == row.tool_call_id)
                                .values(status="withdrawn"))
        uow.audit(actor, "approval.withdrawn", "approval", approval_id, {
            "reason": reason, "tool": row.tool_name, "payload_hash": row.payload_hash})
        uow.record("approval", "update", approval_id, approval_parents(row), row.revision + 1)
    return read_approval(store, approval_id)


def _server_outcome(uow: UnitOfWork, approval_id: str, found: Any, expected: str | None) -> None:
    """What a decision function answered: the write is adopted, or the same typed error as on SQLite."""
    if found.outcome == "not found":
        raise NotFound(f"There is no approval with id {approval_id}.")
    if found.outcome == "stale":
        guard_arguments(approval_id, found.shown_hash, expected)
    if found.outcome != "ok":
        _lost(approval_id, found.status, found.expires_at, found.decided_by, found.decided_at)
    adopt_server_changes(uow, found.changes)


def _explain_lost_decision(uow: UnitOfWork, approval_id: str) -> None:
    uow.session.expire_all()
    row = uow.session.get(sc.ApprovalRow, approval_id)
    assert row is not None
    _lost(approval_id, row.status, row.expires_at, row.decided_by, row.decided_at)


def _lost(approval_id: str, status: str, expires_at: float | None, decided_by: str | None,
          decided_at: float | None) -> None:
    """The loser of a decision race is told who won and when (or that the approval expired)."""
    if status == "pending":
        raise Expired(f"Approval {approval_id} expired at {rm_time(expires_at)} before it was decided; "
                      "it can no longer be approved or denied.")
    if status == "expired":
        raise Expired(f"Approval {approval_id} expired at {rm_time(expires_at)}; "
                      "it can no longer be approved or denied.")
    raise AlreadyDecided(approval_id, status, decided_by, rm_time(decided_at))


def rm_time(value: float | None) -> str | None:
    moment = ts_opt(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else None


def expire_overdue(store: Store, actor: str = "agentdesk") -> list[str]:
    """Mark every pending approval past its deadline as expired; returns their ids."""
    A = sc.ApprovalRow
    with UnitOfWork(store) as uow:
        if on_server(uow):
            found = uow.session.execute(SERVER_EXPIRE, {"actor": actor, "origin": store.origin}).all()
            adopt_server_changes(uow, [c for row in found for c in row.changes])
            return [str(row.approval_id) for row in found]
        rows = uow.session.execute(select(A).where(A.status == "pending", A.expires_at.is_not(None),
                                                   A.expires_at <= uow.now)).scalars().all()
        expired = []
        for row in rows:
            won = affected(uow.session.execute(
                update(A).where(A.id == row.id, A.status == "pending")
                .values(status="expired", decided_at=uow.now, revision=A.revision + 1)
                .execution_options(synchronize_session=False)))
            if won:
                expired.append(row.id)
                uow.audit(actor, "approval.expired", "approval", row.id, {"expires_at": row.expires_at})
                uow.record("approval", "update", row.id, approval_parents(row), row.revision + 1)
    return expired
