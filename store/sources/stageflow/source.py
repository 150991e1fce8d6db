"""`StageflowSource`: a stageflow `AgentStore` database, opened in place.

The class only routes each call to the plain functions of `tree`, `spans` and
`approvals` inside one read (or write) transaction, and says in stageflow's
terms why the commands it lacks are absent. Writes: approval decisions and
stageflow's own expiry sweep; stageflow keeps no editable context, so this
source is no `ContextWriter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.source import Capability, Location, Page, SpanTable
from agentdesk.store.sources.foreign import ForeignSource
from agentdesk.store.sources.schema import Schema
from agentdesk.store.sources.stageflow import approvals, spans, tree
from agentdesk.store.sources.stageflow.common import NO_CONTEXT
from agentdesk.store.sources.stageflow.follow import FOLLOW

TABLES = frozenset({"agent_sessions", "agent_turns", "agent_spans", "agent_approvals"})


def recognise(schema: Schema) -> str | None:
    """stageflow's schema has no version marker: its four core tables are the whole test ("" = unversioned)."""
    return "" if schema.tables >= TABLES else None


class StageflowSource(ForeignSource):
    """Reads, live changes and approval decisions on a stageflow database."""

    kind = "stageflow"
    follow = FOLLOW
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY, Capability.EXPIRE})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "stageflow approves the exact payload it hashed (payload_hash replay "
                                   "protection); its arguments cannot be edited.",
        Capability.SET_VISIBILITY: NO_CONTEXT,
        Capability.LOCK: NO_CONTEXT,
        Capability.EDIT_ITEM: NO_CONTEXT,
        Capability.COMPACT: NO_CONTEXT,
        Capability.UNDO_COMPACTION: NO_CONTEXT,
    }
    notes = ("stageflow's schema is inferred from its SQL; spans carry no cost (cost is per turn); the turn "
             "and session states after a decision are the runtime's to set.")

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
        """stageflow-only: what a turn has beyond `rm.Run` (trace id, scores, delivery)."""
        with self.reading() as conn:
            return tree.run_attributes(conn, run_id)

    def definition(self, task_id: str) -> dict[str, Any]:
        """stageflow-only: the current definition behind a task."""
        with self.reading() as conn:
            return tree.definition(conn, task_id)

    # -- timeline and context ----------------------------------------------------------------
    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        with self.reading() as conn:
            return spans.span_table(conn, run_id, span_ids)

    def span(self, span_id: str) -> rm.Span:
        with self.reading() as conn:
            return spans.span(conn, span_id)

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        """stageflow does not record what a model call was sent (capture mode keeps only span bodies)."""
        return []

    def context(self, agent_id: str) -> rm.AgentContext:
        with self.reading() as conn:
            return spans.context(conn, agent_id)

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

    def expire_overdue(self) -> list[str]:
        with self.writing(Capability.EXPIRE) as conn:
            expired = approvals.expire_overdue(conn)
        self.bus.publish([approvals.approval_change(self.approval(aid)) for aid in expired])
        return expired

    # -- figures -------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self.reading() as conn:
            return tree.counts(conn)

    def showcase_run(self) -> str | None:
        with self.reading() as conn:
            return tree.showcase_run(conn)
