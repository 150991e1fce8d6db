"""The "Shift notes" table: everything noted or labelled since a time, newest first, with who wrote it.

Read on the runner (`store.notes.reads.since`), again on every note or label change, so a note written in
another window appears here. Every cell is agent-safe plain text (`shown_line`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal

from agentdesk.model.notes.cache import MARK_ENTITIES
from agentdesk.model.plain import shown_line, tooltip
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.errors import StoreError
from agentdesk.store.notes import reads
from agentdesk.store.notes.marks import Entry
from agentdesk.store.notes.since import DEFAULT_SINCE, since_time
from agentdesk.store.persistence.bus import Change, ChangeOp
from agentdesk.store.persistence.database import Store, own_store

HEADERS = ("When", "Who", "What", "On", "Labels", "Text")
EntryRole = Qt.ItemDataRole.UserRole + 1
Index = QModelIndex | QPersistentModelIndex


class ShiftNotesModel(QAbstractTableModel):
    loaded = Signal(str)
    """A summary line ("12 entries since 00:14"), or one sentence saying why nothing could be read."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.store = own_store(services.source)
        self.entries: list[Entry] = []
        self.since_text, self.label = DEFAULT_SINCE, ""
        self._latest = LatestTask(services.runner, on_error=self._failed)
        services.bridge.changes.connect(self._on_changes)

    def load(self, since_text: str | None = None, label: str | None = None) -> None:
        if since_text is not None:
            self.since_text = since_text
        if label is not None:
            self.label = label.strip()
        if self.store is None:
            self.loaded.emit("This source keeps no notes or labels: they live in agentdesk's own store.")
            return
        try:
            at = since_time(self.since_text, time.time())
        except StoreError as exc:
            self.loaded.emit(str(exc))
            return
        self._latest.start(self._read(self.store, at, self.label.casefold() or None))

    async def _read(self, store: Store, at: float, label: str | None) -> None:
        self._show(await self.services.runner.run(reads.since, store, at, label), at)

    def _show(self, entries: list[Entry], at: float) -> None:
        self.beginResetModel()
        self.entries = entries
        self.endResetModel()
        since = datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")
        only = f" labelled {self.label}" if self.label else ""
        self.loaded.emit(f"{len(entries):,} entr{'y' if len(entries) == 1 else 'ies'}{only} since {since}")

    def _failed(self, exc: BaseException) -> None:
        self.loaded.emit(str(exc) if isinstance(exc, StoreError) else f"Could not read the notes: {exc}.")

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.entity in MARK_ENTITIES or c.op == ChangeOp.RESET for c in changes):
            self.load()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.entries)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        entry = self.entries[index.row()]
        if role == EntryRole:
            return entry
        if role == Qt.ItemDataRole.DisplayRole:
            return cell(entry, index.column())
        if role == Qt.ItemDataRole.ToolTipRole and index.column() == 5:
            return tooltip(entry.text)
        return None

    def entry_at(self, row: int) -> Entry | None:
        return self.entries[row] if 0 <= row < len(self.entries) else None


def cell(entry: Entry, column: int) -> str:
    if column == 0:
        return datetime.fromtimestamp(entry.at).strftime("%Y-%m-%d %H:%M")
    if column == 1:
        login = f" ({entry.author_login})" if entry.author_login and entry.author_login != entry.author else ""
        return shown_line(entry.author + login, 60)
    if column == 2:
        return entry.what
    if column == 3:
        return shown_line(f"{entry.target.kind} {entry.target.id}", 60)
    if column == 4:
        return shown_line(", ".join(entry.labels), 80)
    return shown_line(entry.text, 200)
