"""Changes to the tree's row cache, each inside its matching Qt notification.

The loader and the change applier decide what to change; this is the one
place that mutates `NodeStore` children, so every mutation sits inside its
`begin*`/`end*` pair with exact row ranges, and a field change becomes one
`dataChanged` per row covering only the columns that show the changed fields.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt

from agentdesk.model.tree.host import TreeHost
from agentdesk.model.tree.nodes import Node, NodeStore, insert_position
from agentdesk.model.tree.rows import INFO, NAME, PENDING, STATUS, Key, RowFields


class TreeEdits:
    def __init__(self, model: TreeHost, nodes: NodeStore) -> None:
        self._model = model
        self._nodes = nodes

    def append(self, parent: Node, fresh: Sequence[Node], seq: int) -> None:
        if not fresh:
            return
        first = len(parent.children)
        self._model.beginInsertRows(self._model.node_index(parent), first, first + len(fresh) - 1)
        attach = self._nodes.attach
        parent.children.extend(attach(node, parent, seq, row) for row, node in enumerate(fresh, first))
        self._model.endInsertRows()

    def place(self, fresh: Node, seq: int) -> None:
        """Insert a new row where the store's order puts it, if its parent is loaded."""
        lister = self._nodes.lister(fresh.entity, fresh.f.group)
        if lister is None or not lister.loaded:
            return
        parent: Node | None = lister
        if fresh.entity == "agent" and fresh.f.parent_agent:
            parent = self._nodes.find(("agent", fresh.f.parent_agent))  # maybe new in this batch
        if parent is None:
            return
        row = insert_position(parent, fresh)
        if row is None:
            return
        self._model.beginInsertRows(self._model.node_index(parent), row, row)
        parent.children.insert(row, self._nodes.attach(fresh, parent, seq, row))
        if fresh.entity == "agent" and parent.entity == "agent":
            parent.n_sub += 1
        self._model.endInsertRows()

    def remove(self, key: Key) -> None:
        node = self._nodes.find(key)
        if node is None or node.parent is None:
            return
        parent = node.parent
        row = self._nodes.row_of(node)
        self._model.beginRemoveRows(self._model.node_index(parent), row, row)
        del parent.children[row]
        if row < parent.n_sub:
            parent.n_sub -= 1
        self._nodes.forget(node)
        self._model.endRemoveRows()

    def known(self, fresh: Node, seq: int) -> bool:
        """Refresh the shown row with `fresh`'s key, if there is one."""
        node = self._nodes.find((fresh.entity, fresh.id))
        if node is not None:
            self.refresh(node, fresh.f, seq)
        return node is not None

    def refresh(self, node: Node, new: RowFields, seq: int) -> None:
        """New fields for a shown row, unless they come from an older read than the ones it shows."""
        if seq < node.seq:
            return
        node.seq = seq
        old = node.f
        if new == old:
            return
        node.f = new
        if new.total is not None:
            node.total = new.total
        columns = changed_columns(old, new)
        if columns:
            self._model.cells_changed(self._model.node_index(node, min(columns)),
                                      self._model.node_index(node, max(columns)))

    def info_changed(self, node: Node) -> None:
        """An agent's Info column counts its loaded runs."""
        if node.parent is not None:
            index = self._model.node_index(node, INFO)
            self._model.cells_changed(index, index, [Qt.ItemDataRole.DisplayRole])


def changed_columns(old: RowFields, new: RowFields) -> set[int]:
    columns = set()
    if new.name != old.name:
        columns.add(NAME)
    if new.status != old.status:
        columns |= {NAME, STATUS}  # the status icon sits in the Name column
    if new.pending != old.pending:
        columns.add(PENDING)
    if new.info != old.info or new.total != old.total:
        columns.add(INFO)
    if new.tooltip != old.tooltip:
        columns |= {NAME, INFO}
    return columns
