"""Writes on asks: an agent asks, an operator answers, the asker cancels, a deadline expires it.

Each is one transaction guarded by compare-and-set on the ask's status (and, for an answer, the revision the
operator saw), appends an audit record and records its change, so every window and the waiting agent hear of
it. A lost race raises a typed `Conflict` naming who answered and when, or when it expired, and writes
nothing. On PostgreSQL the SECURITY DEFINER functions of migration 0015 do the same on the server: an agent
may ask only in its own runs and close only its own asks, only an operator may answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text, update

from agentdesk.store.asks.reads import Ask, read_ask
from agentdesk.store.errors import Conflict, Expired, InvalidInput, NotFound
from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import ts_opt
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected
from agentdesk.store.validation import check_name, check_text

MAX_ASK_BYTES = 1_000_000
"""A question, its options or an answer over 1 MB is refused (the same limit as a tool call's arguments)."""
MAX_OPTIONS = 100

SERVER_ASK = text("SELECT * FROM agentdesk_ask(:id, :run, :span, :question, :options, :expires_in, :actor, :origin)")
SERVER_ANSWER = text("SELECT * FROM agentdesk_answer(:id, :answer, :actor, :expected, :origin)")
SERVER_CLOSE = text("SELECT * FROM agentdesk_close_ask(:id, :status, :actor, :reason, :origin)")


class AlreadyAnswered(Conflict):
    """The ask was answered (or cancelled) first; says by whom and when."""

    def __init__(self, ask_id: str, status: str, actor: str | None, at: str | None) -> None:
        who = actor or "the agent"
        super().__init__(f"Question {ask_id} was already {status} by {who} at {at}.")
        self.ask_id, self.status, self.actor, self.at = ask_id, status, actor, at


class AskExpired(Expired):
    """The ask's deadline passed before the answer arrived."""


def ask_parents(row: sc.AskRow | Any) -> dict[str, str]:
    return {"project": row.project_id, "task": row.task_id, "session": row.session_id,
            "agent": row.agent_id, "run": row.run_id}


def check_question(question: str, options: Sequence[str] | None) -> tuple[str, str | None]:
    """The question as stored and its options as a JSON array (None: free text only); one sentence if refused."""
    if not isinstance(question, str) or not question.strip():
        raise InvalidInput("A question needs some text.")
    check_text("question", question, MAX_ASK_BYTES)
    if options is None:
        return question, None
    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise InvalidInput("Options must be a list of strings.")
    listed = [o for o in options]
    if len(listed) > MAX_OPTIONS:
        raise InvalidInput(f"A question may offer at most {MAX_OPTIONS} options, not {len(listed)}.")
    if any(not o.strip() for o in listed):
        raise InvalidInput("An option cannot be empty.")
    packed = json.dumps(listed, ensure_ascii=False)
    check_text("question's options", packed, MAX_ASK_BYTES)
    return question, packed if listed else None


def check_answer(answer: str) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidInput("An answer needs some text.")
    return check_text("answer", answer, MAX_ASK_BYTES)


def create(store: Store, run_id: str, question: str, options: Sequence[str] | None = None, *,
           expires_in: float | None = None, span_id: str | None = None, actor: str = "runtime",
           ask_id: str | None = None) -> str:
    """Record an agent's question in its run, pending; returns its id. A runtime write (steps aside for people)."""
    question, packed = check_question(question, options)
    if expires_in is not None and not expires_in > 0:
        raise InvalidInput(f"expires_in must be positive seconds or None (never), not {expires_in!r}.")
    actor = check_name("actor name", actor)
    aid = ask_id or new_id("ask")
    with UnitOfWork(store, runtime=True) as uow:
        if store.is_postgres:
            found = uow.session.execute(SERVER_ASK, {
                "id": aid, "run": run_id, "span": span_id, "question": question, "options": packed,
                "expires_in": expires_in, "actor": actor, "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no run with id {run_id}.")
            adopt_server_changes(uow, found.changes)
            return aid
        run = uow.session.get(sc.RunRow, run_id)
        if run is None:
            raise NotFound(f"There is no run with id {run_id}.")
        row = sc.AskRow(id=aid, project_id=run.project_id, task_id=run.task_id, session_id=run.session_id,
                        agent_id=run.agent_id, run_id=run_id, span_id=span_id, question=question, options=packed,
                        status="pending", created_at=uow.now,
                        expires_at=None if expires_in is None else uow.now + expires_in, revision=1)
        uow.session.add(row)
        uow.audit(actor, "ask.create", "ask", aid, {"agent_id": run.agent_id, "expires_at": row.expires_at,
                                                   "options": json.loads(packed) if packed else None,
                                                   "question": question, "run_id": run_id})
        uow.record("ask", "insert", aid, ask_parents(row), 1)
    return aid


def answer(store: Store, ask_id: str, answer_text: str, actor: str, *,
           expected_revision: int | None = None) -> Ask:
    """Answer a pending, unexpired ask, exactly once even across processes; returns it answered.

    `expected_revision` is the revision the operator was shown: if the ask moved since, nothing is written
    and the operator is told (a `Conflict`).
    """
    actor = check_name("actor name", actor)
    answer_text = check_answer(answer_text)
    if store.is_postgres:
        require(store.login, "operator", "answering a question")
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_ANSWER, {"id": ask_id, "answer": answer_text, "actor": actor,
                                                        "expected": expected_revision,
                                                        "origin": store.origin}).one()
            _server_outcome(ask_id, found)
            adopt_server_changes(uow, found.changes)
        return read_ask(store, ask_id)
    A = sc.AskRow
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, ask_id)
        if row is None:
            raise NotFound(f"There is no question with id {ask_id}.")
        guard = [A.id == ask_id, A.status == "pending", A.expires_at.is_(None) | (A.expires_at > uow.now)]
        won = affected(uow.session.execute(
            update(A).where(*guard)
            .values(status="answered", answer=answer_text, answered_by=actor, answered_at=uow.now,
                    revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain(uow, ask_id)
        if expected_revision is not None and expected_revision != row.revision:
            raise Conflict(f"Question {ask_id} changed since you saw it (revision {row.revision}, not "
                           f"{expected_revision}); look at it again.")
        uow.audit(actor, "ask.answered", "ask", ask_id, {"answer": answer_text, "question": row.question,
                                                        "run_id": row.run_id})
        uow.record("ask", "update", ask_id, ask_parents(row), row.revision + 1)
    return read_ask(store, ask_id)


def close(store: Store, ask_id: str, status: str, actor: str, reason: str | None = None) -> Ask:
    """`cancelled` (the asker stopped waiting, or an operator withdrew it) or `expired` (its deadline passed).

    Compare-and-set on pending; an answer that came first wins and raises `AlreadyAnswered`.
    """
    if status not in ("cancelled", "expired"):
        raise InvalidInput(f"An ask closes as cancelled or expired, not {status!r}.")
    actor = check_name("actor name", actor)
    reason = check_text("reason", reason, MAX_ASK_BYTES) if reason else None
    if store.is_postgres:
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_CLOSE, {"id": ask_id, "status": status, "actor": actor,
                                                       "reason": reason, "origin": store.origin}).one()
            _server_outcome(ask_id, found)
            adopt_server_changes(uow, found.changes)
        return read_ask(store, ask_id)
    A = sc.AskRow
    with UnitOfWork(store) as uow:
        row = uow.session.get(A, ask_id)
        if row is None:
            raise NotFound(f"There is no question with id {ask_id}.")
        guard = [A.id == ask_id, A.status == "pending"]
        if status == "expired":
            guard.append(A.expires_at.is_not(None) & (A.expires_at <= uow.now))
        won = affected(uow.session.execute(
            update(A).where(*guard)
            .values(status=status, answered_at=uow.now, answered_by=actor if status == "cancelled" else None,
                    reason=reason, revision=A.revision + 1)
            .execution_options(synchronize_session=False)))
        if won != 1:
            _explain(uow, ask_id)
        uow.audit(actor, f"ask.{status}", "ask", ask_id, {"expires_at": row.expires_at, "reason": reason,
                                                         "run_id": row.run_id})
        uow.record("ask", "update", ask_id, ask_parents(row), row.revision + 1)
    return read_ask(store, ask_id)


def _server_outcome(ask_id: str, found: Any) -> None:
    if found.outcome == "not found":
        raise NotFound(f"There is no question with id {ask_id}.")
    if found.outcome == "stale":
        raise Conflict(f"Question {ask_id} changed since you saw it (revision {found.revision}); look at it again.")
    if found.outcome != "ok":
        lost(ask_id, found.status, found.expires_at, found.answered_by, found.answered_at)


def _explain(uow: UnitOfWork, ask_id: str) -> None:
    uow.session.expire_all()
    row = uow.session.get(sc.AskRow, ask_id)
    assert row is not None
    lost(ask_id, row.status, row.expires_at, row.answered_by, row.answered_at)


def lost(ask_id: str, status: str, expires_at: float | None, answered_by: str | None,
         answered_at: float | None) -> None:
    """The loser is told who answered and when, or when the question expired."""
    if status in ("pending", "expired"):
        raise AskExpired(f"Question {ask_id} expired at {when(expires_at)}; it can no longer be answered.")
    raise AlreadyAnswered(ask_id, status, answered_by, when(answered_at))


def when(value: float | None) -> str | None:
    moment = ts_opt(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else None
