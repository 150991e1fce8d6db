"""Stop asks first: a stopped run cannot be resumed (its agent ends it cancelled at its next checkpoint).

Opened with `open()`, answered through `finished`, never `exec()` (the window's coroutines run on the same
loop). The run's title is agent text: shown as plain text, hidden characters marked.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QVBoxLayout, QWidget

from agentdesk.model.plain import shown_line

CHECKPOINT = "Its agent ends the run as cancelled at its next checkpoint, naming you. A stopped run cannot be resumed."


class StopDialog(QDialog):
    def __init__(self, run_label: str, on_stop: Callable[[str | None], None], parent: QWidget | None = None,
                 consequence: str = CHECKPOINT) -> None:
        super().__init__(parent)
        self.setWindowTitle("Stop this run?")
        self.setObjectName("stop_run_dialog")
        self._on_stop = on_stop
        layout = QVBoxLayout(self)
        question = QLabel(f"Stop “{shown_line(run_label, 120)}”?\n\n{consequence}", self)
        question.setTextFormat(Qt.TextFormat.PlainText)
        question.setWordWrap(True)
        layout.addWidget(question)
        self.reason = QLineEdit(self)
        self.reason.setPlaceholderText("Why (optional; recorded and shown beside the run)")
        layout.addWidget(self.reason)
        buttons = QDialogButtonBox(self)
        self.stop_button = buttons.addButton("Stop run", QDialogButtonBox.ButtonRole.DestructiveRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.stop_button.clicked.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.finished.connect(self._answered)
        self.setMinimumWidth(420)

    def _answered(self, result: int) -> None:
        if result == QDialog.DialogCode.Accepted:
            self._on_stop(self.reason.text().strip() or None)
        self.deleteLater()


def ask_to_stop(parent: QWidget, run_label: str, on_stop: Callable[[str | None], None],
                consequence: str = CHECKPOINT) -> StopDialog:
    dialog = StopDialog(run_label, on_stop, parent, consequence or CHECKPOINT)
    dialog.open()
    return dialog
