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

from sqlalchemy import Connection

from agentdesk.store.ingest.events import PENDING_PREFIX
from agentdesk.store.ingest.outbox import ask


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
    revision: int | None = None
    """The stored run's revision: whether a skeleton this process kept is still the stored one
    (`skeleton_cache`)."""


PROBE_SQL = (
    "SELECT r.project_id, r.task_id, r.session_id, r.agent_id, "
    "EXISTS (SELECT 1 FROM projects WHERE id = :project), EXISTS (SELECT 1 FROM tasks WHERE id = :task), "
    "EXISTS (SELECT 1 FROM sessions WHERE id = :session), "
    "EXISTS (SELECT 1 FROM import_staging WHERE kind != 'run' AND run_id != :run), "
    "EXISTS (SELECT 1 FROM agentdesk_meta WHERE key LIKE :pending || '%'), r.revision "
    "FROM (SELECT 1 AS one) o LEFT JOIN runs r ON r.id = :run")
"""Primary-key and index lookups, as the six separate questions were (the last as `startswith` wrote it)."""


def probe(conn: Connection, run_id: str, project_id: str, task_id: str, session_id: str, trace_id: str) -> Probe:
    """The answers for one trace, in one round trip (sent with the writes queued before it: `outbox`)."""
    row = ask(conn, PROBE_SQL, {"run": run_id, "project": project_id, "task": task_id, "session": session_id,
                                "pending": PENDING_PREFIX + trace_id})
    assert row is not None
    stored = None if row[0] is None else (str(row[0]), str(row[1]), str(row[2]), str(row[3]))
    return Probe(stored, bool(row[4]), bool(row[5]), bool(row[6]), bool(row[7]), bool(row[8]),
                 None if row[9] is None else int(row[9]))
