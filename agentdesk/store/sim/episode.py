"""One simulated agent at work: sessions of runs, each a nest of model calls, tools and gates.

Every write goes through `AgentRuntime`, exactly as a real agent runtime would
write, so the audit log, the change log and the bus see a live agent. All
content comes from the worker's own Random; decisions by operators and the
clock change *what happens next* (a denied call, an expired run) but never the
content drawn before them, which keeps runs with the same seed comparable.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial

from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.control.checkpoint import reach_checkpoint
from agentdesk.store.errors import ServerUnreachable, StoreError
from agentdesk.store.persistence.outage import Pauses
from agentdesk.store.readmodel import ControlState
from agentdesk.store.runtime import AgentRuntime, Decision
from agentdesk.store.sim.content import AgentProfile, ContentGenerator, ToolCall, Usage
from agentdesk.store.sim.control import Control, Stopped
from agentdesk.store.validation import estimate_tokens

log = logging.getLogger(__name__)
TOP_ROLES = ("planner", "coder", "data-analyst", "ops", "writer")
MAX_CONSECUTIVE_FAILURES = 5
OUTAGE_ERROR = "interrupted: the store's server went away in the middle of a write"


CHECKPOINT_POLL_S = 0.05
"""How often a simulated agent paused at a checkpoint looks whether it was resumed or stopped."""


class RunHalted(Exception):
    """An operator stopped the run; the checkpoint recorded it cancelled (the message says who)."""


@dataclass
class LiveAgent:
    id: str
    profile: AgentProfile
    context_tokens: int = 0


class AgentWorker:
    """The body of one simulator thread; `run()` returns when the simulator stops."""

    def __init__(self, index: int, runtime: AgentRuntime, control: Control, rng: random.Random,
                 project_id: str, *, approval_timeout_s: float, approval_rate: float,
                 error_rate: float) -> None:
        self.index = index
        self.rt = runtime
        self.control = control
        self.content = ContentGenerator(rng)
        self.rng = rng
        self.project_id = project_id
        self.profile = self.content.agent(TOP_ROLES[index % len(TOP_ROLES)])
        self.approval_timeout_s = approval_timeout_s
        self.approval_rate = approval_rate
        self.error_rate = error_rate
        self.session_id: str | None = None
        self.open_spans: list[str] = []
        self.open_runs: list[str] = []
        self.sub_agents: dict[str, LiveAgent] = {}
        self._depth = 0

    def run(self) -> None:
        failures = 0
        while not self.control.stopping:
            try:
                self._session()
                failures = 0
            except Stopped:
                self._unwind("cancelled")
                return
            except ServerUnreachable as exc:  # the server went away under a transaction: it rolled back whole
                self.control.emit(self.index, self.profile.name, "outage", detail=str(exc))
                self._unwind("failed", quiet=True, error=OUTAGE_ERROR)  # waits for the server to come back
                if self.control.stopping:
                    return
            except StoreError as exc:  # a locked or unavailable store: note it, clean up, try again later
                failures += 1
                self.control.failure(self.profile.name, exc)
                self._unwind("failed", quiet=True)
                if failures >= MAX_CONSECUTIVE_FAILURES or self.control.pause_or_stop(1.0):
                    return
            except Exception as exc:  # a bug: record it where tests and the CLI look, and stop this agent
                log.exception("simulated agent %s crashed", self.profile.name)
                self.control.failure(self.profile.name, exc)
                self._unwind("failed", quiet=True)
                return

    # -- sessions and runs -----------------------------------------------------------------
    def _session(self) -> None:
        title = self.content.task_title()
        with self._batch():  # the task, its session and the agent appear together (or, once stopping, not at all)
            task_id = self.rt.create_task(self.project_id, title)
            self.session_id = self.rt.create_session(task_id, title)
            self.sub_agents = {}
            agent = LiveAgent(self.rt.create_agent(self.session_id, self.profile.name, self.profile.model),
                              self.profile)
        outcome = "done"
        for _ in range(self.rng.randint(2, 4)):
            ok, _answer = self._run(agent, self.content.task_title() if self.rng.random() < 0.5 else title, 0)
            outcome = outcome if ok else "failed"
            self.control.sleep(self.rng.uniform(0.5, 2.0))
        with self._batch():
            self.rt.set_session_status(self.session_id, outcome)
        self.session_id = None

    def _open_run(self, agent: LiveAgent, title: str, depth: int) -> tuple[str, str, str]:
        """The run, its root span and the prompt, which appear together: (run, root span, turn group)."""
        with self._batch():
            run = self.rt.start_run(agent.id, title)
            self.open_runs.append(run)
            root = self._start(run, "agent", agent.profile.name, None, {"role": agent.profile.role,
                                                                         "model": agent.profile.model})
            group = self.rt.new_turn_group(agent.id, "turn")
            prompt = self.content.user_prompt(title) if depth == 0 else f"Delegated task: {title}"
            self._context(agent, group, "message", "user", prompt)
        return run, root, group

    def _run(self, agent: LiveAgent, title: str, depth: int,
             opened: tuple[str, str, str] | None = None) -> tuple[bool, str]:
        """One run to its end (`opened`: already opened by `_open_run`); returns whether it succeeded and
        its final answer (or error)."""
        run, root, group = opened or self._open_run(agent, title, depth)
        self.control.emit(self.index, agent.profile.name, "run_started", detail=title, entity_id=run)
        error, answer = None, ""
        steps = self.rng.randint(2, 5) if depth == 0 else self.rng.randint(1, 3)
        for step in range(steps):
            try:
                self._checkpoint(run)
            except RunHalted as halted:  # the checkpoint ended the run cancelled; close its root span too
                self.open_runs.remove(run)  # first: a simulator stop meanwhile must not write over its ending
                self._finish(root, "cancelled", error=str(halted))
                self.control.emit(self.index, agent.profile.name, "run_finished", detail=str(halted),
                                  entity_id=run)
                return False, str(halted)
            error, answer = self._step(agent, run, root, group if step == 0 else None, step == steps - 1,
                                       depth)
            if error:
                break
        if error is None and self.rng.random() < self.error_rate / 3:
            error = self.content.run_failure()
        with self._batch():
            if error is None:
                self._context(agent, self.rt.new_turn_group(agent.id, "turn"), "message", "assistant", answer)
            self._finish(root, "error" if error else "ok", output=None if error else answer, error=error)
            self.rt.set_run_status(run, "failed" if error else "done", error=error)
        self.open_runs.remove(run)
        self.control.emit(self.index, agent.profile.name, "run_finished", detail=error or "done",
                          entity_id=run)
        return error is None, error or answer

    def _checkpoint(self, run: str) -> None:
        """A step boundary, as the client library's `run.checkpoint()`: wait while an operator has the run paused
        (reported blocked once), raise `RunHalted` once stopped (the run is then cancelled, naming who)."""
        while True:
            held = reach_checkpoint(self.rt.store, run, self.rt.actor)
            if held.state is ControlState.RUNNING:
                return
            if held.state in (ControlState.STOPPING, ControlState.STOPPED):
                raise RunHalted(f"stopped by {held.who}" + (f": {held.reason}" if held.reason else ""))
            if self.control.pause_or_stop(CHECKPOINT_POLL_S):
                raise Stopped

    def _step(self, agent: LiveAgent, run: str, root: str, first_group: str | None, final: bool,
              depth: int) -> tuple[str | None, str]:
        """One model call and the tools it asks for; returns an error that ends the run (if any) and its text.

        The first call answers with a plan (paired with the user's message in one turn group), the
        last with the final answer, the ones between with tool calls.
        """
        if self.rng.random() < 0.3:
            guard = self._start(run, "guardrail", self.content.guardrail(), root, {})
            self.control.sleep(self.rng.uniform(0.02, 0.15))
            self._finish(guard, "ok", output="pass")
        model = self._model_call(agent, run, root)
        calls = [] if final or first_group else [self.content.tool_call(allow_delegate=depth == 0)
                                                 for _ in range(self.rng.choice((1, 1, 2)))]
        usage = self.content.model_usage(agent.profile.model, agent.context_tokens)
        if calls:
            text = json.dumps([{"tool": c.tool, "arguments": c.arguments} for c in calls], ensure_ascii=False)
        else:
            text = self.content.assistant_reply()
        if first_group:
            with self._batch():
                self._context(agent, first_group, "message", "assistant", text)
                self._finish(model, "ok", output=text, usage=usage)
            return None, text
        error = self._tools(agent, run, model, calls, text, depth) if calls else None
        self._finish(model, "ok", output=text, usage=usage)
        return error, text

    def _model_call(self, agent: LiveAgent, run: str, parent: str) -> str:
        """A model span; a rate-limit or overload error is retried once after a back-off."""
        for attempt in range(2):
            span = self._start(run, "model", f"{agent.profile.model} chat", parent,
                               {"model": agent.profile.model,
                                                                                   "attempt": attempt + 1},
                               context_of=agent.id)
            self.control.sleep(self.content.model_duration())
            if attempt == 0 and self.rng.random() < self.error_rate / 2:
                self._finish(span, "error", error=self.content.model_error())
                self.control.sleep(self.rng.uniform(0.5, 1.5))
                continue
            return span
        raise AssertionError("unreachable")  # pragma: no cover

    # -- tools, approvals, sub-agents ------------------------------------------------------
    def _tools(self, agent: LiveAgent, run: str, model: str, calls: list[ToolCall], text: str,
               depth: int) -> str | None:
        with self._batch():
            group = self.rt.new_turn_group(agent.id, "tool")
            self._context(agent, group, "tool_calls", "assistant", text)
        for call in calls:
            self.control.emit(self.index, agent.profile.name, "tool", tool=call.tool,
                              arguments=call.arguments_json)
            outcome = self._tool(agent, run, model, call, group, depth)
            if outcome == "expired":
                return "approval expired"
            if outcome == "error" and self.rng.random() < 0.3:
                return f"unrecoverable tool error in {call.tool}"
        return None

    def _tool(self, agent: LiveAgent, run: str, parent: str, call: ToolCall, group: str, depth: int) -> str:
        arguments, approval_id = call.arguments, None
        if call.risky and self.rng.random() < self.approval_rate:
            approval_id, decision = self._approval(agent, run, parent, call)
            if decision.status == "expired":
                self._context(agent, group, "result", "tool", "The approval expired before anyone decided.")
                return "expired"
            if decision.status == "denied":
                reason = f"Denied by {decision.actor}: {decision.reason}"
                span = self._start(run, "tool", call.tool, parent, self._tool_attrs(call, arguments,
                                                                                    approval_id))
                self._finish(span, "error", error=reason)
                self._context(agent, group, "result", "tool", reason)
                return "denied"
            arguments = json.loads(decision.arguments)
        if call.tool == "delegate" and depth == 0:
            return self._delegate(agent, run, parent, call, group)
        span = self._start(run, "tool", call.tool, parent, self._tool_attrs(call, arguments, approval_id),
                           input_text=json.dumps(arguments, ensure_ascii=False))
        self.control.sleep(self.content.tool_duration(call.tool))
        if self.rng.random() < self.error_rate:
            error = self.content.tool_error(call)
            with self._batch():
                self._finish(span, "error", error=error)
                self._context(agent, group, "result", "tool", f"Error: {error}")
            return "error"
        output = self.content.tool_output(ToolCall(call.tool, {**call.arguments, **arguments}))
        with self._batch():  # the span's end and its result in the context, in one short transaction
            self._finish(span, "ok", output=output)
            self._context(agent, group, "result", "tool", output)
        return "ok"

    @staticmethod
    def _tool_attrs(call: ToolCall, arguments: object, approval_id: str | None) -> dict[str, object]:
        edited = arguments != call.arguments
        return {"tool": call.tool, "arguments": arguments, "approval_id": approval_id, "edited": edited}

    def _approval(self, agent: LiveAgent, run: str, parent: str, call: ToolCall) -> tuple[str, Decision]:
        """Ask a human, wait (run and session show `waiting`), and record how the gate ended."""
        assert self.session_id is not None
        with self._batch():  # the gate, the request and the waiting state become visible together
            gate = self._start(run, "gate", f"approval: {call.tool}", parent, {"tool": call.tool})
            approval_id = self.rt.request_approval(run, call.tool, call.arguments, span_id=gate,
                                                   timeout_s=self.approval_timeout_s)
            self.rt.set_run_status(run, "waiting")
            self.rt.set_session_status(self.session_id, "waiting")
        self.control.emit(self.index, agent.profile.name, "approval_requested", tool=call.tool,
                          arguments=call.arguments_json, entity_id=approval_id)
        decision = self._wait(approval_id)  # outside any batch: waiting never holds the lock
        with self._batch():
            self.rt.set_run_status(run, "running")
            self.rt.set_session_status(self.session_id, "running")
            if decision.status == "approved":
                self._finish(gate, "ok", output=f"approved by {decision.actor}")
            else:
                why = ("approval expired" if decision.status == "expired"
                       else f"denied by {decision.actor}: {decision.reason}")
                self._finish(gate, "error", error=why)
        self.control.emit(self.index, agent.profile.name, "approval_decided", tool=call.tool,
                          detail=decision.status, entity_id=approval_id)
        return approval_id, decision

    def _wait(self, approval_id: str) -> Decision:
        """Until decided; a lost server only makes the looks less frequent (the decision comes after it)."""
        heartbeat = self.rt.heartbeat(approval_id)  # so the queue knows this agent still waits
        outage: Pauses | None = None
        while True:
            try:
                decision = self.rt.look(approval_id, heartbeat)
                outage = None
            except ServerUnreachable:
                self.rt.store.outage.lost()
                outage, decision = outage or Pauses(), None
            if decision is not None:
                return decision
            if self.control.pause_or_stop(0.05 if outage is None else outage.next()):
                self._withdraw(approval_id)
                raise Stopped

    def _withdraw(self, approval_id: str) -> None:
        """Stopping while waiting: take the request back, as the client library's gate does, so the queue does
        not keep a request nobody waits for (best effort: a decision that came first stands)."""
        with suppress(StoreError):
            approval_commands.withdraw(self.rt.store, approval_id, self.rt.actor, "the simulator stopped")

    def _delegate(self, agent: LiveAgent, run: str, parent: str, call: ToolCall, group: str) -> str:
        assert self.session_id is not None
        role = str(call.arguments["role"])
        sub = self.sub_agents.get(role)
        profile = self.content.agent(role) if sub is None else sub.profile
        task = str(call.arguments["task"])
        with self._batch():  # the sub-agent, the delegation span and the sub-agent's run: all or (stopping) none
            if sub is None:
                sub = LiveAgent(self.rt.create_agent(self.session_id, profile.name, profile.model, agent.id),
                                profile)
            span = self._start(run, "sub_agent", f"delegate → {sub.profile.name}", parent,
                               {"agent_id": sub.id, "role": role}, input_text=task)
            opened = self._open_run(sub, task, 1)
        self.sub_agents[role] = sub
        self.control.emit(self.index, agent.profile.name, "sub_agent", tool=call.tool,
                          detail=sub.profile.name)
        ok, answer = self._run(sub, task, 1, opened)
        self._finish(span, "ok" if ok else "error", output=answer if ok else None,
                     error=None if ok else answer)
        self._context(agent, group, "result", "tool", answer)
        return "ok" if ok else "error"

    # -- bookkeeping -----------------------------------------------------------------------
    @contextmanager
    def _batch(self) -> Iterator[None]:
        """Every write of a live agent runs in one of these: a transaction that, once it holds the lock,
        first looks whether the simulator is stopping, and if so writes nothing and raises `Stopped`.

        Many agents queue for the one write lock; without the look, each agent queued at the deadline
        would still write what it was about to (a new session, a span) and then close it again, one
        write per step, long after the duration ended. Nested blocks join the outer one, which has
        looked already, so a stop never splits a batch: `open_spans` and `open_runs` name only rows
        that were written (or are being written in this batch, which rolls back as a whole).
        """
        if self._depth:
            yield
            return
        if self.control.stopping:  # before queueing for the lock too: a stopping agent need not wait for it
            raise Stopped
        with self.rt.batch():
            if self.control.stopping:
                raise Stopped
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    def _start(self, run: str, kind: str, name: str, parent: str | None, attributes: dict[str, object],
               input_text: str | None = None, context_of: str | None = None) -> str:
        with self._batch():
            span = self.rt.start_span(run, kind, name, parent, attributes, input_text, context_of)
            self.open_spans.append(span)
        return span

    def _finish(self, span: str, status: str, *, output: str | None = None, error: str | None = None,
                usage: Usage | None = None) -> None:
        usage = usage or Usage(0, 0, 0.0)
        with self._batch():
            self.rt.finish_span(span, status, output_text=output, input_tokens=usage.input_tokens,
                                output_tokens=usage.output_tokens, cost_usd=usage.cost_usd, error=error)
            self.open_spans.remove(span)

    def _context(self, agent: LiveAgent, group: str, kind: str, role: str, content: str) -> None:
        with self._batch():
            self.rt.append_context(agent.id, group, kind, role, content)
        agent.context_tokens += estimate_tokens(content)

    def _unwind(self, status: str, *, quiet: bool = False, error: str | None = None) -> None:
        """Close what a stop or a store failure left open, innermost first, so nothing looks live forever."""
        error = error or (None if status == "cancelled" else "simulator lost the store")
        span_status = "cancelled" if status == "cancelled" else "error"
        steps: list[Callable[[], None]] = [partial(self.rt.finish_span, span, span_status, error=error)
                                           for span in reversed(self.open_spans)]
        steps += [partial(self.rt.set_run_status, run, status) for run in reversed(self.open_runs)]
        if self.session_id is not None:
            steps.append(partial(self.rt.set_session_status, self.session_id, status))
        self.open_spans, self.open_runs, self.session_id = [], [], None
        if not steps:
            return
        try:  # one transaction: at a deadline every agent closes at once, and each write queues for the lock
            with self.rt.batch():
                for step in steps:
                    step()
            return
        except StoreError:
            pass
        for step in steps:  # one by one: a span a failed batch never wrote must not keep the rest open
            try:
                step()
            except StoreError:
                if not quiet:
                    log.exception("could not close the simulated run cleanly")
