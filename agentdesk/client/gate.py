"""The human gate: ask for approval, wait for the operator, and say how it ended.

Writing and waiting are the runtime's (`AgentRuntime.request_approval`,
`wait_for_decision` / `poll_decision`): this module only adds what an agent
wants around them. The gate is a span of its own, so the timeline shows where
the agent stopped and for how long; while it waits, the run and its session show
`waiting`, so the tree says which agents need a human. Afterwards they go back to
the status they had (`running` for the client's own runs; whatever the receiver
last rolled up for a joined OpenTelemetry trace, which it keeps up to date).

An agent that stops waiting (its own `timeout` passed, Ctrl-C, a cancelled
asyncio task) withdraws the approval (`approval_commands.withdraw`): the operator's queue
drops it with "withdrawn by the agent", so nobody decides a request nobody waits
for. If the operator decided in the same instant, the decision stands (first
writer wins) and a timeout returns it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentdesk.client.results import ApprovalResult, Outcome, parse_arguments
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.errors import Conflict
from agentdesk.store.persistence import schema as sc
from agentdesk.store.runtime import AgentRuntime, Decision
from agentdesk.store.validation import canonical_arguments, parse_json_arguments

POLL_S = 0.1
"""How often a waiting agent looks at the store: a decision reaches it in about this long."""


@dataclass(frozen=True, slots=True)
class PendingGate:
    """An approval that has been asked for and is being waited on."""

    approval_id: str
    gate_span_id: str
    tool: str
    original: dict[str, Any]
    run_status: str = "running"
    session_status: str = "running"


def open_gate(rt: AgentRuntime, run_id: str, session_id: str, parent_span_id: str | None, tool: str,
              arguments: Mapping[str, Any], expires_in: float | None) -> PendingGate:
    if expires_in is not None and expires_in <= 0:
        raise ValueError(f"expires_in must be positive seconds or None (never), not {expires_in!r}.")
    text = json.dumps(dict(arguments), ensure_ascii=False)
    original = parse_json_arguments(text)  # refuses oversize or non-object arguments before any write
    run_status, session_status = statuses(rt, run_id, session_id)
    gate = rt.start_span(run_id, "gate", f"approval: {tool}", parent_span_id, {"tool": tool})
    approval_id = rt.request_approval(run_id, tool, canonical_arguments(original), span_id=gate,
                                      timeout_s=expires_in)
    rt.set_run_status(run_id, "waiting")
    rt.set_session_status(session_id, "waiting")
    return PendingGate(approval_id, gate, tool, original, run_status, session_status)


def statuses(rt: AgentRuntime, run_id: str, session_id: str) -> tuple[str, str]:
    """What to go back to after the wait (a gate inside a gate keeps `waiting`)."""
    with rt.store.reading() as s:
        run, session = s.get(sc.RunRow, run_id), s.get(sc.SessionRow, session_id)
        return (run.status if run is not None else "running", session.status if session is not None else "running")


def close_gate(rt: AgentRuntime, run_id: str, session_id: str, gate: PendingGate,
               decision: Decision | None) -> ApprovalResult | None:
    """Statuses back as they were, the gate span finished with how it ended; None when the wait was interrupted."""
    rt.set_run_status(run_id, gate.run_status)
    rt.set_session_status(session_id, gate.session_status)
    if decision is None:
        rt.finish_span(gate.gate_span_id, "cancelled", error="the agent stopped waiting")
        return None
    result = to_result(gate, decision)
    if result.withdrawn:
        rt.finish_span(gate.gate_span_id, "cancelled", error=result.describe())
    elif result.approved:
        rt.finish_span(gate.gate_span_id, "ok", output_text=result.describe())
    else:
        rt.finish_span(gate.gate_span_id, "error", error=result.describe())
    return result


def to_result(gate: PendingGate, decision: Decision) -> ApprovalResult:
    outcome = Outcome(decision.status)
    arguments = parse_arguments(decision.arguments) if outcome is Outcome.APPROVED else gate.original
    return ApprovalResult(gate.approval_id, gate.tool, outcome, arguments, gate.original, decision.reason,
                          decision.actor)


def withdraw(rt: AgentRuntime, gate: PendingGate, why: str) -> Decision | None:
    """Take the request back; the decision instead if the operator (or the deadline) came first."""
    try:
        approval_commands.withdraw(rt.store, gate.approval_id, rt.actor, why)
    except Conflict:
        return rt.poll_decision(gate.approval_id)
    return Decision("withdrawn", why, "", rt.actor)


def abandon(rt: AgentRuntime, run_id: str, session_id: str, gate: PendingGate) -> None:
    """The caller was cancelled before the wait began: withdraw, and close the gate as interrupted."""
    withdraw(rt, gate, "the agent's task was cancelled while waiting")
    close_gate(rt, run_id, session_id, gate, None)


def _gave_up(timeout: float) -> str:
    return f"the agent stopped waiting after {timeout:g} s"


def wait(rt: AgentRuntime, run_id: str, session_id: str, gate: PendingGate,
         timeout: float | None = None) -> ApprovalResult:
    """Block until decided, expired, or `timeout` seconds pass here (then withdrawn)."""
    decision: Decision | None = None
    try:
        decision = rt.wait_for_decision(gate.approval_id, timeout_s=timeout, poll_s=POLL_S)
        if decision.status == "pending":
            assert timeout is not None
            decision = withdraw(rt, gate, _gave_up(timeout)) or Decision("withdrawn", None, "", rt.actor)
    except BaseException:  # Ctrl-C, an exception from a signal handler: the request goes with us
        withdraw(rt, gate, "the agent was interrupted while waiting")
        raise
    finally:
        result = close_gate(rt, run_id, session_id, gate, decision)
    assert result is not None
    return result


async def wait_async(rt: AgentRuntime, run_id: str, session_id: str, gate: PendingGate,
                     timeout: float | None = None) -> ApprovalResult:
    """The same wait without blocking the event loop: each look at the store runs in a worker thread.

    Cancelling the task (`asyncio.wait_for`, `TaskGroup`, shutdown) withdraws the request first.
    """
    decision: Decision | None = None
    give_up = None if timeout is None else asyncio.get_running_loop().time() + timeout
    try:
        while decision is None:
            decision = await asyncio.to_thread(rt.poll_decision, gate.approval_id)
            if decision is None:
                if give_up is not None and asyncio.get_running_loop().time() >= give_up:
                    assert timeout is not None
                    decision = (await asyncio.to_thread(withdraw, rt, gate, _gave_up(timeout))
                                or Decision("withdrawn", None, "", rt.actor))
                    break
                await asyncio.sleep(POLL_S)
    except BaseException:  # CancelledError included: withdraw before the cancellation goes on
        await asyncio.shield(asyncio.to_thread(withdraw, rt, gate, "the agent's task was cancelled while waiting"))
        raise
    finally:
        result = await asyncio.to_thread(close_gate, rt, run_id, session_id, gate, decision)
    assert result is not None
    return result
