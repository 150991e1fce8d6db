"""`VgxnessSource`: a vgxness memory database, opened in place.

The class only routes each call to the plain functions of `tree`, `spans` and
`approvals` inside one read (or write) transaction, and says in vgxness's terms
why the commands it lacks are absent. Its one write is resolving an approval;
vgxness keeps no agent context, so this source is no `ContextWriter`.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import Auxiliary, ForeignSource, no_context_edits
from agentdesk.store.sources.reads import Reads, nothing_sent
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
    reads = Reads(tree.projects, tree.tasks, tree.sessions, tree.agents, tree.runs, tree.run, tree.agent, tree.locate,
                  spans.span_table, spans.span, spans.context, approvals.approvals, approvals.approval, tree.counts,
                  tree.showcase_run, nothing_sent)
    """vgxness records no model calls, so nothing was "sent" that agentdesk could show."""
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "A vgxness approval is tied to the immutable run event that raised it; "
                                   "its arguments cannot be edited.",
        Capability.EXPIRE: "vgxness approvals have no deadline.",
        **no_context_edits(NO_CONTEXT),
    }
    auxiliary = {
        "agents": Auxiliary(("id", "project", "scope", "mode", "name", "description", "instructions_json",
                             "capabilities_json", "permissions_json", "memory_json", "workflows_json", "skills_json",
                             "adapters_json", "parent_agent_id", "created_at", "updated_at"),
                            "agents show by id only, without names or their hierarchy"),
        "run_checkpoints": Auxiliary(("id", "run_id", "sequence", "label", "state_json", "created_at"),
                                     "run checkpoints are not shown"),
        "sessions": Auxiliary(("id", "project", "directory", "started_at", "ended_at", "summary"),
                              "sessions are not shown"),
        "session_activity": Auxiliary(("id", "session_id", "sequence", "actor", "kind", "payload_json", "created_at"),
                                      "session activity is not shown"),
        "observations": Auxiliary(("id", "project", "scope", "type", "title", "content", "topic_key", "created_at",
                                   "updated_at"), "observations (memory) are not shown"),
        "observation_revisions": Auxiliary(("id", "observation_id", "revision", "type", "title", "content",
                                            "topic_key", "created_at"), "observation revisions are not shown"),
        "artifacts": Auxiliary(("id", "project", "topic_key", "phase", "content", "observation_id", "created_at",
                                "updated_at"), "artifacts are not shown"),
    }
    notes = ("vgxness records points in time, not durations, and no tokens or cost; a decision sets only the "
             "approval row: the run leaves needs-human when the runtime acts on it.")

    # -- what only this runtime has -------------------------------------------------------------
    def run_attributes(self, run_id: str) -> dict[str, Any]:
        """vgxness-only: what a run has beyond `rm.Run` (outcome, workflow, latest checkpoint)."""
        with self.reading() as conn:
            return tree.run_attributes(conn, run_id)

    # -- timeline, context, memory ---------------------------------------------------------
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
    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        return self.record_decision(approvals.decide, approvals.approval_change, approval_id, approve, actor, reason,
                                    edited_arguments, expected_arguments_hash)
