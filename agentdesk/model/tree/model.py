"""The project tree as a Qt item model: projects > tasks > sessions > agents (> sub-agents) > runs.

This module is the read side Qt sees; loading (`loading`), bus changes
(`changes`) and the row cache they share (`nodes`, mutated only by `edits`) live
beside it and reach back only through the `host.TreeHost` protocol. A QTreeView relayout asks for `index()` and
`hasChildren()` of every loaded row (tens of thousands once an agent's runs are
paged in), so those are a dict lookup and a list access; `flags()` is not
overridden because Qt's default (enabled, selectable) is what every row needs and
costs no Python call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QIcon

from agentdesk.model.services import Services
from agentdesk.model.tasks import Tickets
from agentdesk.model.text import plural
from agentdesk.model.tree.changes import TreeChanges
from agentdesk.model.tree.edits import TreeEdits
from agentdesk.model.tree.loading import TreeLoader
from agentdesk.model.tree.nodes import Node, NodeStore
from agentdesk.model.tree.rows import HEADERS, INFO, NAME, PENDING, STATUS, Key
from agentdesk.store.persistence.bus import Change

__all__ = ["HEADERS", "INFO", "NAME", "PENDING", "STATUS", "ControlRole", "EntityRole", "PendingRole",
           "ProjectTreeModel", "StatusRole"]

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()
"""The invalid index (the top level), as a shared default argument."""

EntityRole = Qt.ItemDataRole.UserRole + 1
"""(entity, id) of the row."""
StatusRole = Qt.ItemDataRole.UserRole + 2
PendingRole = Qt.ItemDataRole.UserRole + 3
ControlRole = Qt.ItemDataRole.UserRole + 4
"""A run's control state (running, paused, stopping, stopped): what its Pause / Resume / Stop offer."""
"""Pending approvals at or below this row, as an int."""

DEFAULT_PAGE_SIZE = 200
COLUMNS = len(HEADERS)
# Plain ints: comparing `role` with an enum member costs an enum attribute lookup per call.
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_DECORATION = int(Qt.ItemDataRole.DecorationRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_CENTER = Qt.AlignmentFlag.AlignCenter


class ProjectTreeModel(QAbstractItemModel):
    children_loaded = Signal(str, str)
    """A node's children (or one more page of runs) arrived: (entity, id); ("", "") for the top level."""
    load_failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None, *,
                 page_size: int = DEFAULT_PAGE_SIZE,
                 status_icon: Callable[[str], QIcon] | None = None) -> None:
        super().__init__(parent)
        self._status_icon = status_icon
        self._nodes = NodeStore()
        self._by_uid = self._nodes.by_uid  # the invalid index's id (0) is the root's uid
        self._latest = Tickets(services.runner)
        edits = TreeEdits(self, self._nodes)
        self._changes = TreeChanges(self, self._nodes, edits, services, self._latest)
        self._loader = TreeLoader(self, self._nodes, edits, services, self._latest, page_size,
                                  self._changes.apply)
        services.bridge.changes.connect(self._on_changes)
        self.fetchMore(QModelIndex())

    def _on_changes(self, changes: Sequence[Change]) -> None:
        """A method of the model, not of `TreeChanges`: Qt drops the connection when the model goes."""
        self._changes.apply(changes)

    # -- what the loader, change applier and edits call back (`host.TreeHost`) ----------------
    def node_index(self, node: Node, column: int = 0) -> QModelIndex:
        if node.parent is None:
            return QModelIndex()
        return self.createIndex(self._nodes.row_of(node), column, node.uid)

    def cells_changed(self, top_left: QModelIndex, bottom_right: QModelIndex, roles: Sequence[int] = ()) -> None:
        self.dataChanged.emit(top_left, bottom_right, list(roles))

    def report_loaded(self, entity: str, entity_id: str) -> None:
        self.children_loaded.emit(entity, entity_id)

    def report_failure(self, message: str) -> None:
        self.load_failed.emit(message)

    # -- structure: called for every row on each relayout ---------------------------------
    def index(self, row: int, column: int, parent: Index = TOP) -> QModelIndex:
        node = self._by_uid.get(parent.internalId())
        if node is not None and 0 <= row < len(node.children) and 0 <= column < COLUMNS:
            return self.createIndex(row, column, node.children[row].uid)
        return QModelIndex()

    def parent(self, child: Index = TOP) -> QModelIndex:  # type: ignore[override]
        node = self._by_uid.get(child.internalId())
        up = node.parent if node is not None else None
        if up is None or up.parent is None:
            return QModelIndex()
        return self.createIndex(self._nodes.row_of(up), 0, up.uid)

    def rowCount(self, parent: Index = TOP) -> int:
        node = self._by_uid.get(parent.internalId())
        return len(node.children) if node is not None and parent.column() <= 0 else 0

    def columnCount(self, parent: Index = TOP) -> int:
        return COLUMNS

    def hasChildren(self, parent: Index = TOP) -> bool:
        node = self._by_uid.get(parent.internalId())
        if node is None or node.leaf or parent.column() > 0:
            return False
        if node.children or node.loading:
            return True
        if node.loaded:
            return node.has_more()
        return node.total is None or node.total > 0

    # -- display ------------------------------------------------------------------------------
    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == _DISPLAY and 0 <= section < COLUMNS:
            return HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        uid = index.internalId()
        node = self._by_uid.get(uid) if uid else None
        if node is None:
            return None
        if role == _DISPLAY:
            return self._display(node, index.column())
        if role == _DECORATION:
            return self._status_icon(node.f.status) if self._status_icon and index.column() == NAME else None
        if role == _TOOLTIP:
            return node.f.tooltip
        if role == EntityRole:
            return (node.entity, node.id)
        if role == StatusRole:
            return node.f.status
        if role == PendingRole:
            return node.f.pending
        if role == ControlRole:
            return node.f.control
        if role == _ALIGNMENT and index.column() == PENDING:
            return _CENTER
        return None

    @staticmethod
    def _display(node: Node, column: int) -> str:
        f = node.f
        if column == NAME:
            return f.name
        if column == STATUS:
            return f.status
        if column == PENDING:
            return str(f.pending) if f.pending else ""
        if node.entity == "agent" and node.total is not None:
            runs = plural(node.total, "run")
            if node.loaded and node.runs_loaded < node.total:
                runs = f"{node.runs_loaded:,} of {runs}"
            return f"{f.info} · {runs}"
        return f.info

    # -- public helpers for views ---------------------------------------------------------
    def _node(self, index: Index) -> Node | None:
        return self._by_uid.get(index.internalId())

    def find(self, entity: str, entity_id: str, column: int = 0) -> QModelIndex:
        node = self._nodes.find((entity, entity_id))
        return self.node_index(node, column) if node is not None else QModelIndex()

    def is_loading(self, index: Index) -> bool:
        node = self._node(index)
        return node is not None and node.loading

    def is_loaded(self, index: Index) -> bool:
        node = self._node(index)
        return node is not None and node.loaded

    def runs_shown(self, agent_id: str) -> tuple[int, int]:
        """(loaded, total) runs of an agent."""
        node = self._nodes.find(("agent", agent_id))
        return (0, 0) if node is None else (node.runs_loaded, node.total or 0)

    def loaded_keys(self) -> list[Key]:
        """Every loaded row, depth first (parents before children)."""
        return [node.key for node in self._nodes.walk()]

    def branch_keys(self) -> list[Key]:
        """The loaded rows that can have children (no runs), depth first: what a view may have expanded."""
        return [node.key for node in self._nodes.walk(branches_only=True)]

    def fetch_more(self, index: Index, limit: int | None = None) -> bool:
        """Like `fetchMore`, with a larger page when a view pages through runs on purpose."""
        node = self._node(index)
        return node is not None and self._loader.fetch(node, limit)

    def has_more(self, index: Index) -> bool:
        """An agent whose older runs are not loaded yet (`fetchMore` loads the next page)."""
        node = self._node(index)
        return node is not None and self._loader.can_page(node)

    def reload(self) -> None:
        """Start again from the store: only for a reset (feed gap), never for ordinary changes."""
        self.beginResetModel()
        self._latest.cancel()
        self._nodes.clear()
        self.endResetModel()
        self.fetchMore(QModelIndex())

    # -- lazy loading ---------------------------------------------------------------------
    def canFetchMore(self, parent: Index) -> bool:
        node = self._node(parent)
        return node is not None and parent.column() <= 0 and self._loader.can_fetch(node)

    def fetchMore(self, parent: Index) -> None:
        """The first load of a row's children, or the next page of an agent's runs."""
        node = self._node(parent)
        if node is not None:
            self._loader.fetch(node)
