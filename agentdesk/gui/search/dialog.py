"""Search every run: a query line, the count, results grouped by run; activating a hit opens it.

Non-modal, so the operator can keep it open beside the timeline and step
through hits. The query runs on the runner (`SearchResults`); a bad query shows
its one sentence under the line instead of results.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from agentdesk.model.search.results import HIT_ROLE, SearchResults
from agentdesk.model.services import Services

HELP = ("Words find span names, inputs and outputs, approvals and context items. "
        "Narrow spans with kind:tool, status:error, dur>2s, name:plan or any attribute key:value; "
        "find what operators marked with label:needs-review or note:words.")


class SearchDialog(QDialog):
    open_hit = Signal(str, str)
    """(run id, span id or ""): show that run, at that span."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Search all runs")
        self.resize(900, 600)
        self.results = SearchResults(services, self)
        self.results.finished.connect(self._finished)
        self.query = QLineEdit(self)
        self.query.setPlaceholderText('e.g. payments.py kind:tool   or   "retry budget" status:error')
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.run_query)
        go = QPushButton("Search", self)
        go.clicked.connect(self.run_query)
        self.status = QLabel(HELP, self)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.view = QTreeView(self)
        self.view.setModel(self.results)
        self.view.setUniformRowHeights(True)
        self.view.setAlternatingRowColors(True)
        self.view.activated.connect(self._activated)
        self.view.doubleClicked.connect(self._activated)
        header = self.view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        line = QHBoxLayout()
        line.addWidget(self.query, 1)
        line.addWidget(go)
        layout = QVBoxLayout(self)
        layout.addLayout(line)
        layout.addWidget(self.status)
        layout.addWidget(self.view, 1)

    def start(self, text: str = "") -> None:
        """Show, focus the query line (keeping the last query selected for retyping)."""
        if text:
            self.query.setText(text)
        self.show()
        self.raise_()
        self.activateWindow()
        self.query.setFocus()
        self.query.selectAll()

    def run_query(self) -> None:
        self.status.setText("Searching…")
        self.results.search(self.query.text())

    def _finished(self, message: str) -> None:
        self.status.setText(message)
        self.view.expandAll()

    def _activated(self, index: QModelIndex) -> None:
        target = index.siblingAtColumn(0).data(HIT_ROLE)
        if target:
            run_id, span_id = target
            self.open_hit.emit(run_id, span_id)
