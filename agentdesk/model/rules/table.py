"""The rules list: one row per rule, more specific above broader, refreshed when any rule changes.

Rules are few (tens, not thousands), so a change re-reads the whole list on the
runner; the model keeps rows in place when the order is unchanged (so selection
and scroll survive a hit-count update) and resets only when rules were added,
removed or reordered.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QFont

from agentdesk.model.approval_format import Clock, local_time, utc_now
from agentdesk.model.rules.flat_table import FlatTableModel, Index
from agentdesk.model.rules.service import rules_store
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.model.text import escaped_tooltip, one_line
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.commands import list_rules
from agentdesk.store.rules.model import Rule, describe_matcher

EFFECT, TOOL, MATCHES, SCOPE, ENABLED, EXPIRES, HITS, LAST_HIT, NOTE = range(9)
HEADERS = ("Effect", "Tool", "Matches", "Scope", "On", "Expires", "Hits", "Last hit", "Note")
RuleRole = Qt.ItemDataRole.UserRole + 31


def scope_text(rule: Rule) -> str:
    parts = [f"{label} {value}" for label, value in (("project", rule.project_id), ("agent", rule.agent_id),
                                                     ("session", rule.session_id)) if value]
    return ", ".join(parts) or "everywhere"


def when(moment: datetime | None, default: str) -> str:
    return local_time(moment) if moment is not None else default


class RuleTableModel(FlatTableModel):
    headers = HEADERS

    loaded = Signal()
    failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None, *, clock: Clock = utc_now) -> None:
        super().__init__(parent)
        self._services = services
        self._store = rules_store(services.source)
        self._clock = clock
        self._rules: list[Rule] = []
        self._latest = LatestTask(services.runner,
                                  on_error=lambda exc: self.failed.emit(f"Could not read the rules: {exc}"))
        self._bold = QFont()
        self._bold.setBold(True)
        self._grey = QColor(Qt.GlobalColor.gray)
        services.bridge.changes.connect(self._on_changes)
        self.reload()

    # -- data -----------------------------------------------------------------------------
    def row_count(self) -> int:
        return len(self._rules)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not self.holds(index):
            return None
        rule = self._rules[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(rule, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return escaped_tooltip(rule.describe(), f"rule {rule.id}, revision {rule.revision}",
                                   f"created by {rule.created_by}")
        if role == RuleRole:
            return rule
        if role == Qt.ItemDataRole.FontRole and index.column() == EFFECT:
            return self._bold
        if role == Qt.ItemDataRole.ForegroundRole and not rule.is_live(self._clock()):
            return self._grey  # disabled or expired: decides nothing
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() == HITS:
            return Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        return None

    def _cell(self, rule: Rule, column: int) -> str:
        if column == EFFECT:
            return str(rule.effect).upper()
        if column == TOOL:
            return one_line(rule.tool, 40)
        if column == MATCHES:
            return one_line(describe_matcher(rule.matcher), 120)
        if column == SCOPE:
            return scope_text(rule)
        if column == ENABLED:
            return "on" if rule.enabled else "off"
        if column == EXPIRES:
            if rule.expires_at is not None and rule.expires_at <= self._clock():
                return "expired"
            return when(rule.expires_at, "never")
        if column == HITS:
            return f"{rule.hit_count:,}"
        if column == LAST_HIT:
            return when(rule.last_hit_at, "—")
        return one_line(rule.note, 80)

    # -- lookups --------------------------------------------------------------------------
    @property
    def rules(self) -> list[Rule]:
        return list(self._rules)

    def rule_at(self, row: int) -> Rule | None:
        return self._rules[row] if 0 <= row < len(self._rules) else None

    def row_of(self, rule_id: str) -> int:
        return next((n for n, r in enumerate(self._rules) if r.id == rule_id), -1)

    # -- loading --------------------------------------------------------------------------
    def reload(self) -> None:
        if self._store is None:
            return
        self._latest.start(self._load(self._store))  # an older read still on its way is dropped

    async def _load(self, store: Store) -> None:
        self._loaded(await self._services.runner.run(list_rules, store))

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.op == RESET or c.entity == "rule" for c in changes):
            self.reload()

    def _loaded(self, rules: list[Rule]) -> None:
        if [r.id for r in rules] == [r.id for r in self._rules]:
            changed = [n for n, (a, b) in enumerate(zip(self._rules, rules, strict=True)) if a != b]
            self._rules = rules
            for row in changed:
                self.dataChanged.emit(self.index(row, 0), self.index(row, len(HEADERS) - 1))
        else:
            self.beginResetModel()
            self._rules = rules
            self.endResetModel()
        self.loaded.emit()
