"""The "also looking: bob, carol" line under the selected approval (PostgreSQL team stores only).

Why a line and not a badge per row: presence is about the approval being read now,
and the line sits where the operator's eyes are before deciding. Hidden when
nobody else looks (always, on SQLite). Login names are shown as plain text.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from agentdesk.model.approvals.presence import also_looking

TIP = ("Other database logins with this approval selected in their window within the last 30 s; "
       "whoever decides first wins, the other is told who and when.")


class PresenceLine(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        self.setToolTip(TIP)
        self.setStyleSheet("color: palette(link); font-style: italic")
        self.hide()

    def show_others(self, _approval_id: str, logins: list[str]) -> None:
        text = also_looking(logins)
        self.setText(text)
        self.setVisible(bool(text))
