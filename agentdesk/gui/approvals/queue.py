"""The docked approval queue: pending and decided approvals, and the operator's decisions.

Keyboard first: A approves, D denies (asks for a reason), E edits the arguments
and approves, T and C jump to the timeline and the context. This module lays
the queue out and keeps its selection, buttons and counts in step with the
models; `approval_decisions` runs the decisions, `approval_details` shows the
current approval and `approval_report` says what happened. All agent text is
shown as plain text.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QPushButton, QSplitter, QTableView, QTabWidget, QVBoxLayout, QWidget

from agentdesk.gui.approvals.decisions import DecisionFlow, Dialog
from agentdesk.gui.approvals.details import ApprovalDetails
from agentdesk.gui.approvals.presence import PresenceLine
from agentdesk.gui.approvals.questions import QuestionsPanel
from agentdesk.gui.approvals.report import NoteBanner, ResultLog, left_text
from agentdesk.gui.approvals.tables import decided_table, pending_table, select_row, selected_rows
from agentdesk.gui.shared.flow import flow_of
from agentdesk.model.approval_format import Clock, utc_now
from agentdesk.model.approvals.decided import DecidedApprovalModel
from agentdesk.model.approvals.pending import PendingApprovalModel
from agentdesk.model.approvals.presence import PresenceModel
from agentdesk.model.plain import tooltip
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.store import readmodel as rm
from agentdesk.store.approvals.heartbeat import GONE_AFTER_S, dismiss_gone
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.source import Capability

PENDING_TAB, DECIDED_TAB, QUESTIONS_TAB = 0, 1, 2
APPROVE_TIP = "Approve the selected approvals (A)"
DENY_TIP = "Deny the selected approvals, with a reason (D)"
EDIT_TIP = "Edit the arguments, then approve them (E)"
DISMISS_GONE_TIP = ("Deny every pending approval whose agent stopped waiting (no heartbeat for "
                    f"{GONE_AFTER_S:g} s), with the reason \"requester gone\"")


class ApprovalQueue(QWidget):
    show_in_timeline = Signal(str, str)
    """(run_id, span_id or "")."""
    show_context = Signal(str, str)
    """(agent_id, approval_id)."""
    pending_count_changed = Signal(int)
    """Pending approvals."""
    questions_count_changed = Signal(int)
    """Pending questions (the Questions tab)."""
    decisions_reported = Signal(str)
    """The summary line after a batch of decisions finished (also shown in the queue)."""

    def __init__(self, services: Services, parent: QWidget | None = None, *, clock: Clock = utc_now) -> None:
        super().__init__(parent)
        self._services = services
        self.pending_model = PendingApprovalModel(services, self, clock=clock)
        self.decided_model = DecidedApprovalModel(services, self, clock=clock)
        self.flow = DecisionFlow(services, self.pending_model, self)
        self.presence = PresenceModel(services, self)
        self._want_selected: str | None = None
        self._last_count = -1
        self._last_questions = -1
        self._build()
        self._connect()
        self._update_actions()

    @property
    def _dialog(self) -> Dialog | None:
        """The open deny or edit dialog, if any (tests drive it)."""
        return self.flow.dialog

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.pending_table = pending_table(self.pending_model, self)
        self.decided_table = decided_table(self.decided_model, self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.pending_table, "Pending")
        self.tabs.addTab(self.decided_table, "Decided")
        self.questions = QuestionsPanel(self._services, self)
        self.tabs.addTab(self.questions, "Questions")
        self.details = ApprovalDetails(self.pending_model, self)
        self.flow.displayed = self.details.shown_hash
        self.presence_line = PresenceLine(self)
        self.title, self.meta, self.arguments = self.details.title, self.details.meta, self.details.arguments
        self.approve_button = QPushButton("Approve  (A)", self)
        self.deny_button = QPushButton("Deny…  (D)", self)
        self.edit_button = QPushButton("Edit arguments…  (E)", self)
        self.timeline_button = QPushButton("Show in timeline  (T)", self)
        self.context_button = QPushButton("Show context  (C)", self)
        self.dismiss_gone_button = QPushButton("Dismiss gone requesters", self)
        self.dismiss_gone_button.setToolTip(DISMISS_GONE_TIP)
        self.dismiss_gone_button.hide()
        self.log = ResultLog(self)
        self.result_line, self.results = self.log.summary, self.log.lines
        self.note = NoteBanner(self)
        self.setLayout(self._arrange())

    def _arrange(self) -> QVBoxLayout:
        detail = self.approval_pane = QWidget(self)
        box = QVBoxLayout(detail)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.details, 1)
        box.addWidget(self.presence_line)
        # The buttons wrap onto more lines in a narrow dock instead of running off its edge.
        box.addLayout(flow_of(self.approve_button, self.deny_button, self.edit_button))
        box.addLayout(flow_of(self.timeline_button, self.context_button, self.dismiss_gone_button))
        box.addWidget(self.log)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.tabs)
        splitter.addWidget(detail)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)  # the arguments must be readable before anything is approved
        layout = QVBoxLayout()
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.note)
        layout.addWidget(splitter, 1)
        return layout

    def _connect(self) -> None:
        self._connect_selection()
        self._connect_models()
        self._connect_flow()
        actions = ((self.approve_button, "A", self.approve_selected, "Approve the selected approvals"),
                   (self.deny_button, "D", self.deny_selected, "Deny the selected approvals (asks for a reason)"),
                   (self.edit_button, "E", self.edit_selected, "Edit the arguments, then approve them"),
                   (self.timeline_button, "T", self.show_selected_in_timeline, "Show the approval in the timeline"),
                   (self.context_button, "C", self.show_selected_context, "Show the agent's context"))
        for button, key, slot, does in actions:
            button.clicked.connect(slot)
            shortcut = QShortcut(QKeySequence(key), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.setWhatsThis(f"Approvals: {does}")  # the F1 sheet reads it
            shortcut.activated.connect(slot)
        self.setFocusProxy(self.pending_table)
        self._count_changed()

    def _connect_selection(self) -> None:
        for table in (self.pending_table, self.decided_table):
            table.selectionModel().selectionChanged.connect(self._on_selection)
            table.selectionModel().currentChanged.connect(self._on_selection)
        self.tabs.currentChanged.connect(self._on_selection)
        self.tabs.currentChanged.connect(lambda tab: self.approval_pane.setVisible(tab != QUESTIONS_TAB))
        self.questions.count_changed.connect(self._count_changed)
        self.questions.reported.connect(self.log.add)

    def _connect_models(self) -> None:
        self.pending_model.ticked.connect(self._on_tick)
        self.presence.changed.connect(self.presence_line.show_others)
        self.pending_model.left.connect(self._on_left)
        self.pending_model.gone_changed.connect(self._on_gone)
        self.dismiss_gone_button.clicked.connect(self.dismiss_gone)
        for signal in (self.pending_model.rowsInserted, self.pending_model.rowsRemoved,
                       self.pending_model.modelReset, self.pending_model.loaded,
                       self.pending_model.ticked):  # a row passing its deadline leaves the count
            signal.connect(self._count_changed)
        for model in (self.pending_model, self.decided_model):
            model.loaded.connect(self._select_wanted)
            model.rowsInserted.connect(self._select_wanted)

    def _connect_flow(self) -> None:
        self.flow.reported.connect(self.log.add)
        self.flow.progress.connect(self.result_line.setText)
        self.flow.busy_changed.connect(self._update_actions)
        self.flow.finished.connect(self._decisions_finished)
        self.flow.dialog_closed.connect(self.pending_table.setFocus)

    # -- what is selected -----------------------------------------------------------------
    def _active(self) -> tuple[QTableView, PendingApprovalModel | DecidedApprovalModel]:
        if self.tabs.currentIndex() == QUESTIONS_TAB:
            return self.pending_table, self.pending_model  # the approval pane is hidden meanwhile
        if self.tabs.currentIndex() == DECIDED_TAB:
            return self.decided_table, self.decided_model
        return self.pending_table, self.pending_model

    def current_approval(self) -> rm.Approval | None:
        table, model = self._active()
        current = table.currentIndex()
        if current.isValid() and table.selectionModel().isRowSelected(current.row(), QModelIndex()):
            return model.approval_at(current.row())
        rows = selected_rows(table)
        return model.approval_at(rows[0]) if rows else None

    def selected_pending(self) -> list[rm.Approval]:
        if self.tabs.currentIndex() != PENDING_TAB:
            return []
        found = (self.pending_model.approval_at(r) for r in selected_rows(self.pending_table))
        return [a for a in found if a is not None]

    def select_approval(self, approval_id: str) -> None:
        """Show an approval (pending or decided); when it has not loaded yet, as soon as it does."""
        for tab, table, model in ((PENDING_TAB, self.pending_table, self.pending_model),
                                  (DECIDED_TAB, self.decided_table, self.decided_model)):
            row = model.row_of(approval_id)
            if row >= 0:
                self._want_selected = None
                self.tabs.setCurrentIndex(tab)
                select_row(table, row)
                return
        self._want_selected = approval_id

    def select_question(self, ask_id: str) -> None:
        """Show a question in the Questions tab (as soon as it has loaded)."""
        self.tabs.setCurrentIndex(QUESTIONS_TAB)
        self.questions.select_ask(ask_id)

    def _select_wanted(self) -> None:
        if self._want_selected:
            self.select_approval(self._want_selected)

    # -- detail pane and buttons ----------------------------------------------------------
    def _on_selection(self, *_args: object) -> None:
        approval = self.current_approval()
        self.details.show_approval(approval)
        self.presence.look_at(approval.id if approval is not None else None)
        self._update_actions()

    def _on_tick(self) -> None:
        approval = self.current_approval()
        if approval is not None and self.tabs.currentIndex() == PENDING_TAB:
            self.details.refresh_meta(approval)
        self._update_actions()

    def _update_actions(self) -> None:
        selected = self.selected_pending()
        why = self.flow.why_not(selected)
        for button, tip in ((self.approve_button, APPROVE_TIP), (self.deny_button, DENY_TIP)):
            button.setEnabled(not why)
            button.setToolTip(tooltip(why or tip))
        edit_why = self.flow.why_not_edit(selected)
        self.edit_button.setEnabled(not edit_why)
        self.edit_button.setToolTip(tooltip(edit_why or EDIT_TIP))
        has_current = self.current_approval() is not None
        self.timeline_button.setEnabled(has_current)
        self.context_button.setEnabled(has_current)

    # -- decisions ------------------------------------------------------------------------
    def approve_selected(self) -> None:
        if self.approve_button.isEnabled():
            self.flow.approve(self.flow.undecided(self.selected_pending()))

    def deny_selected(self) -> None:
        if self.deny_button.isEnabled():
            self.flow.deny(self.flow.undecided(self.selected_pending()))

    def edit_selected(self) -> None:
        if self.edit_button.isEnabled():
            self.flow.edit(self.flow.decidable(self.selected_pending()))

    def _decisions_finished(self, summary: str, next_id: str) -> None:
        self.log.finish(summary)
        self._update_actions()
        row = self.pending_model.row_of(next_id) if next_id else -1
        if row >= 0:
            self.tabs.setCurrentIndex(PENDING_TAB)
            select_row(self.pending_table, row)
        self.pending_table.setFocus()
        self.decisions_reported.emit(summary)

    def _on_left(self, approval_id: str, approval: rm.Approval | None) -> None:
        """A pending approval was decided, expired or removed: keep a row selected and say why."""
        current = self.pending_table.currentIndex()
        if current.isValid() and not self.pending_table.selectionModel().hasSelection():
            select_row(self.pending_table, current.row())  # keep a row under the keyboard
        self._on_selection()
        if not self.flow.is_mine(approval_id):
            text = left_text(approval_id, approval)
            self.note.show_text(text)
            self.log.add(f"• {text}")

    def _count_changed(self, *_args: object) -> None:
        """The tabs' counts; pending approvals and pending questions are reported apart (the window's title and
        status bar name both). Approvals count as `agentdesk approvals` counts them (overdue ones are expired)."""
        count, questions = self.pending_model.awaiting_count(), self.questions.model.pending
        self.tabs.setTabText(PENDING_TAB, f"Pending ({count})" if count else "Pending")
        self.tabs.setTabText(QUESTIONS_TAB, f"Questions ({questions})" if questions else "Questions")
        if questions != self._last_questions:
            self._last_questions = questions
            self.questions_count_changed.emit(questions)
        if count != self._last_count:
            self._last_count = count
            self.pending_count_changed.emit(count)

    # -- requesters that stopped waiting --------------------------------------------------
    def _on_gone(self, count: int) -> None:
        native = isinstance(self._services.source, NativeSource) and not self._services.source.store.read_only
        self.dismiss_gone_button.setText(f"Dismiss {count} gone requester{'s' if count != 1 else ''}")
        self.dismiss_gone_button.setVisible(count > 0 and native)
        refusal = self._services.source.why_not(Capability.DENY)  # a PostgreSQL viewer may not deny
        self.dismiss_gone_button.setEnabled(not refusal)
        self.dismiss_gone_button.setToolTip(refusal or DISMISS_GONE_TIP)

    def dismiss_gone(self) -> None:
        """Deny, in one store command, the pending approvals nobody waits for (each still CAS-guarded)."""
        source = self._services.source
        ids = self.pending_model.gone_ids()
        if not ids or not isinstance(source, NativeSource):
            return

        spawn(self._dismiss_gone(source.store, ids), error_signal=self._services.runner.error)

    async def _dismiss_gone(self, store: Store, ids: list[str]) -> None:
        try:
            dismissed = await self._services.runner.run(dismiss_gone, store, self._services.actor, ids)
        except Exception as exc:
            self.log.add(f"• Could not dismiss: {exc}")
            return
        kept = len(ids) - len(dismissed)
        again = f"; {kept} came back or were decided meanwhile" if kept else ""
        self.log.add(f"• Dismissed {len(dismissed)} approvals whose requester was gone{again}.")

    # -- navigation -----------------------------------------------------------------------
    def show_selected_in_timeline(self) -> None:
        approval = self.current_approval()
        if approval is not None:
            self.show_in_timeline.emit(approval.run_id, approval.span_id or "")

    def show_selected_context(self) -> None:
        approval = self.current_approval()
        if approval is not None:
            self.show_context.emit(approval.agent_id, approval.id)
