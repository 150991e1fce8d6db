"""The pending approvals table, oldest first, with a live countdown to each deadline.

The countdown sits right after the tool name so it stays in view in a narrow
dock: it is what the operator has to act on.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont

from agentdesk.model.approvals.format import (
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
from agentdesk.model.services import Services
from agentdesk.model.tree.rows import escaped_tooltip, one_line
from agentdesk.store import readmodel as rm
from agentdesk.store.text.arguments import inspect_cached

TOOL, EXPIRES, AGE, AGENT, PROJECT, ARGUMENTS = range(6)
PENDING_HEADERS = ("Tool", "Expires in", "Age", "Agent", "Project", "Arguments")

ExpiredRole = Qt.ItemDataRole.UserRole + 13
SecondsLeftRole = Qt.ItemDataRole.UserRole + 14
"""Seconds until the deadline (negative once passed), or None when it never expires."""

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

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now,
                 limit: int = 1000, tick_ms: int = 1000) -> None:
        super().__init__(services, parent, clock=clock, limit=limit)
        self._expired_font = _italic()  # built once: data() runs for every visible cell on every tick
        self._ticks = 0
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    def _accepts(self, approval: rm.Approval) -> bool:
        return approval.status == rm.ApprovalStatus.PENDING

    def _sort_key(self, approval: rm.Approval) -> tuple[Any, ...]:
        return (approval.created_at, approval.id)

    def _read_all(self) -> Reader:
        return self._source.approvals, ("pending", self._limit)

    def seconds_left(self, approval: rm.Approval) -> float | None:
        if approval.expires_at is None:
            return None
        return (approval.expires_at - self._clock()).total_seconds()

    def is_expired(self, approval: rm.Approval) -> bool:
        return approval.is_expired(self._clock())

    def _cell(self, approval: rm.Approval, column: int) -> str:
        if column == TOOL:  # the warning mark: hidden characters or mixed scripts in the arguments
            mark = "⚠ " if inspect_cached(approval.arguments).suspicious else ""
            return mark + one_line(approval.tool_name, 80)
        if column == EXPIRES:
            return format_left(self.seconds_left(approval))
        if column == AGE:
            return format_age((self._clock() - approval.created_at).total_seconds())
        if column == AGENT:
            return one_line(agent_label(approval), 80)
        if column == PROJECT:
            return one_line(project_label(approval), 80)
        return arguments_preview(approval.arguments)

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        if column == ARGUMENTS:
            return escaped_tooltip(*tooltip_lines(pretty_arguments(approval.arguments)))
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
            return self._expired_font
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (AGE, EXPIRES):
            return RIGHT
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
