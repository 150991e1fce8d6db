"""What a trace's write needs to know of the store before it writes, asked in one statement.

Why: on PostgreSQL every statement is a network round trip, and a small trace (20 spans) asked
about six things one by one (its run, project, task and session; whether another import has rows
staged it must claim; whether log records wait for its spans): 5,000 traces meant 30,000 round
trips that each returned the same "not there". `probe` asks them all at once. Its answers hold for
the transaction that asked (a writer holds the writers' turn until it commits, so nobody else
writes meanwhile); a writer drops them when it moves to another transaction (`TraceWriter.rebind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.ingest.events import PENDING_PREFIX
from agentdesk.store.ingest.outbox import ask, ask_rows


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


@dataclass(frozen=True, slots=True)
class Filing:
    """Where a trace goes: the ids `probe` asks about (`trace_write.filing` derives them from the trace)."""
    trace_id: str
    run_id: str
    project_id: str
    task_id: str
    session_id: str


AHEAD_SQL = (
    "SELECT k.run, r.project_id, r.task_id, r.session_id, r.agent_id, "
    "EXISTS (SELECT 1 FROM projects WHERE id = k.project), EXISTS (SELECT 1 FROM tasks WHERE id = k.task), "
    "EXISTS (SELECT 1 FROM sessions WHERE id = k.session), "
    "EXISTS (SELECT 1 FROM import_staging WHERE kind != 'run' AND run_id != k.run), "
    "EXISTS (SELECT 1 FROM agentdesk_meta WHERE key LIKE k.pending || '%'), r.revision "
    "FROM unnest(CAST(:runs AS text[]), CAST(:projects AS text[]), CAST(:tasks AS text[]), "
    "CAST(:sessions AS text[]), CAST(:pendings AS text[])) AS k(run, project, task, session, pending) "
    "LEFT JOIN runs r ON r.id = k.run")
"""`PROBE_SQL` for many traces at once (PostgreSQL)."""


@dataclass(slots=True)
class Ahead:
    """PostgreSQL: the probes of the traces one transaction is about to write, asked together (`ask_ahead`).

    Why: with one probe per trace, every trace waited for the server to insert the trace before it (the
    probe is read after the writes queued before it: `outbox`); asked ahead, a trace's write waits for no
    answer, its rows are `post`ed, and the server inserts them while the client prepares the next trace.
    The answers hold for the transaction that asked, corrected by what its own writes did since (`changed`):
    a trace may create the project, task or session a later one is filed under, or empty a session."""

    answers: dict[str, Probe] = field(default_factory=dict)
    """By run id."""
    changed: dict[str, bool] = field(default_factory=dict)
    """Containers (project, task, session ids) this transaction created (True) or deleted (False) since."""

    def take(self, filing: Filing) -> Probe | None:
        """The trace's answer, as of now; None when it was not asked (the writer probes it alone)."""
        found = self.answers.pop(filing.run_id, None)
        if found is None:
            return None
        now = self.changed
        return replace(found, project=now.get(filing.project_id, found.project),
                       task=now.get(filing.task_id, found.task), session=now.get(filing.session_id, found.session))


def ask_ahead(conn: Connection, ahead: Ahead, filings: Sequence[Filing]) -> None:
    """Ask the probes of `filings` in one statement, into `ahead` (PostgreSQL)."""
    if not filings:
        return
    params: dict[str, Any] = {
        "runs": [f.run_id for f in filings], "projects": [f.project_id for f in filings],
        "tasks": [f.task_id for f in filings], "sessions": [f.session_id for f in filings],
        "pendings": [PENDING_PREFIX + f.trace_id for f in filings]}
    for row in ask_rows(conn, AHEAD_SQL, params):
        ahead.answers[str(row[0])] = _answer(row[1:])


def _answer(row: Sequence[Any]) -> Probe:
    stored = None if row[0] is None else (str(row[0]), str(row[1]), str(row[2]), str(row[3]))
    return Probe(stored, bool(row[4]), bool(row[5]), bool(row[6]), bool(row[7]), bool(row[8]),
                 None if row[9] is None else int(row[9]))


def probe(conn: Connection, filing: Filing) -> Probe:
    """The answers for one trace, in one round trip (sent with the writes queued before it: `outbox`)."""
    row = ask(conn, PROBE_SQL, {"run": filing.run_id, "project": filing.project_id, "task": filing.task_id,
                                "session": filing.session_id, "pending": PENDING_PREFIX + filing.trace_id})
    assert row is not None
    return _answer(row)
