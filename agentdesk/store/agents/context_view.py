"""An agent's context as it is to be sent next: the operator's hiding, locks, edits and compactions applied.

The operator may have hidden turn groups, locked items, edited content or replaced a run of
items by a compaction summary since the agent wrote them. What the agent sends to its model
next must be exactly that: visible items only, each at its current content, summaries in the
place of what they cover. One implementation for the local client and the agent API (which
sends `ModelContext` as JSON); plain values, no ORM rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store import readmodel as rm
from agentdesk.store.messages.reads import delivered_authors
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.queries import NativeQueries

CHUNK = 500
"""Bound parameters per IN (...) query: well under SQLite's limit."""


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One item of the context as the model should see it now (after the operator's changes)."""

    item_id: str
    kind: str
    """message, tool_calls, result, or compaction (an operator's summary standing for covered items)."""
    role: str | None
    content: str
    """Current content: the operator's edit when there was one."""
    locked: bool
    """The operator pinned this item: keep it whatever the agent's own trimming would do."""
    edited: bool
    tokens: int
    author: str | None = None
    """The operator who wrote it, for a delivered operator's message (store/messages); None: the agent's own."""


@dataclass(frozen=True, slots=True)
class ModelContext:
    """An agent's context window as it is to be sent: visible items only, compactions applied."""

    agent_id: str
    revision: int
    """Bumps on every change, by the agent or an operator: compare to skip re-reading."""
    budget: int
    entries: tuple[ContextEntry, ...]
    hidden: int
    """How many live items the operator hid or a compaction covers (not in `entries`)."""

    @property
    def tokens(self) -> int:
        return sum(e.tokens for e in self.entries)

    def messages(self) -> list[dict[str, str]]:
        """`[{"role", "content"}]`, the shape most chat APIs take; a summary is sent as a system note."""
        return [{"role": e.role or ("system" if e.kind == "compaction" else "user"), "content": e.content}
                for e in self.entries]


def context_view(store: Store, agent_id: str) -> ModelContext:
    snapshot = NativeQueries(store).context(agent_id)
    written = first_contents(store, [i.id for i in snapshot.items if i.effective_visible and i.revision > 1])
    authors = delivered_authors(store, [i.id for i in snapshot.items if i.effective_visible and i.role == "user"])
    return from_snapshot(snapshot, written, authors)


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


def from_snapshot(snapshot: rm.AgentContext, written: Mapping[str, str],
                  authors: Mapping[str, str] | None = None) -> ModelContext:
    """Pure, so the rules are testable without a store: hidden and covered items are left out."""
    shown = [i for i in snapshot.items if i.effective_visible]
    by = authors or {}
    entries = tuple(ContextEntry(i.id, i.kind, i.role, i.content, i.locked,
                                 i.id in written and written[i.id] != i.content, i.token_estimate, by.get(i.id))
                    for i in shown)
    return ModelContext(snapshot.agent_id, snapshot.context_revision, snapshot.budget, entries,
                       len(snapshot.items) - len(shown))
