"""The row cache and bus handling shared by the approval queue's two table models.

Each model keeps its own list of read-model `Approval` values. A bus `approval`
change re-reads just the changed approvals on the runner (one call per batch)
and applies the answer with exact row inserts, removals and `dataChanged`: a
pending approval decided elsewhere leaves the pending table, and `left` says
with what outcome and by whom. Reads complete out of order on the pool, so
they go through `model.tasks.Tickets`: each answer carries its ticket, an answer
older than what an approval already shows is dropped, and a full reload drops
every read issued before it (cancelled on the qasync loop).

The tables themselves are `pending.PendingApprovalModel` and
`decided.DecidedApprovalModel`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal

from agentdesk.model.approval_format import Clock, utc_now
from agentdesk.model.plain import shown_line, shown_tooltip
from agentdesk.model.services import Services
from agentdesk.model.tasks import Tickets
from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.source import Source

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()
Reader = tuple[Callable[..., list[rm.Approval]], tuple[Any, ...]]
"""A function the runner calls to read a whole table, and its arguments."""

ApprovalRole = Qt.ItemDataRole.UserRole + 11
"""The row's `rm.Approval`."""
ApprovalIdRole = Qt.ItemDataRole.UserRole + 12


def read_approvals(source: Source, ids: Sequence[str]) -> dict[str, rm.Approval | None]:
    """Runs on the pool: the current state of each approval (None when it is gone)."""
    found: dict[str, rm.Approval | None] = {}
    for approval_id in ids:
        try:
            found[approval_id] = source.approval(approval_id)
        except NotFound:
            found[approval_id] = None
    return found


class ApprovalTableModel(QAbstractTableModel):
    """Shared row cache and bus handling; subclasses say which approvals belong and how they look."""

    headers: tuple[str, ...] = ()
    loaded = Signal()
    left = Signal(str, object)
    """An approval left this table: its id and new state (None when it was deleted)."""

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now,
                 limit: int = 1000) -> None:
        super().__init__(parent)
        self._source = services.source
        self._runner = services.runner
        self._clock = clock
        self._limit = limit
        self._rows: list[rm.Approval] = []
        self._latest = Tickets(services.runner)
        self._loading = False
        self._deferred: dict[str, None] = {}
        self.is_loaded = False
        services.bridge.changes.connect(self._on_changes)
        self.reload()

    # -- subclass hooks -------------------------------------------------------------------
    def _accepts(self, approval: rm.Approval) -> bool:
        raise NotImplementedError

    def _sort_key(self, approval: rm.Approval) -> tuple[Any, ...]:
        raise NotImplementedError

    def _read_all(self) -> Reader:
        raise NotImplementedError

    def _cell(self, approval: rm.Approval, column: int) -> str:
        raise NotImplementedError

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        return shown_tooltip(self._cell(approval, column), shown_line(f"approval {approval.id}"))

    def _extra(self, approval: rm.Approval, column: int, role: int) -> Any:
        """Roles beyond text, tooltip and identity (colours, fonts, alignment)."""
        return None

    # -- Qt model -------------------------------------------------------------------------
    def rowCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = TOP) -> int:
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(self.headers):
            return self.headers[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        approval = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(approval, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(approval, index.column())
        if role == ApprovalRole:
            return approval
        if role == ApprovalIdRole:
            return approval.id
        return self._extra(approval, index.column(), role)

    # -- lookups --------------------------------------------------------------------------
    def approval_at(self, row: int) -> rm.Approval | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, approval_id: str) -> int:
        return next((n for n, a in enumerate(self._rows) if a.id == approval_id), -1)

    def ids(self) -> list[str]:
        return [a.id for a in self._rows]

    # -- loading and changes --------------------------------------------------------------
    def reload(self) -> None:
        """Read the whole table again; answers to reads issued before this one are dropped."""
        self._loading = True
        self._deferred.clear()  # the full read covers them
        read, args = self._read_all()
        self._latest.cancel()
        self._latest.add(lambda ticket: self._read(ticket, self._loaded, read, *args), on_error=self._load_error)

    def refresh(self, ids: Iterable[str]) -> None:
        """Re-read these approvals (after a change, or a decision that lost a race)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return
        if self._loading:
            self._deferred.update(dict.fromkeys(wanted))
            return
        self._latest.add(lambda ticket: self._read(ticket, self._apply, read_approvals, self._source, wanted),
                         on_error=self._load_error)

    async def _read(self, ticket: int, apply: Callable[[Any, int], None], fn: Callable[..., Any],
                    *args: Any) -> None:
        apply(await self._runner.run(fn, *args), ticket)

    def _load_error(self, exc: BaseException) -> None:
        self._loading = False
        self._runner.error.emit(f"Could not read approvals: {exc}")

    def _loaded(self, values: list[rm.Approval], seq: int) -> None:
        self._loading = False
        fresh = sorted((a for a in values if self._accepts(a)), key=self._sort_key)
        if self._rows:
            self.beginResetModel()  # only after a bus reset
            self._rows = fresh
            self.endResetModel()
        elif fresh:
            self.beginInsertRows(TOP, 0, len(fresh) - 1)
            self._rows = fresh
            self.endInsertRows()
        for approval in fresh:
            self._latest.fresh(approval.id, seq)
        self.is_loaded = True
        self.loaded.emit()
        deferred, self._deferred = list(self._deferred), {}
        self.refresh(deferred)

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.op == RESET for c in changes):
            self.reload()
            return
        self.refresh(c.id for c in changes if c.entity == "approval")

    def _apply(self, found: dict[str, rm.Approval | None], seq: int) -> None:
        for approval_id, approval in found.items():
            if self._latest.fresh(approval_id, seq):
                self._apply_one(approval_id, approval)

    def _apply_one(self, approval_id: str, approval: rm.Approval | None) -> None:
        row = self.row_of(approval_id)
        if approval is None or not self._accepts(approval):
            if row >= 0:
                self._remove(row)
                self.left.emit(approval_id, approval)
        elif row < 0:
            self._insert(approval)
        elif self._rows[row] != approval:
            self._rows[row] = approval
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.headers) - 1))

    def _insert(self, approval: rm.Approval) -> None:
        key = self._sort_key(approval)
        row = len(self._rows)
        while row > 0 and self._sort_key(self._rows[row - 1]) > key:
            row -= 1
        if row >= self._limit:
            return
        self.beginInsertRows(TOP, row, row)
        self._rows.insert(row, approval)
        self.endInsertRows()
        if len(self._rows) > self._limit:
            self._remove(len(self._rows) - 1)

    def _resort(self) -> None:
        """Re-apply the sort order after a key changed with time (a requester went quiet): a layout
        change that moves persistent indexes, so selection and the current row follow their approvals."""
        order = sorted(range(len(self._rows)), key=lambda n: self._sort_key(self._rows[n]))
        if order == list(range(len(self._rows))):
            return
        self.layoutAboutToBeChanged.emit()
        moved_to = {old: new for new, old in enumerate(order)}
        self._rows = [self._rows[n] for n in order]
        old = self.persistentIndexList()
        self.changePersistentIndexList(old, [self.index(moved_to[i.row()], i.column()) for i in old])
        self.layoutChanged.emit()

    def _remove(self, row: int) -> None:
        self.beginRemoveRows(TOP, row, row)
        del self._rows[row]
        self.endRemoveRows()
