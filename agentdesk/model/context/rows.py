"""The context model's row cache and how a fresh snapshot tree is applied to it.

A reload is applied as exact remove/insert/dataChanged calls per parent rather
than a reset, so the view's selection and expansion survive other writers'
changes. Rows hold plain values (see `tree`); lookups hand out values or
fresh indexes, never stored ones.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QObject, QPersistentModelIndex, Qt

from agentdesk.model.context.tree import GroupRow, ItemRow, Node, Row
from agentdesk.store import readmodel as rm

Index = QModelIndex | QPersistentModelIndex
NO_PARENT = QModelIndex()

KIND, ROLE, PREVIEW, TOKENS, VISIBLE, LOCKED = range(6)
HEADERS = ("Item", "Role", "Content", "Tokens", "Visible", "Locked")
RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


class ContextRows(QAbstractItemModel):
    """Tree navigation over `Node`s plus the diff that keeps them in step with each snapshot."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._root = Node(("root", ""), None)
        self._by_key: dict[tuple[str, str], Node] = {}

    def _clear_rows(self) -> None:
        """Only between beginResetModel and endResetModel."""
        self._root, self._by_key = Node(("root", ""), None), {}

    def _apply_tree(self, fresh: Node) -> None:
        self._sync(self._root, QModelIndex(), fresh.children)
        self._by_key = {}
        self._index_keys(self._root)

    # -- lookups for views (plain values, never indexes kept) ------------------------------
    def row_value(self, index: Index) -> Row | None:
        return self._node(index).value if index.isValid() else None

    def item(self, item_id: str) -> rm.ContextItem | None:
        node = self._by_key.get(("item", item_id))
        return node.value.item if node is not None and isinstance(node.value, ItemRow) else None

    def group(self, group_id: str) -> GroupRow | None:
        node = self._by_key.get(("group", group_id))
        return node.value if node is not None and isinstance(node.value, GroupRow) else None

    def group_item_ids(self, group_id: str) -> list[str]:
        node = self._by_key.get(("group", group_id))
        return [c.key[1] for c in node.children] if node is not None else []

    def index_of(self, kind: str, node_id: str, column: int = 0) -> QModelIndex:
        node = self._by_key.get((kind, node_id))
        return self.createIndex(node.row, column, node) if node is not None else QModelIndex()

    # -- applying a snapshot as exact row operations ---------------------------------------
    def _index_keys(self, node: Node) -> None:
        for child in node.children:
            self._by_key[child.key] = child
            self._index_keys(child)

    def _sync(self, parent: Node, parent_index: QModelIndex, fresh: list[Node]) -> None:
        wanted = {n.key: n for n in fresh}
        order = {n.key: i for i, n in enumerate(fresh)}
        self._remove_stale(parent, parent_index, order)
        self._insert_missing(parent, parent_index, fresh)
        for node in parent.children:
            new = wanted[node.key]
            if new is node:
                continue
            if node.value != new.value:
                node.value = new.value
                self.dataChanged.emit(self.createIndex(node.row, 0, node),
                                      self.createIndex(node.row, len(HEADERS) - 1, node))
            self._sync(node, self.createIndex(node.row, 0, node), new.children)

    def _remove_stale(self, parent: Node, parent_index: QModelIndex,
                      order: dict[tuple[str, str], int]) -> None:
        last, doomed = -1, []
        for node in parent.children:  # survivors must keep their relative order; others go
            pos = order.get(node.key, -1)
            if pos > last:
                last = pos
            else:
                doomed.append(node.row)
        for first, end in reversed(_runs(doomed)):
            self.beginRemoveRows(parent_index, first, end)
            del parent.children[first:end + 1]
            parent.renumber()
            self.endRemoveRows()

    def _insert_missing(self, parent: Node, parent_index: QModelIndex, fresh: list[Node]) -> None:
        have = {n.key for n in parent.children}
        missing = [i for i, n in enumerate(fresh) if n.key not in have]
        for first, end in _runs(missing):
            self.beginInsertRows(parent_index, first, end)
            for node in fresh[first:end + 1]:
                node.parent = parent
            parent.children[first:first] = fresh[first:end + 1]
            parent.renumber()
            self.endInsertRows()

    # -- QAbstractItemModel: the tree's shape ------------------------------------------------
    def _node(self, index: Index) -> Node:
        return index.internalPointer() if index.isValid() else self._root  # type: ignore[return-value]

    def index(self, row: int, column: int, parent: Index = NO_PARENT) -> QModelIndex:
        node = self._node(parent)
        if parent.isValid() and parent.column() != 0:
            return QModelIndex()
        if 0 <= row < len(node.children) and 0 <= column < len(HEADERS):
            return self.createIndex(row, column, node.children[row])
        return QModelIndex()

    def parent(self, index: Index = NO_PARENT) -> QModelIndex:  # type: ignore[override]
        if not index.isValid():
            return QModelIndex()
        up = self._node(index).parent
        if up is None or up is self._root:
            return QModelIndex()
        return self.createIndex(up.row, 0, up)

    def rowCount(self, parent: Index = NO_PARENT) -> int:
        if parent.isValid() and parent.column() != 0:
            return 0
        return len(self._node(parent).children)

    def columnCount(self, parent: Index = NO_PARENT) -> int:
        return len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(HEADERS):
            if role == Qt.ItemDataRole.DisplayRole:
                return HEADERS[section]
            if role == Qt.ItemDataRole.TextAlignmentRole and section == TOKENS:
                return RIGHT
        return None


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as inclusive (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs
