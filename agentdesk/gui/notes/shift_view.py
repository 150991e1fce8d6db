"""Shift notes: everything noted or labelled since a time (8 hours by default), filtered by label.

A dock from the View menu. Double-clicking a line asks the window to reveal what it is about (a span in the
timeline, a run in the tree, an approval in the queue): `reveal(kind, id, run_id)`.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from agentdesk.model.notes.shift import ShiftNotesModel
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.store.notes.labels import SUGGESTED
from agentdesk.store.notes.since import DEFAULT_SINCE

SINCE_CHOICES = ("30m", "2h", DEFAULT_SINCE, "24h", "2d", "1w")


def _edit(combo: QComboBox) -> QLineEdit:
    edit = combo.lineEdit()
    assert edit is not None, "an editable combo box has a line edit"
    return edit


class ShiftNotesView(QWidget):
    reveal = Signal(str, str, str)
    """(kind, id, run id) of the line double-clicked."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = ShiftNotesModel(services, self)
        self.since = QComboBox(self)
        self.since.setEditable(True)
        self.since.addItems(SINCE_CHOICES)
        self.since.setCurrentText(DEFAULT_SINCE)
        self.since.setToolTip("How far back: 30m, 8h, 2d, 1w, or a time such as 2026-12-06T08:00 (UTC)")
        self.label = QComboBox(self)
        self.label.setEditable(True)
        self.label.addItems(["", *SUGGESTED])
        _edit(self.label).setPlaceholderText("any label")
        self.summary = QLabel(textFormat=Qt.TextFormat.PlainText, wordWrap=True)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.doubleClicked.connect(self._open)
        _edit(self.since).returnPressed.connect(self.refresh)
        self.since.activated.connect(lambda _i: self.refresh())
        _edit(self.label).returnPressed.connect(self.refresh)
        self.label.activated.connect(lambda _i: self.refresh())
        self.model.loaded.connect(lambda text: self.summary.setText(shown_line(text, 300)))
        row = QHBoxLayout()
        row.addWidget(QLabel("Since", self))
        row.addWidget(self.since)
        row.addWidget(QLabel("Label", self))
        row.addWidget(self.label, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        self.since.setMinimumContentsLength(6)

    def refresh(self) -> None:
        self.model.load(self.since.currentText().strip() or DEFAULT_SINCE, self.label.currentText())

    def _open(self, index: QModelIndex) -> None:
        entry = self.model.entry_at(index.row())
        if entry is not None:
            self.reveal.emit(entry.target.kind, entry.target.id, entry.target.run_id)
