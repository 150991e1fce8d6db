"""The docked approval queue: pending and decided approvals, and the operator's decisions.

Keyboard first: A approves, D denies (asks for a reason), E edits the arguments
and approves, T and C jump to the timeline and the context. Several selected
approvals are decided one by one, each its own compare-and-set; the results
are reported as they arrive ("approved 3, 1 already denied by bob"). The queue
never pokes its rows after a decision: the store's change event removes them.
All agent text is shown as plain text.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from functools import partial

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontDatabase, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from model.approval_model import (
    D_REASON,
    D_STATUS,
    EXPIRES,
    Clock,
    DecidedApprovalModel,
    PendingApprovalModel,
    SecondsLeftRole,
    format_left,
    local_time,
    pretty_arguments,
    utc_now,
)
from model.services import Services
from store import readmodel as rm
from store.errors import AlreadyDecided, Expired
from store.source import Capability

from .approval_dialogs import EditArgumentsDialog, ReasonDialog
from .palette import status_colour
from .tree_view import readable

Index = QModelIndex | QPersistentModelIndex
PENDING_TAB, DECIDED_TAB = 0, 1
NOTE_MS = 8_000
MAX_RESULTS = 200


def plain_label(parent: QWidget, *, wrap: bool = True) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


@dataclass
class _Batch:
    """One press of Approve/Deny over several approvals; reports as each decision lands."""

    verb: str
    total: int
    next_id: str | None
    done: int = 0
    won: int = 0
    expired: int = 0
    failed: int = 0
    lost: Counter[tuple[str, str]] = field(default_factory=Counter)

    def summary(self) -> str:
        parts = [f"{self.verb} {self.won}"]
        parts += [f"{n} already {status} by {actor}" for (status, actor), n in self.lost.items()]
        if self.expired:
            parts.append(f"{self.expired} expired")
        if self.failed:
            parts.append(f"{self.failed} failed")
        pending = self.total - self.done
        return ", ".join(parts) + (f" ({pending} still running…)" if pending else "")


class _ColourDelegate(QStyledItemDelegate):
    """Colours the countdown (orange under a minute, grey once expired) and decided statuses."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:
        super().initStyleOption(option, index)
        palette: QPalette = option.palette  # type: ignore[attr-defined]
        if index.column() == EXPIRES and isinstance(index.model(), PendingApprovalModel):
            left = index.data(SecondsLeftRole)
            if left is not None and left <= 0:
                palette.setColor(QPalette.ColorRole.Text, palette.color(QPalette.ColorRole.PlaceholderText))
            elif left is not None and left < 60:
                palette.setColor(QPalette.ColorRole.Text, readable(status_colour("waiting"), palette))
        elif index.column() == D_STATUS and isinstance(index.model(), DecidedApprovalModel):
            palette.setColor(QPalette.ColorRole.Text, readable(status_colour(str(index.data())), palette))


class ApprovalQueue(QWidget):
    show_in_timeline = Signal(str, str)
    """(run_id, span_id or "")."""
    show_context = Signal(str, str)
    """(agent_id, approval_id)."""
    pending_count_changed = Signal(int)
    decisions_reported = Signal(str)
    """The summary line after a batch of decisions finished (also shown in the queue)."""

    def __init__(self, services: Services, parent: QWidget | None = None, *, clock: Clock = utc_now) -> None:
        super().__init__(parent)
        self._services = services
        self.pending_model = PendingApprovalModel(services, self, clock=clock)
        self.decided_model = DecidedApprovalModel(services, self, clock=clock)
        self._deciding: set[str] = set()
        self._mine: set[str] = set()
        """Approvals this queue decided (or tried to): their removal is reported as a result, not a note."""
        self._want_selected: str | None = None
        self._dialog: ReasonDialog | EditArgumentsDialog | None = None
        self._last_count = -1
        self._build()
        self._connect()
        self._update_actions()

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.pending_table = self._table(self.pending_model)
        self.decided_table = self._table(self.decided_model)
        for table, widths in ((self.pending_table, (88, 96, 100, 62, 80)),
                              (self.decided_table, (66, 100, 90, 70, 0, 52, 110))):
            for column, width in enumerate(widths):
                table.horizontalHeader().resizeSection(column, width)
        decided_header = self.decided_table.horizontalHeader()
        decided_header.setStretchLastSection(False)
        decided_header.setSectionResizeMode(D_REASON, QHeaderView.ResizeMode.Stretch)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.pending_table, "Pending")
        self.tabs.addTab(self.decided_table, "Decided")
        self.title = plain_label(self)
        title_font = QFont(self.title.font())
        title_font.setBold(True)
        self.title.setFont(title_font)
        self.meta = plain_label(self)
        self.arguments = QPlainTextEdit(self)
        self.arguments.setReadOnly(True)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setPlaceholderText("Select an approval to see its arguments.")
        self.approve_button = QPushButton("Approve  (A)", self)
        self.deny_button = QPushButton("Deny…  (D)", self)
        self.edit_button = QPushButton("Edit arguments…  (E)", self)
        self.timeline_button = QPushButton("Show in timeline  (T)", self)
        self.context_button = QPushButton("Show context  (C)", self)
        self.result_line = plain_label(self)
        self.results = QListWidget(self)
        self.results.setMaximumHeight(72)
        self.results.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.results.hide()
        self.note = plain_label(self)
        self.note.setAutoFillBackground(True)
        self.note.setContentsMargins(6, 3, 6, 3)
        self.note.hide()
        self._note_timer = QTimer(self)
        self._note_timer.setSingleShot(True)
        self._note_timer.timeout.connect(self.note.hide)
        self.setLayout(self._arrange())

    def _table(self, model: PendingApprovalModel | DecidedApprovalModel) -> QTableView:
        table = QTableView(self)
        table.setModel(model)
        table.setItemDelegate(_ColourDelegate(table))
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setAlternatingRowColors(True)
        table.setWordWrap(False)
        table.setShowGrid(False)
        table.verticalHeader().hide()
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
        table.horizontalHeader().setStretchLastSection(True)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        table.horizontalHeader().setHighlightSections(False)
        return table

    def _arrange(self) -> QVBoxLayout:
        detail = QWidget(self)
        box = QVBoxLayout(detail)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.title)
        box.addWidget(self.meta)
        box.addWidget(self.arguments, 1)
        decide = QHBoxLayout()
        for button in (self.approve_button, self.deny_button, self.edit_button):
            decide.addWidget(button)
        decide.addStretch(1)
        go = QHBoxLayout()
        for button in (self.timeline_button, self.context_button):
            go.addWidget(button)
        go.addStretch(1)
        box.addLayout(decide)
        box.addLayout(go)
        box.addWidget(self.result_line)
        box.addWidget(self.results)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.tabs)
        splitter.addWidget(detail)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout()
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.note)
        layout.addWidget(splitter, 1)
        return layout

    def _connect(self) -> None:
        for table in (self.pending_table, self.decided_table):
            table.selectionModel().selectionChanged.connect(self._on_selection)
            table.selectionModel().currentChanged.connect(self._on_selection)
        self.tabs.currentChanged.connect(self._on_selection)
        self.pending_model.ticked.connect(self._on_tick)
        self.pending_model.left.connect(self._on_left)
        for signal in (self.pending_model.rowsInserted, self.pending_model.rowsRemoved,
                       self.pending_model.modelReset, self.pending_model.loaded):
            signal.connect(self._count_changed)
        for model in (self.pending_model, self.decided_model):
            model.loaded.connect(self._select_wanted)
            model.rowsInserted.connect(self._select_wanted)
        actions = ((self.approve_button, "A", self.approve_selected),
                   (self.deny_button, "D", self.deny_selected),
                   (self.edit_button, "E", self.edit_selected),
                   (self.timeline_button, "T", self.show_selected_in_timeline),
                   (self.context_button, "C", self.show_selected_context))
        for button, key, slot in actions:
            button.clicked.connect(slot)
            shortcut = QShortcut(QKeySequence(key), self,
                                 context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)
        self.setFocusProxy(self.pending_table)
        self._count_changed()

    # -- what is selected -----------------------------------------------------------------
    def _active(self) -> tuple[QTableView, PendingApprovalModel | DecidedApprovalModel]:
        if self.tabs.currentIndex() == DECIDED_TAB:
            return self.decided_table, self.decided_model
        return self.pending_table, self.pending_model

    def current_approval(self) -> rm.Approval | None:
        table, model = self._active()
        current = table.currentIndex()
        if current.isValid() and table.selectionModel().isRowSelected(current.row(), QModelIndex()):
            return model.approval_at(current.row())
        rows = self._selected_rows(table)
        return model.approval_at(rows[0]) if rows else None

    @staticmethod
    def _selected_rows(table: QTableView) -> list[int]:
        return sorted(index.row() for index in table.selectionModel().selectedRows())

    def selected_pending(self) -> list[rm.Approval]:
        if self.tabs.currentIndex() != PENDING_TAB:
            return []
        found = (self.pending_model.approval_at(r) for r in self._selected_rows(self.pending_table))
        return [a for a in found if a is not None]

    def _decidable(self) -> list[rm.Approval]:
        return [a for a in self.selected_pending()
                if a.id not in self._deciding and not self.pending_model.is_expired(a)]

    def select_approval(self, approval_id: str) -> None:
        """Show an approval (pending or decided); when it has not loaded yet, as soon as it does."""
        for tab, table, model in ((PENDING_TAB, self.pending_table, self.pending_model),
                                  (DECIDED_TAB, self.decided_table, self.decided_model)):
            row = model.row_of(approval_id)
            if row >= 0:
                self._want_selected = None
                self.tabs.setCurrentIndex(tab)
                self._select_row(table, row)
                return
        self._want_selected = approval_id

    def _select_wanted(self) -> None:
        if self._want_selected:
            self.select_approval(self._want_selected)

    def _select_row(self, table: QTableView, row: int) -> None:
        index = table.model().index(row, 0)
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        table.selectionModel().setCurrentIndex(index, flags)
        table.scrollTo(index)

    # -- detail pane and buttons ----------------------------------------------------------
    def _on_selection(self, *_args: object) -> None:
        self._show_detail(self.current_approval())
        self._update_actions()

    def _on_tick(self) -> None:
        approval = self.current_approval()
        if approval is not None and self.tabs.currentIndex() == PENDING_TAB:
            self.meta.setText(self._meta_text(approval))
        self._update_actions()

    def _show_detail(self, approval: rm.Approval | None) -> None:
        if approval is None:
            self.title.setText("")
            self.meta.setText("")
            self.arguments.setPlainText("")
            return
        self.title.setText(f"{approval.tool_name} · {approval.agent_name or approval.agent_id}"
                           f" · {approval.project_name or approval.project_id}")
        self.meta.setText(self._meta_text(approval))
        text = pretty_arguments(approval.arguments)
        if approval.edited_arguments:
            text = (f"Approved with edited arguments:\n{pretty_arguments(approval.edited_arguments)}\n\n"
                    f"Originally requested:\n{text}")
        if self.arguments.toPlainText() != text:
            self.arguments.setPlainText(text)

    def _meta_text(self, approval: rm.Approval) -> str:
        if approval.status == rm.ApprovalStatus.PENDING:
            left = self.pending_model.seconds_left(approval)
            if left is None:
                deadline = "never expires"
            elif left <= 0:
                deadline = f"expired at {local_time(approval.expires_at)}"
            else:
                deadline = f"expires in {format_left(left)}"
            return f"{approval.id} · requested {local_time(approval.created_at)} · {deadline}"
        who = approval.decided_by or "the runtime"
        reason = f" — reason: {approval.reason}" if approval.reason else ""
        return f"{approval.id} · {approval.status} by {who} at {local_time(approval.decided_at)}{reason}"

    def _update_actions(self) -> None:
        selected = self.selected_pending()
        decidable = self._decidable()
        why = self._why_not(selected, decidable)
        for button, tip in ((self.approve_button, "Approve the selected approvals (A)"),
                            (self.deny_button, "Deny the selected approvals, with a reason (D)")):
            button.setEnabled(not why)
            button.setToolTip(html.escape(why or tip))
        # A schema that cannot carry edited arguments says so first: reopening with writes would not help.
        edit_why = (self._services.source.why_not(Capability.EDIT_ARGUMENTS) or why
                    or ("" if len(selected) == 1 else "Select exactly one approval to edit its arguments."))
        self.edit_button.setEnabled(not edit_why)
        self.edit_button.setToolTip(html.escape(edit_why or "Edit the arguments, then approve them (E)"))
        has_current = self.current_approval() is not None
        self.timeline_button.setEnabled(has_current)
        self.context_button.setEnabled(has_current)

    def _why_not(self, selected: list[rm.Approval], decidable: list[rm.Approval]) -> str:
        if self._deciding:
            return "A decision is being recorded…"
        denied = self._services.source.why_not(Capability.APPROVE)
        if denied:
            return denied
        if not selected:
            return "Select a pending approval first."
        if not decidable:
            first = selected[0]
            return (f"{first.id} expired at {local_time(first.expires_at)}; "
                    "it can no longer be approved or denied.")
        return ""

    # -- decisions ------------------------------------------------------------------------
    def approve_selected(self) -> None:
        if self.approve_button.isEnabled():
            self._decide(self._undecided(), approve=True)

    def _undecided(self) -> list[rm.Approval]:
        """Selected and not being decided; expired ones are reported as skipped when the decision runs."""
        return [a for a in self.selected_pending() if a.id not in self._deciding]

    def deny_selected(self) -> None:
        approvals = self._undecided()
        if not self.deny_button.isEnabled() or not approvals or self._dialog is not None:
            return
        dialog = ReasonDialog(approvals, self)
        dialog.finished.connect(lambda result: self._denial_finished(dialog, approvals, result))
        self._dialog = dialog
        dialog.open()

    def _denial_finished(self, dialog: ReasonDialog, approvals: list[rm.Approval], result: int) -> None:
        self._dialog = None
        dialog.deleteLater()
        if result == ReasonDialog.DialogCode.Accepted:
            self._decide(approvals, approve=False, reason=dialog.reason())
        self.pending_table.setFocus()

    def edit_selected(self) -> None:
        approvals = self._decidable()
        if not self.edit_button.isEnabled() or len(approvals) != 1 or self._dialog is not None:
            return
        dialog = EditArgumentsDialog(approvals[0], self)
        dialog.finished.connect(lambda result: self._edit_finished(dialog, approvals, result))
        self._dialog = dialog
        dialog.open()

    def _edit_finished(self, dialog: EditArgumentsDialog, approvals: list[rm.Approval], result: int) -> None:
        self._dialog = None
        dialog.deleteLater()
        if result == EditArgumentsDialog.DialogCode.Accepted:
            self._decide(approvals, approve=True, edited=dialog.arguments())
        self.pending_table.setFocus()

    def _decide(self, approvals: list[rm.Approval], approve: bool, reason: str | None = None,
                edited: str | None = None) -> None:
        live = [a for a in approvals if not self.pending_model.is_expired(a)]  # may have expired meanwhile
        if not approvals:
            return
        ids = [a.id for a in approvals]
        batch = _Batch("approved" if approve else "denied", len(ids), self._next_after(ids))
        self._deciding.update(a.id for a in live)
        self._mine.update(ids)
        self.result_line.setText(f"{'Approving' if approve else 'Denying'} {len(live)}…")
        for approval in approvals:
            if approval not in live:
                batch.expired += 1
                batch.done += 1
                self._report(f"✖ {approval.id} ({approval.tool_name}) expired; skipped")
        if not live:
            self._finish_batch(batch)
            return
        self._update_actions()
        source, actor = self._services.source, self._services.actor
        for approval in live:
            self._services.runner.submit(source.decide, approval.id, approve, actor, reason, edited,
                                         on_done=partial(self._decided, batch, approval),
                                         on_error=partial(self._not_decided, batch, approval))

    def _next_after(self, ids: list[str]) -> str | None:
        """The pending approval to move to once these are decided: the next one below, else above."""
        rows = [self.pending_model.row_of(i) for i in ids]
        order = self.pending_model.ids()
        last = max(rows) if rows else -1
        below = [i for i in order[last + 1:] if i not in ids and i not in self._deciding]
        above = [i for i in reversed(order[:last]) if i not in ids and i not in self._deciding]
        candidates = below + above
        return candidates[0] if candidates else None

    def _decided(self, batch: _Batch, approval: rm.Approval, decided: rm.Approval) -> None:
        batch.won += 1
        self._report(f"✔ {approval.id} ({approval.tool_name}) {decided.status}")
        self._finish_one(batch, approval.id)

    def _not_decided(self, batch: _Batch, approval: rm.Approval, exc: BaseException) -> None:
        if isinstance(exc, AlreadyDecided):
            actor = exc.actor or "the runtime"
            batch.lost[(exc.status, actor)] += 1
            self._report(f"✖ {approval.id} ({approval.tool_name}) was already {exc.status} by {actor}")
        elif isinstance(exc, Expired):
            batch.expired += 1
            self._report(f"✖ {approval.id} ({approval.tool_name}) expired before the decision")
        else:
            batch.failed += 1
            self._report(f"✖ {approval.id} ({approval.tool_name}): {exc}")
        self.pending_model.refresh([approval.id])  # its change may not have reached us yet
        self._finish_one(batch, approval.id)

    def _report(self, line: str) -> None:
        self.results.insertItem(0, line)
        while self.results.count() > MAX_RESULTS:
            self.results.takeItem(self.results.count() - 1)
        self.results.show()

    def _finish_one(self, batch: _Batch, approval_id: str) -> None:
        batch.done += 1
        self._deciding.discard(approval_id)
        if batch.done < batch.total:
            self.result_line.setText(self._sentence(batch.summary()))
            return
        self._finish_batch(batch)

    @staticmethod
    def _sentence(text: str) -> str:
        return text[:1].upper() + text[1:]

    def _finish_batch(self, batch: _Batch) -> None:
        summary = batch.summary()
        self.result_line.setText(self._sentence(summary))
        self._update_actions()
        if batch.next_id and self.pending_model.row_of(batch.next_id) >= 0:
            self.tabs.setCurrentIndex(PENDING_TAB)
            self._select_row(self.pending_table, self.pending_model.row_of(batch.next_id))
        self.pending_table.setFocus()
        self.decisions_reported.emit(summary)

    # -- decisions made elsewhere ---------------------------------------------------------
    def _on_left(self, approval_id: str, approval: rm.Approval | None) -> None:
        current = self.pending_table.currentIndex()
        if current.isValid() and not self.pending_table.selectionModel().hasSelection():
            self._select_row(self.pending_table, current.row())  # keep a row under the keyboard
        self._update_actions()
        self._on_selection()
        if approval_id in self._mine:
            return
        if approval is None:
            text = f"{approval_id} was removed from the store"
        elif approval.status == rm.ApprovalStatus.EXPIRED:
            text = f"{approval_id} ({approval.tool_name}) expired"
        else:
            text = (f"{approval_id} ({approval.tool_name}) was {approval.status} "
                    f"by {approval.decided_by or 'the runtime'}")
        self.show_note(text)
        self._report(f"• {text}")

    def show_note(self, text: str) -> None:
        palette = self.note.palette()
        palette.setColor(QPalette.ColorRole.Window, readable(status_colour("waiting"), palette).lighter(170)
                         if palette.color(QPalette.ColorRole.Base).lightness() > 128 else
                         status_colour("waiting").darker(260))
        self.note.setPalette(palette)
        self.note.setText(text)
        self.note.show()
        self._note_timer.start(NOTE_MS)

    def _count_changed(self, *_args: object) -> None:
        count = self.pending_model.rowCount()
        self.tabs.setTabText(PENDING_TAB, f"Pending ({count})" if count else "Pending")
        if count != self._last_count:
            self._last_count = count
            self.pending_count_changed.emit(count)

    # -- navigation -----------------------------------------------------------------------
    def show_selected_in_timeline(self) -> None:
        approval = self.current_approval()
        if approval is not None:
            self.show_in_timeline.emit(approval.run_id, approval.span_id or "")

    def show_selected_context(self) -> None:
        approval = self.current_approval()
        if approval is not None:
            self.show_context.emit(approval.agent_id, approval.id)

