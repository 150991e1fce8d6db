"""What the rules feature's two tables share: a flat list of rows under fixed column headers.

Subclasses set `headers` and say how many rows they hold (`row_count`); the Qt
overrides for a flat table (no children, one header row) live here once.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()


class FlatTableModel(QAbstractTableModel):
    headers: tuple[str, ...] = ()

    def row_count(self) -> int:
        raise NotImplementedError  # every subclass knows its rows; the base has none

    def rowCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else self.row_count()

    def columnCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        return None

    def holds(self, index: Index) -> bool:
        """The index points at a row this table has (not the root, not past the end)."""
        return index.isValid() and 0 <= index.row() < self.row_count()
