"""The "Add note / label…" dialog: a note, the suggested labels as checkboxes, and one of your own.

Opened with `open()` (never `exec()`: the window is a qasync loop); its answer is a `MarkRequest` the caller
writes on the runner. A custom label is checked as it is typed (`label_problem`), so a label with a hidden
character is refused here, in words, before anything reaches the store.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.shared.flow import FlowLayout, HeightForWidth
from agentdesk.model.notes.writes import MarkRequest
from agentdesk.model.plain import shown_line
from agentdesk.store.errors import StoreError
from agentdesk.store.notes.labels import MAX_NOTE_BYTES, SUGGESTED, check_note, label_problem
from agentdesk.store.notes.marks import Target


def _plain(text: str = "") -> QLabel:
    label = QLabel(text, textFormat=Qt.TextFormat.PlainText, wordWrap=True)
    return label


class MarkDialog(QDialog):
    chosen = Signal(object)
    """The `MarkRequest` the operator accepted."""

    def __init__(self, target: Target, current: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.target, self.current = target, current
        self.setWindowTitle("Add note / label")
        self.heading = _plain(shown_line(f"On {target.kind} {target.id} (run {target.run_id})", 200))
        self.note = QPlainTextEdit(self)
        self.note.setPlaceholderText("A note for the next shift (plain text, optional)")
        self.checks: dict[str, QCheckBox] = {}
        chips = QWidget(self)
        flow = FlowLayout(chips, spacing=10)
        for label in dict.fromkeys((*SUGGESTED, *current)):
            box = QCheckBox(shown_line(label, 64), chips)
            box.setChecked(label in current)
            self.checks[label] = box
            flow.addWidget(box)
        HeightForWidth(chips)
        self.custom = QLineEdit(self)
        self.custom.setPlaceholderText("your own label, e.g. flaky-network")
        self.custom.setMaxLength(200)  # long enough to say why it is too long
        self.problem = _plain()
        self.problem.setStyleSheet("color: #c62828;")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        self.custom.textChanged.connect(self._check)
        self.note.textChanged.connect(self._check)
        layout = QVBoxLayout(self)
        for widget in (self.heading, self.note, _plain("Labels:"), chips, self.custom, self.problem, self.buttons):
            layout.addWidget(widget)
        self.resize(520, 420)
        self._check()

    def request(self) -> MarkRequest:
        wanted = {label for label, box in self.checks.items() if box.isChecked()}
        custom = self.custom.text().strip()
        if custom:
            wanted.add(custom)
        return MarkRequest(self.target, self.note.toPlainText(), tuple(sorted(wanted - set(self.current))),
                           tuple(sorted(set(self.current) - wanted)))

    def _problem(self) -> str | None:
        custom = self.custom.text().strip()
        if custom and (why := label_problem(custom)) is not None:
            return why
        text = self.note.toPlainText()
        if len(text) > MAX_NOTE_BYTES // 4 and text.strip():
            try:
                check_note(text)
            except StoreError as exc:
                return str(exc)
        return None

    def _check(self) -> None:
        problem = self._problem()
        self.problem.setText(problem or "")
        self.problem.setVisible(problem is not None)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(problem is None)

    def _accept(self) -> None:
        if self._problem() is None:
            self.chosen.emit(self.request())
            self.accept()
