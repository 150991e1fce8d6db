"""The recently decided approvals table, newest decision first.

Reason comes last so it can take whatever width the dock leaves: the short
columns (who, what, when) stay readable in a narrow dock.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from agentdesk.model.approval_format import (
    Clock,
    agent_label,
    local_time,
    pretty_arguments,
    short_local_time,
    tooltip_lines,
    utc_now,
)
from agentdesk.model.approvals.model import ApprovalTableModel, Reader
from agentdesk.model.plain import shown_tooltip
from agentdesk.model.services import Services
from agentdesk.model.text import escaped_tooltip, one_line
from agentdesk.store import readmodel as rm
from agentdesk.store.source import Source

D_STATUS, D_TOOL, D_AGENT, D_ACTOR, D_DECIDED_AT, D_EDITED, D_REASON = range(7)
DECIDED_HEADERS = ("Status", "Tool", "Agent", "Actor", "Decided at", "Edited", "Reason")
DECIDED_STATUSES = (rm.ApprovalStatus.APPROVED, rm.ApprovalStatus.DENIED, rm.ApprovalStatus.EXPIRED,
                    rm.ApprovalStatus.WITHDRAWN)


def read_decided(source: Source, limit: int) -> list[rm.Approval]:
    """Runs on the pool: the newest `limit` decisions of any outcome."""
    decided = [a for status in DECIDED_STATUSES for a in source.approvals(status, limit)]
    decided.sort(key=lambda a: (a.decided_at or a.created_at, a.id), reverse=True)
    return decided[:limit]


def actor_label(approval: rm.Approval) -> str:
    """An expiry is the runtime's doing; a decision whose source kept no name stays blank rather than guessed."""
    return approval.decider or ("runtime" if approval.status == rm.ApprovalStatus.EXPIRED else "")


class DecidedApprovalModel(ApprovalTableModel):
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

    def _read_all(self) -> Reader:
        return read_decided, (self._source, self._limit)

    def _cell(self, approval: rm.Approval, column: int) -> str:
        if column == D_STATUS:
            return approval.status
        if column == D_TOOL:
            return one_line(approval.tool_name, 80)
        if column == D_AGENT:
            return one_line(agent_label(approval), 80)
        if column == D_ACTOR:
            return one_line(actor_label(approval), 80)
        if column == D_DECIDED_AT:
            return short_local_time(approval.decided_at, self._clock())
        if column == D_EDITED:
            return "edited" if approval.edited_arguments else ""
        return one_line(approval.reason or "", 120)

    def _tooltip(self, approval: rm.Approval, column: int) -> str:
        if column == D_REASON and approval.reason:
            return escaped_tooltip(*tooltip_lines(approval.reason))
        if column == D_EDITED and approval.edited_arguments:
            return shown_tooltip("Approved with edited arguments:",  # rendered: already visible
                                   *tooltip_lines(pretty_arguments(approval.edited_arguments)))
        if column == D_DECIDED_AT:
            return escaped_tooltip(f"Decided at {local_time(approval.decided_at)}")
        return super()._tooltip(approval, column)
