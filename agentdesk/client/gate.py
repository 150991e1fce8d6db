"""The human gate: ask for approval, wait for the operator, and say how it ended.

Writing and waiting are the backend's (client/backend.py: the agent API over HTTP, or a local
runtime): this module only adds what an agent wants around them. The gate is a span of its own,
so the timeline shows where the agent stopped and for how long; while it waits, the run and its
session show `waiting`, so the tree says which agents need a human. Afterwards they go back to
the status they had (`running` for the client's own runs; whatever the receiver last rolled up
for a joined OpenTelemetry trace, which it keeps up to date).

An agent that stops waiting (its own `timeout` passed, Ctrl-C, a cancelled asyncio task)
withdraws the approval: the operator's queue drops it with "withdrawn by the agent", so nobody
decides a request nobody waits for. If the operator decided in the same instant, the decision
stands (first writer wins) and a timeout returns it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentdesk.client.backend import Backend
from agentdesk.client.results import ApprovalResult, Outcome, parse_arguments
from agentdesk.store.runtime import Decision
from agentdesk.store.validation import canonical_arguments, parse_json_arguments

POLL_S = 0.1
"""How often a waiting agent on a local store looks at it (over HTTP the wait is a long poll)."""


@dataclass(frozen=True, slots=True)
class PendingGate:
    """An approval that has been asked for and is being waited on."""

    approval_id: str
    gate_span_id: str
    tool: str
    original: dict[str, Any]
    run_status: str = "running"
    session_status: str = "running"


def open_gate(rt: Backend, run_id: str, session_id: str, parent_span_id: str | None, tool: str,
              arguments: Mapping[str, Any], expires_in: float | None) -> PendingGate:
    if expires_in is not None and expires_in <= 0:
        raise ValueError(f"expires_in must be positive seconds or None (never), not {expires_in!r}.")
    text = json.dumps(dict(arguments), ensure_ascii=False)
    original = parse_json_arguments(text)  # refuses oversize or non-object arguments before any write
    run_status, session_status = rt.statuses(run_id, session_id)
    gate = rt.start_span(run_id, "gate", f"approval: {tool}", parent_span_id, {"tool": tool})
    approval_id = rt.request_approval(run_id, tool, canonical_arguments(original), span_id=gate,
                                      timeout_s=expires_in)
    rt.set_statuses(run_id, session_id, "waiting", "waiting")
    return PendingGate(approval_id, gate, tool, original, run_status, session_status)


def close_gate(rt: Backend, run_id: str, session_id: str, gate: PendingGate,
               decision: Decision | None) -> ApprovalResult | None:
    """Statuses back as they were, the gate span finished with how it ended; None when the wait was interrupted."""
    rt.set_statuses(run_id, session_id, gate.run_status, gate.session_status)
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


def withdraw(rt: Backend, gate: PendingGate, why: str) -> Decision | None:
    """Take the request back; the decision instead if the operator (or the deadline) came first."""
    return rt.withdraw_request(gate.approval_id, why)


def abandon(rt: Backend, run_id: str, session_id: str, gate: PendingGate) -> None:
    """The caller was cancelled before the wait began: withdraw, and close the gate as interrupted."""
    withdraw(rt, gate, "the agent's task was cancelled while waiting")
    close_gate(rt, run_id, session_id, gate, None)


def _gave_up(timeout: float) -> str:
    return f"the agent stopped waiting after {timeout:g} s"


def wait(rt: Backend, run_id: str, session_id: str, gate: PendingGate,
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


async def wait_async(rt: Backend, run_id: str, session_id: str, gate: PendingGate,
                     timeout: float | None = None) -> ApprovalResult:
    """The same wait without blocking the event loop.

    Cancelling the task (`asyncio.wait_for`, `TaskGroup`, shutdown) withdraws the request first.
    """
    decision: Decision | None = None
    try:
        decision = await rt.await_decision(gate.approval_id, timeout)
        if decision.status == "pending":
            assert timeout is not None
            decision = (await asyncio.to_thread(withdraw, rt, gate, _gave_up(timeout))
                        or Decision("withdrawn", None, "", rt.actor))
    except BaseException:  # CancelledError included: withdraw before the cancellation goes on
        await asyncio.shield(asyncio.to_thread(withdraw, rt, gate, "the agent's task was cancelled while waiting"))
        raise
    finally:
        result = await asyncio.to_thread(close_gate, rt, run_id, session_id, gate, decision)
    assert result is not None
    return result
