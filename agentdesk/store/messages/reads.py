"""Reading messages: the pending queue (all agents or one), one message, and who wrote a delivered item.

Plain frozen values, no ORM rows: the CLI, the context editor and the agent API share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store

PENDING, DELIVERED, CANCELLED = "pending", "delivered", "cancelled"
CHUNK = 500
"""Bound parameters per IN (...) query: well under SQLite's limit."""


@dataclass(frozen=True, slots=True)
class Message:
    id: str
    agent_id: str
    session_id: str
    content: str
    status: str
    """pending, delivered or cancelled."""
    created_at: float
    created_by: str
    settled_at: float | None
    settled_by: str | None
    """Who cancelled it, or the agent actor that took it."""
    item_id: str | None
    """The context item a delivered message became."""
    revision: int

    @property
    def pending(self) -> bool:
        return self.status == PENDING


def message_of(row: sc.MessageRow) -> Message:
    return Message(row.id, row.agent_id, row.session_id, row.content, row.status, row.created_at, row.created_by,
                   row.settled_at, row.settled_by, row.item_id, row.revision)


def read_message(store: Store, message_id: str) -> Message | None:
    with store.reading() as s:
        row = s.get(sc.MessageRow, message_id)
        return None if row is None else message_of(row)


def pending_messages(store: Store, agent_id: str | None = None) -> list[Message]:
    """Pending messages, oldest first (the order the agent will read them); of one agent, or of all."""
    M = sc.MessageRow
    query = select(M).where(M.status == PENDING)
    if agent_id is not None:
        query = query.where(M.agent_id == agent_id)
    with store.reading() as s:
        return [message_of(r) for r in s.execute(query.order_by(M.created_at, M.id)).scalars()]


def delivered_authors(store: Store, item_ids: Sequence[str]) -> dict[str, str]:
    """item id → the operator who wrote it, for the items that are delivered messages."""
    M = sc.MessageRow
    found: dict[str, str] = {}
    with store.reading() as s:
        for n in range(0, len(item_ids), CHUNK):
            rows = s.execute(select(M.item_id, M.created_by).where(
                M.status == DELIVERED, M.item_id.in_(item_ids[n:n + CHUNK]))).all()
            found.update((str(item), str(author)) for item, author in rows)
    return found
