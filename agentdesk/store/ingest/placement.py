"""Which agent each span of a trace belongs to: the agent of its nearest agent span, else the run's.

Why apart: the rows (`writer`), the late-parent correction (`correction`) and the roll-up all ask it, and
the answer is the same for a trace written whole (`import`) and one received in pieces: an agent's id is
derived from its session, its parent agent and its identity (`gen_ai.agent.id`, else its name), never
random, so both find the same agent rows. A nested agent span is a `sub_agent`; the run belongs to the
trace's outermost agent span (the earliest), or to a stand-in named after the service when it has none.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from agentdesk.store.ingest.prepare import Prepared, digest
from agentdesk.store.ingest.rows import bulk_insert
from agentdesk.store.ingest.spans import span_row_id
from agentdesk.store.ingest.trace_index import IndexEntry, TraceIndex
from agentdesk.store.ingest.trace_write import DEFAULT_PROJECT, IMPORTED_AGENT_PREFIX, TraceWrite
from agentdesk.store.persistence import schema as sc
from agentdesk.store.uow import UnitOfWork


class AgentPlacement(TraceWrite):
    """Derives (and creates, in creation order) the agents of a trace's spans, memoised per span."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        super().__init__(uow, index, default_project, staged=staged, resources=resources)
        self._agent_of: dict[str, str | None] = {}
        """OTel span id -> agentdesk agent id of its nearest agent span (None: the run's agent)."""
        self._new_agents: list[str] = []
        self._created: set[str] = set()
        self._pending_agents: list[dict[str, Any]] = []
        self._session_agents: set[str] | None = None
        self._stored_agents: dict[str, str | None] = {}
        """Stored span row id -> the agent of its nearest agent span (many children share a parent)."""
        self._agent_spans: tuple[int, list[tuple[str, IndexEntry]]] | None = None
        """(spans in the index when sorted, its agent spans in start order): `agent_spans_by_start`."""
        self._model_at: dict[str, int] = {}
        """Agent -> start of the span its model was taken from: the earliest span naming a model wins."""

    def _top_agent(self) -> str:
        """The run's agent: the trace's outermost agent span, else one named after the service."""
        for span_id, entry in self.agent_spans_by_start():
            if self._enclosing_agent(entry.parent_id) is None:
                found = self._enclosing_agent(span_id)
                assert found is not None
                return found
        name = self.index.project or self.default_project or DEFAULT_PROJECT
        return self._ensure_agent("service:" + name, name, None)

    def agent_spans_by_start(self) -> list[tuple[str, IndexEntry]]:
        """The trace's agent spans in start order (ties in the index's order, as `TraceIndex.by_start` sorts):
        all that choosing the run's agent and deriving the agents reads, without sorting every span of a
        stored trace on each of its writes."""
        if self._agent_spans is None or self._agent_spans[0] != len(self.index.spans):
            spans = [(sid, e) for sid, e in self.index.spans.items() if e.agent_key is not None]
            spans.sort(key=lambda kv: kv[1].start_ns)
            self._agent_spans = (len(self.index.spans), spans)
        return self._agent_spans[1]

    def _note_model(self, agent: str, start_ns: int, model: str) -> None:
        """An agent's model is the one its earliest span names (what `import`, in time order, sees first)."""
        facts = self._agents.setdefault(agent, {"parent": None})
        if not facts.get("model") or start_ns < self._model_at.get(agent, start_ns):
            facts["model"] = model
            self._model_at[agent] = start_ns

    def _enclosing_agent(self, span_id: str | None) -> str | None:
        """The agent of the nearest agent span at or above `span_id`.

        Iterative, resolved top-down, memoised: a trace can be 100,000 spans deep, and a
        hostile one can loop (the walk stops after as many steps as there are spans).
        """
        path: list[str] = []
        found: str | None = None
        current = span_id
        while current is not None:
            if current in self._agent_of:
                found = self._agent_of[current]
                break
            entry = self.index.spans.get(current)
            if entry is None:  # not here; stored, unless the stored spans are in the index already
                found = (None if self._skeleton is not None
                         else self._stored_agent_of(span_row_id(self.index.trace_id, current)))
                break
            path.append(current)
            current = entry.parent_id
            if len(path) > len(self.index.spans):
                break
        for sid in reversed(path):
            entry = self.index.spans[sid]
            if entry.agent_key is not None:
                found = self._ensure_agent(entry.agent_key, entry.agent_name or entry.agent_key, found)
            self._agent_of[sid] = found
        return found

    def _stored_agent_of(self, row_id: str) -> str | None:
        """For a parent written earlier: walk stored spans up to the nearest agent span (once per parent)."""
        if row_id not in self._stored_agents:
            self._stored_agents[row_id] = self._walk_stored(row_id)
        return self._stored_agents[row_id]

    def _walk_stored(self, row_id: str) -> str | None:
        seen = 0
        current: str | None = row_id
        while current is not None and seen < 100_000:
            row = self.conn.execute(select(sc.SpanRow.kind, sc.SpanRow.parent_span_id, sc.SpanRow.attributes,
                                           sc.SpanRow.name).where(sc.SpanRow.id == current)).first()
            if row is None:
                return None
            if row.kind in ("agent", "sub_agent"):
                attrs = json.loads(row.attributes or "{}")
                name = attrs.get("gen_ai.agent.name") or row.name
                key = str(attrs.get("gen_ai.agent.id") or name)
                hit = self.conn.execute(select(sc.AgentRow.id).where(
                    sc.AgentRow.session_id == self.session_id, sc.AgentRow.name == str(name))).scalar()
                return hit if hit else self._ensure_agent(key, str(name), None)
            current, seen = row.parent_span_id, seen + 1
        return None

    def _ensure_agent(self, key: str, name: str, parent: str | None) -> str:
        agent_id = IMPORTED_AGENT_PREFIX + digest(self.session_id, parent or "", key)
        if agent_id in self._agents:
            return agent_id
        if self._session_agents is None:  # one query for the session's agents, not one per agent
            self._session_agents = set(self.conn.execute(
                select(sc.AgentRow.id).where(sc.AgentRow.session_id == self.session_id)).scalars())
        if agent_id not in self._session_agents:
            self._session_agents.add(agent_id)
            self._pending_agents.append({
                "id": agent_id, "project_id": self.project_id, "task_id": self.task_id,
                "session_id": self.session_id, "parent_agent_id": parent, "name": name, "model": "",
                "status": "running", "context_revision": 0, "context_budget": 128_000,
                "created_at": self._first, "revision": 1})
            self._new_agents.append(agent_id)
            self._created.add(agent_id)
        self._agents[agent_id] = {"parent": parent}
        return agent_id

    def _flush_agents(self) -> None:
        """New agents in creation order (a parent is always created before its sub-agents)."""
        if self._pending_agents:
            bulk_insert(self.conn, sc.AgentRow, self._pending_agents)
            self._stage("agent", [a["id"] for a in self._pending_agents])
            self._pending_agents = []

    def _kind(self, sp: Prepared) -> str:
        if sp.kind == "agent" and sp.parent_id is not None and self._enclosing_agent(sp.parent_id) is not None:
            return "sub_agent"
        return sp.kind

    def _agent_of_span(self, sp: Prepared) -> str:
        return self._enclosing_agent(sp.span_id) or self.run_agent
