"""How tree rows look: status as a coloured dot plus symbol and word, pending approvals as a badge.

Kept apart from the widget so other views (the approval queue, its dialogs)
can share the status colours without pulling in the tree.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QRect, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QHelpEvent, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QToolTip

from agentdesk.gui.shared.palette import STATUS_SYMBOLS, readable, status_colour
from agentdesk.model.plain import shown_tooltip
from agentdesk.model.tree.model import NAME, PENDING, STATUS, EntityRole, PendingRole, StatusRole

Index = QModelIndex | QPersistentModelIndex
BADGE_COLOUR = "#f0a020"
MARK_COLOUR = "#d4a017"
"""The flag on a run an operator noted or labelled (the timeline flags its spans in the same gold)."""
FALLBACK_SYMBOLS = {"waiting": "‖"}
"""For fonts without the shared symbol (⏸ is missing from many)."""


def status_symbol(status: str, metrics: QFontMetrics) -> str:
    symbol = STATUS_SYMBOLS.get(status, "•")
    if not metrics.inFontUcs4(ord(symbol[0])):
        symbol = FALLBACK_SYMBOLS.get(status, "•")
    return symbol


class StatusIcons:
    """A coloured dot per status, painted once and cached."""

    def __init__(self, size: int = 12) -> None:
        self._size = size
        self._icons: dict[str, QIcon] = {}

    def __call__(self, status: str) -> QIcon:
        icon = self._icons.get(status)
        if icon is None:
            icon = self._icons[status] = self._paint(status)
        return icon

    def _paint(self, status: str) -> QIcon:
        scale = 2
        pixmap = QPixmap(self._size * scale, self._size * scale)
        pixmap.setDevicePixelRatio(scale)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colour = status_colour(status)
        inset = 1.5
        diameter = self._size - 2 * inset
        if status in ("idle", "cancelled"):  # hollow: nothing is happening
            painter.setPen(colour)
            painter.setBrush(Qt.BrushStyle.NoBrush)
        else:
            painter.setPen(colour.darker(120))
            painter.setBrush(colour)
        painter.drawEllipse(int(inset), int(inset), int(diameter), int(diameter))
        painter.end()
        icon = QIcon(pixmap)
        icon.addPixmap(pixmap, QIcon.Mode.Selected)  # keep the colour on the highlighted row
        return icon


class TreeDelegate(QStyledItemDelegate):
    """Status as symbol + word in its colour; pending approvals as an orange count badge; a flag on runs
    operators noted or labelled (`marked`: run id -> "" or a short text, set by the window)."""

    marked: Callable[[str], str] | None = None

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:
        super().initStyleOption(option, index)
        if index.column() == STATUS:
            status = str(index.data(StatusRole) or "")
            option.text = f"{status_symbol(status, option.fontMetrics)} {status}"  # type: ignore[attr-defined]
            if not option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
                palette = option.palette  # type: ignore[attr-defined]
                palette.setColor(QPalette.ColorRole.Text, readable(status_colour(status), palette))
        elif index.column() == PENDING:
            option.text = ""  # type: ignore[attr-defined]  # painted as a badge

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        super().paint(painter, option, index)
        count = int(index.data(PendingRole) or 0) if index.column() == PENDING else 0
        if count > 0:
            self._badge(painter, option.rect, str(count))  # type: ignore[attr-defined]
        if self.marked is not None and index.column() == NAME:
            entity = index.data(EntityRole)
            if entity and entity[0] == "run" and self.marked(entity[1]):
                self._flag(painter, option.rect)  # type: ignore[attr-defined]

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem,
                  index: Index) -> bool:
        """A marked run's tooltip also says what is on it ("⚑ needs-review · 2 notes")."""
        entity = index.data(EntityRole) if self.marked is not None and index.column() == NAME else None
        text = self.marked(entity[1]) if self.marked is not None and entity and entity[0] == "run" else ""
        if not text or event.type() != QEvent.Type.ToolTip:
            return super().helpEvent(event, view, option, index)
        original = str(index.data(Qt.ItemDataRole.ToolTipRole) or "")
        lines = [original, text] if original and not original.startswith("<qt>") else [text]
        QToolTip.showText(event.globalPos(), shown_tooltip(*lines), view)
        return True

    @staticmethod
    def _flag(painter: QPainter, cell: QRect) -> None:
        """A gold flag at the right end of the name: the run holds notes or labels (the tooltip says which)."""
        painter.save()
        colour = QColor(MARK_COLOUR)
        x, top, height = cell.right() - 10, cell.top() + 3, max(8, cell.height() - 6)
        painter.fillRect(QRect(x, top, 1, height), colour)
        painter.fillRect(QRect(x + 1, top, 6, max(4, height // 2)), colour)
        painter.restore()

    @staticmethod
    def _badge(painter: QPainter, cell: QRect, text: str) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        font = QFont(painter.font())
        font.setBold(True)
        painter.setFont(font)
        height = max(12, cell.height() - 6)
        width = max(height, painter.fontMetrics().horizontalAdvance(text) + 10)
        badge = QRect(cell.center().x() - width // 2, cell.center().y() - height // 2 + 1, width, height)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(BADGE_COLOUR))
        painter.drawRoundedRect(badge, height / 2, height / 2)
        painter.setPen(QColor("#1b1300"))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()
