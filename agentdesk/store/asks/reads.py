"""Asks as the read model shows them: what a command answers, the queue lists and an agent waits on.

The `Ask` value is shared by agentdesk's own store and the foreign runtimes that have questions of their own
(lensagent `user_input` waits, maka interaction requests): `source` says whose it is, and `read_only` why
agentdesk cannot answer it, when it cannot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from agentdesk.store.errors import NotFound
from agentdesk.store.persistence import convert
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store

STATUSES = ("pending", "answered", "expired", "cancelled")


@dataclass(frozen=True, slots=True)
class Ask:
    id: str
    run_id: str
    agent_id: str
    question: str
    options: tuple[str, ...]
    status: str
    """pending, answered, expired or cancelled."""
    created_at: datetime
    expires_at: datetime | None = None
    answered_at: datetime | None = None
    answered_by: str | None = None
    answer: str | None = None
    reason: str | None = None
    revision: int = 1
    agent_name: str = ""
    project_name: str = ""
    session_id: str = ""
    answered_login: str | None = None
    source: str = "agentdesk"
    """Whose question: agentdesk's own store, or the foreign runtime's kind (lensagent, maka)."""
    read_only: str | None = None
    """Why agentdesk cannot answer it here (a foreign runtime whose answer format is not known), or None."""
    extra: dict[str, str] = field(default_factory=dict)

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    @property
    def pending(self) -> bool:
        return self.status == "pending"


def options_of(text: str | None) -> tuple[str, ...]:
    """The stored JSON array of options as a tuple (anything else reads as no options)."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def to_ask(row: sc.AskRow, agent_name: str = "", project_name: str = "") -> Ask:
    return Ask(row.id, row.run_id, row.agent_id, row.question, options_of(row.options), row.status,
               convert.ts(row.created_at), convert.ts_opt(row.expires_at), convert.ts_opt(row.answered_at),
               row.answered_by, row.answer, row.reason, row.revision, agent_name, project_name, row.session_id,
               row.answered_login)


def read_ask(store: Store, ask_id: str) -> Ask:
    """The ask `ask_id`, fresh; `NotFound` if there is none."""
    with store.reading() as s:
        row = s.get(sc.AskRow, ask_id)
        if row is None:
            raise NotFound(f"There is no question with id {ask_id}.")
        agent = s.get(sc.AgentRow, row.agent_id)
        proj = s.get(sc.ProjectRow, row.project_id)
        return to_ask(row, agent.name if agent else "", proj.name if proj else "")


def list_asks(store: Store, *, pending_only: bool = False, run_id: str | None = None,
              limit: int = 1000) -> list[Ask]:
    """Asks newest first (pending ones only, if asked), with their agent's and project's names; one query."""
    A, G, P = sc.AskRow, sc.AgentRow, sc.ProjectRow
    query = (select(A, G.name, P.name).join(G, G.id == A.agent_id).join(P, P.id == A.project_id)
             .order_by(A.created_at.desc(), A.id).limit(limit))
    if pending_only:
        query = query.where(A.status == "pending")
    if run_id is not None:
        query = query.where(A.run_id == run_id)
    with store.reading() as s:
        return [to_ask(row, agent or "", project or "") for row, agent, project in s.execute(query)]


def pending_count(store: Store) -> int:
    """Pending asks across the store (the queue's count)."""
    from sqlalchemy import func

    with store.reading() as s:
        return int(s.execute(select(func.count()).select_from(sc.AskRow)
                             .where(sc.AskRow.status == "pending")).scalar() or 0)
