"""The Rules panel: standing rules, their editor, and the dry run that shows what a draft would do.

Left, the rules (more specific above broader) with hit counts and last hits;
right, the editor. Every edit re-runs the dry run (debounced, on the runner):
the table below lists the pending approvals the draft would settle now and every
past approval it would have decided, differing rows highlighted, and
`draft_settles` tells the approval queue which pending rows to mark. Saving,
enabling and removing are store commands carrying the revision the operator saw;
a lost race is one sentence and a reload, never an overwrite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.rules.editor import RuleEditor
from agentdesk.gui.shared.flow import flow_of
from agentdesk.model.rules.draft import RuleForm, form_of
from agentdesk.model.rules.dry_run import DryRunModel
from agentdesk.model.rules.service import rules_store, why_no_rules
from agentdesk.model.rules.table import HEADERS, RuleTableModel
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask, spawn
from agentdesk.store import readmodel as rm
from agentdesk.store.errors import StoreError
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules import commands as rule_commands
from agentdesk.store.rules.dryrun import DryRun, dry_run, propose_rule
from agentdesk.store.rules.model import Effect, Rule, covers_every_call, every_call_warning

DRY_RUN_DELAY_MS = 400
CurrentApproval = Callable[[], "rm.Approval | None"]


def table_view(model: Any, parent: QWidget, widths: tuple[int, ...]) -> QTableView:
    table = QTableView(parent)
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    for column, width in enumerate(widths):
        header.resizeSection(column, width)
    return table


def summary_text(result: DryRun) -> str:
    s = result.summary()
    more = " (older history not replayed)" if s["truncated"] else ""
    settle = "" if not s["pending_matched"] else f" It would settle {s['pending_matched']:,} pending now."
    return (f"Over {s['examined']:,} past approvals{more} this rule would have decided {s['matched']:,}: "
            f"{s['would_allow']:,} allowed, {s['would_deny']:,} denied, {s['would_ask']:,} asked — "
            f"{s['differs']:,} differ from what happened (highlighted).{settle}")


NARROW_PX = 900
"""Narrower than this, the rule editor sits under the rules list instead of beside it."""


class RulesPanel(QWidget):
    draft_settles = Signal(object, str)
    """(ids of pending approvals the draft would decide, its effect) — empty when there is no valid draft."""

    def __init__(self, services: Services, parent: QWidget | None = None, *,
                 current_approval: CurrentApproval | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._store = rules_store(services.source)
        self._why_not = why_no_rules(services.source)
        self._current_approval = current_approval
        self._dry = LatestTask(services.runner, on_error=lambda exc: self.summary.setText(f"The dry run failed: {exc}"))
        self._want = ""
        self.rules_model = RuleTableModel(services, self)
        self.dry_model = DryRunModel(self)
        self._dry_timer = QTimer(self)
        self._dry_timer.setSingleShot(True)
        self._dry_timer.setInterval(DRY_RUN_DELAY_MS)
        self._dry_timer.timeout.connect(self.run_dry_run)
        self._build()
        self._connect()
        self._update_actions()

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.banner = QLabel(self._why_not if self._store is None else "", self)
        self.banner.setVisible(self._store is None)
        self.banner.setWordWrap(True)
        self.table = table_view(self.rules_model, self, (60, 90, 220, 110, 36, 140, 44, 140))
        self.new_button = QPushButton("New rule", self)
        self.propose_button = QPushButton("From selected approval", self)
        self.propose_button.setToolTip("The narrowest rule matching the approval selected in the queue")
        self.toggle_button = QPushButton("Disable", self)
        self.remove_button = QPushButton("Remove", self)
        self.editor = RuleEditor(self)
        self.dry_button = QPushButton("Dry run", self)
        self.save_button = QPushButton("Save rule", self)
        self.message = QLabel("", self)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setWordWrap(True)
        self.summary = QLabel("Edit a rule to see what it would have decided.", self)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.results = table_view(self.dry_model, self, (90, 80, 90, 90, 95, 110, 420))
        self.setLayout(self._arrange())

    def _arrange(self) -> QVBoxLayout:
        left = QWidget(self)
        box = QVBoxLayout(left)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.table, 1)
        # wrapped, not cut: in a narrow window "From selected approval" read "rom selected approva"
        box.addLayout(flow_of(self.new_button, self.propose_button, self.toggle_button, self.remove_button))
        right = QWidget(self)
        form = QVBoxLayout(right)
        form.setContentsMargins(0, 0, 0, 0)
        form.addWidget(self.editor)
        form.addLayout(flow_of(self.dry_button, self.save_button))
        form.addWidget(self.message)
        form.addStretch(1)
        top = self.top = QSplitter(Qt.Orientation.Horizontal, self)
        top.addWidget(left)
        top.addWidget(right)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        bottom = QWidget(self)
        lower = QVBoxLayout(bottom)
        lower.setContentsMargins(0, 0, 0, 0)
        lower.addWidget(self.summary)
        lower.addWidget(self.results, 1)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout()
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.banner)
        layout.addWidget(split, 1)
        return layout

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Narrow (a 1024 px screen with the docks open), the editor goes under the rules list: beside it,
        its fields were a few letters wide."""
        super().resizeEvent(event)
        wanted = Qt.Orientation.Vertical if self.width() < NARROW_PX else Qt.Orientation.Horizontal
        if self.top.orientation() != wanted:
            self.top.setOrientation(wanted)

    def _connect(self) -> None:
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        self.table.selectionModel().selectionChanged.connect(self._update_actions)
        self.rules_model.loaded.connect(self._update_actions)
        self.rules_model.failed.connect(self.message.setText)
        self.new_button.clicked.connect(self.new_rule)
        self.propose_button.clicked.connect(self.propose_from_selected)
        self.toggle_button.clicked.connect(self.toggle_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.dry_button.clicked.connect(self.run_dry_run)
        self.save_button.clicked.connect(self.save)
        self.editor.edited.connect(self._dry_timer.start)

    # -- selection ------------------------------------------------------------------------
    def selected_rule(self) -> Rule | None:
        rows = self.table.selectionModel().selectedRows()
        return self.rules_model.rule_at(rows[0].row()) if rows else None

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        rule = self.rules_model.rule_at(current.row())
        if rule is not None:
            self.editor.load(form_of(rule), f"Rule {rule.id} (revision {rule.revision}, {rule.hit_count:,} hits)")
        self._update_actions()

    def _update_actions(self, *_args: object) -> None:
        writable = self._store is not None and not self._why_not
        rule = self.selected_rule()
        for button in (self.new_button, self.save_button):
            button.setEnabled(writable)
        self.propose_button.setEnabled(self._store is not None and self._current_approval is not None)
        self.toggle_button.setEnabled(writable and rule is not None)
        self.remove_button.setEnabled(writable and rule is not None)
        self.toggle_button.setText("Enable" if rule is not None and not rule.enabled else "Disable")
        self.dry_button.setEnabled(self._store is not None)
        why = self._why_not or ""
        for button in (self.save_button, self.toggle_button, self.remove_button, self.new_button):
            button.setToolTip(why)

    # -- editing --------------------------------------------------------------------------
    def new_rule(self) -> None:
        self.table.clearSelection()
        self.editor.load(RuleForm(), "New rule")
        self.editor.tool.setFocus()

    def propose_from_selected(self) -> None:
        approval = self._current_approval() if self._current_approval else None
        if approval is None:
            self.message.setText("Select an approval in the queue first.")
            return
        self.propose_from(approval)

    def propose_from(self, approval: rm.Approval) -> None:
        """Load the narrowest rule matching `approval` into the editor (not saved until Save)."""
        try:
            draft = propose_rule(approval)
        except StoreError as exc:
            self.message.setText(str(exc))
            return
        self.table.clearSelection()
        self.editor.load(form_of(draft), f"New rule from approval {approval.id}")
        self.message.setText("Proposed the narrowest rule; widen it if you mean to, check the dry run, then save.")

    def _draft(self) -> Rule | None:
        try:
            return self.editor.form().rule()
        except StoreError as exc:
            self.summary.setText(str(exc))
            self.dry_model.show(None)
            self.draft_settles.emit(set(), "")
            return None

    def run_dry_run(self) -> None:
        self._dry_timer.stop()
        if self._store is None:
            return
        draft = self._draft()
        if draft is None:
            return
        self.summary.setText("Replaying the history…")
        self._dry.start(self._dry_run(self._store, draft))  # a newer draft cancels the replay of an older one

    async def _dry_run(self, store: Store, draft: Rule) -> None:
        self._dry_done(draft, await self._services.runner.run(dry_run, store, draft))

    def _dry_done(self, draft: Rule, result: DryRun) -> None:
        self.dry_model.show(result)
        self.summary.setText(summary_text(result))
        settles = set() if draft.effect == Effect.ASK else \
            {r.approval_id for r in result.pending if r.outcome != "would-ask"}  # a maybe-deny only asks
        self.draft_settles.emit(settles, str(draft.effect))

    # -- commands -------------------------------------------------------------------------
    def save(self) -> None:
        store = self._store
        if store is None or self._why_not:
            return
        form = self.editor.form()
        try:
            draft = form.rule()
        except StoreError as exc:
            self.message.setText(str(exc))
            return
        already = bool(form.rule_id) and self.editor.loaded_kind == "any"  # confirmed when it became so
        if covers_every_call(draft.matcher) and not already and not self.confirm_every_call(
                every_call_warning(str(draft.effect), draft.tool or "the tool")):
            self.message.setText("Not saved: the rule has no matcher. Name the commands or arguments it covers.")
            return
        actor = self._services.actor
        if form.rule_id:
            job: Callable[[], Rule] = lambda: rule_commands.update_rule(  # noqa: E731
                store, form.rule_id, form.revision, actor, effect=str(draft.effect), tool=draft.tool,
                matcher=draft.matcher, enabled=draft.enabled, expires_at=draft.expires_at, note=draft.note,
                project_id=draft.project_id, agent_id=draft.agent_id, session_id=draft.session_id)
        else:
            job = lambda: rule_commands.add_rule(  # noqa: E731
                store, str(draft.effect), draft.tool, draft.matcher, actor, project_id=draft.project_id,
                agent_id=draft.agent_id, session_id=draft.session_id, expires_at=draft.expires_at,
                note=draft.note, enabled=draft.enabled)
        self._run(job, lambda rule: f"Saved rule {rule.id} (revision {rule.revision}).", select=True)

    def confirm_every_call(self, warning: str) -> bool:
        """Ask before saving a rule with no matcher; No is the default button."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Save a rule for every call?",
                          f"{warning}\n\nNo argument is checked: any agent may make such a call and the rule "
                          "decides it without asking anyone. Save it anyway?",
                          QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Cancel, self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.every_call_box = box
        try:
            return box.exec() == QMessageBox.StandardButton.Save
        finally:
            self.every_call_box = None

    every_call_box: QMessageBox | None = None
    """The confirmation while it is open (tests answer it)."""

    def toggle_selected(self) -> None:
        rule = self.selected_rule()
        if rule is None or self._store is None:
            return
        store, actor = self._store, self._services.actor
        self._run(lambda: rule_commands.set_rule_enabled(store, rule.id, not rule.enabled, rule.revision, actor),
                  lambda r: f"Rule {r.id} {'enabled' if r.enabled else 'disabled'}.", select=True)

    def remove_selected(self) -> None:
        rule = self.selected_rule()
        if rule is None or self._store is None:
            return
        store, actor = self._store, self._services.actor
        self._run(lambda: rule_commands.remove_rule(store, rule.id, actor, rule.revision),
                  lambda _none: f"Removed rule {rule.id}.")

    def _run(self, job: Callable[[], Any], said: Callable[[Any], str], *, select: bool = False) -> None:
        spawn(self._command(job, said, select))

    async def _command(self, job: Callable[[], Any], said: Callable[[Any], str], select: bool) -> None:
        try:
            result = await self._services.runner.run(job)
        except Exception as exc:
            self.message.setText(str(exc) if isinstance(exc, StoreError) else f"The store refused: {exc}")
            self.rules_model.reload()
            return
        self.message.setText(said(result))
        if select and isinstance(result, Rule):
            if self.editor.rule_id in ("", result.id):  # keep editing what was saved, at its new revision
                self.editor.load(form_of(result), f"Rule {result.id} (revision {result.revision}, "
                                                  f"{result.hit_count:,} hits)")
            self._want = result.id
            self._select_wanted()  # the list may have reloaded already, or reloads next
            self.rules_model.loaded.connect(self._select_wanted, Qt.ConnectionType.SingleShotConnection)

    def _select_wanted(self) -> None:
        row = self.rules_model.row_of(self._want)
        current = self.selected_rule()
        if row >= 0 and (current is None or current.id != self._want):
            self.table.selectRow(row)


__all__ = ["HEADERS", "RulesPanel"]
