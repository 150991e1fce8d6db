"""Reading an agent's context back the way the operator left it (store/agents/context_view.py does the work).

Locally the store is read directly; over HTTP the agent API sends the same `ModelContext` as
JSON (`from_wire`). Either way the agent gets a `ModelContext`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.agents.context_view import ContextEntry, ModelContext, context_view
from agentdesk.store.agents.context_view import from_snapshot as view_of_snapshot
from agentdesk.store.persistence.database import Store


def model_context(store: Store, agent_id: str) -> ModelContext:
    return context_view(store, agent_id)


def from_snapshot(snapshot: rm.AgentContext, written: Mapping[str, str]) -> ModelContext:
    return view_of_snapshot(snapshot, written)


def from_wire(data: Mapping[str, Any]) -> ModelContext:
    """The agent API's JSON form of a `ModelContext`."""
    entries = tuple(ContextEntry(str(e["item_id"]), str(e["kind"]), e.get("role"), str(e["content"]),
                                 bool(e["locked"]), bool(e["edited"]), int(e["tokens"]), e.get("author"))
                    for e in data["entries"])
    return ModelContext(str(data["agent_id"]), int(data["revision"]), int(data["budget"]), entries,
                        int(data["hidden"]))
