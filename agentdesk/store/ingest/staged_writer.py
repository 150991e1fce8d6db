"""A large trace written staged: slice after slice, hidden, then made visible whole by a short last transaction.

Why a writer of its own: the slices write spans as any trace does (`TraceWriter`), but what they create is
named in `import_staging` and their change-log rows wait (`staged`), and the end differs: `settle` rolls
the run up still hidden (its facts read outside the write lock), and `flip` releases the staged rows and
announces the trace, parents first (`store.ingest.staging` says why and how a crash is resumed).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.rows import IN_CHUNK
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.writer import TraceWriter
from agentdesk.store.persistence import schema as sc
from agentdesk.store.uow import UnitOfWork


class StagedTraceWriter(TraceWriter):
    """`prepare` and `write` as `TraceWriter` (rebound to a new unit of work per slice), then `settle`, `flip`."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None) -> None:
        super().__init__(uow, index, default_project, staged=True)

    def place_written(self) -> None:
        """Orphans waiting for the spans written so far move under them (in the slice's transaction)."""
        self._place_orphans(roots=False)

    def heartbeat(self) -> None:
        """The importer is alive (a staged trace untouched for `STALE_S` is abandoned).

        Only the run's own row: `staging.stale_runs` reads no other, and a trace stages a row per span, so
        renewing them all made each slice rewrite every row staged so far (quadratic in the trace: most of a
        100,000-span import's server time on PostgreSQL, whose slices are short)."""
        St = sc.ImportStagingRow
        self.conn.execute(update(St).where(St.run_id == self.run_id, St.kind == "run")
                          .values(heartbeat_at=self.uow.now))

    def settle(self, facts: tuple[Any, ...] | None = None) -> None:
        """Everything `finish` computes, still hidden (its change-log rows wait for `flip`);
        `facts`: `roll_up_facts`, read before this transaction."""
        self._facts = facts
        self.heartbeat()
        self.finish()

    def flip(self) -> IngestReport:
        """The short last transaction. The trace becomes visible whole: its staged rows are
        released, and the change log announces them, parents first, then what `finish` recorded."""
        St, A = sc.ImportStagingRow, sc.AgentRow
        self._claim_shared()
        staged = dict(self.conn.execute(select(St.entity_id, St.kind).where(St.run_id == self.run_id)).all())
        box = {"project": self.project_id, "task": self.task_id, "session": self.session_id}
        for kind in ("project", "task", "session"):
            for entity_id in [e for e, k in staged.items() if k == kind]:
                self.uow.record(kind, "insert", entity_id,
                                {k: box[k] for k in ("project", "task")[:("project", "task", "session").index(kind)]})
        agents = [e for e, k in staged.items() if k == "agent"]
        parent_of: dict[str, str | None] = {}
        for n in range(0, len(agents), IN_CHUNK):
            parent_of.update(self.conn.execute(select(A.id, A.parent_agent_id)
                                               .where(A.id.in_(agents[n:n + IN_CHUNK]))).all())

        def depth(agent: str) -> int:
            d, current = 0, parent_of.get(agent)
            while current is not None and current in parent_of and d <= len(parent_of):
                d, current = d + 1, parent_of.get(current)
            return d

        for agent_id in sorted(parent_of, key=depth):  # a parent before its sub-agents
            p = dict(box)
            if parent_of[agent_id]:
                p["parent_agent"] = str(parent_of[agent_id])
            self.uow.record("agent", "insert", agent_id, p)
        deferred, self._deferred, self.staged = self._deferred, [], False
        for entity, op, entity_id, parents, revision in deferred:
            if entity == "agent" and op == "insert":
                continue  # announced above, with any a crashed earlier attempt staged
            if entity == "run" and entity_id == self.run_id and self.run_id in staged:
                op = "insert"  # new to every reader, even when an earlier attempt created the row
            self.uow.record(entity, op, entity_id, parents, revision)
        if not self._server_delete("staging", []):
            self.conn.execute(delete(St).where(St.run_id == self.run_id))
        return self.report
