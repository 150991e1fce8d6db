"""What the tree's helpers need of the Qt model, as a protocol, so none of them imports it.

The loader (`loading`), the change applier (`changes`) and the row edits
(`edits`) are built by `model.ProjectTreeModel` and act on it; typing them
against this protocol instead of the model class keeps the imports one-way
(model -> helpers), with no cycle hidden behind `TYPE_CHECKING`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from PySide6.QtCore import QModelIndex, QPersistentModelIndex

from agentdesk.model.tree.nodes import Node


class TreeHost(Protocol):
    def node_index(self, node: Node, column: int = 0) -> QModelIndex: ...
    def beginInsertRows(self, parent: QModelIndex | QPersistentModelIndex, first: int, last: int) -> None: ...
    def endInsertRows(self) -> None: ...
    def beginRemoveRows(self, parent: QModelIndex | QPersistentModelIndex, first: int, last: int) -> None: ...
    def endRemoveRows(self) -> None: ...
    def cells_changed(self, top_left: QModelIndex, bottom_right: QModelIndex, roles: Sequence[int] = ()) -> None:
        """Emit `dataChanged` for these cells."""
        ...
    def report_loaded(self, entity: str, entity_id: str) -> None:
        """Emit `children_loaded`."""
        ...
    def report_failure(self, message: str) -> None:
        """Emit `load_failed`."""
        ...
    def reload(self) -> None: ...
