"""The approval queue's two tables: row selection, column widths and the colours that carry urgency.

Column widths are chosen so the dock's default width (about 450 px) shows the
tool, the countdown and the age of every pending approval without scrolling,
and who decided what and when in the decided table; the last column (arguments
or reason) takes whatever room is left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from agentdesk.gui.shared.palette import readable, status_colour
from agentdesk.model.approvals.decided import D_STATUS, DecidedApprovalModel
from agentdesk.model.approvals.model import ApprovalTableModel
from agentdesk.model.approvals.pending import EXPIRES, PendingApprovalModel, SecondsLeftRole

Index = QModelIndex | QPersistentModelIndex
TextColour = Callable[[Index, QPalette], QColor | None]

PENDING_WIDTHS = (96, 70, 64, 84, 110)
"""Tool, Expires in, Age, Agent, Project; Arguments stretches."""
DECIDED_WIDTHS = (68, 96, 80, 64, 74, 52)
"""Status, Tool, Agent, Actor, Decided at, Edited; Reason stretches."""


def countdown_colour(index: Index, palette: QPalette) -> QColor | None:
    """Orange under a minute, grey once expired: the rows that need a decision now stand out."""
    left = index.data(SecondsLeftRole) if index.column() == EXPIRES else None
    if left is None:
        return None
    if left <= 0:
        return palette.color(QPalette.ColorRole.PlaceholderText)
    return readable(status_colour("waiting"), palette) if left < 60 else None


def status_text_colour(index: Index, palette: QPalette) -> QColor | None:
    if index.column() != D_STATUS:
        return None
    return readable(status_colour(str(index.data())), palette)


class _TextColourDelegate(QStyledItemDelegate):
    """Recolours a cell's text; the colour comes from a function of the cell and the current palette."""

    def __init__(self, colour: TextColour, parent: QWidget) -> None:
        super().__init__(parent)
        self._colour = colour

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:
        super().initStyleOption(option, index)
        palette: QPalette = option.palette  # type: ignore[attr-defined]
        colour = self._colour(index, palette)
        if colour is not None:
            palette.setColor(QPalette.ColorRole.Text, colour)


def approval_table(model: ApprovalTableModel, parent: QWidget, colour: TextColour,
                   widths: Sequence[int]) -> QTableView:
    table = QTableView(parent)
    table.setModel(model)
    table.setItemDelegate(_TextColourDelegate(colour, table))
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.setShowGrid(False)
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    header = table.horizontalHeader()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    header.setHighlightSections(False)
    for column, width in enumerate(widths):
        header.resizeSection(column, width)
    return table


def pending_table(model: PendingApprovalModel, parent: QWidget) -> QTableView:
    return approval_table(model, parent, countdown_colour, PENDING_WIDTHS)


def decided_table(model: DecidedApprovalModel, parent: QWidget) -> QTableView:
    return approval_table(model, parent, status_text_colour, DECIDED_WIDTHS)


def selected_rows(table: QTableView) -> list[int]:
    return sorted(index.row() for index in table.selectionModel().selectedRows())


def select_row(table: QTableView, row: int) -> None:
    """Make `row` the only selected row and the current one, scrolled into view."""
    index = table.model().index(row, 0)
    flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
    table.selectionModel().setCurrentIndex(index, flags)
    table.scrollTo(index)
