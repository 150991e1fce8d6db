"""Table models of the approval queue: the pending approvals (with a live countdown) and the decided ones.

Each model keeps its own list of read-model `Approval` values. A bus `approval`
change re-reads just the changed approvals on the runner (one call per batch)
and applies the answer with exact row inserts, removals and `dataChanged`: a
pending approval decided elsewhere leaves the pending table, and `left` says
with what outcome and by whom. Reads complete out of order on the pool, so
every read carries the sequence number it was issued with and answers older
than what an approval already shows are dropped.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QFont

from store import readmodel as rm
from store.bus import RESET, Change
from store.errors import NotFound
from store.source import Source

from .services import Services
from .tree_rows import escaped_tooltip, one_line

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()
Clock = Callable[[], datetime]

TOOL, AGENT, PROJECT, AGE, EXPIRES, ARGUMENTS = range(6)
PENDING_HEADERS = ("Tool", "Agent", "Project", "Age", "Expires in", "Arguments")
D_STATUS, D_TOOL, D_AGENT, D_ACTOR, D_REASON, D_EDITED, D_DECIDED_AT = range(7)
DECIDED_HEADERS = ("Status", "Tool", "Agent", "Actor", "Reason", "Edited", "Decided at")

ApprovalRole = Qt.ItemDataRole.UserRole + 11
"""The row's `rm.Approval`."""
ApprovalIdRole = Qt.ItemDataRole.UserRole + 12
ExpiredRole = Qt.ItemDataRole.UserRole + 13
SecondsLeftRole = Qt.ItemDataRole.UserRole + 14
"""Seconds until the deadline (negative once passed), or None when it never expires."""

AGE_EVERY_TICKS = 10


def utc_now() -> datetime:
    return datetime.now(UTC)


def pretty_arguments(text: str) -> str:
    """Arguments as indented JSON for reading; the raw text when it is not JSON."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def arguments_preview(text: str, limit: int = 160) -> str:
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), ensure_ascii=False, separators=(", ", ": "))
    return one_line(text, limit)


def format_age(seconds: float) -> str:
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{minutes // (24 * 60)} d"


def format_left(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds <= 0:
        return "expired"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}:{whole % 60:02d}"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def local_time(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def short_local_time(moment: datetime | None, now: datetime) -> str:
    """The time alone for today, the date and minute otherwise: fits a narrow column."""
    if moment is None:
        return ""
    local = moment.astimezone()
    same_day = local.date() == now.astimezone().date()
    return local.strftime("%H:%M:%S" if same_day else "%b %d %H:%M")


def read_approvals(source: Source, ids: Sequence[str]) -> dict[str, rm.Approval | None]:
    """Runs on the pool: the current state of each approval (None when it is gone)."""
    found: dict[str, rm.Approval | None] = {}
    for approval_id in ids:
        try:
            found[approval_id] = source.approval(approval_id)
        except NotFound:
            found[approval_id] = None
    return found


def read_decided(source: Source, limit: int) -> list[rm.Approval]:
    decided = [a for status in ("approved", "denied", "expired") for a in source.approvals(status, limit)]
    decided.sort(key=lambda a: (a.decided_at or a.created_at, a.id), reverse=True)
    return decided[:limit]


class _ApprovalTable(QAbstractTableModel):
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
        self._seen: dict[str, int] = {}
        self._seqs = itertools.count(1)
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

    def _read_all(self) -> tuple[Callable[..., list[rm.Approval]], tuple[Any, ...]]:
        raise NotImplementedError

    def _cell(self, approval: rm.Approval, column: int) -> str:
        raise NotImplementedError

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        return escaped_tooltip(self._cell(approval, column), f"approval {approval.id}")

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

    def _extra(self, approval: rm.Approval, column: int, role: int) -> Any:
        return None

    # -- lookups --------------------------------------------------------------------------
    def approval_at(self, row: int) -> rm.Approval | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, approval_id: str) -> int:
        return next((n for n, a in enumerate(self._rows) if a.id == approval_id), -1)

    def ids(self) -> list[str]:
        return [a.id for a in self._rows]

    # -- loading and changes --------------------------------------------------------------
    def reload(self) -> None:
        self._loading = True
        seq = next(self._seqs)
        read, args = self._read_all()
        self._runner.submit(read, *args, on_done=lambda values: self._loaded(seq, values),
                     on_error=self._load_error)

    def refresh(self, ids: Iterable[str]) -> None:
        """Re-read these approvals (after a change, or a decision that lost a race)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return
        if self._loading:
            self._deferred.update(dict.fromkeys(wanted))
            return
        seq = next(self._seqs)
        self._runner.submit(read_approvals, self._source, wanted,
                     on_done=lambda found: self._apply(seq, found), on_error=self._load_error)

    def _load_error(self, exc: BaseException) -> None:
        self._loading = False
        self._runner.error.emit(f"Could not read approvals: {exc}")

    def _loaded(self, seq: int, values: list[rm.Approval]) -> None:
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
        self._seen.update((a.id, seq) for a in fresh)
        self.is_loaded = True
        self.loaded.emit()
        deferred, self._deferred = list(self._deferred), {}
        self.refresh(deferred)

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.op == RESET for c in changes):
            self.reload()
            return
        self.refresh(c.id for c in changes if c.entity == "approval")

    def _apply(self, seq: int, found: dict[str, rm.Approval | None]) -> None:
        for approval_id, approval in found.items():
            if seq < self._seen.get(approval_id, -1):
                continue
            self._seen[approval_id] = seq
            row = self.row_of(approval_id)
            if approval is None or not self._accepts(approval):
                if row >= 0:
                    self._remove(row)
                    self.left.emit(approval_id, approval)
            elif row >= 0:
                if self._rows[row] != approval:
                    self._rows[row] = approval
                    self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.headers) - 1))
            else:
                self._insert(approval)

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

    def _remove(self, row: int) -> None:
        self.beginRemoveRows(TOP, row, row)
        del self._rows[row]
        self.endRemoveRows()


class PendingApprovalModel(_ApprovalTable):
    """Pending approvals, oldest first; a 1 s timer keeps the "Expires in" column counting down."""

    headers = PENDING_HEADERS
    ticked = Signal()
    """After each countdown update: views re-check which selected rows have expired."""

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now,
                 limit: int = 1000, tick_ms: int = 1000) -> None:
        super().__init__(services, parent, clock=clock, limit=limit)
        self._ticks = 0
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    def _accepts(self, approval: rm.Approval) -> bool:
        return approval.status == rm.ApprovalStatus.PENDING

    def _sort_key(self, approval: rm.Approval) -> tuple[Any, ...]:
        return (approval.created_at, approval.id)

    def _read_all(self) -> tuple[Callable[..., list[rm.Approval]], tuple[Any, ...]]:
        return self._source.approvals, ("pending", self._limit)

    def seconds_left(self, approval: rm.Approval) -> float | None:
        if approval.expires_at is None:
            return None
        return (approval.expires_at - self._clock()).total_seconds()

    def is_expired(self, approval: rm.Approval) -> bool:
        return approval.is_expired(self._clock())

    def _cell(self, approval: rm.Approval, column: int) -> str:
        if column == TOOL:
            return one_line(approval.tool_name, 80)
        if column == AGENT:
            return one_line(approval.agent_name or approval.agent_id, 80)
        if column == PROJECT:
            return one_line(approval.project_name or approval.project_id, 80)
        if column == AGE:
            return format_age((self._clock() - approval.created_at).total_seconds())
        if column == EXPIRES:
            return format_left(self.seconds_left(approval))
        return arguments_preview(approval.arguments)

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        if column == ARGUMENTS:
            return escaped_tooltip(*pretty_arguments(approval.arguments)[:3000].splitlines())
        if column == EXPIRES and approval.expires_at is not None:
            verb = "Expired" if self.is_expired(approval) else "Expires"
            return escaped_tooltip(f"{verb} at {local_time(approval.expires_at)}")
        if column == AGE:
            return escaped_tooltip(f"Requested at {local_time(approval.created_at)}")
        return super()._tooltip(approval, column)

    def _extra(self, approval: rm.Approval, column: int, role: int) -> Any:
        if role == ExpiredRole:
            return self.is_expired(approval)
        if role == SecondsLeftRole:
            return self.seconds_left(approval)
        if role == Qt.ItemDataRole.FontRole and self.is_expired(approval):
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (AGE, EXPIRES):
            return Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        return None

    def _tick(self) -> None:
        if not self._rows:
            return
        last = len(self._rows) - 1
        self._ticks += 1
        self.dataChanged.emit(self.index(0, EXPIRES), self.index(last, EXPIRES))
        if self._ticks % AGE_EVERY_TICKS == 0:
            self.dataChanged.emit(self.index(0, AGE), self.index(last, AGE))
        self.ticked.emit()


class DecidedApprovalModel(_ApprovalTable):
    """Recently decided approvals, newest decision first."""

    headers = DECIDED_HEADERS

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now,
                 limit: int = 500) -> None:
        super().__init__(services, parent, clock=clock, limit=limit)

    def _accepts(self, approval: rm.Approval) -> bool:
        return approval.status != rm.ApprovalStatus.PENDING

    def _sort_key(self, approval: rm.Approval) -> tuple[Any, ...]:
        moment = approval.decided_at or approval.created_at
        return (-moment.timestamp(), approval.id)

    def _read_all(self) -> tuple[Callable[..., list[rm.Approval]], tuple[Any, ...]]:
        return read_decided, (self._source, self._limit)

    def _cell(self, approval: rm.Approval, column: int) -> str:
        if column == D_STATUS:
            return approval.status
        if column == D_TOOL:
            return one_line(approval.tool_name, 80)
        if column == D_AGENT:
            return one_line(approval.agent_name or approval.agent_id, 80)
        if column == D_ACTOR:
            return one_line(approval.decided_by or ("runtime" if approval.status == "expired" else ""), 80)
        if column == D_REASON:
            return one_line(approval.reason or "", 120)
        if column == D_EDITED:
            return "edited" if approval.edited_arguments else ""
        return short_local_time(approval.decided_at, self._clock())

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        if column == D_REASON and approval.reason:
            return escaped_tooltip(*approval.reason[:3000].splitlines())
        if column == D_EDITED and approval.edited_arguments:
            return escaped_tooltip("Approved with edited arguments:",
                                   *pretty_arguments(approval.edited_arguments)[:3000].splitlines())
        if column == D_DECIDED_AT:
            return escaped_tooltip(f"Decided at {local_time(approval.decided_at)}")
        return super()._tooltip(approval, column)
