"""A dock that folds to a narrow strip while it has nothing to show, and opens again when it has.

The approval queue with nothing pending is a third of a 1366 px window doing nothing: folded, the
timeline gets that width; the strip still says what is there ("Approvals · none pending") and a click
(or Ctrl+4) opens it. New pending approvals open it by themselves.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QDockWidget, QMainWindow, QStackedWidget, QWidget

STRIP_PX = 28


class VerticalStrip(QWidget):
    """The folded dock: its title written upwards; a click opens the dock."""

    clicked = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._text = text
        self.setFixedWidth(STRIP_PX)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Open (Ctrl+4)")

    def set_text(self, text: str) -> None:
        self._text = text
        self.update()

    def text(self) -> str:
        return self._text

    def sizeHint(self) -> QSize:
        return QSize(STRIP_PX, self.fontMetrics().horizontalAdvance(self._text) + 24)

    def minimumSizeHint(self) -> QSize:
        return QSize(STRIP_PX, 40)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.translate(0, self.height())
        painter.rotate(-90)
        area = QRectF(8, 0, self.height() - 16, self.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        shown = self.fontMetrics().elidedText(self._text, Qt.TextElideMode.ElideRight, int(area.width()))
        painter.drawText(area, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()


class FoldingDock:
    """Puts `content` in `dock` with a strip beside it; `fold()` / `unfold()` switch between them."""

    def __init__(self, window: QMainWindow, dock: QDockWidget, content: QWidget, min_width: int) -> None:
        self._window, self._dock, self._min_width = window, dock, min_width
        self.stack = QStackedWidget(dock)
        self.stack.addWidget(content)
        self.strip = VerticalStrip(dock.windowTitle(), self.stack)
        self.stack.addWidget(self.strip)
        self.strip.clicked.connect(self.unfold)
        dock.setWidget(self.stack)
        self._width = min_width

    @property
    def folded(self) -> bool:
        return self.stack.currentWidget() is self.strip

    def fold(self, text: str) -> None:
        self.strip.set_text(text)
        if self.folded:
            return
        self._width = max(self._dock.width(), self._min_width)
        self.stack.setCurrentWidget(self.strip)
        self._dock.setMinimumWidth(STRIP_PX)
        self._dock.setMaximumWidth(STRIP_PX + 8)

    def unfold(self) -> None:
        if not self.folded:
            return
        self.stack.setCurrentIndex(0)
        self._dock.setMaximumWidth(16_777_215)
        self._dock.setMinimumWidth(self._min_width)
        self._window.resizeDocks([self._dock], [self._width], Qt.Orientation.Horizontal)
