"""What the client's handles call: the agent level, over HTTP (`HttpRuntime`) or on a local store.

`AgentDesk.connect("http://…")` (or `$AGENTDESK_URL`) talks to the receiver's agent API with an
agent token (client/http.py): the agent never holds the store, so it cannot decide its own
requests. `AgentDesk.connect(path)` opens a store directly (client/local.py): for tests, the
simulator and back-compat only, since whoever opens the store can also decide in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agentdesk.store.agents.context_view import ModelContext
from agentdesk.store.agents.registry import Registered
from agentdesk.store.asks.waiting import AskState
from agentdesk.store.messages.commands import Delivered
from agentdesk.store.runtime import Decision


class Backend(Protocol):
    actor: str

    def register(self, *, project: str, agent: str, model: str, session: str | None, task: str,
                 session_id: str | None, context_budget: int) -> Registered: ...

    def attach(self, agent_id: str) -> Registered: ...

    def find_run(self, run_id: str) -> Registered | None:
        """The agent of a run, None while the run does not exist (join_trace waits for it)."""

    def create_agent(self, session_id: str, name: str, model: str, parent_agent_id: str | None = None,
                     context_budget: int = 128_000) -> str: ...

    def start_run(self, agent_id: str, title: str) -> str: ...

    def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None: ...

    def finish_session(self, agent_id: str, session_id: str, status: str) -> None:
        """The agent's session is over: done, failed or cancelled."""

    def start_span(self, run_id: str, kind: str, name: str, parent_span_id: str | None = None,
                   attributes: Mapping[str, Any] | None = None, input_text: str | None = None,
                   context_of_agent: str | None = None) -> str: ...

    def finish_span(self, span_id: str, status: str = "ok", output_text: str | None = None,
                    input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                    error: str | None = None, attributes: Mapping[str, Any] | None = None) -> None: ...

    def new_turn_group(self, agent_id: str, kind: str = "turn") -> str: ...

    def append_context(self, agent_id: str, group_id: str, kind: str, role: str | None, content: str,
                       locked: bool = False) -> str: ...

    def model_context(self, agent_id: str) -> ModelContext: ...

    def take_messages(self, agent_id: str) -> list[Delivered]:
        """Deliver the agent's pending operator messages into its context now; what was delivered, oldest first."""

    def statuses(self, run_id: str, session_id: str) -> tuple[str, str]:
        """The run's and the session's status now (what a gate goes back to after its wait)."""

    def set_statuses(self, run_id: str, session_id: str, run_status: str, session_status: str) -> None: ...

    def request_approval(self, run_id: str, tool_name: str, arguments: str, span_id: str | None = None,
                         timeout_s: float | None = 300.0) -> str: ...

    def poll_decision(self, approval_id: str) -> Decision | None: ...

    def wait_for_decision(self, approval_id: str, timeout_s: float | None = None, poll_s: float = 0.1) -> Decision:
        """The decision, or status `pending` once `timeout_s` passed; renews the requester heartbeat meanwhile."""

    async def await_decision(self, approval_id: str, timeout_s: float | None = None) -> Decision:
        """`wait_for_decision` without blocking the event loop."""

    def withdraw_request(self, approval_id: str, why: str) -> Decision | None:
        """Take the request back: `withdrawn`, or the decision (or expiry) that came first."""

    def ask(self, run_id: str, question: str, options: list[str] | None, expires_in: float | None,
            span_id: str | None) -> str:
        """Record the agent's question, pending; its id."""

    def wait_for_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        """The question once it is no longer pending, or its pending state once `timeout_s` passed."""

    async def await_answer(self, ask_id: str, timeout_s: float | None = None) -> AskState:
        """`wait_for_answer` without blocking the event loop."""

    def cancel_ask(self, ask_id: str, why: str) -> AskState:
        """Take the question back: `cancelled`, or the answer (or expiry) that came first."""

    def close(self) -> None: ...
