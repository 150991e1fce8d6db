"""A one-line plain-text label that gives way when room is short: the middle of its text becomes "…",
never the end silently, and the whole text is in its tooltip.

For lines whose every part matters but whose width must not decide the window's width (a store path in
the status bar, an agent's model name in a header): a plain QLabel either holds the window wider than the
screen or is cut at an arbitrary letter with no mark.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from agentdesk.model.plain import tooltip


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None, *, min_chars: int = 12,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._min_chars = min_chars
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def setText(self, text: str) -> None:  # type: ignore[override]
        super().setText(text)
        self.setToolTip(tooltip(text) if text else "")

    @property
    def elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self.fontMetrics().averageCharWidth() * self._min_chars), hint.height())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), self._mode, rect.width())
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(),
                                  self.isEnabled(), shown, self.foregroundRole())
