"""The context tree view, spoken to in ids: rows are selected, read and restored by key.

Indexes die with every reload's row operations, so the view remembers what was
current as a (kind, id) key, and a command that knows what should be selected
once its reload arrives (the new summary after a compaction, the first restored
item after an undo) leaves a key for `restore_selection` to pick up.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeView, QWidget

from agentdesk.model.context.model import LOCKED, PREVIEW, TOKENS, VISIBLE, ContextModel
from agentdesk.model.context.tree import GroupRow, ItemRow, Row

Key = tuple[str, str]
COLUMN_WIDTHS = ((0, 210), (1, 80), (TOKENS, 70), (VISIBLE, 62), (LOCKED, 62))


class ContextTreeView(QTreeView):
    def __init__(self, model: ContextModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._context = model
        self._current: Key | None = None
        self._select_next: Callable[[], Key | None] | None = None
        self.setModel(model)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setUniformRowHeights(True)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(PREVIEW, QHeaderView.ResizeMode.Stretch)
        for column, width in COLUMN_WIDTHS:
            self.setColumnWidth(column, width)
        model.rowsInserted.connect(self._expand_new_groups)
        self.selectionModel().currentChanged.connect(self._remember_current)

    def current_value(self) -> Row | None:
        return self._context.row_value(self.currentIndex())

    def selected_item_ids(self) -> list[str]:
        """Selected items in context order; a selected group row stands for its items."""
        chosen: set[str] = set()
        for index in self.selectionModel().selectedRows(0):
            value = self._context.row_value(index)
            if isinstance(value, ItemRow):
                chosen.add(value.item.id)
            elif isinstance(value, GroupRow):
                chosen.update(self._context.group_item_ids(value.group.id))
        snapshot = self._context.snapshot
        return [i.id for i in snapshot.items if i.id in chosen] if snapshot else []

    def select_key(self, key: Key) -> None:
        index = self._context.index_of(*key)
        if index.isValid():
            self.scrollTo(index)
            self.setCurrentIndex(index)

    def select_after_reload(self, wanted: Callable[[], Key | None]) -> None:
        """`wanted` is asked after each reload until the row it names exists."""
        self._select_next = wanted

    def forget_current(self) -> None:
        self._current = None

    def restore_selection(self) -> None:
        wanted = self._select_next() if self._select_next else None
        if wanted is not None and self._context.index_of(*wanted).isValid():
            self._select_next = None
            self.select_key(wanted)
        elif not self.currentIndex().isValid() and self._current is not None:
            self.select_key(self._current)

    def _remember_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        value = self._context.row_value(current)
        if value is not None:
            self._current = value.key

    def _expand_new_groups(self, parent: QModelIndex, first: int, last: int) -> None:
        if not parent.isValid():
            for row in range(first, last + 1):
                self.expand(self._context.index(row, 0))
