"""The maka source: its reads, its one write (settling a permission) and what it cannot do.

The class only routes each call to the plain functions of `tree`, `spans`, `context` and
`approvals` (with the cached tree topology, inside one transaction) and states, in maka's
terms, why each command agentdesk has elsewhere is absent here: maka's context is
immutable, so this source is an `ApprovalWriter` only. Schema version: `recognise`
accepts maka's tables at `PRAGMA user_version` 11 only (the version this mapping was
written against, and the only one maka's own read-only open accepts at that commit); the
constructor applies the same rule, for callers that build the source directly.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from agentdesk.store import readmodel as rm
from agentdesk.store.asks.reads import Ask
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import Auxiliary, ForeignSource
from agentdesk.store.sources.maka import approvals, spans, tree
from agentdesk.store.sources.maka import asks as maka_asks
from agentdesk.store.sources.maka import context as contexts
from agentdesk.store.sources.maka.follow import follow
from agentdesk.store.sources.maka.spanrows import SpanRow
from agentdesk.store.sources.maka.topology import TopologyCache
from agentdesk.store.sources.reads import Reads, bind
from agentdesk.store.sources.schema import Schema

SUPPORTED_USER_VERSIONS = frozenset({11})
TABLES = frozenset({"session_metadata", "core_agent_runs", "runtime_events", "core_interaction_requests"})


def recognise(schema: Schema) -> str | None:
    """maka's tables, at a `PRAGMA user_version` this mapping was written against (11)."""
    if not schema.tables >= TABLES:
        return None
    if schema.user_version not in SUPPORTED_USER_VERSIONS:
        raise StoreUnavailable(f"looks like a maka runtime store, but of schema version {schema.user_version}; "
                               f"agentdesk understands version(s) {sorted(SUPPORTED_USER_VERSIONS)}.")
    return str(schema.user_version)

IMMUTABLE = ("maka's context is its runtime event ledger, whose events are immutable once committed "
             "(re-inserting an event with other content is refused by the runtime)")


class MakaSource(ForeignSource):
    """A maka `runtime.sqlite`, opened in place; read-only unless writes were allowed."""

    kind = "maka"
    writable_capabilities = frozenset({Capability.APPROVE, Capability.DENY})
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "A maka permission answer carries only allow or deny; the tool call's "
                                   "arguments cannot be changed.",
        Capability.EXPIRE: "maka has no approval deadlines; only its host closes a request (closure "
                           "'timed_out'), and agentdesk does not write closures for it.",
        Capability.SET_VISIBILITY: f"{IMMUTABLE}; model visibility is a field of each event, fixed when "
                                   "it was written.",
        Capability.LOCK: "maka has no notion of locking context items.",
        Capability.EDIT_ITEM: f"{IMMUTABLE}.",
        Capability.COMPACT: "maka compacts history only inside a running turn (history_compact "
                            "checkpoints); there is no stored command to request one.",
        Capability.UNDO_COMPACTION: "maka compaction checkpoints are immutable and record no covered items, "
                                    "so there is nothing to undo.",
    }
    auxiliary = {
        "core_interaction_outcomes": Auxiliary(("request_id", "record_json"),
                                               "no approval shows as decided (every request reads as pending)"),
        "core_agent_run_events": Auxiliary(("session_id", "run_id", "sequence", "event_id", "event_type", "event_ts",
                                            "record_json"), "run lifecycle events are not shown"),
        "projects": Auxiliary(("project_id", "identity", "name", "last_used_at", "archived_at"),
                              "every session shows under sessions without a project"),
        "runtime_partial_segments": Auxiliary(("stream_key", "segment_seq", "text_content", "updated_at"),
                                              "partial (streaming) output is not shown"),
        "runtime_partial_snapshots": Auxiliary(("stream_key", "session_id", "invocation_id", "run_id", "turn_id",
                                                "after_event_id", "payload_json", "text_content", "updated_at"),
                                               "partial (streaming) output is not shown"),
        "runtime_session_event_ordinals": Auxiliary(("session_id", "ordinal", "event_id"),
                                                    "the context shows no revision"),
        "usage_model_call_attempts": Auxiliary(("attempt_id", "completed_at", "record_json"),
                                               "model calls show no tokens or cost"),
        "tool_operations": Auxiliary(("operation_id", "invocation_id", "run_id", "turn_id", "provider_tool_call_id",
                                      "tool_name", "canonical_args_hash", "recovery_mode", "current_state",
                                      "call_event_id", "result_event_id", "version", "dispatch_event_id"),
                                     "tool operations' recovery state is not shown"),
    }
    notes = ("maka's context is read-only and its approvals have no deadlines. An allow or deny written "
             "here is the outcome row maka's interaction store reads, but a hosted maka runtime holds the "
             "pending request in memory and may not notice an outcome written by another process: settle "
             "through the maka host when one is running. The operator's name and reason are not stored "
             "(maka records only reviewer 'user').")

    def __init__(self, path: Path, *, version: str | None = None, allow_writes: bool = False,
                 busy_timeout_s: float = 5.0) -> None:
        super().__init__(path, version=version, allow_writes=allow_writes, busy_timeout_s=busy_timeout_s)
        try:  # the same rule detection applies, for callers that build the source directly
            with self.reading() as conn:
                found = int(conn.execute(text("PRAGMA user_version")).scalar_one())
            recognise(Schema(TABLES, found))
        except StoreUnavailable as exc:
            self.engine.dispose()
            raise StoreUnavailable(f"{path} {exc}") from exc
        except Exception:
            self.engine.dispose()
            raise
        self.version = str(found)
        self.topology = TopologyCache()
        self.follow = follow(self.topology)
        topo = self.topology
        self.reads = Reads(bind(tree.projects, topo), bind(tree.tasks, topo), bind(tree.sessions, topo),
                           bind(tree.agents, topo), bind(tree.runs, topo), bind(tree.run, topo),
                           bind(tree.agent, topo), bind(tree.locate, topo), bind(spans.span_table, topo),
                           bind(spans.span, topo), bind(contexts.context, topo), bind(approvals.approvals, topo),
                           bind(approvals.approval, topo), bind(tree.counts, topo), tree.showcase_run,
                           spans.sent_context)

    # -- timeline and context ----------------------------------------------------------------
    def span_rows(self, run_id: str) -> list[SpanRow]:
        """maka-only: the projected span rows with their attributes (what the waterfall is built from)."""
        with self.reading() as conn:
            return spans.span_rows(conn, self.topology(conn), run_id)

    # -- questions (store/asks: AskReader only; see maka/asks.py for why it never answers) -----
    def asks(self, pending_only: bool = True, limit: int = 1000) -> list[Ask]:
        with self.reading() as conn:
            return maka_asks.asks(conn, self.topology(conn), pending_only, limit)

    def ask(self, ask_id: str) -> Ask:
        with self.reading() as conn:
            return maka_asks.ask(conn, self.topology(conn), ask_id)

    # -- approvals -----------------------------------------------------------------------------
    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        """Settle a pending permission request as maka's host would: first writer wins.

        `actor` and `reason` cannot be stored: maka's canonical outcome records only
        `reviewer: 'user'` (a rationale is allowed for auto-review outcomes only).
        """
        capability, _, _ = self.check_decision(approve, actor or "user", reason or "-", edited_arguments)
        with self.writing(capability) as conn:
            self.guard_shown(approval_id, expected_arguments_hash)
            decided, published = approvals.decide(conn, self.topology(conn), approval_id, approve)
        self.bus.publish(published)
        return decided
