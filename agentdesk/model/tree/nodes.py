"""The project tree's row cache: plain nodes (ids and display fields, never ORM objects).

The bus delivers changes after commit, so the model cannot read "before" state
from the store: this cache is that state. Qt-free, so nodes can be made on the
runner's threads and handed to the GUI thread ready to attach. A relayout asks
about every loaded row, so the lookups behind `index()`/`parent()` are a dict
get (`by_uid`) and a checked hint (`row_of`, searching only after rows shifted).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from agentdesk.model.tree.rows import LEVELS, NO_FIELDS, Key, RowFields
from agentdesk.store.persistence.bus import Change

ROOT_UID = 0
"""The root's uid is the invalid QModelIndex's internal id, so `by_uid` resolves both without a branch."""


class Node:
    """One row. The reads on the runner make it unattached (uid 0, no parent); `NodeStore.attach` places it."""

    __slots__ = ("children", "entity", "f", "id", "leaf", "loaded", "loading", "n_sub", "parent", "row_hint",
                 "seq", "total", "uid")

    def __init__(self, entity: str, node_id: str, f: RowFields) -> None:
        self.uid = ROOT_UID
        self.entity, self.id, self.f = entity, node_id, f
        self.leaf = entity == "run"
        self.parent: Node | None = None
        self.children: list[Node] = []
        self.n_sub = 0
        """Sub-agents come first among an agent's children, runs after them."""
        self.total = f.total
        self.loaded = self.loading = False
        self.seq = -1
        """The read this node's fields came from: older answers never overwrite newer ones."""
        self.row_hint = 0
        """Where the node last was among its siblings; checked before use (rows shift on inserts)."""

    @property
    def key(self) -> Key:
        return (self.entity, self.id)

    @property
    def runs_loaded(self) -> int:
        return len(self.children) - self.n_sub

    def has_more(self) -> bool:
        """An agent whose older runs are not loaded yet."""
        return self.entity == "agent" and self.loaded and self.runs_loaded < (self.total or 0)


class NodeStore:
    """Every node by uid (what QModelIndex carries) and by (entity, id) (what the bus names)."""

    def __init__(self) -> None:
        self._uids = itertools.count(1)
        self.by_uid: dict[int, Node] = {}
        self.by_key: dict[Key, Node] = {}
        self._deferred: dict[int, list[Change]] = {}
        self.root = Node("", "", NO_FIELDS)
        self.clear()

    def clear(self) -> None:
        """Forget everything (the model also cancels the reads in flight: their nodes are gone)."""
        self.by_uid.clear()  # in place: the model keeps a reference for its hot lookups
        self.by_key.clear()
        self._deferred.clear()
        self.root = Node("", "", NO_FIELDS)
        self.by_uid[ROOT_UID] = self.root

    def find(self, key: Key) -> Node | None:
        return self.by_key.get(key)

    def holds(self, node: Node) -> bool:
        """The node is still in the tree (a load's answer for a removed row is dropped)."""
        return node is self.root or self.by_key.get(node.key) is node

    def attach(self, node: Node, parent: Node, seq: int, row: int) -> Node:
        """Register a fresh node; the caller puts it at `row` of `parent.children`."""
        node.uid, node.parent, node.seq, node.row_hint = next(self._uids), parent, seq, row
        self.by_uid[node.uid] = node
        self.by_key[(node.entity, node.id)] = node
        return node

    def forget(self, node: Node) -> None:
        for child in node.children:
            self.forget(child)
        self.by_uid.pop(node.uid, None)
        self.by_key.pop((node.entity, node.id), None)
        self._deferred.pop(node.uid, None)

    def row_of(self, node: Node) -> int:
        assert node.parent is not None, "the root has no row"
        siblings = node.parent.children
        hint = node.row_hint
        if hint < len(siblings) and siblings[hint] is node:
            return hint
        node.row_hint = row = siblings.index(node)
        return row

    def lister(self, entity: str, group: str) -> Node | None:
        """The node whose load lists rows of this entity: a session lists all its agents, sub-agents too."""
        if entity == "project":
            return self.root
        return self.by_key.get((LEVELS[LEVELS.index(entity) - 1], group))

    def defer(self, node: Node, change: Change) -> None:
        """Hold a change about a child of a node whose load is in flight (the load may predate it)."""
        self._deferred.setdefault(node.uid, []).append(change)

    def take_deferred(self, node: Node) -> list[Change]:
        return self._deferred.pop(node.uid, [])

    def walk(self, branches_only: bool = False) -> Iterator[Node]:
        """Every loaded node, depth first (parents before children); runs skipped if `branches_only`."""
        stack = list(reversed(self.root.children))
        while stack:
            node = stack.pop()
            if branches_only and node.leaf:
                continue
            yield node
            stack.extend(reversed(node.children))


def insert_position(parent: Node, node: Node) -> int | None:
    """Where a new row goes among `parent`'s children, or None for a run older than the loaded pages."""
    kids, f = parent.children, node.f
    if node.entity == "run":  # newest first, like the store's pages
        for row in range(parent.n_sub, len(kids)):
            other = kids[row].f
            if other.sort_key < f.sort_key or (other.sort_key == f.sort_key and kids[row].id > node.id):
                return row
        return len(kids) if parent.runs_loaded + 1 >= (parent.total or 0) else None
    row = parent.n_sub if parent.entity == "agent" else len(kids)
    while row > 0 and (kids[row - 1].f.sort_key, kids[row - 1].id) > (f.sort_key, node.id):
        row -= 1
    return row
