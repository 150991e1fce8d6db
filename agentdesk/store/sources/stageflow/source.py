"""`StageflowSource`: a stageflow `AgentStore` database, opened in place.

The class only routes each call to the plain functions of `tree`, `spans` and
`approvals` inside one read (or write) transaction, and says in stageflow's
terms why the commands it lacks are absent. Writes: approval decisions and
stageflow's own expiry sweep; stageflow keeps no editable context, so this
source is no `ContextWriter`.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import Auxiliary, ForeignSource, no_context_edits
from agentdesk.store.sources.reads import Reads, nothing_sent
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
    reads = Reads(tree.projects, tree.tasks, tree.sessions, tree.agents, tree.runs, tree.run, tree.agent, tree.locate,
                  spans.span_table, spans.span, spans.context, approvals.approvals, approvals.approval, tree.counts,
                  tree.showcase_run, nothing_sent)
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY, Capability.EXPIRE})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "stageflow approves the exact payload it hashed (payload_hash replay "
                                   "protection); its arguments cannot be edited.",
        **no_context_edits(NO_CONTEXT),
    }
    auxiliary = {
        "agent_definitions": Auxiliary(("project_key", "agent_id", "current_revision", "archived", "file_hash",
                                        "issues_json", "created_at", "updated_at"), "agent definitions are not shown"),
        "agent_revisions": Auxiliary(("project_key", "agent_id", "revision", "definition_json", "yaml_text", "source",
                                      "author", "summary", "restored_from", "created_at"),
                                     "agent revisions are not shown"),
        "agent_messages": Auxiliary(("message_id", "session_id", "seq", "turn_id", "role", "author", "text",
                                     "created_at"), "agents' messages (their context) are not shown"),
        "agent_eval_scores": Auxiliary(("turn_id", "metric", "score", "recorded_at"), "eval scores are not shown"),
        "agent_deliveries": Auxiliary(("turn_id", "session_id", "connection_id", "provider", "reply_to", "text",
                                       "state", "attempts", "error_code", "error_message", "retryable",
                                       "next_attempt_at", "created_at", "updated_at"),
                                      "reply deliveries are not shown"),
    }
    notes = ("stageflow's schema is inferred from its SQL; spans carry no cost (cost is per turn); the turn "
             "and session states after a decision are the runtime's to set.")

    # -- what only this runtime has -------------------------------------------------------------
    def run_attributes(self, run_id: str) -> dict[str, Any]:
        """stageflow-only: what a turn has beyond `rm.Run` (trace id, scores, delivery)."""
        with self.reading() as conn:
            return tree.run_attributes(conn, run_id)

    def definition(self, task_id: str) -> dict[str, Any]:
        """stageflow-only: the current definition behind a task."""
        with self.reading() as conn:
            return tree.definition(conn, task_id)

    # -- approvals -----------------------------------------------------------------------------
    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        return self.record_decision(approvals.decide, approvals.approval_change, approval_id, approve, actor, reason,
                                    edited_arguments, expected_arguments_hash)

    def expire_overdue(self) -> list[str]:
        with self.writing(Capability.EXPIRE) as conn:
            expired = approvals.expire_overdue(conn)
        self.bus.publish([approvals.approval_change(self.approval(aid)) for aid in expired])
        return expired
