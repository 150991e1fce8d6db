"""One merged waterfall of two runs: a row per aligned span, its bar coloured by how it changed.

Painted directly (no item per row) and only for the rows in the exposed rect,
so a diff of many thousand rows scrolls as fast as one of ten.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QToolTip, QWidget

from agentdesk.model.diff.rows import DiffRows
from agentdesk.model.plain import shown_tooltip
from agentdesk.store.analysis.align import Change

ROW_H = 20
LABEL_W = 340
DETAIL_W = 150
INDENT = 12
CHANGE_COLOURS: dict[Change, str] = {
    Change.SAME: "#8b949e",
    Change.SLOWER: "#e5484d",
    Change.FASTER: "#30a46c",
    Change.ADDED: "#3aa0ff",
    Change.REMOVED: "#b07cd8",
}
FLAG = "⚑"
"""Drawn before a row's label when an operator labelled or noted the span on either side."""
FLAG_COLOUR = "#d4a017"
MARKS = {Change.SAME: " ", Change.SLOWER: "▲", Change.FASTER: "▼", Change.ADDED: "+", Change.REMOVED: "-"}


class DiffWaterfall(QWidget):
    row_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: DiffRows | None = None
        self.setMouseTracking(True)
        self.setMinimumWidth(LABEL_W + DETAIL_W + 200)

    def set_rows(self, rows: DiffRows | None) -> None:
        self._rows = rows
        self.setMinimumHeight(ROW_H * (len(rows.rows) if rows else 0) + 4)
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        count = len(self._rows.rows) if self._rows else 0
        return QSize(1000, ROW_H * count + 4)

    def row_at(self, y: int) -> int | None:
        if self._rows is None:
            return None
        index = y // ROW_H
        return index if 0 <= index < len(self._rows.rows) else None

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        palette = self.palette()
        painter.fillRect(event.rect(), palette.color(QPalette.ColorRole.Base))
        if self._rows is None:
            return
        rows = self._rows.rows
        first = max(0, event.rect().top() // ROW_H)
        last = min(len(rows) - 1, event.rect().bottom() // ROW_H)
        bars_x = LABEL_W
        bars_w = max(10, self.width() - LABEL_W - DETAIL_W - 8)
        scale = bars_w / self._rows.span
        text = palette.color(QPalette.ColorRole.Text)
        dim = palette.color(QPalette.ColorRole.PlaceholderText)
        for index in range(first, last + 1):
            row = rows[index]
            y = index * ROW_H
            colour = QColor(CHANGE_COLOURS[row.change])
            if index % 2:
                painter.fillRect(QRect(0, y, self.width(), ROW_H), palette.color(QPalette.ColorRole.AlternateBase))
            painter.setPen(colour)
            painter.drawText(QRect(4, y, 14, ROW_H), Qt.AlignmentFlag.AlignCenter, MARKS[row.change])
            painter.setPen(dim if row.change is Change.SAME else text)
            indent = 20 + min(row.depth, 16) * INDENT
            if row.marks:
                painter.setPen(QColor(FLAG_COLOUR))
                painter.drawText(QRect(indent, y, 14, ROW_H), Qt.AlignmentFlag.AlignCenter, FLAG)
                painter.setPen(dim if row.change is Change.SAME else text)
                indent += 16
            painter.drawText(QRect(indent, y, LABEL_W - indent - 6, ROW_H),
                             Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextSingleLine,
                             painter.fontMetrics().elidedText(row.label, Qt.TextElideMode.ElideRight,
                                                              LABEL_W - indent - 6))
            x0 = bars_x + int(row.start * scale)
            width = max(2, int((row.end - row.start) * scale))
            fill = QColor(colour)
            if row.change is Change.SAME:
                fill.setAlpha(110)
            painter.fillRect(QRect(x0, y + 4, width, ROW_H - 8), fill)
            painter.setPen(dim if row.change is Change.SAME else colour)
            painter.drawText(QRect(self.width() - DETAIL_W, y, DETAIL_W - 6, ROW_H),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, row.detail)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        index = self.row_at(int(event.position().y()))
        if index is None or self._rows is None:
            QToolTip.hideText()
            return
        row = self._rows.rows[index]
        QToolTip.showText(event.globalPosition().toPoint(),
                          shown_tooltip(f"{row.change.value}: {row.label}", f"{row.kind} · {row.detail}",
                                        *([f"marked: {row.marks}"] if row.marks else [])), self)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        index = self.row_at(int(event.position().y()))
        if index is not None:
            self.row_clicked.emit(index)
