"""The dry-run results table: what a draft rule would have decided, differing rows highlighted.

Rows are the pending approvals it would settle now, then the past approvals it
matches, newest first. A row where the rule would have changed what happened
(allowed what a person denied, denied what was approved, decided what expired)
is bold on an amber background and says "differs"; the summary counts them.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QColor, QFont

from agentdesk.model.approval_format import local_time, short_local_time, utc_now
from agentdesk.model.rules.flat_table import FlatTableModel, Index
from agentdesk.model.text import escaped_tooltip, one_line
from agentdesk.store.rules.dryrun import DryRun, DryRunRow

WHEN, TOOL, WOULD, ACTUAL, DIFFERS, DECIDED_BY, ARGUMENTS = range(7)
HEADERS = ("When", "Tool", "Rule would", "Actually", "", "Decided by", "Arguments")
"""The approval id is in each row's tooltip; the arguments, last, take the remaining width."""
DIFFERS_BACKGROUND = QColor(255, 196, 0, 90)
PENDING_BACKGROUND = QColor(64, 140, 255, 60)
DiffersRole = Qt.ItemDataRole.UserRole + 41


class DryRunModel(FlatTableModel):
    headers = HEADERS

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[tuple[DryRunRow, bool]] = []
        self.result: DryRun | None = None
        self._bold = QFont()
        self._bold.setBold(True)

    def show(self, result: DryRun | None) -> None:
        self.beginResetModel()
        self.result = result
        self._rows = [] if result is None else [(r, True) for r in result.pending] + \
            [(r, False) for r in result.rows]
        self.endResetModel()

    def row_at(self, row: int) -> DryRunRow | None:
        return self._rows[row][0] if 0 <= row < len(self._rows) else None

    def row_count(self) -> int:
        return len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not self.holds(index):
            return None
        row, pending = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(row, pending, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return escaped_tooltip(f"approval {row.approval_id}, requested {local_time(row.created_at)}",
                                   row.arguments[:3000])
        if role == DiffersRole:
            return row.differs
        if role == Qt.ItemDataRole.BackgroundRole:
            if row.differs:
                return DIFFERS_BACKGROUND
            return PENDING_BACKGROUND if pending else None
        if role == Qt.ItemDataRole.FontRole and (row.differs or column == WOULD):
            return self._bold
        return None

    @staticmethod
    def _cell(row: DryRunRow, pending: bool, column: int) -> str:
        if column == WHEN:
            return short_local_time(row.created_at, utc_now())
        if column == TOOL:
            return one_line(row.tool, 40)
        if column == WOULD:
            return row.outcome
        if column == ACTUAL:
            return "pending now" if pending else row.actual
        if column == DIFFERS:
            return "differs" if row.differs else ("would settle" if pending and row.outcome != "would-ask"
                                                  else "")
        if column == DECIDED_BY:
            return one_line(row.decided_by or "—", 40)
        return one_line(row.arguments[:400], 160)
