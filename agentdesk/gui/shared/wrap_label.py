"""A plain-text label that wraps at word boundaries, and inside a word that is wider than the label.

QLabel's word wrap never breaks a word: one long word (an agent's 150-character tool name, a reason
pasted without spaces) makes the label, and every pane holding it, as wide as that word, and a pane
that cannot grow cuts it off with no mark. Here the word breaks where the line ends, so the label is
never wider than its parent gives it and every character stays in view.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QTextLayout, QTextOption
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class WrapAnywhereLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.setText(text)

    def _laid_out(self, width: int) -> tuple[QTextLayout, int]:
        layout = QTextLayout(self.text(), self.font())
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        layout.setTextOption(option)
        layout.beginLayout()
        y = 0.0
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(max(1, width))
            line.setPosition(QPointF(0, y))
            y += line.height()
        layout.endLayout()
        return layout, math.ceil(y)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        m = self.contentsMargins()
        inner = width - m.left() - m.right()
        return max(self.fontMetrics().height(), self._laid_out(inner)[1]) + m.top() + m.bottom()

    def minimumSizeHint(self) -> QSize:
        m = self.contentsMargins()
        return QSize(self.fontMetrics().averageCharWidth() * 6 + m.left() + m.right(),
                     self.fontMetrics().height() + m.top() + m.bottom())

    def sizeHint(self) -> QSize:
        m = self.contentsMargins()
        width = min(self.fontMetrics().horizontalAdvance(self.text()), 400) + m.left() + m.right()
        return QSize(width, self.heightForWidth(width))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        layout, _ = self._laid_out(rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        layout.draw(painter, QPointF(rect.topLeft()))
