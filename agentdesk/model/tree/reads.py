"""The project tree's store reads, run on the store runner's threads.

Each read answers with ready-made, unattached `Node`s (display fields
computed): formatting a row costs about 10 µs, which adds up to tens of
milliseconds for a page of runs and must not be spent on the GUI thread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentdesk.model.tree.nodes import Node
from agentdesk.model.tree.rows import LEVELS, Key, entity_of, row_fields
from agentdesk.store.errors import NotFound
from agentdesk.store.source import Source


@dataclass(frozen=True, slots=True)
class Listing:
    """A node's children as read: all of them, or one page of an agent's runs (with their total)."""

    nodes: list[Node]
    total: int | None = None


def make_node(value: Any) -> Node:
    return Node(entity_of(value), value.id, row_fields(value))


def read_children(source: Source, entity: str, node_id: str, offset: int, limit: int) -> Listing:
    """Children of the root ("") or of a project, task, session; a page of runs (newest first) of an agent."""
    if entity == "agent":
        page = source.runs(node_id, offset, limit)
        return Listing([make_node(v) for v in page.items], page.total)
    children_of: dict[str, Callable[[str], Sequence[Any]]] = {
        "project": source.tasks, "task": source.sessions, "session": source.agents}
    values: Sequence[Any] = source.projects() if entity == "" else children_of[entity](node_id)
    return Listing([make_node(v) for v in values])


def read_rows(source: Source, wanted: Mapping[Key, str]) -> list[tuple[Key, Node | None]]:
    """The current row of every wanted key (None if gone), one listing per parent, top level first.

    `wanted` maps each key to the id the store lists it under; agents come out oldest
    first so a sub-agent's parent is inserted before it.
    """
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (entity, entity_id), group in wanted.items():
        groups[(entity, group)].append(entity_id)
    listings = _listings(source)
    found: list[tuple[Key, Node | None]] = []
    for (entity, group), ids in sorted(groups.items(), key=lambda g: LEVELS.index(g[0][0])):
        if entity == "run":
            found.extend((("run", i), _run_or_none(source, i)) for i in ids)
            continue
        values = {v.id: v for v in listings[entity](group)}
        found.extend(((entity, i), make_node(values[i]) if i in values else None) for i in ids)
    level_order = {level: n for n, level in enumerate(LEVELS)}
    return sorted(found, key=lambda kv: (level_order[kv[0][0]], kv[1].f.sort_key
                                         if kv[1] is not None and kv[0][0] == "agent" else 0.0))


def _listings(source: Source) -> dict[str, Callable[[str], Any]]:
    return {"project": lambda _: source.projects(), "task": source.tasks, "session": source.sessions,
            "agent": source.agents}


def _run_or_none(source: Source, run_id: str) -> Node | None:
    try:
        return make_node(source.run(run_id))
    except NotFound:
        return None
