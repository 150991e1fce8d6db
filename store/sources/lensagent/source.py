"""`LensagentSource`: a `@lensagent/core` 0.1.0 or 0.1.2 SQLite database, opened in place.

Reads map lensagent's full tree, derived spans, policy-review approvals and context editor
onto agentdesk's read model (see docs/sources.md (lensagent)). Writes, only when the operator
allowed them, are the three the schema defines and the reference documents: decisions on
calls in policy review, turn-group visibility and context-item edits. Locks are refused:
lensagent sets `locked` itself (the goal message is locked) and exposes no setter, so what
an operator's lock or unlock would mean to the runtime is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from agentdesk.store import readmodel as rm
from agentdesk.store.bus import Change
from agentdesk.store.errors import NotFound
from agentdesk.store.source import Capability, Location, Page, SpanTable
from agentdesk.store.sources.foreign import ForeignSource
from agentdesk.store.sources.lensagent import approvals, changes, detail, spans, tree, writes
from agentdesk.store.sources.lensagent import context as contexts
from agentdesk.store.sources.lensagent.layout import Layout, one, read_layout
from agentdesk.store.validation import check_name, check_text


class LensagentSource(ForeignSource):
    kind = "lensagent"
    writable_capabilities = frozenset(
        {Capability.APPROVE, Capability.DENY, Capability.SET_VISIBILITY, Capability.EDIT_ITEM}
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
        "own process appends to: agentdesk cannot keep it in step with direct writes, so after a decision "
        "or a context edit made here that log no longer records every change, and a running lensagent is "
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
        self._tracker = changes.ChangeTracker(self.layout)

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

    def node(self, entity: str, entity_id: str) -> object:
        """One tree row by entity name, fresh (for dataChanged)."""
        if entity == "run":
            with self.reading() as conn:
                return tree.run_values(conn, [tree.run_row(conn, entity_id)])[0]
        parents = {
            "project": "SELECT id AS parent FROM projects WHERE id = :i",
            "task": "SELECT project_id AS parent FROM tasks WHERE id = :i",
            "session": "SELECT task_id AS parent FROM sessions WHERE id = :i",
            "agent": "SELECT session_id AS parent FROM agents WHERE id = :i",
        }
        found = self.rows(parents[entity], i=entity_id) if entity in parents else []
        if not found:
            self._missing(entity, entity_id)
        parent = found[0]["parent"]
        listing: Sequence[rm.Project | rm.Task | rm.Session | rm.Agent]
        if entity == "project":
            listing = self.projects()
        elif entity == "task":
            listing = self.tasks(parent)
        elif entity == "session":
            listing = self.sessions(parent)
        else:
            listing = self.agents(parent)
        return next(x for x in listing if x.id == entity_id)

    def locate(self, entity: str, entity_id: str) -> Location:
        with self.reading() as conn:
            span_id = None
            if entity == "approval":
                entity, entity_id = "span", f"call:{entity_id}"
            if entity == "span":
                span_id, entity, entity_id = entity_id, "run", spans.span_run(conn, entity_id)
            sql = {
                "project": "SELECT id AS project, NULL AS task, NULL AS session, NULL AS agent "
                "FROM projects p",
                "task": "SELECT project_id AS project, id AS task, NULL AS session, NULL AS agent "
                "FROM tasks p",
                "session": "SELECT t.project_id AS project, p.task_id AS task, p.id AS session, "
                "NULL AS agent "
                "FROM sessions p JOIN tasks t ON t.id = p.task_id",
                "agent": "SELECT t.project_id AS project, p.task_id AS task, p.session_id AS session, "
                "p.id AS agent FROM agents p JOIN tasks t ON t.id = p.task_id",
                "run": "SELECT t.project_id AS project, a.task_id AS task, a.session_id AS session, "
                "a.id AS agent FROM runs p JOIN agents a ON a.id = p.agent_id "
                "JOIN tasks t ON t.id = a.task_id",
            }.get(entity)
            found = one(conn, f"{sql} WHERE p.id = :i", i=entity_id) if sql else None
            if found is None:
                self._missing(entity, entity_id)
            chain = tree.agent_chain(conn, found["agent"]) if found["agent"] else ()
            return Location(
                found["project"],
                found["task"],
                found["session"],
                chain,
                entity_id if entity == "run" else None,
                span_id,
            )

    @staticmethod
    def _missing(entity: str, entity_id: str) -> NoReturn:
        raise NotFound(f"There is no {entity} with id {entity_id}.")

    # -- timeline ----------------------------------------------------------------------------
    def span_table(self, run_id: str) -> SpanTable:
        with self.reading() as conn:
            return spans.table(spans.run_trace(conn, self.layout, run_id))

    def span(self, span_id: str) -> rm.Span:
        with self.reading() as conn:
            return detail.span(conn, self.layout, span_id)

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        with self.reading() as conn:
            return detail.sent_context(conn, self.layout, span_id)

    # -- approvals ---------------------------------------------------------------------------
    def approvals(self, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
        with self.reading() as conn:
            return approvals.approvals(conn, self.layout, status, limit)

    def approval(self, approval_id: str) -> rm.Approval:
        with self.reading() as conn:
            return approvals.approval(conn, self.layout, approval_id)

    # -- context -----------------------------------------------------------------------------
    def context(self, agent_id: str) -> rm.AgentContext:
        with self.reading() as conn:
            return contexts.context(conn, self.layout, agent_id)

    def projection_savings(self, agent_id: str) -> list[contexts.ProjectionSaving]:
        """lensagent-only: every projection decision of an agent, as tokens saved."""
        with self.reading() as conn:
            return contexts.projection_savings(conn, self.layout, agent_id)

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

    # -- live changes, counts ----------------------------------------------------------------
    def prime_high_water(self) -> None:
        with self.reading() as conn:
            self._tracker.prime(conn)

    def poll_changes(self) -> list[Change]:
        with self.reading() as conn:
            return self._tracker.poll(conn)

    def counts(self) -> dict[str, int]:
        tables = (
            "projects",
            "tasks",
            "sessions",
            "agents",
            "runs",
            "steps",
            "model_attempts",
            "calls",
            "context_items",
        )
        with self.reading() as conn:
            counted = {t: one(conn, f"SELECT count(*) AS n FROM {t}")["n"] for t in tables}  # type: ignore[index]
            counted["pending_approvals"] = len(approvals.approvals(conn, self.layout, "pending", 1_000_000))
        return counted

    def showcase_run(self) -> str | None:
        """The run with the most calls among the newest 200 (for screenshots and first start)."""
        found = self.rows(
            "SELECT r.id FROM (SELECT id FROM runs ORDER BY created_at DESC LIMIT 200) r "
            "LEFT JOIN steps s ON s.run_id = r.id LEFT JOIN calls c ON c.step_id = s.id "
            "GROUP BY r.id ORDER BY count(c.id) DESC, r.id LIMIT 1"
        )
        return found[0]["id"] if found else None
