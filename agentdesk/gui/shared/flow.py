"""A layout that wraps its widgets onto the next line when the row is full (Qt's flow-layout example).

Button rows in narrow docks use it: a row of fixed buttons in a QHBoxLayout makes the dock as wide as
all of them together, and a dock narrower than that hides the last buttons off its edge. Wrapped, the
row is only as wide as its widest button and every button stays in view.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMargins, QObject, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QWidget


class FlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._gap = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        """All on one line when there is room."""
        visible = [item.sizeHint() for item in self._shown()]
        width = sum(s.width() for s in visible) + self._gap * max(0, len(visible) - 1)
        height = max((s.height() for s in visible), default=0)
        return QSize(width, height) + self._margin_size()

    def minimumSize(self) -> QSize:
        """One button per line: as narrow as the widest button."""
        size = QSize()
        for item in self._shown():
            size = size.expandedTo(item.minimumSize())
        return size + self._margin_size()

    def _margin_size(self) -> QSize:
        m: QMargins = self.contentsMargins()
        return QSize(m.left() + m.right(), m.top() + m.bottom())

    def _shown(self) -> list[QLayoutItem]:
        return [item for item in self._items if not item.isEmpty()]

    def _place(self, rect: QRect, *, move: bool) -> int:
        """Lay the items out left to right, wrapping; the height used."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, line_height = area.x(), area.y(), 0
        for item in self._shown():
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, line_height = area.x(), y + line_height + self._gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), QSize(min(hint.width(), area.width()), hint.height())))
            x += hint.width() + self._gap
            line_height = max(line_height, hint.height())
        return y + line_height - rect.y() + m.bottom()


def flow_of(*widgets: QWidget) -> FlowLayout:
    flow = FlowLayout()
    for widget in widgets:
        widget.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        flow.addWidget(widget)
    return flow


class HeightForWidth(QObject):
    """Gives a wrapping widget the height its width needs where the parent layout does not ask for it
    (a tab widget, a splitter or a main window's centre): without it, a label wrapped onto a second line
    keeps one line's height and shows the middle of its text, cut at the top and the bottom."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self._widget = widget
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._widget and event.type() == QEvent.Type.Resize:
            needed = self._widget.heightForWidth(self._widget.width())
            if needed > 0 and needed != self._widget.minimumHeight():
                self._widget.setMinimumHeight(needed)
        return False
