"""The approval queue's details pane: what was asked, by whom, until when, and with which arguments.

All of it is agent text, so labels are fixed to plain text (Qt would otherwise
guess HTML) and the arguments sit in a read-only `QPlainTextEdit`. The
deadline leads the meta line so the countdown never wraps out of sight.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from agentdesk.model.approvals.format import agent_label, format_left, local_time, pretty_arguments, project_label
from agentdesk.model.approvals.pending import PendingApprovalModel
from agentdesk.store import readmodel as rm


def plain_label(parent: QWidget, text: str = "") -> QLabel:
    """A label that never interprets agent text as HTML; selectable so ids can be copied."""
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def title_text(approval: rm.Approval) -> str:
    return f"{approval.tool_name} · {agent_label(approval)} · {project_label(approval)}"


def deadline_text(approval: rm.Approval, seconds_left: float | None) -> str:
    if seconds_left is None:
        return "Never expires"
    if seconds_left <= 0:
        return f"Expired at {local_time(approval.expires_at)}"
    return f"Expires in {format_left(seconds_left)}"


def meta_text(approval: rm.Approval, seconds_left: float | None) -> str:
    if approval.status == rm.ApprovalStatus.PENDING:
        return (f"{deadline_text(approval, seconds_left)} · requested {local_time(approval.created_at)}"
                f" · {approval.id}")
    who = approval.decided_by or "the runtime"
    reason = f" — reason: {approval.reason}" if approval.reason else ""
    status = str(approval.status).capitalize()
    return f"{status} by {who} at {local_time(approval.decided_at)} · {approval.id}{reason}"


def arguments_text(approval: rm.Approval) -> str:
    text = pretty_arguments(approval.arguments)
    if not approval.edited_arguments:
        return text
    return (f"Approved with edited arguments:\n{pretty_arguments(approval.edited_arguments)}\n\n"
            f"Originally requested:\n{text}")


class ApprovalDetails(QWidget):
    """Title, meta line and arguments of the current approval; the meta line follows the countdown."""

    def __init__(self, pending: PendingApprovalModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pending = pending
        self.title = plain_label(self)
        bold = QFont(self.title.font())
        bold.setBold(True)
        self.title.setFont(bold)
        self.meta = plain_label(self)
        self.arguments = QPlainTextEdit(self)
        self.arguments.setReadOnly(True)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setPlaceholderText("Select an approval to see its arguments.")
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.title)
        box.addWidget(self.meta)
        box.addWidget(self.arguments, 1)

    def show_approval(self, approval: rm.Approval | None) -> None:
        if approval is None:
            self.title.setText("")
            self.meta.setText("")
            self.arguments.setPlainText("")
            return
        self.title.setText(title_text(approval))
        self.refresh_meta(approval)
        text = arguments_text(approval)
        if self.arguments.toPlainText() != text:  # keeps the reader's scroll position across updates
            self.arguments.setPlainText(text)

    def refresh_meta(self, approval: rm.Approval) -> None:
        left = self._pending.seconds_left(approval) if approval.status == rm.ApprovalStatus.PENDING else None
        self.meta.setText(meta_text(approval, left))
