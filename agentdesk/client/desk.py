"""The client's entry point: connect to agentdesk and register an agent.

    AgentDesk.connect("http://127.0.0.1:4318")   # or $AGENTDESK_URL; token from $AGENTDESK_TOKEN

An agent should connect by URL: it then talks to the receiver's agent API with an agent token
(`agentdesk agent-token create NAME`) and never holds the store, so it cannot decide its own
requests. A path or database URL (or `$AGENTDESK_STORE`) opens the store itself: for tests,
simulations and back-compat only (docs/integrations.md). Projects and tasks are found by
name (so every process of one service lands in one project); a session is new per `register`
call unless an existing one is named by id (a resumed conversation).
"""

from __future__ import annotations

import os
import time
from types import TracebackType

from agentdesk.client.backend import Backend
from agentdesk.client.handles import Agent, Run
from agentdesk.client.http import TOKEN_ENV, URL_ENV, HttpRuntime, is_url
from agentdesk.client.local import LocalRuntime
from agentdesk.store.agents.registry import DEFAULT_TASK, shared_project_id
from agentdesk.store.errors import NotFound
from agentdesk.store.persistence.database import DEFAULT_BUSY_TIMEOUT_S, Store, open_store
from agentdesk.store.validation import check_name

__all__ = ["DEFAULT_TASK", "AgentDesk", "otel_span_id", "shared_project_id", "trace_run_id"]


def trace_run_id(trace_id: str | int) -> str:
    """agentdesk's run id for an OpenTelemetry trace (an int as OTel's SpanContext has it, or hex)."""
    return "otr_" + (f"{trace_id:032x}" if isinstance(trace_id, int) else trace_id.lower())


def otel_span_id(trace_id: str | int, span_id: str | int) -> str:
    """agentdesk's span id for an OpenTelemetry span: the same one the receiver gives it when it arrives."""
    trace = f"{trace_id:032x}" if isinstance(trace_id, int) else trace_id.lower()
    span = f"{span_id:016x}" if isinstance(span_id, int) else span_id.lower()
    return f"o{trace}{span}"


class AgentDesk:
    """One agent process's connection to agentdesk: the agent API by URL, or (tests) a store."""

    def __init__(self, store: Store | Backend, *, actor: str = "agent") -> None:
        self.runtime: Backend
        if isinstance(store, Store):
            self.store: Store | None = store
            self.runtime = LocalRuntime(store, actor=check_name("actor name", actor))
        else:
            self.store = None
            self.runtime = store

    @classmethod
    def connect(cls, store: str | None = None, *, token: str | None = None, actor: str = "agent",
                busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> AgentDesk:
        """Connect to the receiver at an `http://` URL (default `$AGENTDESK_URL`) with an agent token
        (default `$AGENTDESK_TOKEN`); the requester recorded is the token's name.

        Without a URL, opens (creating if needed) the store at a path or database URL, default
        `$AGENTDESK_STORE` or the user's: an agent that holds the store can decide in it, so use
        this for tests and simulations only.
        """
        target = store if store is not None else os.environ.get(URL_ENV) or None
        if target is not None and is_url(target):
            return cls(HttpRuntime(target, token or os.environ.get(TOKEN_ENV)))
        return cls(open_store(target, create=True, busy_timeout_s=busy_timeout_s), actor=actor)

    @property
    def actor(self) -> str:
        """Who the requests are recorded as: the agent token's name over HTTP."""
        return self.runtime.actor

    def close(self) -> None:
        self.runtime.close()

    def __enter__(self) -> AgentDesk:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- registration ----------------------------------------------------------------------
    def register(self, *, project: str, agent: str, model: str = "unknown", session: str | None = None,
                 task: str = DEFAULT_TASK, session_id: str | None = None,
                 context_budget: int = 128_000) -> Agent:
        """The agent, in project > task > session, ready to start runs.

        `session` titles a new session (default: the agent's name); `session_id`
        joins an existing one instead.
        """
        found = self.runtime.register(project=project, agent=agent, model=model, session=session, task=task,
                                      session_id=session_id, context_budget=context_budget)
        return Agent(self.runtime, found.agent_id, found.session_id, found.project_id, found.name)

    def join_trace(self, trace_id: str | int, *, wait_s: float = 10.0) -> Run:
        """The run the OTLP receiver made of an OpenTelemetry trace, to gate tools inside it.

        Its approvals then sit in the same run as the agent's spans (the queue's "show in
        timeline" lands on them). The run exists once the trace's first spans arrived:
        this waits up to `wait_s` for that (flush the tracer provider first to be quick).
        """
        run_id = trace_run_id(trace_id)
        give_up = time.monotonic() + wait_s
        while True:
            found = self.runtime.find_run(run_id)
            if found is not None:
                return Run(Agent(self.runtime, found.agent_id, found.session_id, found.project_id, found.name), run_id)
            if time.monotonic() >= give_up:
                raise NotFound(f"No spans of trace {run_id[4:]} have reached the store yet; is the agent's "
                               "exporter pointed at `agentdesk receive`?")
            time.sleep(0.1)

    def attach(self, agent_id: str) -> Agent:
        """An agent registered earlier (by this process or another, with the same token), to continue its work."""
        found = self.runtime.attach(agent_id)
        return Agent(self.runtime, found.agent_id, found.session_id, found.project_id, found.name)
