"""The context editor's last rows: messages queued for the agent's next model call, each with Cancel.

They are not context yet (the model has not been sent them), so they sit under the tree rather than in it,
marked "pending — queued by alice at 12:03"; once the agent takes one it leaves this list and appears in the
tree as an ordinary item whose role names its author. Text is the operator's but reaches the model: hidden
characters are shown as marks and counted on the row, like approval arguments.
"""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from agentdesk.model.messages.pending import Pending, PendingMessages
from agentdesk.model.plain import shown_line
from agentdesk.model.text import plural
from agentdesk.store.text.times import shown_time
from agentdesk.store.text.visible import findings

PREVIEW_CHARS = 400
MAX_PANEL_PX = 180
FINDINGS_SCAN_CHARS = 100_000


def pending_mark(message_created_at: float, author: str) -> str:
    at = shown_time(datetime.fromtimestamp(message_created_at, UTC), "%H:%M")
    return f"pending — queued by {shown_line(author, 80)} at {at}"


def _label(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class PendingRow(QFrame):
    def __init__(self, row: Pending, cancel: QPushButton) -> None:
        super().__init__()
        self.setObjectName("pendingMessage")
        self.setStyleSheet("#pendingMessage { border: 1px dashed rgba(128, 128, 128, 140); border-radius: 4px; }")
        message = row.message
        self.mark = _label(pending_mark(message.created_at, message.created_by))
        font = self.mark.font()
        font.setItalic(True)
        self.mark.setFont(font)
        hidden = findings(message.content[:FINDINGS_SCAN_CHARS])
        if hidden:
            self.mark.setText(f"{self.mark.text()} · ⚠ {plural(len(hidden), 'hidden character')} (shown as marks)")
        self.text = _label(shown_line(message.content, PREVIEW_CHARS))
        self.text.setToolTip(message.id)
        self.cancel = cancel
        column = QVBoxLayout()
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.mark)
        column.addWidget(self.text)
        line = QHBoxLayout(self)
        line.setContentsMargins(6, 4, 6, 4)
        line.addLayout(column, 1)
        line.addWidget(cancel, 0, Qt.AlignmentFlag.AlignTop)


class PendingPanel(QScrollArea):
    """Hidden while nothing is pending."""

    def __init__(self, model: PendingMessages, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMaximumHeight(MAX_PANEL_PX)
        self.rows: list[PendingRow] = []
        self._body = QWidget()
        self._layout = QVBoxLayout(self._body)
        self._layout.setContentsMargins(0, 2, 0, 2)
        self._layout.setSpacing(4)
        self.setWidget(self._body)
        model.changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        for row in self.rows:
            self._layout.removeWidget(row)
            row.deleteLater()
        self.rows = []
        while self._layout.count():
            self._layout.takeAt(0)
        refusal = self.model.refusal
        for pending in self.model.rows:
            button = QPushButton("Cancelling…" if pending.cancelling else "Cancel")
            button.setEnabled(not pending.cancelling and refusal is None)
            button.setToolTip(refusal or "Cancel this message: the agent will not see it (refused once it was "
                                         "delivered).")
            message_id = pending.message.id
            button.clicked.connect(lambda _=False, m=message_id: self.model.cancel(m))
            row = PendingRow(pending, button)
            self.rows.append(row)
            self._layout.addWidget(row)
        self._layout.addStretch(1)
        self.setVisible(bool(self.rows))
        self._fit()

    def _fit(self) -> None:
        """As tall as its rows at the width it has (the tree keeps the rest), scrolling past MAX_PANEL_PX."""
        if not self.rows:
            return
        width = max(self.viewport().width(), 200)
        wanted = self._layout.heightForWidth(width)
        self.setFixedHeight(min((wanted if wanted > 0 else self._body.sizeHint().height()) + 4, MAX_PANEL_PX))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()
