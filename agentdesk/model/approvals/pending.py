"""The pending approvals table, oldest first, with a live countdown to each deadline.

The countdown sits right after the tool name so it stays in view in a narrow
dock: it is what the operator has to act on.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont

from agentdesk.model.approval_format import (
    Clock,
    agent_label,
    arguments_preview,
    format_age,
    format_left,
    local_time,
    pretty_arguments,
    project_label,
    tooltip_lines,
    utc_now,
)
from agentdesk.model.approvals.model import ApprovalTableModel, Reader
from agentdesk.model.plain import shown_tooltip
from agentdesk.model.services import Services
from agentdesk.model.text import escaped_tooltip, one_line
from agentdesk.store import readmodel as rm
from agentdesk.store.approvals.heartbeat import GONE_AFTER_S, is_gone
from agentdesk.store.sources.unreadable import UNREADABLE
from agentdesk.store.text.arguments import inspect_cached

TOOL, EXPIRES, AGE, AGENT, PROJECT, ARGUMENTS = range(6)
PENDING_HEADERS = ("Tool", "Expires in", "Age", "Agent", "Project", "Arguments")

ExpiredRole = Qt.ItemDataRole.UserRole + 13
SecondsLeftRole = Qt.ItemDataRole.UserRole + 14
"""Seconds until the deadline (negative once passed), or None when it never expires."""
GoneRole = Qt.ItemDataRole.UserRole + 15
"""True when the requester stopped renewing its heartbeat: nobody waits for this approval any more."""
SettlesRole = Qt.ItemDataRole.UserRole + 16
""""allow"/"deny" when the rule being drafted in the Rules panel would decide this approval, else None."""
GONE_TEXT = "gone"
"""Fits the countdown column; the tooltip and the dismiss button say "requester gone" in full."""
SETTLE_MARKS = {"allow": "✓ ", "deny": "✗ "}
"""Prefixed to the tool name (with a green/red tint) while the Rules panel's draft would decide the row."""
SETTLE_BACKGROUND = {"allow": QColor(40, 170, 90, 55), "deny": QColor(220, 60, 60, 55)}

AGE_EVERY_TICKS = 10
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def _italic() -> QFont:
    font = QFont()
    font.setItalic(True)
    return font


class PendingApprovalModel(ApprovalTableModel):
    """Pending approvals, oldest first; a 1 s timer keeps the "Expires in" column counting down."""

    headers = PENDING_HEADERS
    ticked = Signal()
    """After each countdown update: views re-check which selected rows have expired."""
    gone_changed = Signal(int)
    """How many pending approvals have a requester that stopped waiting."""

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now,
                 limit: int = 1000, tick_ms: int = 1000) -> None:
        super().__init__(services, parent, clock=clock, limit=limit)
        self._expired_font = _italic()  # built once: data() runs for every visible cell on every tick
        self._gone: set[str] = set()
        self._settles: dict[str, str] = {}
        self._ticks = 0
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    def _accepts(self, approval: rm.Approval) -> bool:
        """Pending, or a foreign row that could not be read: shown marked (it cannot be decided), never hidden."""
        return approval.status in (rm.ApprovalStatus.PENDING, UNREADABLE)

    def _sort_key(self, approval: rm.Approval) -> tuple[Any, ...]:
        return (approval.id in self._gone, approval.created_at, approval.id)  # gone requesters sort last

    def _read_all(self) -> Reader:
        return self._source.approvals, (rm.ApprovalStatus.PENDING, self._limit)

    def seconds_left(self, approval: rm.Approval) -> float | None:
        if approval.expires_at is None:
            return None
        return (approval.expires_at - self._clock()).total_seconds()

    def is_expired(self, approval: rm.Approval) -> bool:
        return approval.is_expired(self._clock())

    def awaiting_count(self) -> int:
        """Rows an operator can still decide: the count the window shows, read as the CLI reads it
        (`readmodel.awaiting_decision`: a row past its deadline, not yet swept, is not pending)."""
        return len(rm.awaiting_decision(self._rows, self._clock()))

    def _cell(self, approval: rm.Approval, column: int) -> str:
        if column == TOOL:  # the warning mark: hidden characters or mixed scripts in the arguments
            mark = "⚠ " if inspect_cached(approval.arguments).suspicious else ""
            return mark + one_line(approval.tool_name, 80)
        if column == EXPIRES:
            return GONE_TEXT if approval.id in self._gone else format_left(self.seconds_left(approval))
        if column == AGE:
            return format_age((self._clock() - approval.created_at).total_seconds())
        if column == AGENT:
            return one_line(agent_label(approval), 80)
        if column == PROJECT:
            return one_line(project_label(approval), 80)
        return arguments_preview(approval.arguments)

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        if column == TOOL and approval.id in self._settles:
            return escaped_tooltip(f"The rule being edited in the Rules tab would {self._settles[approval.id]} "
                                   "this approval.", approval.tool_name)
        if column == EXPIRES and approval.id in self._gone and approval.requester_heartbeat_at is not None:
            return escaped_tooltip(f"Requester gone: the agent stopped waiting (last heartbeat "
                                   f"{local_time(approval.requester_heartbeat_at)}).")
        if column == ARGUMENTS:
            return shown_tooltip(*tooltip_lines(pretty_arguments(approval.arguments)))  # already rendered
        if column == EXPIRES and approval.expires_at is not None:
            verb = "Expired" if self.is_expired(approval) else "Expires"
            return escaped_tooltip(f"{verb} at {local_time(approval.expires_at)}")
        if column == AGE:
            return escaped_tooltip(f"Requested at {local_time(approval.created_at)}")
        return super()._tooltip(approval, column)

    def _extra(self, approval: rm.Approval, column: int, role: int) -> Any:
        if role == GoneRole:
            return approval.id in self._gone
        if role == SettlesRole:
            return self._settles.get(approval.id)
        if role == Qt.ItemDataRole.ForegroundRole and approval.id in self._gone:
            return QColor(Qt.GlobalColor.gray)
        if role == Qt.ItemDataRole.BackgroundRole and approval.id in self._settles:
            return SETTLE_BACKGROUND[self._settles[approval.id]]
        if role == ExpiredRole:
            return self.is_expired(approval)
        if role == SecondsLeftRole:
            return self.seconds_left(approval)
        if role == Qt.ItemDataRole.FontRole and self.is_expired(approval):
            return self._expired_font
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (AGE, EXPIRES):
            return RIGHT
        return None

    def data(self, index: Any, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        value = super().data(index, role)
        if role == Qt.ItemDataRole.DisplayRole and index.column() == TOOL and value is not None:
            effect = self._settles.get(self._rows[index.row()].id)
            return SETTLE_MARKS[effect] + value if effect else value
        return value

    # -- requester heartbeat and draft rules ----------------------------------------------
    def is_gone(self, approval: rm.Approval) -> bool:
        return is_gone(approval.status, approval.requester_heartbeat_at, self._clock(), GONE_AFTER_S)

    def gone_ids(self) -> list[str]:
        return [a.id for a in self._rows if a.id in self._gone]

    def set_settles(self, ids: set[str], effect: str) -> None:
        """Mark the approvals a draft rule would decide (an empty set clears the marks)."""
        settles = {i: effect for i in ids} if effect in SETTLE_MARKS else {}
        if settles != self._settles:
            self._settles = settles
            if self._rows:
                self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(self.headers) - 1))

    def _update_gone(self) -> None:
        gone = {a.id for a in self._rows if self.is_gone(a)}
        if gone != self._gone:
            self._gone = gone
            self._resort()
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(self.headers) - 1))
            self.gone_changed.emit(len(gone))

    def _tick(self) -> None:
        if not self._rows:
            return
        self._update_gone()
        last = len(self._rows) - 1
        self._ticks += 1
        self.dataChanged.emit(self.index(0, EXPIRES), self.index(last, EXPIRES))
        if self._ticks % AGE_EVERY_TICKS == 0:
            self.dataChanged.emit(self.index(0, AGE), self.index(last, AGE))
        self.ticked.emit()
