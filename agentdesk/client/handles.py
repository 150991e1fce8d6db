"""Handles an agent holds: its registration, its runs, and the spans inside them.

Each method is one call of the backend (client/backend.py: the agent API over HTTP, or a local
runtime): one transaction, audited, on the change bus, so an operator's window follows the
agent live. Spans nest by themselves: the
span opened last in this thread or asyncio task is the parent of the next one.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agentdesk.client import asking, gate
from agentdesk.client.backend import Backend
from agentdesk.client.results import ApprovalResult
from agentdesk.store.agents.context_view import ModelContext
from agentdesk.store.messages.commands import Delivered

_current_span: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("agentdesk_span",
                                                                                      default=None)
"""(run id, span id) of the span open in this thread or task: a parent only for spans of the same run."""

DEFAULT_EXPIRES_IN_S = 300.0


@dataclass
class Span:
    """An open span; set what it produced before the `with` block ends."""

    id: str
    output: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    attributes: dict[str, Any] = field(default_factory=dict)


class Run:
    """One run of an agent: spans, approvals, and how it ended."""

    def __init__(self, agent: Agent, run_id: str) -> None:
        self.agent = agent
        self.id = run_id
        self._rt = agent.runtime

    def _open_span(self) -> str | None:
        current = _current_span.get()
        return current[1] if current is not None and current[0] == self.id else None

    @contextmanager
    def span(self, kind: str, name: str, *, input: str | None = None,
             attributes: Mapping[str, Any] | None = None, context_of_agent: str | None = None) -> Iterator[Span]:
        """A span around a block: `ok` when it ends normally, `error` (with the exception) when it raises.

        `kind` is one of agent, model, tool, sub_agent, guardrail, gate, internal.
        """
        span_id = self._rt.start_span(self.id, kind, name, self._open_span(), attributes, input, context_of_agent)
        span = Span(span_id)
        token = _current_span.set((self.id, span_id))
        status, error = "ok", None
        try:
            yield span
        except BaseException as exc:
            status, error = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            _current_span.reset(token)
            self._rt.finish_span(span_id, status, span.output, span.input_tokens, span.output_tokens,
                                 span.cost_usd, error, span.attributes or None)

    def model_call(self, name: str, **kwargs: Any) -> Any:
        """A model span that records exactly which context items (at which revision) it was sent.

        An operator's pending messages are taken first: they join the context (as `user` items, their author
        the operator) before the span records it, so `agent.context()` inside the block includes them.
        """
        self.agent.inbox()
        return self.span("model", name, context_of_agent=self.agent.id, **kwargs)

    def request_approval(self, tool: str, arguments: Mapping[str, Any], *,
                         expires_in: float | None = DEFAULT_EXPIRES_IN_S,
                         parent_span_id: str | None = None, timeout: float | None = None) -> ApprovalResult:
        """Ask an operator and block until they decide or `expires_in` seconds pass (None: no deadline).

        The gate span goes under the span open in this thread or task, or under
        `parent_span_id` (e.g. `otel_span_id(...)` of the OpenTelemetry span of the tool call).
        `timeout`: stop waiting here after this many seconds and withdraw the request
        (`Outcome.WITHDRAWN`); an interruption (Ctrl-C) withdraws it too, then propagates.
        """
        parent = parent_span_id or self._open_span()
        pending = gate.open_gate(self._rt, self.id, self.agent.session_id, parent, tool, arguments, expires_in)
        return gate.wait(self._rt, self.id, self.agent.session_id, pending, timeout)

    async def arequest_approval(self, tool: str, arguments: Mapping[str, Any], *,
                                expires_in: float | None = DEFAULT_EXPIRES_IN_S,
                                parent_span_id: str | None = None, timeout: float | None = None) -> ApprovalResult:
        """`request_approval` for asyncio: the event loop keeps running while the operator decides.

        Cancelling the task (e.g. `asyncio.wait_for`) withdraws the request before the
        cancellation propagates; `timeout` withdraws it and returns `Outcome.WITHDRAWN`.
        """
        import asyncio

        parent = parent_span_id or self._open_span()
        opening = asyncio.ensure_future(asyncio.to_thread(gate.open_gate, self._rt, self.id, self.agent.session_id,
                                                          parent, tool, arguments, expires_in))
        try:
            pending = await asyncio.shield(opening)
        except asyncio.CancelledError:  # cancelled while the request was being written: take it back once it is
            await asyncio.to_thread(gate.abandon, self._rt, self.id, self.agent.session_id, await opening)
            raise
        return await gate.wait_async(self._rt, self.id, self.agent.session_id, pending, timeout)

    def ask(self, question: str, options: Sequence[str] | None = None, *,
            expires_in: float | None = DEFAULT_EXPIRES_IN_S, timeout: float | None = None) -> str:
        """Ask an operator a question and block until they answer; returns the answer's text.

        `options`: choices to offer (the operator may still type another answer). Raises `QuestionExpired`
        when nobody answered within `expires_in` seconds (None: no deadline), `QuestionCancelled` when the
        question was taken back (by an operator, or here: `timeout` seconds passed, or an interruption).
        """
        asked = asking.open_question(self._rt, self.id, self.agent.session_id, self._open_span(), question,
                                     options, expires_in)
        return asking.ask(self._rt, self.id, self.agent.session_id, asked, timeout)

    async def aask(self, question: str, options: Sequence[str] | None = None, *,
                   expires_in: float | None = DEFAULT_EXPIRES_IN_S, timeout: float | None = None) -> str:
        """`ask` for asyncio: the event loop keeps running while the operator answers; cancelling the task
        takes the question back before the cancellation propagates."""
        import asyncio

        opening = asyncio.ensure_future(asyncio.to_thread(asking.open_question, self._rt, self.id,
                                                          self.agent.session_id, self._open_span(), question,
                                                          options, expires_in))
        try:
            asked = await asyncio.shield(opening)
        except asyncio.CancelledError:  # cancelled while the question was being written: take it back once it is
            await asyncio.to_thread(asking.interrupted, self._rt, self.id, self.agent.session_id, await opening,
                                    "the agent's task was cancelled while asking")
            raise
        return await asking.aask(self._rt, self.id, self.agent.session_id, asked, timeout)

    def finish(self, status: str = "done", error: str | None = None) -> None:
        """done, failed or cancelled."""
        self._rt.set_run_status(self.id, status, error)


class Agent:
    """A registered agent: it owns a context window and starts runs."""

    def __init__(self, runtime: Backend, agent_id: str, session_id: str, project_id: str, name: str) -> None:
        self.runtime = runtime
        self.id = agent_id
        self.session_id = session_id
        self.project_id = project_id
        self.name = name
        self._group: str | None = None

    def start_run(self, title: str) -> Run:
        return Run(self, self.runtime.start_run(self.id, title))

    @contextmanager
    def run(self, title: str) -> Iterator[Run]:
        """A run around a block: done when it ends, failed (with the error) when it raises."""
        run = self.start_run(title)
        try:
            yield run
        except BaseException as exc:
            run.finish("cancelled" if isinstance(exc, KeyboardInterrupt) else "failed",
                       f"{type(exc).__name__}: {exc}")
            raise
        run.finish("done")

    def sub_agent(self, name: str, model: str, context_budget: int = 128_000) -> Agent:
        agent_id = self.runtime.create_agent(self.session_id, name, model, self.id, context_budget)
        return Agent(self.runtime, agent_id, self.session_id, self.project_id, name)

    # -- context ---------------------------------------------------------------------------
    def new_turn(self, kind: str = "turn") -> str:
        """Start a turn group: items of one turn (a tool call and its result) are shown and hidden together."""
        self._group = self.runtime.new_turn_group(self.id, kind)
        return self._group

    def add_context(self, content: str, *, role: str | None = "user", kind: str = "message",
                    locked: bool = False) -> str:
        """Append one item to this agent's context (to the current turn group, started if there is none)."""
        group = self._group or self.new_turn()
        return self.runtime.append_context(self.id, group, kind, role, content, locked)

    def inbox(self) -> list[Delivered]:
        """Take the operator's pending messages now: each becomes a `user` item at the end of the context.

        `Run.model_call` does this for you before every model call; call it yourself between model calls to read
        a message early. Returns what was delivered, oldest first (empty when nothing was waiting).
        """
        return self.runtime.take_messages(self.id)

    def context(self) -> ModelContext:
        """The context to send next, with the operator's hiding, locks, edits and compactions applied."""
        return self.runtime.model_context(self.id)

    def finish(self, status: str = "done") -> None:
        """Close the session (done, failed or cancelled) when the agent's work is over."""
        self.runtime.finish_session(self.id, self.session_id, status)
