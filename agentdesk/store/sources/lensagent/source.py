"""`LensagentSource`: a `@lensagent/core` 0.1.0 or 0.1.2 SQLite database, opened in place.

Reads map lensagent's full tree, derived spans, policy-review approvals and context editor
onto agentdesk's read model (see docs/sources.md (lensagent)). Writes, only when the operator
allowed them, follow the runtime's own transitions: decisions on calls in policy review, answers to
calls waiting for user input, queued messages, turn-group visibility, context-item edits, and
stopping a run as `interruptCall` would (stop.py; lensagent has no pause, so pause and resume are
refused). Locks are refused: lensagent sets `locked` itself (the goal message is locked) and exposes no setter, so what
an operator's lock or unlock would mean to the runtime is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentdesk.store import readmodel as rm
from agentdesk.store.asks.commands import check_answer
from agentdesk.store.asks.reads import Ask
from agentdesk.store.errors import Unsupported
from agentdesk.store.readmodel import RunControl
from agentdesk.store.source import Capability
from agentdesk.store.sources.foreign import ForeignSource
from agentdesk.store.sources.lensagent import approvals, asks, detail, nodes, spans, stop, tree, writes
from agentdesk.store.sources.lensagent import context as contexts
from agentdesk.store.sources.lensagent.follow import FOLLOW
from agentdesk.store.sources.lensagent.layout import Layout, read_layout, version_of
from agentdesk.store.sources.lensagent.messages import LensagentMessages
from agentdesk.store.sources.reads import Reads, given
from agentdesk.store.sources.schema import Schema
from agentdesk.store.validation import check_name, check_text

NO_PAUSE = "lensagent has no paused state: a run can only be stopped."
TABLES = frozenset({"projects", "tasks", "sessions", "agents", "runs", "steps", "calls", "context_items",
                    "context_turn_groups"})


def recognise(schema: Schema) -> str | None:
    """lensagent's tree tables, at the version its tables say (`layout.version_of`)."""
    return version_of(schema.tables) if schema.tables >= TABLES else None


class LensagentSource(ForeignSource):
    kind = "lensagent"
    follow = FOLLOW
    writable_capabilities = frozenset(
        {Capability.APPROVE, Capability.DENY, Capability.SET_VISIBILITY, Capability.EDIT_ITEM,
         Capability.SEND_MESSAGE, Capability.CONTROL_RUN}
    )
    unsupported_reasons = {
        Capability.EDIT_ARGUMENTS: "lensagent reviews a call as the model asked for it; its review has no "
        "edited arguments.",
        Capability.EXPIRE: "lensagent approvals have no deadline, so nothing expires.",
        Capability.LOCK: "lensagent sets context locks itself and has no API to change them; agentdesk "
        "will not change a flag whose meaning to the runtime is unknown.",
        Capability.COMPACT: "lensagent compacts a context with its own model call (compactContext); "
        "agentdesk does not write compactions into a lensagent database.",
        Capability.UNDO_COMPACTION: "lensagent cannot undo a compaction.",
    }
    notes = (
        "lensagent also keeps an EventLog (a JSONL hash chain in a file beside the database) that only its "
        "own process appends to: agentdesk cannot keep it in step with direct writes, so after a decision, "
        "a stop or a context edit made here that log no longer records every change, and a running lensagent is "
        "not told through its EventBus."
    )

    def __init__(
        self,
        path: Path,
        *,
        version: str | None = None,
        allow_writes: bool = False,
        busy_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(path, version=version, allow_writes=allow_writes, busy_timeout_s=busy_timeout_s)
        with self.reading() as conn:
            self.layout: Layout = read_layout(conn)
        self.version = self.layout.version
        if self.layout.version == "0.1.0":
            self.notes += (
                " It is a 0.1.0 database: compactions show no covered items and decisions keep no "
                "operator name."
            )
        elif self.layout.missing:
            self.notes += f" It lacks some 0.1.2 columns: {', '.join(self.layout.missing)}."
        layout = self.layout
        self.reads = Reads(tree.projects, tree.tasks, tree.sessions, tree.agents, tree.runs, nodes.run, nodes.agent,
                           nodes.locate, given(spans.span_table, layout), given(detail.span, layout),
                           given(contexts.context, layout), given(approvals.approvals, layout),
                           given(approvals.approval, layout), given(nodes.counts, layout),
                           nodes.showcase_run, given(detail.sent_context, layout))

    # -- what only this runtime has -------------------------------------------------------------

    def projection_savings(self, agent_id: str) -> list[contexts.ProjectionSaving]:
        """lensagent-only: every projection decision of an agent, as tokens saved."""
        with self.reading() as conn:
            return contexts.projection_savings(conn, self.layout, agent_id)

    def message_desk(self) -> LensagentMessages | None:
        """Operators' messages as `pending_messages` rows (store/messages/desk.py); read-only: listed only."""
        return LensagentMessages(self)

    # -- questions: calls waiting for user input (store/asks: AskReader, AskWriter) ----------
    def asks(self, pending_only: bool = True, limit: int = 1000) -> list[Ask]:
        with self.reading() as conn:
            return asks.asks(conn, self.layout, pending_only, limit)

    def ask(self, ask_id: str) -> Ask:
        with self.reading() as conn:
            return asks.ask(conn, self.layout, ask_id)

    def answer_ask(self, ask_id: str, answer: str, actor: str, *, expected_revision: int | None = None) -> Ask:
        """completeCall with the answer, only with --allow-writes (the same write consent as a decision)."""
        actor = check_name("actor name", actor)
        answer = check_answer(answer)
        with self.writing(Capability.APPROVE) as conn:
            published = writes.answer(conn, self.layout, ask_id, answer, actor, expected_revision)
        self.bus.publish(published)
        return self.ask(ask_id)

    # -- run control: stop only (store/source.py: RunController, LimitedRunController) ----------
    def why_not_run_action(self, action: str) -> str:
        return "" if action == "stop" else NO_PAUSE

    def pause_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        raise Unsupported(NO_PAUSE)

    def resume_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        raise Unsupported(NO_PAUSE)

    def stop_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl:
        """End the run cancelled as lensagent's interruptCall would (stop.py), only with --allow-writes."""
        actor = check_name("actor name", actor)
        reason = check_name("reason", reason, required=False) or None
        with self.writing(Capability.CONTROL_RUN) as conn:
            control, published = stop.stop_run(conn, self.layout, run_id, actor, reason)
        self.bus.publish(published)
        return control

    def run_control(self, run_id: str) -> RunControl:
        with self.reading() as conn:
            return stop.run_control(conn, self.layout, run_id)

    # -- commands ----------------------------------------------------------------------------
    def decide(
        self,
        approval_id: str,
        approve: bool,
        actor: str,
        reason: str | None = None,
        edited_arguments: str | None = None,
        *,
        expected_arguments_hash: str | None = None,
    ) -> rm.Approval:
        capability, actor, reason = self.check_decision(approve, actor, reason, edited_arguments)
        with self.writing(capability) as conn:
            self.guard_shown(approval_id, expected_arguments_hash)
            published = writes.decide(conn, self.layout, approval_id, approve, actor, reason)
        self.bus.publish(published)
        return self.approval(approval_id)

    def set_group_visibility(self, group_id: str, visible: bool, expected_revision: int, actor: str) -> None:
        check_name("actor name", actor)
        with self.writing(Capability.SET_VISIBILITY) as conn:
            published = writes.set_group_visibility(conn, self.layout, group_id, visible, expected_revision)
        self.bus.publish(published)

    def set_item_locked(self, item_id: str, locked: bool, expected_revision: int, actor: str) -> None:
        self._require(Capability.LOCK)

    def edit_item(self, item_id: str, content: str, expected_revision: int, actor: str) -> None:
        check_name("actor name", actor)
        check_text("item content", content)
        with self.writing(Capability.EDIT_ITEM) as conn:
            published = writes.edit_item(conn, self.layout, item_id, content, expected_revision)
        self.bus.publish(published)

    def compact(
        self,
        agent_id: str,
        item_ids: Sequence[str],
        summary: str,
        focus: str,
        expected_context_revision: int,
        actor: str,
    ) -> str:
        self._require(Capability.COMPACT)
        raise AssertionError("unreachable: lensagent never offers compaction")

    def undo_compaction(self, compaction_id: str, actor: str) -> None:
        self._require(Capability.UNDO_COMPACTION)
