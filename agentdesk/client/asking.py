"""Questions: an agent asks a person and blocks (or awaits) until they answer.

Like the approval gate (client/gate.py), a question is a span of its own (kind `gate`, "question: …") and
the run and session show `waiting` meanwhile, so the tree says which agents need a person. Writing and
waiting are the backend's (a local store, or the agent API over HTTP). An agent that stops waiting (its own
`timeout`, Ctrl-C, a cancelled task) takes the question back: the operator's queue shows it cancelled. If the
operator answered in the same instant, the answer stands (first writer wins) and is returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from agentdesk.client.backend import Backend
from agentdesk.client.results import QuestionCancelled, QuestionExpired
from agentdesk.store.asks.commands import check_question
from agentdesk.store.asks.waiting import AskState


@dataclass(frozen=True, slots=True)
class Asked:
    ask_id: str
    span_id: str
    run_status: str
    session_status: str


def open_question(rt: Backend, run_id: str, session_id: str, parent_span_id: str | None, question: str,
                  options: Sequence[str] | None, expires_in: float | None) -> Asked:
    if expires_in is not None and expires_in <= 0:
        raise ValueError(f"expires_in must be positive seconds or None (never), not {expires_in!r}.")
    check_question(question, options)  # refuses oversize or malformed questions before any write
    run_status, session_status = rt.statuses(run_id, session_id)
    span = rt.start_span(run_id, "gate", f"question: {' '.join(question.split())[:60]}", parent_span_id,
                         {"question": question[:2000]})
    ask_id = rt.ask(run_id, question, list(options) if options is not None else None, expires_in, span)
    rt.set_statuses(run_id, session_id, "waiting", "waiting")
    return Asked(ask_id, span, run_status, session_status)


def interrupted(rt: Backend, run_id: str, session_id: str, asked: Asked, why: str) -> None:
    """The agent stopped waiting: take the question back and close its span; the interruption goes on."""
    rt.cancel_ask(asked.ask_id, why)
    rt.set_statuses(run_id, session_id, asked.run_status, asked.session_status)
    rt.finish_span(asked.span_id, "cancelled", error=why)


def close_question(rt: Backend, run_id: str, session_id: str, asked: Asked, found: AskState) -> str:
    """Statuses back, the span finished with how it ended; the answer, or a typed error."""
    rt.set_statuses(run_id, session_id, asked.run_status, asked.session_status)
    if found.status == "answered" and found.answer is not None:
        rt.finish_span(asked.span_id, "ok", output_text=found.answer,
                       attributes={"answered_by": found.answered_by or ""})
        return found.answer
    if found.status == "expired":
        rt.finish_span(asked.span_id, "error", error="nobody answered before the deadline")
        raise QuestionExpired(asked.ask_id, f"Question {asked.ask_id} was not answered before its deadline.")
    who = f" by {found.answered_by}" if found.answered_by else ""
    why = f": {found.reason}" if found.reason else ""
    rt.finish_span(asked.span_id, "cancelled", error=f"cancelled{who}{why}")
    raise QuestionCancelled(asked.ask_id, f"Question {asked.ask_id} was cancelled{who}{why}.", found.reason)


def ask(rt: Backend, run_id: str, session_id: str, asked: Asked, timeout: float | None) -> str:
    """Block until answered (the answer), expired or cancelled (typed errors); `timeout` here takes it back."""
    try:
        found = rt.wait_for_answer(asked.ask_id, timeout)
    except BaseException:  # Ctrl-C, an exception from a signal handler: the question goes with us
        interrupted(rt, run_id, session_id, asked, "the agent was interrupted while waiting")
        raise
    if found.pending:
        found = rt.cancel_ask(asked.ask_id, f"the agent stopped waiting after {timeout:g} s")
    return close_question(rt, run_id, session_id, asked, found)


async def aask(rt: Backend, run_id: str, session_id: str, asked: Asked, timeout: float | None) -> str:
    """`ask` without blocking the event loop; cancelling the task takes the question back first."""
    try:
        found = await rt.await_answer(asked.ask_id, timeout)
    except BaseException:  # CancelledError included
        await asyncio.shield(asyncio.to_thread(interrupted, rt, run_id, session_id, asked,
                                               "the agent's task was cancelled while waiting"))
        raise
    if found.pending:
        found = await asyncio.to_thread(rt.cancel_ask, asked.ask_id, f"the agent stopped waiting after {timeout:g} s")
    return await asyncio.to_thread(close_question, rt, run_id, session_id, asked, found)
