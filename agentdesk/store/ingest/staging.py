"""A large trace written in many short transactions, hidden until a last short one makes it whole.

Why: a 100,000-span trace in one transaction held the write lock for seconds, and an
operator's decision waited behind all of it. Now the import writes such a trace slice
by slice (each slice a transaction of at most ~`IMPORT_SLICE_S` of lock, ended early
when an operator's write waits), and the rows it *creates* (project, task, session,
agents, run) are named in `import_staging` in the same transaction as their insert.
Every reader skips what is named there (`visible`), so spans written into a staged run
are unreachable: no tree row, no count, no search hit, no change-log event. The flip
(`TraceWriter.flip`) deletes the names and publishes the trace's changes in one short
transaction: readers see nothing of the trace, then all of it.

Cancel or crash mid-trace leaves a staged, invisible run. A later import of the same
trace resumes it (span ids already stored are skipped); one nobody has touched for
`STALE_S` is deleted, in slices, by the next import (`clean_stale`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.orm import InstrumentedAttribute

from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.uow import UnitOfWork

STALE_S = 600.0
"""A staged trace whose importer wrote nothing for this long is abandoned (cancelled, crashed)."""
DELETE_SLICE = 2_000
"""Rows deleted per clean-up transaction (each well under the 20 ms slice of an import)."""
STAGED_SQL = "SELECT entity_id FROM import_staging"
"""For raw-SQL readers (the search): `... AND s.run_id NOT IN (STAGED_SQL)`."""


def visible(column: InstrumentedAttribute[Any] | ColumnElement[Any]) -> ColumnElement[bool]:
    """A filter keeping rows whose id (`column`) no unfinished import has staged."""
    return column.not_in(select(sc.ImportStagingRow.entity_id))


def state(uow: UnitOfWork, run_id: str) -> str:
    """"new" (no such run), "staged" (an unfinished import's: resume it) or "visible"."""
    if uow.session.get(sc.RunRow, run_id) is None:
        return "new"
    return "staged" if uow.session.get(sc.ImportStagingRow, run_id) is not None else "visible"


def stale_runs(store: Store, keep: Collection[str] = (), now: float | None = None) -> list[str]:
    """Staged runs no importer has touched for `STALE_S` (not those in `keep`: about to be resumed)."""
    limit = (time.time() if now is None else now) - STALE_S
    St = sc.ImportStagingRow
    with store.reading() as s:
        rows = s.execute(select(St.run_id).where(St.kind == "run").group_by(St.run_id)
                         .having(func.max(St.heartbeat_at) < limit)).scalars().all()
    return [r for r in rows if r not in keep]


def clean_stale(store: Store, keep: Collection[str] = (), now: float | None = None) -> int:
    """Delete abandoned staged traces, `DELETE_SLICE` rows per transaction; how many runs went.

    On PostgreSQL only the store's owner deletes them: no level below it holds DELETE on the runtime's tables
    (migration 0012), so an agent's or a person's import leaves them (hidden from every reader) to the owner's."""
    login = store.login
    if login is not None and not login.owner:
        return 0
    gone = 0
    for run_id in stale_runs(store, keep, now):
        while _delete_slice(store, run_id):
            pass
        gone += 1
    return gone


def _delete_slice(store: Store, run_id: str) -> bool:
    """One short transaction of the clean-up of `run_id`; False once nothing of it is left."""
    St, S = sc.ImportStagingRow, sc.SpanRow
    with UnitOfWork(store, runtime=True) as uow:
        c = uow.session.connection()
        staged = dict(c.execute(select(St.entity_id, St.kind).where(St.run_id == run_id)).all())
        if staged.get(run_id) != "run":  # resumed and flipped meanwhile, or already gone
            return False
        ids = list(c.execute(select(S.id).where(S.run_id == run_id).limit(DELETE_SLICE)).scalars())
        if ids:
            c.execute(delete(sc.SpanContextRow).where(sc.SpanContextRow.span_id.in_(ids)))
            c.execute(delete(sc.OtelOrphanRow).where(sc.OtelOrphanRow.span_id.in_(ids)))
            c.execute(delete(S).where(S.id.in_(ids)))
            return True
        agents = [e for e, k in staged.items() if k == "agent"]
        Rev, Item, Group = sc.ContextItemRevisionRow, sc.ContextItemRow, sc.ContextGroupRow
        items = select(Item.id).where(Item.agent_id.in_(agents))
        doomed = list(c.execute(select(Rev.item_id).where(Rev.item_id.in_(items)).limit(DELETE_SLICE)).scalars())
        if doomed:
            c.execute(delete(Rev).where(Rev.item_id.in_(doomed)))
            return True
        doomed = list(c.execute(items.limit(DELETE_SLICE)).scalars())
        if doomed:
            c.execute(delete(Item).where(Item.id.in_(doomed)))
            return True
        doomed = list(c.execute(select(Group.id).where(Group.agent_id.in_(agents)).limit(DELETE_SLICE)).scalars())
        if doomed:
            c.execute(delete(Group).where(Group.id.in_(doomed)))
            return True
        if c.execute(select(sc.ApprovalRow.id).where(sc.ApprovalRow.run_id == run_id).limit(1)).first():
            # an agent asked for a decision under it: keep the rows (hidden), never lose an approval
            c.execute(update(St).where(St.run_id == run_id).values(heartbeat_at=uow.now + 10 * STALE_S))
            return False
        c.execute(delete(sc.OtelOrphanRow).where(sc.OtelOrphanRow.run_id == run_id))
        c.execute(delete(sc.RunRow).where(sc.RunRow.id == run_id))
        c.execute(update(sc.AgentRow).where(sc.AgentRow.id.in_(agents)).values(parent_agent_id=None))
        c.execute(delete(sc.AgentRow).where(sc.AgentRow.id.in_(agents)))
        mine = {kind: [e for e, k in staged.items() if k == kind] for kind in ("session", "task", "project")}
        c.execute(delete(sc.SessionRow).where(sc.SessionRow.id.in_(mine["session"])))
        c.execute(delete(sc.TaskRow).where(sc.TaskRow.id.in_(mine["task"])))
        c.execute(delete(sc.ProjectRow).where(sc.ProjectRow.id.in_(mine["project"])))
        c.execute(delete(St).where(St.run_id == run_id))
        return False
