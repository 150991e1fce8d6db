"""What a trace's write needs to know of the store before it writes, asked in one statement.

Why: on PostgreSQL every statement is a network round trip, and a small trace (20 spans) asked
about six things one by one (its run, project, task and session; whether another import has rows
staged it must claim; whether log records wait for its spans): 5,000 traces meant 30,000 round
trips that each returned the same "not there". `probe` asks them all at once. Its answers hold for
the transaction that asked (a writer holds the writers' turn until it commits, so nobody else
writes meanwhile); a writer drops them when it moves to another transaction (`TraceWriter.rebind`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, exists, select

from agentdesk.store.ingest.events import PENDING_PREFIX
from agentdesk.store.persistence import schema as sc


@dataclass(frozen=True, slots=True)
class Probe:
    run: tuple[str, str, str, str] | None
    """The stored run's (project, task, session, agent), or None: the trace is new."""
    project: bool
    task: bool
    session: bool
    """Whether the project, task and session a new run would be filed under are stored already."""
    others_staged: bool
    """Another import has containers staged (hidden): this trace may have to claim some (`_claim_shared`)."""
    events_waiting: bool
    """Log records that came before this trace's spans wait in `agentdesk_meta` (`events.adopt_pending`)."""


def probe(conn: Connection, run_id: str, project_id: str, task_id: str, session_id: str, trace_id: str) -> Probe:
    """The answers for one trace, in one round trip (scalar subqueries, each a primary-key or index lookup)."""
    R, St, M = sc.RunRow, sc.ImportStagingRow, sc.MetaRow
    run = [select(column).where(R.id == run_id).scalar_subquery()
           for column in (R.project_id, R.task_id, R.session_id, R.agent_id)]
    row = conn.execute(select(
        *run,
        exists().where(sc.ProjectRow.id == project_id),
        exists().where(sc.TaskRow.id == task_id),
        exists().where(sc.SessionRow.id == session_id),
        exists().where(St.kind != "run", St.run_id != run_id),
        exists().where(M.key.startswith(PENDING_PREFIX + trace_id)))).one()
    stored = None if row[0] is None else (str(row[0]), str(row[1]), str(row[2]), str(row[3]))
    return Probe(stored, bool(row[4]), bool(row[5]), bool(row[6]), bool(row[7]), bool(row[8]))
