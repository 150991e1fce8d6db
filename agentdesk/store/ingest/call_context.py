"""What the model saw: a model call's messages become its agent's context items, in call order.

Why apart from the rows: each message is an item the first time a call of its agent carries it (a growing
history sends the same messages again), items are numbered on from the agent's stored ones, one turn per
call that brought new items; a call that arrives before the agent's latest stored turn has the agent's
context written again from its calls instead (`agent_context.rebuild`, at `finish`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select

from agentdesk.store.ingest import agent_context
from agentdesk.store.ingest.placement import AgentPlacement
from agentdesk.store.ingest.prepare import Prepared, digest, item_id
from agentdesk.store.ingest.rows import bulk_insert
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.persistence import schema as sc
from agentdesk.store.uow import UnitOfWork
from agentdesk.store.validation import estimate_tokens

EXISTS_CHUNK = 100
"""Ids per "which of these items are stored" query: short enough that PostgreSQL's planner probes the primary
key rather than scanning the table (at 500 ids it chose a scan once the table held ~76,000 items)."""


@dataclass
class ContextBatch:
    groups: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[tuple[str, str, str, str, str, str, float]] = field(default_factory=list)
    """(item id, agent, group, item kind, role, content, at) of messages not yet known in this write."""

    def flush(self, conn: Connection) -> None:
        for table, rows in ((sc.ContextGroupRow, self.groups), (sc.ContextItemRow, self.items),
                            (sc.ContextItemRevisionRow, self.revisions), (sc.SpanContextRow, self.sent)):
            if rows:
                bulk_insert(conn, table, rows)


class CallContext(AgentPlacement):
    """Queues a write's calls' messages as context items of their agents (deduplicated, numbered on)."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        super().__init__(uow, index, default_project, staged=staged, resources=resources)
        self._positions: dict[str, int] = {}
        self._ordinals: dict[str, int] = {}
        self._item_ids: dict[tuple[str, str, str, int], str] = {}
        """(agent, role, content, repeat) -> item id, for the items already queued in this write."""
        self._context_touched: set[str] = set()
        self._latest_turn: dict[str, float | None] = {}
        """Agent -> start of its latest stored turn: a call not after it cannot simply be appended."""

    def _context(self, row_id: str, sp: Prepared, batch: ContextBatch) -> None:
        """Queue the call's messages as context items of its agent (deduplicated)."""
        if sp.kind != "model":
            return
        agent = self._agent_of_span(sp)
        at = sp.start_ns / 1e9
        if agent not in self._created and agent not in self._rebuild and self.may_rebuild():
            if agent not in self._latest_turn:
                self._latest_turn[agent] = agent_context.latest_turn(self.conn, agent)
            latest = self._latest_turn[agent]
            if latest is not None and at <= latest:
                self._rebuild.add(agent)  # an earlier call may take items a later one brought: numbered again
        repeats: dict[tuple[str, str], int] = {}
        known_ids = self._item_ids
        group = ""
        for role, content, kind in sp.messages:
            # The same message in the next call (a growing or sliding history) is the same item;
            # a message repeated within one call is a new one.
            k = repeats[(role, content)] = repeats.get((role, content), -1) + 1
            if (agent, role, content, k) in known_ids:  # most of a history was sent before
                continue
            item = known_ids[(agent, role, content, k)] = item_id(agent, role, content, k)
            group = group or "otg_" + digest(row_id)
            batch.candidates.append((item, agent, group, kind, role, content, at))

    def _start_numbering(self, agent: str) -> None:
        """Where an agent's items and turns continue from: 0 for an agent made in this write."""
        if agent in self._created:
            self._positions[agent] = self._ordinals[agent] = 0
            return
        self._positions[agent] = self.conn.execute(
            select(func.coalesce(func.max(sc.ContextItemRow.position), 0))
            .where(sc.ContextItemRow.agent_id == agent)).scalar_one()
        self._ordinals[agent] = self.conn.execute(
            select(func.coalesce(func.max(sc.ContextGroupRow.ordinal), 0))
            .where(sc.ContextGroupRow.agent_id == agent)).scalar_one()

    def _flush_context(self, batch: ContextBatch) -> None:
        """New items get the next positions of their agent, in the order they were first seen."""
        # An agent this write created has no items but those it queued (`_item_ids` skips them already): only
        # the items of agents stored before can be there. That was most of a PostgreSQL import of one large
        # trace: its planner scanned the whole table for each 500-id list (16 ms at 76,000 items, ~60 % of
        # the server's time), where a short list is an index probe per id.
        ids = [c[0] for c in batch.candidates if c[1] not in self._created]
        stored: set[str] = set()
        for n in range(0, len(ids), EXISTS_CHUNK):
            stored.update(self.conn.execute(select(sc.ContextItemRow.id)
                                            .where(sc.ContextItemRow.id.in_(ids[n:n + EXISTS_CHUNK]))).scalars())
        groups: dict[str, dict[str, Any]] = {}
        for item, agent, group, kind, role, content, at in batch.candidates:
            if item in stored or agent in self._rebuild:  # those are numbered again at `finish`
                continue
            if agent not in self._positions:
                self._start_numbering(agent)
            self._positions[agent] += 1
            if group not in groups:
                self._ordinals[agent] += 1  # turns numbered 1, 2, 3... per agent
                groups[group] = {"id": group, "agent_id": agent, "ordinal": self._ordinals[agent],
                                 "kind": "turn", "revision": 1, "created_at": at}
            tokens = estimate_tokens(content)
            batch.items.append({"id": item, "agent_id": agent, "group_id": group,
                                "position": self._positions[agent], "kind": kind, "role": role,
                                "content": content, "visible": True, "locked": False, "revision": 1,
                                "token_estimate": tokens, "compaction_id": None, "summary_of": None,
                                "removed": False, "created_at": at})
            batch.revisions.append({"item_id": item, "revision": 1, "content": content, "token_estimate": tokens,
                                    "created_at": at})
            self._context_touched.add(agent)
        batch.groups.extend(groups.values())
        batch.flush(self.conn)
