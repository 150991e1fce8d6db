"""Filtering the project tree by name, status and "has pending approvals".

Filtering is recursive: a row stays when it or any loaded descendant matches,
so a matching run keeps its agent, session, task and project visible. A name
that matches an ancestor keeps the whole branch below it (typing a project's
name shows that project's tree). Only loaded rows can match: children that were
never fetched are not searched (the tree is lazy on purpose).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QSortFilterProxyModel, Qt

from agentdesk.model.tree.model import NAME, PendingRole, StatusRole

Index = QModelIndex | QPersistentModelIndex


class TreeFilterProxy(QSortFilterProxyModel):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setRecursiveFilteringEnabled(True)
        self.setDynamicSortFilter(True)
        self._text = ""
        self._status = ""
        self._pending_only = False

    @property
    def active(self) -> bool:
        return bool(self._text or self._status or self._pending_only)

    def set_text(self, text: str) -> None:
        self._change(lambda: setattr(self, "_text", text.strip().casefold()))

    def set_status(self, status: str) -> None:
        """"" shows every status."""
        self._change(lambda: setattr(self, "_status", status))

    def set_pending_only(self, pending_only: bool) -> None:
        self._change(lambda: setattr(self, "_pending_only", pending_only))

    def set_filters(self, text: str, status: str, pending_only: bool) -> None:
        """All three at once: one refilter however many changed."""
        def apply() -> None:
            self._text, self._status, self._pending_only = text.strip().casefold(), status, pending_only
        self._change(apply)

    def clear(self) -> None:
        def reset() -> None:
            self._text, self._status, self._pending_only = "", "", False
        self._change(reset)

    def _change(self, apply: Callable[[], object]) -> None:
        self.beginFilterChange()
        apply()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        if not self.active:
            return True
        model = self.sourceModel()
        index = model.index(source_row, NAME, source_parent)
        if self._pending_only and not (index.data(PendingRole) or 0) > 0:
            return False
        if self._status and index.data(StatusRole) != self._status:
            return False
        return not self._text or self._name_matches(index)

    def _name_matches(self, index: QModelIndex) -> bool:
        while index.isValid():
            if self._text in str(index.data(Qt.ItemDataRole.DisplayRole) or "").casefold():
                return True
            index = index.parent()
        return False
