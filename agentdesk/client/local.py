"""The client on a store it opens itself: tests, the simulator and back-compat.

An agent that opens the store can also decide in it: give real agents a URL and a token
instead (client/http.py, docs/integrations.md).

It rides out a lost PostgreSQL server (`RideOut`: back-off from 0.1 s to 2 s for up to ten minutes,
one line on stderr): calls are made again only when nothing of them was applied, and a wait for a
decision goes on across the outage (store/runtime.py, store/persistence/outage.py).
"""

from __future__ import annotations

import asyncio
import time

from agentdesk.client.context import model_context
from agentdesk.store.agents.context_view import ModelContext
from agentdesk.store.agents.registry import Registered, register
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.approvals.heartbeat import Heartbeat
from agentdesk.store.asks import commands as ask_commands
from agentdesk.store.asks import waiting as ask_waiting
from agentdesk.store.asks.waiting import AskState
from agentdesk.store.control.checkpoint import reach_checkpoint, read_control
from agentdesk.store.control.state import RunControl
from agentdesk.store.errors import Conflict, NotFound, ServerUnreachable
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.commands import Delivered
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import Pauses, RideOut
from agentdesk.store.runtime import AgentRuntime, Decision, rides_out

POLL_S = 0.1
"""How often a waiting agent looks at the store: a decision reaches it in about this long."""
CONTROL_POLL_S = 0.02
"""How often an agent paused at a checkpoint looks at its run's control row (one indexed read): a resume reaches
it within this long (bench/control_bench.py holds the release under 100 ms at the 99th percentile)."""


class LocalRuntime(AgentRuntime):
    """`AgentRuntime` plus what the client's handles need around it."""

    def __init__(self, store: Store, actor: str = "agent", *, ride_out: RideOut | None = None) -> None:
        super().__init__(store, actor, ride_out=RideOut() if ride_out is None else ride_out)

    @rides_out
    def register(self, *, project: str, agent: str, model: str, session: str | None, task: str,
                 session_id: str | None, context_budget: int) -> Registered:
        return register(self, project=project, agent=agent, model=model, session=session, task=task,
                        session_id=session_id, context_budget=context_budget)

    @rides_out
    def attach(self, agent_id: str) -> Registered:
        with self.store.reading() as s:
            row = s.get(sc.AgentRow, agent_id)
            if row is None:
                raise NotFound(f"There is no agent with id {agent_id}.")
            return Registered(row.id, row.session_id, row.project_id, row.name)

    @rides_out
    def find_run(self, run_id: str) -> Registered | None:
        with self.store.reading() as s:
            run = s.get(sc.RunRow, run_id)
            agent = s.get(sc.AgentRow, run.agent_id) if run is not None else None
            if run is None or agent is None:
                return None
            return Registered(agent.id, run.session_id, run.project_id, agent.name)

    @rides_out
    def model_context(self, agent_id: str) -> ModelContext:
        return model_context(self.store, agent_id)

    @rides_out
    def take_messages(self, agent_id: str) -> list[Delivered]:
        """Made again after a lost server only when nothing of it was applied (the unit of work says which), and the
        server delivers only what is still pending: a message is delivered once, never twice, never lost."""
        return messages.take(self.store, agent_id, self.actor)

    @rides_out
    def statuses(self, run_id: str, session_id: str) -> tuple[str, str]:
        with self.store.reading() as s:
            run, session = s.get(sc.RunRow, run_id), s.get(sc.SessionRow, session_id)
            return (run.status if run is not None else "running",
                    session.status if session is not None else "running")

    def finish_session(self, agent_id: str, session_id: str, status: str) -> None:
        self.set_session_status(session_id, status)

    def set_statuses(self, run_id: str, session_id: str, run_status: str, session_status: str) -> None:
        self.set_run_status(run_id, run_status)
        self.set_session_status(session_id, session_status)

    async def await_decision(self, approval_id: str, timeout_s: float | None = None) -> Decision:
        loop = asyncio.get_running_loop()
        give_up = None if timeout_s is None else loop.time() + timeout_s
        heartbeat = Heartbeat(self.store, approval_id)

        outage: Pauses | None = None
        while True:
            try:
                decision = await asyncio.to_thread(self.look, approval_id, heartbeat)
                outage = None
            except ServerUnreachable:  # the wait outlasts the server (see the module)
                self.store.outage.lost()
                outage = outage or Pauses()
                decision = None
            if decision is not None:
                return decision
            if give_up is not None and loop.time() >= give_up:
                return Decision("pending", None, "", None)
            await asyncio.sleep(POLL_S if outage is None else outage.next())

    @rides_out
    def withdraw_request(self, approval_id: str, why: str) -> Decision | None:
        try:
            approval_commands.withdraw(self.store, approval_id, self.actor, why)
        except Conflict:
            return self.poll_decision(approval_id)
        return Decision("withdrawn", why, "", self.actor)

    @rides_out
    def ask(self, run_id: str, question: str, options: list[str] | None, expires_in: float | None,
            span_id: str | None) -> str:
        return ask_commands.create(self.store, run_id, question, options, expires_in=expires_in, span_id=span_id,
                                   actor=self.actor)

    def wait_for_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        """The wait outlasts a lost server, as a wait for a decision does: the answer is read once it is back."""
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        outage: Pauses | None = None
        while True:
            left = None if give_up is None else max(0.0, give_up - time.monotonic())
            try:
                found = ask_waiting.wait(self.store, ask_id, self.actor, left)
            except ServerUnreachable:
                if self.ride_out.deadline_s <= 0:
                    raise
                self.store.outage.lost()
                outage = outage or Pauses()
                if self.ride_out.pause(outage.next() if left is None else min(outage.next(), left)):
                    raise
                if left is not None and left <= 0:
                    return self.ask_state(ask_id)
                continue
            if outage is not None:
                self.store.outage.back()
            return found

    @rides_out
    def ask_state(self, ask_id: str) -> AskState:
        return ask_waiting.read_state(self.store, ask_id)

    async def await_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        """Waits in slices on a worker thread, so cancelling the task stops the wait within one slice."""
        loop = asyncio.get_running_loop()
        give_up = None if timeout_s is None else loop.time() + timeout_s
        while True:
            left = None if give_up is None else max(0.0, give_up - loop.time())
            found = await asyncio.to_thread(self.wait_for_answer, ask_id, 0.25 if left is None else min(0.25, left))
            if not found.pending or (left is not None and left <= 0.25):
                return found

    @rides_out
    def cancel_ask(self, ask_id: str, why: str) -> AskState:
        return ask_waiting.cancel(self.store, ask_id, self.actor, why)

    @rides_out
    def checkpoint(self, run_id: str) -> RunControl:
        return reach_checkpoint(self.store, run_id, self.actor)

    def wait_control(self, run_id: str, timeout_s: float) -> RunControl:
        give_up = time.monotonic() + timeout_s
        while True:
            control = self.read_control(run_id)
            if not control.held or time.monotonic() >= give_up:
                return control
            time.sleep(CONTROL_POLL_S)

    @rides_out
    def read_control(self, run_id: str) -> RunControl:
        """One look at the run's control row; a paused agent's wait outlasts a lost server."""
        return read_control(self.store, run_id)

    def close(self) -> None:
        self.store.close()

