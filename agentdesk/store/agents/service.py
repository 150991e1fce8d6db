"""What an agent token may do, and nothing more: the agent level, for one identity.

Every method checks ownership first (store/agents/ownership.py) and then makes exactly the
runtime call the local client makes (store/runtime.py): one transaction, audited with the
token's name as the actor, on the change bus. There is no method to decide, to edit or hide
context, to touch rules or to write the audit log: the agent API cannot offer what is not here.
Answers are plain JSON-able values. Sync: the agent API calls it from worker threads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from sqlalchemy import select

from agentdesk.store.agents.context_view import context_view
from agentdesk.store.agents.ownership import TRACE_RUN_PREFIX, Ownership
from agentdesk.store.agents.refusals import Forbidden
from agentdesk.store.agents.registry import register
from agentdesk.store.agents.tokens import AgentIdentity
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.approvals.heartbeat import beat
from agentdesk.store.asks import commands as ask_commands
from agentdesk.store.asks import waiting as ask_waiting
from agentdesk.store.control.checkpoint import reach_checkpoint, read_control
from agentdesk.store.control.state import ControlState, RunControl
from agentdesk.store.errors import Conflict, InvalidInput, NotFound, ServerUnreachable
from agentdesk.store.messages import commands as message_commands
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import COMMIT_CHECK_S, RideOut
from agentdesk.store.readmodel import ItemKind, RunStatus, SpanKind, SpanStatus
from agentdesk.store.runtime import AgentRuntime, Decision
from agentdesk.store.validation import canonical_arguments, check_name, check_text

RUN_STATUSES = {s.value for s in RunStatus} - {RunStatus.PENDING.value}
SESSION_STATUSES = RUN_STATUSES
SPAN_KINDS = {k.value for k in SpanKind}
SPAN_ENDINGS = {s.value for s in SpanStatus} - {SpanStatus.RUNNING.value}
AGENT_ITEM_KINDS = {k.value for k in ItemKind} - {ItemKind.COMPACTION.value}
"""A compaction is an operator's summary: an agent appends messages, tool calls and results only."""
MAX_EXPIRES_IN_S = 30 * 24 * 3600.0
RUNTIME_SPAN_PREFIX = "spn_"
"""Spans started through the runtime API (store/ids.py); OpenTelemetry spans have other ids."""
MAX_BUDGET = 100_000_000


def decision_json(decision: Decision | None) -> dict[str, Any]:
    if decision is None:
        return {"status": "pending"}
    return {"status": decision.status, "reason": decision.reason, "arguments": decision.arguments,
            "decided_by": decision.actor}


def control_json(control: RunControl) -> dict[str, Any]:
    """A run's control state as the agent API answers it (client/http.py reads it back with `control_of`)."""
    return {"state": control.state.value, "set_by": control.set_by, "set_at": control.set_at,
            "reason": control.reason, "held_at": control.held_at, "set_login": control.set_login}


class AgentService:
    def __init__(self, store: Store, ownership: Ownership, identity: AgentIdentity) -> None:
        self.store = store
        self.ownership = ownership
        self.identity = identity
        self.rt = AgentRuntime(store, actor=identity.name)

    # -- ownership -------------------------------------------------------------------------
    def _own(self, entity: str, entity_id: str) -> None:
        if not isinstance(entity_id, str) or not entity_id:
            raise InvalidInput(f"A {entity} id is required.")
        if not self.ownership.owns(self.identity.name, entity, entity_id):
            self._exists(entity, entity_id)
            raise Forbidden(f"The {entity} {entity_id} is not {self.identity.name}'s: an agent token acts only "
                            "on what it registered.")

    def _exists(self, entity: str, entity_id: str) -> None:
        table = {"agent": sc.AgentRow, "session": sc.SessionRow, "approval": sc.ApprovalRow, "run": sc.RunRow,
                 "span": sc.SpanRow, "ask": sc.AskRow}[entity]
        with self.store.reading() as s:
            if s.get(table, entity_id) is None:
                raise NotFound(f"There is no {entity} with id {entity_id}.")

    def _run(self, run_id: str, *, joinable: bool = False) -> sc.RunRow:
        with self.store.reading() as s:
            run = s.get(sc.RunRow, run_id)
            if run is None:
                raise NotFound(f"There is no run with id {run_id}.")
            s.expunge(run)
        if not (joinable and run.id.startswith(TRACE_RUN_PREFIX)):
            self._own("agent", run.agent_id)
        return run

    def _span_run(self, span_id: str) -> sc.RunRow:
        with self.store.reading() as s:
            run_id = s.execute(select(sc.SpanRow.run_id).where(sc.SpanRow.id == span_id)).scalar()
        if run_id is None:
            raise NotFound(f"There is no span with id {span_id}.")
        return self._run(run_id, joinable=True)

    def _note(self, entity: str, entity_id: str) -> str:
        self.ownership.note(entity, entity_id, self.identity.name)
        return entity_id

    # -- registration ----------------------------------------------------------------------
    def whoami(self) -> dict[str, Any]:
        return {"name": self.identity.name, "token_id": self.identity.token_id, "level": "agent"}

    def register(self, body: Mapping[str, Any]) -> dict[str, Any]:
        session_id = body.get("session_id")
        if session_id is not None:
            self._own("session", session_id)
        budget = body.get("context_budget") or 128_000
        _check_range("context_budget", budget, 1, MAX_BUDGET)
        # Several writes (project, task, session, agent): once one landed, the rest must follow, so they wait
        # for a lost server a while instead of answering 503 (which would make the client register twice).
        rt = AgentRuntime(self.store, actor=self.identity.name, ride_out=RideOut(COMMIT_CHECK_S))
        registered = register(rt, project=body["project"], agent=body["agent"],
                              model=body.get("model") or "unknown", session=body.get("session"),
                              task=body.get("task") or "default", session_id=session_id, context_budget=budget)
        if session_id is None:
            self._note("session", registered.session_id)
        self._note("agent", registered.agent_id)
        return asdict(registered)

    def attach(self, agent_id: str) -> dict[str, Any]:
        self._own("agent", agent_id)
        with self.store.reading() as s:
            row = s.get(sc.AgentRow, agent_id)
            if row is None:
                raise NotFound(f"There is no agent with id {agent_id}.")
            return {"agent_id": row.id, "session_id": row.session_id, "project_id": row.project_id, "name": row.name}

    def sub_agent(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        parent = self.attach(agent_id)
        budget = body.get("context_budget") or 128_000
        _check_range("context_budget", budget, 1, MAX_BUDGET)
        child = self.rt.create_agent(parent["session_id"], check_name("agent name", body["name"]),
                                     check_name("model", body["model"]), agent_id, budget)
        return {"agent_id": self._note("agent", child), "session_id": parent["session_id"],
                "project_id": parent["project_id"], "name": body["name"]}

    def finish_agent(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        agent = self.attach(agent_id)
        self.rt.set_session_status(agent["session_id"], _one_of("status", body["status"], SESSION_STATUSES))
        return {}

    # -- runs and spans --------------------------------------------------------------------
    def start_run(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._own("agent", agent_id)
        return {"run_id": self.rt.start_run(agent_id, check_name("run title", body["title"]))}

    def run_info(self, run_id: str) -> dict[str, Any]:
        run = self._run(run_id, joinable=True)
        with self.store.reading() as s:
            agent = s.get(sc.AgentRow, run.agent_id)
            session = s.get(sc.SessionRow, run.session_id)
            return {"run_id": run.id, "agent_id": run.agent_id, "session_id": run.session_id,
                    "project_id": run.project_id, "agent_name": agent.name if agent else "",
                    "status": run.status, "session_status": session.status if session else "running"}

    def set_run_status(self, run_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        run = self._run(run_id, joinable=True)
        error = body.get("error")
        if error is not None:
            check_text("run error", error)
        if "status" in body:
            _keep_stopped(self.store, run)
        with self.rt.batch():
            if "status" in body:
                self.rt.set_run_status(run_id, _one_of("status", body["status"], RUN_STATUSES), error)
            if "session_status" in body:
                self.rt.set_session_status(run.session_id,
                                           _one_of("session_status", body["session_status"], SESSION_STATUSES))
        return {}

    def start_span(self, run_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._run(run_id, joinable=True)
        context_of = body.get("context_of_agent")
        if context_of is not None:
            self._own("agent", context_of)
        attributes = body.get("attributes") or {}
        span_id = self.rt.start_span(run_id, _one_of("kind", body["kind"], SPAN_KINDS),
                                     check_name("span name", body["name"]), body.get("parent_span_id"),
                                     attributes, body.get("input"), context_of)
        return {"span_id": span_id}

    def finish_span(self, span_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        run = self._span_run(span_id)
        if run.id.startswith(TRACE_RUN_PREFIX) and not span_id.startswith(RUNTIME_SPAN_PREFIX):
            raise Forbidden(f"The span {span_id} came from OpenTelemetry: an agent token ends only the spans "
                            "it started.")
        for key in ("input_tokens", "output_tokens"):
            _check_range(key, body.get(key, 0), 0, 10**12)
        cost = body.get("cost_usd", 0.0)
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not 0 <= cost < 1e12:
            raise InvalidInput("cost_usd must be a number from 0.")
        error = body.get("error")
        if error is not None:
            check_text("span error", error)
        self.rt.finish_span(span_id, _one_of("status", body.get("status", "ok"), SPAN_ENDINGS), body.get("output"),
                            body.get("input_tokens", 0), body.get("output_tokens", 0), float(cost), error,
                            body.get("attributes") or None)
        return {}

    # -- context ---------------------------------------------------------------------------
    def new_turn(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._own("agent", agent_id)
        return {"group_id": self.rt.new_turn_group(agent_id, check_name("turn kind", body.get("kind", "turn")))}

    def append_context(self, agent_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._own("agent", agent_id)
        role = body.get("role")
        if role is not None:
            check_name("role", role)
        item = self.rt.append_context(agent_id, body["group_id"], _one_of("kind", body.get("kind", "message"),
                                                                          AGENT_ITEM_KINDS),
                                      role, body["content"], bool(body.get("locked", False)))
        return {"item_id": item}

    def context(self, agent_id: str) -> dict[str, Any]:
        self._own("agent", agent_id)
        return asdict(context_view(self.store, agent_id))

    def take_messages(self, agent_id: str) -> dict[str, Any]:
        """The agent's pending operator messages, delivered into its context now (its own agents only)."""
        self._own("agent", agent_id)
        return {"messages": [asdict(d) for d in message_commands.take(self.store, agent_id, self.identity.name)]}

    # -- approvals -------------------------------------------------------------------------
    def request_approval(self, run_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._run(run_id, joinable=True)
        expires_in = body.get("expires_in")
        if expires_in is not None and (isinstance(expires_in, bool) or not isinstance(expires_in, int | float)
                                       or not 0 < expires_in <= MAX_EXPIRES_IN_S):
            raise InvalidInput(f"expires_in must be seconds above 0 and at most {MAX_EXPIRES_IN_S:g}, or null.")
        span_id = body.get("span_id")
        if span_id is not None and self._span_run(span_id).id != run_id:
            raise InvalidInput(f"The span {span_id} belongs to another run.")
        arguments = canonical_arguments(body["arguments"])
        approval_id = self.rt.request_approval(run_id, check_name("tool name", body["tool"]), arguments,
                                               span_id=span_id, timeout_s=expires_in)
        self._note("approval", approval_id)
        try:  # a standing rule may have decided it already; a server gone now must not undo the answer
            decision = self.rt.poll_decision(approval_id)
        except ServerUnreachable:
            decision = None  # the agent waits for it next, which outlasts the server
        return {"approval_id": approval_id, "decision": decision_json(decision)}

    # -- run control (store/control): the agent reads and honours it, never sets it -------------------
    def checkpoint(self, run_id: str) -> dict[str, Any]:
        """The agent reached a step boundary: report itself blocked if paused, end the run if stopped. A joined
        OpenTelemetry trace run belongs to no token: any agent gating tools inside it honours its controls."""
        self._run(run_id, joinable=True)
        return control_json(reach_checkpoint(self.store, run_id, self.identity.name))

    def own_run(self, run_id: str) -> None:
        self._run(run_id, joinable=True)

    def own_approval(self, approval_id: str) -> None:
        self._own("approval", approval_id)

    def decision(self, approval_id: str) -> dict[str, Any]:
        self._own("approval", approval_id)
        return decision_json(self.rt.poll_decision(approval_id))

    def withdraw(self, approval_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Take the request back; the decision that came first instead, if one did."""
        self._own("approval", approval_id)
        reason = body.get("reason")
        try:
            approval_commands.withdraw(self.store, approval_id, self.identity.name, reason)
        except Conflict:
            return decision_json(self.rt.poll_decision(approval_id))
        return decision_json(Decision("withdrawn", reason, "", self.identity.name))

    def heartbeat(self, approval_id: str) -> dict[str, Any]:
        self._own("approval", approval_id)
        return {"pending": beat(self.store, approval_id)}


    # -- questions -------------------------------------------------------------------------
    def ask(self, run_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The agent's question in its own run, pending (an agent never answers: there is no route for it)."""
        self._run(run_id, joinable=True)
        expires_in = body.get("expires_in")
        if expires_in is not None and (isinstance(expires_in, bool) or not isinstance(expires_in, int | float)
                                       or not 0 < expires_in <= MAX_EXPIRES_IN_S):
            raise InvalidInput(f"expires_in must be seconds above 0 and at most {MAX_EXPIRES_IN_S:g}, or null.")
        span_id = body.get("span_id")
        if span_id is not None and self._span_run(span_id).id != run_id:
            raise InvalidInput(f"The span {span_id} belongs to another run.")
        options = body.get("options")
        if options is not None and not isinstance(options, list):
            raise InvalidInput("options must be a list of strings, or null.")
        ask_id = ask_commands.create(self.store, run_id, body["question"], options, expires_in=expires_in,
                                     span_id=span_id, actor=self.identity.name)
        self._note("ask", ask_id)
        return {"ask_id": ask_id}

    def own_ask(self, ask_id: str) -> None:
        self._own("ask", ask_id)

    def ask_state(self, ask_id: str) -> dict[str, Any]:
        self._own("ask", ask_id)
        return ask_waiting.state(self.store, ask_id, self.identity.name).json()

    def cancel_ask(self, ask_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Take the question back; the answer that came first instead, if one did."""
        self._own("ask", ask_id)
        reason = body.get("reason")
        return ask_waiting.cancel(self.store, ask_id, self.identity.name, reason or "the agent took it back").json()


def _keep_stopped(store: Store, run: sc.RunRow) -> None:
    """A run an operator stopped stays cancelled: the agent cannot write another status over the stop."""
    control = read_control(store, run.id)
    if control.state is ControlState.STOPPED:
        raise Conflict(f"Run {run.id} was stopped by {control.who}; its status stays cancelled.")


def _one_of(label: str, value: Any, allowed: set[str]) -> str:
    if value not in allowed:
        raise InvalidInput(f"{label} must be one of {', '.join(sorted(allowed))}, not {json.dumps(value)[:60]}.")
    return str(value)


def _check_range(label: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{label} must be a whole number from {low} to {high:,}.")
