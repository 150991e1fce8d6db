"""The approval queue's two dialogs: a reason for a denial, and edited arguments checked as you type.

Both are opened with `open()` and report through `finished` (never `exec()`):
the queue keeps running, and qasync never re-enters the event loop.
"""

from __future__ import annotations

import json

from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.approvals.details import plain_label
from agentdesk.gui.shared.palette import readable, status_colour
from agentdesk.model.approval_format import agent_label
from agentdesk.model.plain import shown_line
from agentdesk.store import readmodel as rm
from agentdesk.store.errors import InvalidInput
from agentdesk.store.text.arguments import Inspection, escaped_json
from agentdesk.store.validation import parse_json_arguments


def describe(approvals: list[rm.Approval], limit: int = 4) -> str:
    names = ", ".join(shown_line(f"{a.tool_name} ({agent_label(a)})", 120) for a in approvals[:limit])
    more = f" and {len(approvals) - limit} more" if len(approvals) > limit else ""
    return names + more


def check_arguments(text: str) -> str:
    """"" when the text is acceptable edited arguments, else one sentence saying what is wrong and where."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
    try:
        parse_json_arguments(text)
    except InvalidInput as exc:
        return str(exc)
    return ""


class ReasonDialog(QDialog):
    """Why the operator denies: the agent receives this reason, so it cannot be empty."""

    def __init__(self, approvals: list[rm.Approval], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        count = len(approvals)
        self.setWindowTitle("Deny approval" if count == 1 else f"Deny {count} approvals")
        self.prompt = plain_label(self, f"Deny {describe(approvals)}?\nThe agent receives your reason.")
        self.reason_edit = QPlainTextEdit(self)
        self.reason_edit.setPlaceholderText("Reason (required)")
        self.reason_edit.setTabChangesFocus(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.deny_button: QPushButton = self.buttons.addButton("Deny", QDialogButtonBox.ButtonRole.AcceptRole)
        self.deny_button.setEnabled(False)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.reason_edit.textChanged.connect(
            lambda: self.deny_button.setEnabled(bool(self.reason())))
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addWidget(self.reason_edit, 1)
        layout.addWidget(self.buttons)
        self.resize(420, 220)
        self.reason_edit.setFocus()

    def reason(self) -> str:
        return self.reason_edit.toPlainText().strip()


class EditArgumentsDialog(QDialog):
    """Edit a tool call's arguments; approving records the edit next to the original."""

    def __init__(self, approval: rm.Approval, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(shown_line(f"Edit arguments of {approval.tool_name}", 120))
        self.prompt = plain_label(self, shown_line(
            f"Arguments of {approval.tool_name} requested by {agent_label(approval)} ({approval.id}). "
            "Approving records your edit next to the original; hidden characters are shown as \\u escapes.",
            600))
        self.editor = QPlainTextEdit(self)
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlainText(escaped_json(approval.arguments))  # hidden characters as \uXXXX
        self.editor.setTabChangesFocus(True)
        self.message = plain_label(self)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.approve_button: QPushButton = self.buttons.addButton(
            "Approve with these arguments", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.editor.textChanged.connect(self.validate)
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.message)
        layout.addWidget(self.buttons)
        self.resize(560, 420)
        self.validate()
        self.editor.setFocus()

    def arguments(self) -> str:
        return self.editor.toPlainText()

    def validate(self) -> bool:
        problem = check_arguments(self.arguments())
        palette = self.message.palette()
        colour = status_colour("failed" if problem else "done")
        palette.setColor(QPalette.ColorRole.WindowText, readable(colour, palette))
        self.message.setPalette(palette)
        self.message.setText(f"✖ {problem}" if problem else "✔ Valid JSON object.")
        self.approve_button.setEnabled(not problem)
        return not problem

    def accept(self) -> None:
        if self.validate():  # Enter must not slip past the check
            super().accept()


class ConfirmHiddenDialog(QDialog):
    """The second confirmation an approval with hidden characters needs: what is hidden, then a choice.
    Cancel is the default button, so Enter alone never approves."""

    def __init__(self, approval: rm.Approval, inspection: Inspection, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Approve arguments with hidden characters?")
        self.prompt = plain_label(self, shown_line(
            f"This call to {approval.tool_name} ({approval.id}) {inspection.sentence()}.", 1200)
            + "\n\nWhat runs may differ from what it seems to say. Approve exactly these arguments?")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.approve_button: QPushButton = self.buttons.addButton(
            "Approve anyway", QDialogButtonBox.ButtonRole.AcceptRole)
        self.approve_button.setAutoDefault(False)
        cancel = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        cancel.setDefault(True)
        cancel.setFocus()
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt)
        layout.addWidget(self.buttons)
        self.resize(520, 200)
