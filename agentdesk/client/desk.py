"""The client's entry point: open the store an operator watches and register an agent in it.

`AgentDesk` is what an agent process creates once. Projects and tasks are found
by name (so every process of one service lands in one project); a session is
new per `register` call unless an existing one is named by id (a resumed
conversation).
"""

from __future__ import annotations

import hashlib
import time
from types import TracebackType

from sqlalchemy import select

from agentdesk.client.handles import Agent, Run
from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import DEFAULT_BUSY_TIMEOUT_S, Store, open_store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.validation import check_name

DEFAULT_TASK = "default"


def trace_run_id(trace_id: str | int) -> str:
    """agentdesk's run id for an OpenTelemetry trace (an int as OTel's SpanContext has it, or hex)."""
    return "otr_" + (f"{trace_id:032x}" if isinstance(trace_id, int) else trace_id.lower())


def otel_span_id(trace_id: str | int, span_id: str | int) -> str:
    """agentdesk's span id for an OpenTelemetry span: the same one the receiver gives it when it arrives."""
    trace = f"{trace_id:032x}" if isinstance(trace_id, int) else trace_id.lower()
    span = f"{span_id:016x}" if isinstance(span_id, int) else span_id.lower()
    return f"o{trace}{span}"


def shared_project_id(name: str) -> str:
    """The id store/ingest/writer.py gives the project of a `service.name` (tests pin the two together)."""
    return "otp_" + hashlib.sha256(name.encode()).hexdigest()[:16]


class AgentDesk:
    """One agent process's connection to an agentdesk store."""

    def __init__(self, store: Store, *, actor: str = "agent") -> None:
        self.store = store
        self.runtime = AgentRuntime(store, actor=check_name("actor name", actor))

    @classmethod
    def connect(cls, store: str | None = None, *, actor: str = "agent",
                busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> AgentDesk:
        """Open (creating if needed) the store at a path or URL; default `$AGENTDESK_STORE` or the user's."""
        return cls(open_store(store, create=True, busy_timeout_s=busy_timeout_s), actor=actor)

    def close(self) -> None:
        self.store.close()

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
        if session_id is None:
            task_id = self.task_id(self.project_id(project), task)
            session_id = self.runtime.create_session(task_id, check_name("session title", session or agent))
        project_id = self._project_of_session(session_id)
        agent_id = self.runtime.create_agent(session_id, check_name("agent name", agent),
                                             check_name("model", model), None, context_budget)
        return Agent(self.runtime, agent_id, session_id, project_id, agent)

    def join_trace(self, trace_id: str | int, *, wait_s: float = 10.0) -> Run:
        """The run the OTLP receiver made of an OpenTelemetry trace, to gate tools inside it.

        Its approvals then sit in the same run as the agent's spans (the queue's "show in
        timeline" lands on them). The run exists once the trace's first spans arrived:
        this waits up to `wait_s` for that (flush the tracer provider first to be quick).
        """
        run_id = trace_run_id(trace_id)
        give_up = time.monotonic() + wait_s
        while True:
            with self.store.reading() as s:
                run = s.get(sc.RunRow, run_id)
                agent = s.get(sc.AgentRow, run.agent_id) if run is not None else None
                if run is not None and agent is not None:
                    return Run(Agent(self.runtime, agent.id, run.session_id, run.project_id, agent.name), run_id)
            if time.monotonic() >= give_up:
                raise NotFound(f"No spans of trace {run_id[4:]} have reached the store yet; is the agent's "
                               "exporter pointed at `agentdesk receive`?")
            time.sleep(0.1)

    def attach(self, agent_id: str) -> Agent:
        """An agent registered earlier (by this process or another), to continue its work."""
        with self.store.reading() as s:
            row = s.get(sc.AgentRow, agent_id)
            if row is None:
                raise NotFound(f"There is no agent with id {agent_id}.")
            return Agent(self.runtime, row.id, row.session_id, row.project_id, row.name)

    def project_id(self, name: str) -> str:
        """The project of that name, created the first time under the id the OTel ingest derives from it.

        So an agent's approvals and its OpenTelemetry spans (project = `service.name`)
        share one project whichever arrives first, and two processes creating it at
        the same instant collide on the id instead of making two.
        """
        name = check_name("project name", name)
        found = self._find_project(name)
        if found:
            return found
        try:
            return self.runtime.create_project(name, shared_project_id(name))
        except InvalidInput:  # another process created it between our look and our write
            found = self._find_project(name)
            if found is None:
                raise
            return found

    def _find_project(self, name: str) -> str | None:
        with self.store.reading() as s:
            shared = s.get(sc.ProjectRow, shared_project_id(name))
            if shared is not None:
                return shared.id
            found: str | None = s.execute(select(sc.ProjectRow.id).where(sc.ProjectRow.name == name)
                                          .order_by(sc.ProjectRow.created_at).limit(1)).scalar()
            return found

    def task_id(self, project_id: str, title: str) -> str:
        title = check_name("task title", title)
        with self.store.reading() as s:
            found = s.execute(select(sc.TaskRow.id).where(sc.TaskRow.project_id == project_id,
                                                          sc.TaskRow.title == title)
                              .order_by(sc.TaskRow.created_at).limit(1)).scalar()
        return found or self.runtime.create_task(project_id, title)

    def _project_of_session(self, session_id: str) -> str:
        with self.store.reading() as s:
            row = s.get(sc.SessionRow, session_id)
            if row is None:
                raise NotFound(f"There is no session with id {session_id}.")
            return row.project_id
