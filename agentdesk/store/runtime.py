"""The runtime-facing API: what an agent runtime (our simulator, or any Python agent) calls.

It creates the hierarchy, records spans and context, and asks a human for
approval, blocking until the decision (or the deadline) arrives. Every write is
one unit of work, so operators' views follow the agent live through the bus.

Runtime writes wait for a locked store instead of failing and step aside for an
operator's decision (`UnitOfWork(runtime=True)`, store/persistence/retry.py). A burst of
consecutive writes with nothing between them (end a span, append its result, start
the next one) can share one short transaction with `with runtime.batch():`: the
agent's hot path then costs one lock acquisition per burst instead of one per
write. A batch holds the write lock until its block ends, so it must contain
writes only: no model call, no tool, no sleeping, no waiting for a decision
(`wait_for_decision` refuses to run inside one).

Given a `ride_out` (the client library and the simulator pass one), a runtime outlasts a lost
PostgreSQL server: each call that raised `ServerUnreachable` (nothing of it was applied) is made
again after a back-off, and a wait for a decision goes on across the outage and gets the decision
after it (store/persistence/outage.py). Inside a batch calls are not retried one by one: the
batch's caller owns the block and hears the error.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import String, func, insert, literal, select, update

from agentdesk.store.approvals.commands import approval_parents, expire_overdue
from agentdesk.store.approvals.heartbeat import HEARTBEAT_INTERVAL_S, Heartbeat
from agentdesk.store.audit import guard
from agentdesk.store.errors import InvalidInput, NotFound, ServerUnreachable
from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import NO_RIDE_OUT, Pauses, RideOut
from agentdesk.store.rules.apply import apply_rules
from agentdesk.store.rules.prepare import prepare_request
from agentdesk.store.text.times import ns_of_seconds
from agentdesk.store.uow import UnitOfWork
from agentdesk.store.validation import (
    arguments_text,
    canonical_arguments,
    check_text,
    estimate_tokens,
    parse_json_arguments,
    payload_hash,
)

log = logging.getLogger("agentdesk.audit")


@dataclass(frozen=True, slots=True)
class Decision:
    status: str
    """approved, denied or expired."""
    reason: str | None
    arguments: str
    """The arguments to run with: the operator's edit when there was one."""
    actor: str | None


REFUSER = "agentdesk"
"""Who a refused decision says decided: agentdesk itself, not the operator the row names."""


def refused_decision(approval_id: str, refused: guard.Refusal) -> Decision:
    """A decided row its audit records do not vouch for is acted on as a denial that says why (logged too)."""
    log.warning("agentdesk: the decision of approval %s was refused: %s", approval_id, refused.sentence)
    return Decision("denied", f"Refused by agentdesk: the approval's row does not match its audit record, so it "
                              f"is treated as denied and must not run. {refused.sentence} Run `agentdesk verify`.",
                    refused.requested_arguments or "{}", REFUSER)


P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R", bound="AgentRuntime")


def rides_out(method: Callable[Concatenate[R, P], T]) -> Callable[Concatenate[R, P], T]:
    """Make the call again while the server is unreachable (nothing of a call that raised it was applied)."""
    @functools.wraps(method)
    def ride(self: R, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if self.ride_out.deadline_s <= 0 or getattr(self._local, "unit", None) is not None:
            return method(self, *args, **kwargs)
        return self.store.outage.ride_out(lambda: method(self, *args, **kwargs), self.ride_out)
    return ride


class AgentRuntime:
    def __init__(self, store: Store, actor: str = "runtime", *, ride_out: RideOut = NO_RIDE_OUT) -> None:
        self.store = store
        self.actor = actor
        self.ride_out = ride_out
        self._local = threading.local()

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run the writes in this block (this thread's) as one transaction; a failure rolls all back.

        Nested batches join the outer one. Keep the block to writes only: the lock is held throughout.
        """
        if getattr(self._local, "unit", None) is not None:
            yield
            return
        with UnitOfWork(self.store, runtime=True, ride_out=self.ride_out) as uow:
            self._local.unit = uow
            try:
                yield
            finally:
                self._local.unit = None

    def _refuse_in_batch(self, what: str) -> None:
        """Waiting (or expiring, an operator-side write) inside a batch would hold or need the lock."""
        if getattr(self._local, "unit", None) is not None:
            raise RuntimeError(f"{what} cannot run inside runtime.batch(): the batch holds the write lock")

    @contextmanager
    def _unit(self) -> Iterator[UnitOfWork]:
        """The open batch's unit of work, or a new one for this write alone."""
        current: UnitOfWork | None = getattr(self._local, "unit", None)
        if current is not None:
            yield current
            return
        with UnitOfWork(self.store, runtime=True, ride_out=self.ride_out) as uow:
            yield uow

    # -- hierarchy -------------------------------------------------------------------------
    @rides_out
    def create_project(self, name: str, project_id: str | None = None) -> str:
        """`project_id` lets writers that derive ids from the name (the client, the OTel ingest) agree on one."""
        pid = project_id or new_id("prj")
        with self._unit() as uow:
            uow.session.add(sc.ProjectRow(id=pid, name=name, created_at=uow.now, revision=1))
            uow.record("project", "insert", pid)
            uow.audit(self.actor, "project.create", "project", pid, {"name": name})
        return pid

    @rides_out
    def create_task(self, project_id: str, title: str) -> str:
        tid = new_id("tsk")
        with self._unit() as uow:
            self._get(uow, sc.ProjectRow, project_id)
            uow.session.add(sc.TaskRow(id=tid, project_id=project_id, title=title, created_at=uow.now,
                                       revision=1))
            uow.record("task", "insert", tid, {"project": project_id})
            uow.audit(self.actor, "task.create", "task", tid, {"title": title})
        return tid

    @rides_out
    def create_session(self, task_id: str, title: str) -> str:
        sid = new_id("ses")
        with self._unit() as uow:
            task = self._get(uow, sc.TaskRow, task_id)
            uow.session.add(sc.SessionRow(id=sid, project_id=task.project_id, task_id=task_id, title=title,
                                          status="running", created_at=uow.now, revision=1))
            uow.record("session", "insert", sid, {"project": task.project_id, "task": task_id})
            uow.audit(self.actor, "session.create", "session", sid, {"title": title})
        return sid

    @rides_out
    def create_agent(self, session_id: str, name: str, model: str, parent_agent_id: str | None = None,
                     context_budget: int = 128_000) -> str:
        aid = new_id("agt")
        with self._unit() as uow:
            ses = self._get(uow, sc.SessionRow, session_id)
            uow.session.add(sc.AgentRow(
                id=aid, project_id=ses.project_id, task_id=ses.task_id, session_id=session_id,
                parent_agent_id=parent_agent_id, name=name, model=model, status="idle", context_revision=0,
                context_budget=context_budget, created_at=uow.now, revision=1))
            parents = {"project": ses.project_id, "task": ses.task_id, "session": session_id}
            if parent_agent_id:
                parents["parent_agent"] = parent_agent_id
            uow.record("agent", "insert", aid, parents)
            uow.audit(self.actor, "agent.create", "agent", aid, {"name": name, "model": model,
                                                                 "parent": parent_agent_id})
        return aid

    @rides_out
    def set_agent_status(self, agent_id: str, status: str) -> None:
        with self._unit() as uow:
            self._set_agent_status(uow, agent_id, status)

    def _set_agent_status(self, uow: UnitOfWork, agent_id: str, status: str) -> None:
        agent = self._get(uow, sc.AgentRow, agent_id)
        if agent.status == status:
            return
        agent.status = status
        agent.revision += 1
        uow.record("agent", "update", agent_id, self._agent_parents(agent), agent.revision)

    @rides_out
    def set_session_status(self, session_id: str, status: str) -> None:
        with self._unit() as uow:
            ses = self._get(uow, sc.SessionRow, session_id)
            ses.status = status
            ses.revision += 1
            if status in ("done", "failed", "cancelled"):
                ses.ended_at = uow.now
            uow.record("session", "update", session_id, {"project": ses.project_id, "task": ses.task_id},
                       ses.revision)
            uow.audit(self.actor, f"session.{status}", "session", session_id, {})

    # -- runs and spans --------------------------------------------------------------------
    @rides_out
    def start_run(self, agent_id: str, title: str) -> str:
        rid = new_id("run")
        with self._unit() as uow:
            agent = self._get(uow, sc.AgentRow, agent_id)
            uow.session.add(sc.RunRow(
                id=rid, project_id=agent.project_id, task_id=agent.task_id, session_id=agent.session_id,
                agent_id=agent_id, title=title, status="running", started_at=uow.now, revision=1))
            uow.record("run", "insert", rid, self._agent_parents(agent) | {"agent": agent_id})
            self._set_agent_status(uow, agent_id, "running")
            uow.audit(self.actor, "run.start", "run", rid, {"title": title})
        return rid

    @rides_out
    def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Move a run to running/waiting, or finish it (done/failed/cancelled)."""
        with self._unit() as uow:
            run = self._get(uow, sc.RunRow, run_id)
            run.status = status
            run.revision += 1
            if status in ("done", "failed", "cancelled"):
                run.ended_at = uow.now
                run.error = error
                uow.audit(self.actor, f"run.{status}", "run", run_id, {"error": error})
            uow.record("run", "update", run_id, self._run_parents(run), run.revision)
            agent_status = {"done": "done", "failed": "failed", "cancelled": "done"}.get(status, status)
            self._set_agent_status(uow, run.agent_id, agent_status)

    @rides_out
    def start_span(self, run_id: str, kind: str, name: str, parent_span_id: str | None = None,
                   attributes: Mapping[str, Any] | None = None, input_text: str | None = None,
                   context_of_agent: str | None = None) -> str:
        """Open a span; for model calls pass `context_of_agent` to snapshot exactly what is sent."""
        span_id = new_id("spn")
        with self._unit() as uow:
            run = self._get(uow, sc.RunRow, run_id)
            span = sc.SpanRow(
                id=span_id, run_id=run_id, parent_span_id=parent_span_id, kind=kind, name=name,
                status="running", started_at=ns_of_seconds(uow.now), attributes=json.dumps(dict(attributes or {})),
                input_text=check_text("span input", input_text) if input_text else None)
            uow.session.add(span)
            uow.session.flush()
            if context_of_agent is not None:
                span.context_revision = self._snapshot_context(uow, span_id, context_of_agent)
            uow.record("span", "insert", span_id, self._run_parents(run) | {"run": run_id})
        return span_id

    def _snapshot_context(self, uow: UnitOfWork, span_id: str, agent_id: str) -> int:
        Item = sc.ContextItemRow
        agent = self._get(uow, sc.AgentRow, agent_id)
        # One INSERT ... SELECT inside the database: a context of N items used to cost N ORM objects
        # and their flush (6 ms of a 16 ms hot-path batch at 80 items), all of it holding the write lock.
        order = (Item.position, Item.summary_of.is_(None), Item.created_at)
        chosen = (select(literal(span_id, String()).label("span_id"),
                         (func.row_number().over(order_by=order) - 1).label("position"),
                         Item.id, Item.revision)
                  .where(Item.agent_id == agent_id, Item.removed.is_(False), Item.visible.is_(True),
                         Item.compaction_id.is_(None)))
        uow.session.execute(insert(sc.SpanContextRow).from_select(["span_id", "position", "item_id", "item_revision"],
                                                     chosen))
        return agent.context_revision

    @rides_out
    def finish_span(self, span_id: str, status: str = "ok", output_text: str | None = None,
                    input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                    error: str | None = None, attributes: Mapping[str, Any] | None = None) -> None:
        with self._unit() as uow:
            span = self._get(uow, sc.SpanRow, span_id)
            span.status = status
            span.ended_at = ns_of_seconds(uow.now)
            span.output_text = check_text("span output", output_text) if output_text else None
            span.input_tokens, span.output_tokens, span.cost_usd = input_tokens, output_tokens, cost_usd
            span.error = error
            if attributes:
                span.attributes = json.dumps({**json.loads(span.attributes or "{}"), **attributes})
            run = self._get(uow, sc.RunRow, span.run_id)
            if input_tokens or output_tokens or cost_usd:
                run.input_tokens += input_tokens
                run.output_tokens += output_tokens
                run.cost_usd += cost_usd
                run.revision += 1
                uow.record("run", "update", run.id, self._run_parents(run), run.revision)
            uow.record("span", "update", span_id, self._run_parents(run) | {"run": run.id})

    # -- context ---------------------------------------------------------------------------
    @rides_out
    def new_turn_group(self, agent_id: str, kind: str = "turn") -> str:
        gid = new_id("grp")
        with self._unit() as uow:
            G = sc.ContextGroupRow
            self._get(uow, sc.AgentRow, agent_id)
            last = uow.session.execute(select(G.ordinal).where(G.agent_id == agent_id)
                                       .order_by(G.ordinal.desc()).limit(1)).scalar()
            uow.session.add(G(id=gid, agent_id=agent_id, ordinal=(last or 0) + 1, kind=kind, revision=1,
                              created_at=uow.now))
            uow.record("context_group", "insert", gid, {"agent": agent_id})
        return gid

    @rides_out
    def append_context(self, agent_id: str, group_id: str, kind: str, role: str | None, content: str,
                       locked: bool = False) -> str:
        """Append one item at the end of the agent's context (bumps its context revision)."""
        iid = new_id("itm")
        check_text("context item", content)
        Item = sc.ContextItemRow
        with self._unit() as uow:
            agent = self._get(uow, sc.AgentRow, agent_id)
            group = self._get(uow, sc.ContextGroupRow, group_id)
            if group.agent_id != agent_id:
                raise InvalidInput(f"Turn group {group_id} belongs to another agent.")
            last = uow.session.execute(select(Item.position).where(Item.agent_id == agent_id)
                                       .order_by(Item.position.desc()).limit(1)).scalar()
            tokens = estimate_tokens(content)
            uow.session.add(Item(id=iid, agent_id=agent_id, group_id=group_id, position=(last or 0) + 1,
                                 kind=kind, role=role, content=content, visible=True, locked=locked,
                                 revision=1, token_estimate=tokens, removed=False, created_at=uow.now))
            uow.session.flush()
            uow.session.add(sc.ContextItemRevisionRow(item_id=iid, revision=1, content=content,
                                                      token_estimate=tokens, created_at=uow.now))
            group.revision += 1
            agent.context_revision += 1
            uow.record("context_item", "insert", iid, {"agent": agent_id, "group": group_id}, 1)
            uow.record("context_group", "update", group_id, {"agent": agent_id}, group.revision)
            uow.record("context", "update", agent_id, {"agent": agent_id, "session": agent.session_id},
                       agent.context_revision)
        return iid

    # -- tool calls and approvals ----------------------------------------------------------
    @rides_out
    def request_approval(self, run_id: str, tool_name: str, arguments: Mapping[str, Any] | str,
                         span_id: str | None = None, timeout_s: float | None = 300.0) -> str:
        """Record a tool call that needs a human, and its pending approval.

        Arguments must be a JSON object of at most `MAX_ARGUMENTS_BYTES` (1 MB) nested at most
        `MAX_ARGUMENTS_DEPTH` (64) levels; anything else raises `InvalidInput` saying which limit.
        """
        text = arguments if isinstance(arguments, str) else arguments_text(arguments)
        args = canonical_arguments(parse_json_arguments(text))
        prepared = prepare_request(self.store, tool_name, args)  # parsed here, never under the write lock
        aid, cid = new_id("apr"), new_id("tcl")
        with self._unit() as uow:
            run = self._get(uow, sc.RunRow, run_id)
            agent = self._get(uow, sc.AgentRow, run.agent_id)
            uow.session.add(sc.ToolCallRow(id=cid, run_id=run_id, span_id=span_id, tool_name=tool_name,
                                           arguments=args, status="pending", created_at=uow.now))
            uow.session.flush()
            row = sc.ApprovalRow(
                id=aid, tool_call_id=cid, project_id=run.project_id, task_id=run.task_id,
                session_id=run.session_id, agent_id=run.agent_id, run_id=run_id, span_id=span_id,
                tool_name=tool_name, arguments=args, payload_hash=payload_hash(tool_name, args),
                status="pending", created_at=uow.now,
                expires_at=None if timeout_s is None else uow.now + timeout_s,
                context_revision=agent.context_revision, revision=1)
            uow.session.add(row)
            uow.record("approval", "insert", aid, approval_parents(row), 1)
            uow.session.flush()  # on PostgreSQL the server checks the request record against the row it names
            uow.audit(self.actor, "approval.request", "approval", aid,
                      {"tool": tool_name, "arguments": args, "payload_hash": row.payload_hash,
                       "expires_at": row.expires_at, "created_at": row.created_at, "tool_call_id": cid,
                       "run_id": run_id, "agent_id": run.agent_id, "span_id": span_id})  # binds the row (state.py)
            guard.remember_request(aid, uow.audit_head[0] if uow.audit_head else None)
            if self._decides_by_rule():
                apply_rules(uow, row, prepared)  # a standing rule may decide it right here, in this transaction
        return aid

    def _decides_by_rule(self) -> bool:
        """Whether this process may apply standing rules itself: on SQLite (one user) and as the PostgreSQL store's
        owner. An agent login may not: a rule's verdict reached in the agent's own process would be the agent
        deciding for itself, so the server refuses any approval it records as decided (migration 0012) and the
        request waits for a person."""
        login = self.store.login
        return login is None or login.owner

    def wait_for_decision(self, approval_id: str, timeout_s: float | None = None,
                          poll_s: float = 0.1, heartbeat_s: float = HEARTBEAT_INTERVAL_S) -> Decision:
        """Block until the approval is decided or expires (the runtime expires it itself).

        While waiting it renews the requester heartbeat every `heartbeat_s`, so the
        queue can tell an approval somebody waits for from one nobody does.
        """
        self._refuse_in_batch("wait_for_decision")
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        heartbeat = self.heartbeat(approval_id, heartbeat_s)
        outage: Pauses | None = None
        while True:
            try:
                decision = self.look(approval_id, heartbeat)
                outage = None
            except ServerUnreachable:  # the wait outlasts the server: the decision is read once it is back
                if self.ride_out.deadline_s <= 0:
                    raise
                self.store.outage.lost()
                outage = outage or Pauses()
                decision = None
            if decision is not None:
                return decision
            if give_up is not None and time.monotonic() >= give_up:
                return Decision("pending", None, "", None)
            pause = poll_s if outage is None else outage.next()
            if self.ride_out.pause(pause if give_up is None else max(0.0, min(pause, give_up - time.monotonic()))):
                raise ServerUnreachable(f"Stopped waiting for the store {self.store.display_name}.")

    def look(self, approval_id: str, heartbeat: Heartbeat) -> Decision | None:
        """One look of a wait: the decision, or None after beating (when due). The read rides out a lost server
        (`poll_decision`); the beat does not (it is due again at the next look)."""
        decision = self.poll_decision(approval_id)
        if decision is None:
            heartbeat.tick()
        return decision

    def heartbeat(self, approval_id: str, interval_s: float = HEARTBEAT_INTERVAL_S) -> Heartbeat:
        """A heartbeat for a wait loop of your own: call `tick()` in it (it beats when due)."""
        return Heartbeat(self.store, approval_id, interval_s)

    @rides_out
    def poll_decision(self, approval_id: str) -> Decision | None:
        return self._poll_decision(approval_id)

    def _poll_decision(self, approval_id: str) -> Decision | None:
        self._refuse_in_batch("poll_decision")
        with self.store.reading() as s:
            row = s.get(sc.ApprovalRow, approval_id)
            if row is None:
                raise NotFound(f"There is no approval with id {approval_id}.")
            status, expires = row.status, row.expires_at
            decision = Decision(row.status, row.reason, row.edited_arguments or row.arguments, row.decided_by)
            refused = guard.decision_refusal(s, row) if status != "pending" else None
        if refused is not None:
            return refused_decision(approval_id, refused)
        if status != "pending":
            return decision
        if expires is not None and time.time() >= expires:
            expire_overdue(self.store, actor=self.actor)
            return self._poll_decision(approval_id)
        return None

    @rides_out
    def set_tool_call_status(self, tool_call_id: str, status: str) -> None:
        with self._unit() as uow:
            uow.session.execute(update(sc.ToolCallRow).where(sc.ToolCallRow.id == tool_call_id)
                                .values(status=status))
            uow.record("tool_call", "update", tool_call_id)

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _get(uow: UnitOfWork, table: type[Any], key: str) -> Any:
        row = uow.session.get(table, key)
        if row is None:
            raise NotFound(f"There is no {table.__tablename__[:-1]} with id {key}.")
        uow.loaded.append(row)  # the batch's next write finds it without a query (and the flush before it)
        return row

    @staticmethod
    def _agent_parents(agent: sc.AgentRow) -> dict[str, str]:
        parents = {"project": agent.project_id, "task": agent.task_id, "session": agent.session_id}
        if agent.parent_agent_id:
            parents["parent_agent"] = agent.parent_agent_id
        return parents

    @staticmethod
    def _run_parents(run: sc.RunRow) -> dict[str, str]:
        return {"project": run.project_id, "task": run.task_id, "session": run.session_id,
                "agent": run.agent_id}
