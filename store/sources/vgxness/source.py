"""`VgxnessSource`: a vgxness memory database, opened in place.

The class only routes each call to the plain functions of `tree`, `spans` and
`approvals` inside one read (or write) transaction, and says in vgxness's terms
why the commands it lacks are absent. Its one write is resolving an approval;
vgxness keeps no agent context, so this source is no `ContextWriter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.source import Capability, Location, Page, SpanTable
from agentdesk.store.sources.foreign import ForeignSource
from agentdesk.store.sources.schema import Schema
from agentdesk.store.sources.sql import Row
from agentdesk.store.sources.vgxness import approvals, spans, tree
from agentdesk.store.sources.vgxness.common import NO_CONTEXT
from agentdesk.store.sources.vgxness.follow import FOLLOW

TABLES = frozenset({"schema_migrations", "runs", "run_events", "run_approvals"})
FIRST_READ = "005_run_approvals.sql"


def recognise(schema: Schema) -> str | None:
    """vgxness names its schema by the newest applied migration file; runs and approvals came with 005."""
    if schema.tables >= TABLES:
        return schema.migration or ""
    if schema.migration is not None and schema.migration.endswith(".sql"):
        raise StoreUnavailable(f"looks like a vgxness store at migration {schema.migration}; agentdesk reads "
                               f"vgxness from {FIRST_READ} on (runs, run events, run approvals).")
    return None


class VgxnessSource(ForeignSource):
    """Reads, live changes and approval resolutions on a vgxness memory database."""

    kind = "vgxness"
    follow = FOLLOW
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "A vgxness approval is tied to the immutable run event that raised it; "
                                   "its arguments cannot be edited.",
        Capability.EXPIRE: "vgxness approvals have no deadline.",
        Capability.SET_VISIBILITY: NO_CONTEXT,
        Capability.LOCK: NO_CONTEXT,
        Capability.EDIT_ITEM: NO_CONTEXT,
        Capability.COMPACT: NO_CONTEXT,
        Capability.UNDO_COMPACTION: NO_CONTEXT,
    }
    notes = ("vgxness records points in time, not durations, and no tokens or cost; a decision sets only the "
             "approval row: the run leaves needs-human when the runtime acts on it.")

    # -- the tree --------------------------------------------------------------------------
    def projects(self) -> list[rm.Project]:
        with self.reading() as conn:
            return tree.projects(conn)

    def tasks(self, project_id: str) -> list[rm.Task]:
        with self.reading() as conn:
            return tree.tasks(conn, project_id)

    def sessions(self, task_id: str) -> list[rm.Session]:
        with self.reading() as conn:
            return tree.sessions(conn, task_id)

    def agents(self, session_id: str) -> list[rm.Agent]:
        with self.reading() as conn:
            return tree.agents(conn, session_id)

    def runs(self, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
        with self.reading() as conn:
            return tree.runs(conn, agent_id, offset, limit)

    def run(self, run_id: str) -> rm.Run:
        with self.reading() as conn:
            return tree.run(conn, run_id)

    def agent(self, agent_id: str) -> rm.Agent:
        with self.reading() as conn:
            return tree.agent(conn, agent_id)

    def locate(self, entity: str, entity_id: str) -> Location:
        with self.reading() as conn:
            return tree.locate(conn, entity, entity_id)

    def run_attributes(self, run_id: str) -> dict[str, Any]:
        """vgxness-only: what a run has beyond `rm.Run` (outcome, workflow, latest checkpoint)."""
        with self.reading() as conn:
            return tree.run_attributes(conn, run_id)

    # -- timeline, context, memory ---------------------------------------------------------
    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        with self.reading() as conn:
            return spans.span_table(conn, run_id, span_ids)

    def span(self, span_id: str) -> rm.Span:
        with self.reading() as conn:
            return spans.span(conn, span_id)

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        """vgxness records no model calls, so nothing was "sent" that agentdesk could show."""
        return []

    def context(self, agent_id: str) -> rm.AgentContext:
        with self.reading() as conn:
            return spans.context(conn, agent_id)

    def observation(self, observation_id: str) -> Row | None:
        with self.reading() as conn:
            return spans.observation(conn, observation_id)

    def observations(self, project_id: str, query: str | None = None, limit: int = 100) -> list[Row]:
        with self.reading() as conn:
            return spans.observations(conn, project_id, query, limit)

    def memory_sessions(self, project_id: str) -> list[Row]:
        with self.reading() as conn:
            return spans.memory_sessions(conn, project_id)

    # -- approvals -----------------------------------------------------------------------------
    def approvals(self, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
        with self.reading() as conn:
            return approvals.approvals(conn, status, limit)

    def approval(self, approval_id: str) -> rm.Approval:
        with self.reading() as conn:
            return approvals.approval(conn, approval_id)

    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None) -> rm.Approval:
        capability, actor, reason = self.check_decision(approve, actor, reason, edited_arguments)
        with self.writing(capability) as conn:
            approvals.decide(conn, approval_id, approve, actor, reason)
        decided = self.approval(approval_id)
        self.bus.publish([approvals.approval_change(decided)])
        return decided

    # -- figures -------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self.reading() as conn:
            return tree.counts(conn)

    def showcase_run(self) -> str | None:
        with self.reading() as conn:
            return tree.showcase_run(conn)
