"""Knowing someone is still waiting: the requester's heartbeat on a pending approval.

While a runtime waits for a decision it renews `requester_heartbeat_at` every
`HEARTBEAT_INTERVAL_S` (AgentRuntime.wait_for_decision, the simulator). A pending
approval whose heartbeat is older than `GONE_AFTER_S` (three missed beats) has
nobody waiting for it: the queue greys it, sorts it last and offers to dismiss
such approvals in bulk. Approvals that never had a heartbeat (older runtimes,
foreign systems) are never "gone": there is nothing to go on.

A beat is a compare-and-set on the pending status, with no audit record (it
decides nothing) and no revision bump (it must never make an operator's
decision stale). It does write one change-log row (entity "approval", op
"heartbeat"), so other windows re-read the row; at one beat per waiting
approval every 5 s that is a handful of rows a minute, and the window's bridge
coalesces them into one update per burst. Dismissing gone approvals is an
operator command like any other: one transaction, CAS per approval, audited.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select, text, update

from agentdesk.store.approvals.commands import approval_parents
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected, on_server
from agentdesk.store.validation import check_name

HEARTBEAT_INTERVAL_S = 5.0
GONE_AFTER_S = 3 * HEARTBEAT_INTERVAL_S
GONE_REASON = "requester gone"
SERVER_BEAT = text("SELECT agentdesk_beat(:id, :origin)")
SERVER_DISMISS = text("SELECT * FROM agentdesk_dismiss_gone(:actor, :ids, :after, :reason, :origin)")


def beat(store: Store, approval_id: str) -> bool:
    """Say the requester still waits; False once the approval is no longer pending (or is gone)."""
    A = sc.ApprovalRow
    if store.is_postgres:  # the requester's own beat, through the server (an agent login may update no approval)
        with UnitOfWork(store) as uow:
            change = uow.session.execute(SERVER_BEAT, {"id": approval_id, "origin": store.origin}).scalar()
            if change is not None:
                adopt_server_changes(uow, [change])
        return change is not None
    with UnitOfWork(store) as uow:
        won = affected(uow.session.execute(
            update(A).where(A.id == approval_id, A.status == "pending")
            .values(requester_heartbeat_at=uow.now).execution_options(synchronize_session=False)))
        if won:
            row = uow.session.get(A, approval_id)
            assert row is not None
            uow.record("approval", "heartbeat", approval_id, approval_parents(row), row.revision)
    return bool(won)


class Heartbeat:
    """Beats for one approval when due; call `tick()` from the wait loop as often as you like."""

    def __init__(self, store: Store, approval_id: str, interval_s: float = HEARTBEAT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.approval_id = approval_id
        self.interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self.beats = 0

    def tick(self) -> None:
        now = self._clock()
        if self._last is None or now - self._last >= self.interval_s:
            self._last = now
            try:
                beaten = beat(self.store, self.approval_id)
            except StoreUnavailable:
                self._last = None  # beat again at the next tick: after an outage, at once (not a full interval on)
                raise
            if beaten:
                self.beats += 1


def is_gone(status: str, heartbeat_at: datetime | None, now: datetime, gone_after_s: float = GONE_AFTER_S) -> bool:
    """A pending approval whose requester stopped beating (never true without any heartbeat)."""
    return status == "pending" and heartbeat_at is not None and now - heartbeat_at > timedelta(seconds=gone_after_s)


def dismiss_gone(store: Store, actor: str, approval_ids: list[str] | None = None,
                 gone_after_s: float = GONE_AFTER_S) -> list[str]:
    """Deny every pending approval whose requester is gone (or just these ids, if still gone).

    Each is a compare-and-set on `pending` *and* the stale heartbeat, so a requester
    that beats again in the meantime keeps its approval. Returns the dismissed ids.
    """
    actor = check_name("actor name", actor)
    require(store.login, "operator", "dismissing requests")
    A = sc.ApprovalRow
    with UnitOfWork(store) as uow:
        if on_server(uow):  # PostgreSQL: the same compare-and-set, audit and change log, in agentdesk_dismiss_gone
            found = uow.session.execute(SERVER_DISMISS, {
                "actor": actor, "ids": approval_ids, "after": gone_after_s, "reason": GONE_REASON,
                "origin": store.origin}).all()
            adopt_server_changes(uow, [c for row in found for c in row.changes])
            return [str(row.approval_id) for row in found]
        cutoff = uow.now - gone_after_s
        query = select(A).where(A.status == "pending", A.requester_heartbeat_at.is_not(None),
                                A.requester_heartbeat_at < cutoff)
        if approval_ids is not None:
            query = query.where(A.id.in_(approval_ids))
        dismissed = []
        for row in uow.session.execute(query).scalars().all():
            won = affected(uow.session.execute(
                update(A).where(A.id == row.id, A.status == "pending", A.requester_heartbeat_at < cutoff)
                .values(status="denied", decided_at=uow.now, decided_by=actor, reason=GONE_REASON,
                        revision=A.revision + 1).execution_options(synchronize_session=False)))
            if not won:
                continue
            if row.tool_call_id:
                uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == row.tool_call_id)
                                    .values(status="denied"))
            dismissed.append(row.id)
            uow.audit(actor, "approval.denied", "approval", row.id, {
                "reason": GONE_REASON, "tool": row.tool_name, "payload_hash": row.payload_hash,
                "requester_heartbeat_at": row.requester_heartbeat_at})
            uow.record("approval", "update", row.id, approval_parents(row), row.revision + 1)
    return dismissed


def beat_many(store: Store, approval_ids: list[str], chunk: int = 500) -> int:
    """One beat for many waiting requesters in one transaction (the agent API beats for every held wait).

    One UPDATE ... RETURNING per chunk (SQLite 3.35+, PostgreSQL) finds and beats the still pending ones.
    """
    A = sc.ApprovalRow
    beaten = 0
    with UnitOfWork(store, runtime=True) as uow:
        for n in range(0, len(approval_ids), chunk):
            rows = uow.session.execute(
                update(A).where(A.id.in_(approval_ids[n:n + chunk]), A.status == "pending")
                .values(requester_heartbeat_at=uow.now)
                .returning(A.id, A.project_id, A.task_id, A.session_id, A.agent_id, A.run_id, A.revision)
                .execution_options(synchronize_session=False)).all()
            for r in rows:
                uow.record("approval", "heartbeat", r.id, {"project": r.project_id, "task": r.task_id,
                                                            "session": r.session_id, "agent": r.agent_id,
                                                            "run": r.run_id}, r.revision)
            beaten += len(rows)
    return beaten
