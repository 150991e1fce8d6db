"""An agent's context as it is to be sent next: the operator's hiding, locks, edits and compactions applied.

The operator may have hidden turn groups, locked items, edited content or replaced a run of
items by a compaction summary since the agent wrote them. What the agent sends to its model
next must be exactly that: visible items only, each at its current content, summaries in the
place of what they cover. One implementation for the local client and the agent API (which
sends `ContextView` as JSON); plain values, no ORM rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store import readmodel as rm
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.queries import NativeQueries

CHUNK = 500
"""Bound parameters per IN (...) query: well under SQLite's limit."""


@dataclass(frozen=True, slots=True)
class ViewEntry:
    item_id: str
    kind: str
    role: str | None
    content: str
    locked: bool
    edited: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class ContextView:
    agent_id: str
    revision: int
    budget: int
    entries: tuple[ViewEntry, ...]
    hidden: int


def context_view(store: Store, agent_id: str) -> ContextView:
    snapshot = NativeQueries(store).context(agent_id)
    written = first_contents(store, [i.id for i in snapshot.items if i.effective_visible and i.revision > 1])
    return from_snapshot(snapshot, written)


def first_contents(store: Store, item_ids: Sequence[str]) -> dict[str, str]:
    """What the agent itself wrote (revision 1): a revision also moves on a toggle, so compare contents."""
    R = sc.ContextItemRevisionRow
    found: dict[str, str] = {}
    with store.reading() as s:
        for n in range(0, len(item_ids), CHUNK):
            rows = s.execute(select(R.item_id, R.content)
                             .where(R.revision == 1, R.item_id.in_(item_ids[n:n + CHUNK]))).all()
            found.update((item_id, content) for item_id, content in rows)
    return found


def from_snapshot(snapshot: rm.AgentContext, written: Mapping[str, str]) -> ContextView:
    """Pure, so the rules are testable without a store: hidden and covered items are left out."""
    shown = [i for i in snapshot.items if i.effective_visible]
    entries = tuple(ViewEntry(i.id, i.kind, i.role, i.content, i.locked,
                              i.id in written and written[i.id] != i.content, i.token_estimate)
                    for i in shown)
    return ContextView(snapshot.agent_id, snapshot.context_revision, snapshot.budget, entries,
                       len(snapshot.items) - len(shown))
