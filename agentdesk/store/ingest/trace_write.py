"""What every part of one trace's write shares: its unit of work, its trace, where it files the trace, and how
it records what it changed.

Why a base of its own: writing a trace has three jobs that read and set the same facts (`placement`: which
agent each span belongs to; `correction`: what a late parent changes in the spans stored before it;
`writer`: the rows themselves, their context and the roll-up). Each is a class of its own module over this
one, so the write is read one job at a time, and none imports another's module (no cycles).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, delete, insert
from sqlalchemy import text as sql_text

from agentdesk.store.ingest.outbox import is_postgres
from agentdesk.store.ingest.prepare import Prepared, digest
from agentdesk.store.ingest.probe import Ahead, Filing, Probe
from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.rows import IN_CHUNK, bulk_insert
from agentdesk.store.ingest.skeleton import StoredSpan
from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.persistence import schema as sc
from agentdesk.store.uow import UnitOfWork

DEFAULT_PROJECT = "OpenTelemetry"
IMPORTED_AGENT_PREFIX = "ota_"
"""Agents made from OTel spans: their context is what the model was sent, so views show it read-only."""


def session_row_id(project_id: str, conversation: str | None, trace_id: str) -> str:
    """A trace's session: its conversation's in the project, else one of its own."""
    return "ots_" + digest(project_id, conversation or "trace:" + trace_id)


def filing(index: TraceIndex, default_project: str | None) -> tuple[str, Filing]:
    """The project's name and the ids a trace is filed under (a new run's; a stored run keeps its own):
    rows are found again by these ids, so importing a trace again or elsewhere files it in the same place."""
    name = index.project or default_project or DEFAULT_PROJECT
    project_id = "otp_" + digest(name)
    task_id = "ott_" + digest(project_id)
    session_id = session_row_id(project_id, index.conversation, index.trace_id)
    return name, Filing(index.trace_id, run_row_id(index.trace_id), project_id, task_id, session_id)


class TraceWrite:
    """One trace's write inside a unit of work: the state its jobs share, and recording what changed."""

    project_id: str
    task_id: str
    session_id: str
    run_agent: str
    """The run's agent: the trace's outermost agent span's, else a stand-in named after the service."""
    root_row: str | None
    """The root span's row id, once known (orphans wait under it)."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        self.rebind(uow)
        self.ahead: Ahead | None = None
        """The probes of this transaction's traces, asked together (PostgreSQL import: `write_trace`)."""
        self.staged = staged
        """Written over many transactions (`store.otel.staging`): what it creates is named in
        `import_staging` (hidden from readers) and its change-log rows wait for `flip`."""
        self._deferred: list[tuple[str, str, str, dict[str, str] | None, int | None]] = []
        self.index = index
        self.default_project = default_project
        self.run_id = run_row_id(index.trace_id)
        self.report = IngestReport(traces=1, run_ids=[self.run_id])
        self._first = uow.now
        self._agents: dict[str, dict[str, Any]] = {}
        """The agents this trace derives (id -> parent, model): placed, corrected and rolled up."""
        self._skeleton: list[StoredSpan] | None = None
        """A stored trace's spans (`skeleton.load`), read into `index`: placing decides over the whole trace."""
        self._rebuild: set[str] = set()
        """Agents whose context is written again from their calls at `finish` (`agent_context.rebuild`)."""

    def rebind(self, uow: UnitOfWork) -> None:
        """Continue in another unit of work (a staged trace takes one per slice)."""
        self.uow = uow
        self.conn: Connection = uow.session.connection()
        self._probe: Probe | None = None
        """`prepare`'s answers, good for this transaction only."""
        self._approval_spans: list[tuple[str, Prepared]] = []
        self._bumped = False
        if self.conn.dialect.name == "sqlite":  # random-id B-tree inserts thrash the default 2 MB page cache
            self.conn.exec_driver_sql("PRAGMA cache_size=-131072")

    def _record(self, entity: str, op: str, entity_id: str, parents: dict[str, str] | None = None,
                revision: int | None = None) -> None:
        """A change-log row now, or (staged) at the flip: no watcher hears of a trace before it is whole."""
        if self.staged:
            self._deferred.append((entity, op, entity_id, parents, revision))
        else:
            self.uow.record(entity, op, entity_id, parents, revision)

    def _filed(self, container_id: str, exists: bool = True) -> None:
        """A project, task or session this write created (or deleted): answers asked ahead learn it."""
        if self.ahead is not None:
            self.ahead.changed[container_id] = exists

    def _stage(self, kind: str, ids: Iterable[str]) -> None:
        """Name rows this staged write created: hidden until the flip (same transaction as their insert)."""
        if not self.staged:
            return
        rows = [{"entity_id": i, "kind": kind, "run_id": self.run_id, "heartbeat_at": self.uow.now} for i in ids]
        if rows:
            self.conn.execute(insert(sc.ImportStagingRow), rows)

    def _add(self, table: type[sc.Base], **values: Any) -> None:
        """A container row, in the order they are keys of each other: queued on PostgreSQL (`outbox`: sent
        with the next read, in order), through the session elsewhere (flushed, so the next one finds it)."""
        if is_postgres(self.conn):
            bulk_insert(self.conn, table, [values])
            return
        self.uow.session.add(table(**values))
        self.uow.session.flush()

    def _claim_shared(self) -> None:
        """Containers this trace uses that an unfinished staged import created become visible now: they
        hold this trace too (which is whole when this transaction commits). Staged runs stay hidden."""
        if self._probe is not None and not self._probe.others_staged:
            return  # no other import has anything staged (asked in this transaction)
        St = sc.ImportStagingRow
        ids = [self.project_id, self.task_id, self.session_id, *self._agents]
        for n in range(0, len(ids), IN_CHUNK):
            if not self._server_delete("staging of others", ids[n:n + IN_CHUNK]):
                self.conn.execute(delete(St).where(St.entity_id.in_(ids[n:n + IN_CHUNK]), St.run_id != self.run_id,
                                                   St.kind != "run"))

    def may_rebuild(self) -> bool:
        """Whether this login may delete and rewrite imported context (`agent_context`): not a PostgreSQL login
        below the owner (it holds no DELETE on context tables, migration 0012), which appends instead."""
        login = self.uow.store.login
        return self.conn.dialect.name != "postgresql" or login is None or login.owner

    def _server_delete(self, what: str, ids: list[str]) -> bool:
        """On PostgreSQL below the owner, the runtime's few deletes go through `agentdesk_runtime_delete`
        (migration 0012): an agent login holds no DELETE grant (one would let it LOCK any of these tables)."""
        login = self.uow.store.login
        if self.conn.dialect.name != "postgresql" or login is None or login.owner:
            return False
        self.conn.execute(sql_text("SELECT agentdesk_runtime_delete(:what, :run, CAST(:ids AS text[]))"),
                          {"what": what, "run": self.run_id, "ids": ids})
        return True
