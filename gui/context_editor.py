"""The context editor: what an agent's model will see next, and the operator's tools to change it.

Every change goes to the store as a command guarded by the revision the operator
was looking at; the tree only changes when the resulting event reloads it. When
someone else got there first the store refuses, the editor says so in a message
bar, reloads, and nothing is overwritten.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import datetime

from PySide6.QtCore import QItemSelection, QModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolBar,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from model.context_model import LOCKED, PREVIEW, TOKENS, VISIBLE, ContextModel, GroupRow, ItemRow
from model.services import Services
from store import readmodel as rm
from store.errors import Conflict, StaleRevision
from store.source import Capability

from .context_widgets import CompactDialog, EditItemDialog, MessageBar, TokenGauge, describe, plain_label

DETAIL_CAP = 200_000


class ContextEditor(QWidget):
    conflict = Signal(str)
    """A command lost to someone else's change: one sentence for the status bar."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.model = ContextModel(services, self)
        self._current: tuple[str, str] | None = None
        self._select_next: Callable[[], tuple[str, str] | None] | None = None
        self._pending_conflict: int | None = None
        """The revision a command lost with was based on, until the reload shows the new one."""
        self._show_all: str | None = None
        self._retry: Callable[[], None] | None = None
        self._detail_key: tuple[str, int, int] | None = None
        self._build()
        self.model.reloaded.connect(self._on_reloaded)
        self.model.rowsInserted.connect(self._expand_new_groups)
        self.model.command_failed.connect(lambda exc, basis: self._command_failed(exc, basis, "do that"))
        self.model.load_failed.connect(lambda text: self.message_bar.show_message(text))

    # -- building ------------------------------------------------------------------------------
    def _build(self) -> None:
        self.view = self._build_view()
        self.gauge = TokenGauge()
        self.banner = plain_label()
        self.banner.setObjectName("asOfBanner")
        self.banner.setStyleSheet("#asOfBanner { background: rgba(240, 160, 32, 60); padding: 4px 8px; "
                                  "border-radius: 4px; }")
        self.banner.hide()
        self.message_bar = MessageBar()
        self.toolbar = QToolBar()
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self._build_actions()
        self.summary = plain_label()
        top = QHBoxLayout()
        top.addWidget(self.toolbar, 1)
        top.addWidget(self.summary)
        top.addWidget(self.gauge)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(self._build_detail())
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        body = QWidget()
        inner = QVBoxLayout(body)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addLayout(top)
        inner.addWidget(self.banner)
        inner.addWidget(self.message_bar)
        inner.addWidget(split, 1)
        self.placeholder = plain_label("Choose an agent to see and edit its context window.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.stack)

    def _build_view(self) -> QTreeView:
        view = QTreeView()
        view.setModel(self.model)
        view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        view.setUniformRowHeights(True)
        view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(PREVIEW, QHeaderView.ResizeMode.Stretch)
        for column, width in ((0, 210), (1, 80), (TOKENS, 70), (VISIBLE, 62), (LOCKED, 62)):
            view.setColumnWidth(column, width)
        view.selectionModel().selectionChanged.connect(self._on_selection)
        view.selectionModel().currentChanged.connect(self._on_current)
        view.doubleClicked.connect(self._on_double_click)
        return view

    def _build_detail(self) -> QWidget:
        self.detail_title = plain_label()
        self.show_all_button = QPushButton()
        self.show_all_button.clicked.connect(self._on_show_all)
        self.show_all_button.hide()
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Select an item to see its full content.")
        head = QHBoxLayout()
        head.addWidget(self.detail_title, 1)
        head.addWidget(self.show_all_button)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(head)
        layout.addWidget(self.detail, 1)
        return box

    def _action(self, text: str, keys: list[QKeySequence | QKeySequence.StandardKey | str],
                slot: Callable[[], object], on: QWidget, context: Qt.ShortcutContext) -> QAction:
        action = QAction(text, self)
        action.setShortcuts([QKeySequence(k) for k in keys])
        action.setShortcutContext(context)
        action.triggered.connect(lambda: slot())
        on.addAction(action)
        return action

    def _build_actions(self) -> None:
        tree, mine = Qt.ShortcutContext.WidgetShortcut, Qt.ShortcutContext.WidgetWithChildrenShortcut
        self.edit_action = self._action("Edit…", ["Return", "Enter", "F2"], self.edit_selected, self.view,
                                        tree)
        self.compact_action = self._action("Compact…", ["Ctrl+K"], self.compact_selected, self, mine)
        self.undo_action = self._action("Undo compaction", ["Ctrl+Z"], self.undo_selected, self, mine)
        self.visible_action = self._action("Hide turn", ["Space"], self.toggle_visible, self.view, tree)
        self.lock_action = self._action("Lock", ["L"], self.toggle_locked, self.view, tree)
        for action in (self.visible_action, self.lock_action, self.edit_action, self.compact_action,
                       self.undo_action):
            self.toolbar.addAction(action)

    # -- public API ----------------------------------------------------------------------------
    def show_agent(self, agent_id: str | None, at_time: datetime | None = None) -> None:
        self.message_bar.clear()
        self._current, self._show_all, self._pending_conflict = None, None, None
        self.model.set_agent(agent_id, at_time)
        self.stack.setCurrentIndex(0 if agent_id is None else 1)
        self._update_banner()
        self._refresh()

    def shutdown(self) -> None:
        """Stop reloading; call before the services close (the window does it on quit)."""
        self.model.close()

    def selected_item_ids(self) -> list[str]:
        """Selected items in context order; a selected group row stands for its items."""
        chosen: set[str] = set()
        for index in self.view.selectionModel().selectedRows(0):
            value = self.model.row_value(index)
            if isinstance(value, ItemRow):
                chosen.add(value.item.id)
            elif isinstance(value, GroupRow):
                chosen.update(self.model.group_item_ids(value.group.id))
        order = [i.id for i in self.model.snapshot.items] if self.model.snapshot else []
        return [i for i in order if i in chosen]

    def select_item(self, item_id: str) -> None:
        self._select(("item", item_id))

    # -- commands ------------------------------------------------------------------------------
    def toggle_visible(self) -> None:
        index = self.view.currentIndex().siblingAtColumn(VISIBLE)
        if index.isValid() and self.model.toggle_refusal(index) is None:
            state = self.model.data(index, Qt.ItemDataRole.CheckStateRole)
            self._toggle(index, state != Qt.CheckState.Checked)

    def toggle_locked(self) -> None:
        index = self.view.currentIndex().siblingAtColumn(LOCKED)
        if index.isValid() and self.model.toggle_refusal(index) is None:
            state = self.model.data(index, Qt.ItemDataRole.CheckStateRole)
            self._toggle(index, state != Qt.CheckState.Checked)

    def _toggle(self, index: QModelIndex, on: bool) -> None:
        value, basis = self.model.row_value(index), self._revision()
        fail = self._on_error(basis, "change the item")
        if index.column() == LOCKED and isinstance(value, ItemRow):
            self.model.set_item_locked(value.item.id, on, on_error=fail)
        elif isinstance(value, (ItemRow, GroupRow)):
            group_id = value.item.group_id if isinstance(value, ItemRow) else value.group.id
            self.model.set_group_visible(group_id, on, on_error=fail)

    def edit_selected(self, text: str | None = None) -> EditItemDialog | None:
        item = self._current_item()
        if item is None or self._edit_refusal() is not None:
            return None
        dialog = EditItemDialog(item, self._revision(), text, self)
        dialog.finished.connect(lambda result: self._edit_finished(dialog, result))
        dialog.open()
        return dialog

    def _edit_finished(self, dialog: EditItemDialog, result: int) -> None:
        dialog.deleteLater()
        if result != EditItemDialog.DialogCode.Accepted:
            return
        text, item_id = dialog.text(), dialog.item_id

        def reopen() -> None:
            self.select_item(item_id)
            if self.edit_selected(text) is None:
                self.message_bar.show_message(f"Your edit cannot be reopened: {self._edit_refusal()}")

        self.model.edit_item(item_id, text, dialog.revision,
                             on_error=self._on_error(dialog.context_revision, "save the edit", reopen))

    def compact_selected(self) -> CompactDialog | None:
        ids, why = self._compact_plan()
        if why is not None:
            return None
        items = [i for i in (self.model.item(x) for x in ids) if i is not None]
        dialog = CompactDialog(items, self._revision(), self)
        dialog.finished.connect(lambda result: self._compact_finished(dialog, result))
        dialog.open()
        return dialog

    def _compact_finished(self, dialog: CompactDialog, result: int) -> None:
        dialog.deleteLater()
        if result != CompactDialog.DialogCode.Accepted:
            return

        def done(compaction_id: str) -> None:
            self._select_next = lambda: self._summary_key(compaction_id)

        self.model.compact(dialog.item_ids, dialog.summary_text(), dialog.focus_text(),
                           dialog.context_revision, on_done=done,
                           on_error=self._on_error(dialog.context_revision, "compact"))

    def undo_selected(self) -> None:
        comp, why = self._undo_plan()
        if comp is None or why is not None:
            return
        first = comp.covered_item_ids[0] if comp.covered_item_ids else None
        self._select_next = lambda: ("item", first) if first else None
        self.model.undo_compaction(comp.id, on_error=self._on_error(self._revision(), "undo the compaction"))

    # -- refusals: each says why, so a disabled action can explain itself -----------------------
    def _current_item(self) -> rm.ContextItem | None:
        value = self.model.row_value(self.view.currentIndex())
        return value.item if isinstance(value, ItemRow) else None

    def _edit_refusal(self) -> str | None:
        value = self.model.row_value(self.view.currentIndex())
        if why := self.model.cannot(Capability.EDIT_ITEM):
            return why
        if not isinstance(value, ItemRow):
            return "Select an item to edit its text."
        if value.covered:
            return "This item was replaced by a compaction; undo the compaction to edit it."
        if value.item.locked:
            return "This item is locked; unlock it (L) before editing."
        return None

    def _compact_plan(self) -> tuple[list[str], str | None]:
        ids = self.selected_item_ids()
        if why := self.model.cannot(Capability.COMPACT):
            return ids, why
        if not ids:
            return ids, "Select consecutive visible, unlocked items to compact them into a summary."
        live = {item_id: n for n, item_id in enumerate(self.model.live_item_ids())}
        if any(i not in live for i in ids):
            return ids, "The selection includes items a compaction already replaced."
        spots = [live[i] for i in ids]
        if spots != list(range(spots[0], spots[0] + len(spots))):
            return ids, "Only consecutive items can be compacted; the selection has gaps."
        items = [self.model.item(i) for i in ids]
        if any(i is not None and not i.visible for i in items):
            return ids, "Hidden items cannot be compacted; show them first or leave them out."
        if any(i is not None and i.locked for i in items):
            return ids, "Locked items cannot be compacted; unlock them or leave them out."
        return ids, None

    def _undo_plan(self) -> tuple[rm.Compaction | None, str | None]:
        value = self.model.row_value(self.view.currentIndex())
        if isinstance(value, GroupRow) and value.group.kind == "compaction":
            first = self.model.group_item_ids(value.group.id)[:1]
            value = self.model.row_value(self.model.index_of("item", first[0])) if first else None
        comp = self.model.compaction(value.item.summary_of) if isinstance(value, ItemRow) else None
        if why := self.model.cannot(Capability.UNDO_COMPACTION):
            return comp, why
        if comp is None:
            return None, "Select a compaction summary to bring back the items it replaced."
        if isinstance(value, ItemRow) and value.covered:
            return comp, "A later compaction replaced this summary; undo that one first."
        return comp, None

    # -- conflicts -------------------------------------------------------------------------------
    def _on_error(self, basis: int, what: str, retry: Callable[[], None] | None = None
                  ) -> Callable[[BaseException], None]:
        return lambda exc: self._command_failed(exc, basis, what, retry)

    def _command_failed(self, exc: BaseException, basis: int, what: str,
                        retry: Callable[[], None] | None = None) -> None:
        self._retry = retry
        if isinstance(exc, StaleRevision):
            self._pending_conflict = basis
            self.model.reload()  # supersedes any older reload still in flight
            return
        text = f"{exc} Reloaded; nothing was changed." if isinstance(exc, Conflict) else \
            f"Could not {what}: {exc}"
        self._announce(text, isinstance(exc, Conflict))

    def _announce(self, text: str, conflict: bool) -> None:
        retry = self._retry
        self.message_bar.show_message(text, "Reopen my edit" if retry else None, retry)
        if conflict:
            self.conflict.emit(text)

    def _resolve_conflict(self) -> None:
        if self._pending_conflict is None:
            return
        basis, self._pending_conflict = self._pending_conflict, None
        lost = " Your text was kept: reopen it to apply it to the new version." if self._retry else ""
        self._announce(f"Someone else changed this context (revision {basis} → {self._revision()}). "
                       f"Reloaded; nothing was overwritten.{lost}", True)

    # -- reacting to the model and the selection --------------------------------------------------
    def _on_reloaded(self) -> None:
        self._restore_selection()
        self._resolve_conflict()
        self._refresh()

    def _restore_selection(self) -> None:
        wanted = self._select_next() if self._select_next else None
        if wanted is not None and self.model.index_of(*wanted).isValid():
            self._select_next = None
            self._select(wanted)
        elif not self.view.currentIndex().isValid() and self._current is not None:
            self._select(self._current)

    def _select(self, key: tuple[str, str]) -> None:
        index = self.model.index_of(*key)
        if index.isValid():
            self.view.scrollTo(index)
            self.view.setCurrentIndex(index)

    def _summary_key(self, compaction_id: str) -> tuple[str, str] | None:
        comp = self.model.compaction(compaction_id)
        return ("item", comp.summary_item_id) if comp else None

    def _expand_new_groups(self, parent: QModelIndex, first: int, last: int) -> None:
        if not parent.isValid():
            for row in range(first, last + 1):
                self.view.expand(self.model.index(row, 0))

    def _on_selection(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self._update_actions()

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        value = self.model.row_value(current)
        if isinstance(value, ItemRow):
            self._current = ("item", value.item.id)
        elif isinstance(value, GroupRow):
            self._current = ("group", value.group.id)
        self._refresh()

    def _on_double_click(self, index: QModelIndex) -> None:
        if index.column() not in (VISIBLE, LOCKED) and isinstance(self.model.row_value(index), ItemRow):
            self.edit_selected()

    def _refresh(self) -> None:
        ctx = self.model.snapshot
        self.gauge.setVisible(ctx is not None)
        if ctx is not None:
            self.gauge.set_tokens(ctx.visible_tokens, ctx.budget)
            live = [i for i in ctx.items if i.compaction_id is None]
            hidden = sum(not i.visible for i in live)
            self.summary.setText(f"{len(live)} items · {hidden} hidden · "
                                 f"{sum(c.undone_at is None for c in ctx.compactions)} compactions · "
                                 f"revision {ctx.context_revision}")
        self.summary.setVisible(ctx is not None)
        self._update_banner()
        self._update_actions()
        self._update_detail()

    def _update_actions(self) -> None:
        current = self.view.currentIndex()
        self._enable(self.edit_action, "Edit the item's text (Enter, F2)", self._edit_refusal())
        self._enable(self.compact_action, "Replace the selected items by a summary (Ctrl+K)",
                     self._compact_plan()[1])
        self._enable(self.undo_action, "Bring back the items this summary replaced (Ctrl+Z)",
                     self._undo_plan()[1])
        visible = self.model.data(current.siblingAtColumn(VISIBLE), Qt.ItemDataRole.CheckStateRole)
        self.visible_action.setText("Hide turn" if visible == Qt.CheckState.Checked else "Show turn")
        self._enable(self.visible_action, "Show or hide the whole turn group (Space)",
                     self._toggle_refusal(current, VISIBLE))
        locked = self.model.data(current.siblingAtColumn(LOCKED), Qt.ItemDataRole.CheckStateRole)
        self.lock_action.setText("Unlock" if locked == Qt.CheckState.Checked else "Lock")
        self._enable(self.lock_action, "Lock the item against edits, hiding and compaction (L)",
                     self._toggle_refusal(current, LOCKED))

    def _toggle_refusal(self, current: QModelIndex, column: int) -> str | None:
        if not current.isValid():
            return "Select an item first."
        return self.model.toggle_refusal(current.siblingAtColumn(column))

    @staticmethod
    def _enable(action: QAction, hint: str, refusal: str | None) -> None:
        action.setEnabled(refusal is None)
        action.setToolTip(html.escape(refusal or hint))

    def _update_banner(self) -> None:
        at, ctx = self.model.as_of, self.model.snapshot
        self.banner.setVisible(at is not None and self.model.agent_id is not None)
        if at is None:
            return
        later = sum(1 for i in (ctx.items if ctx else ()) if i.created_at is not None and i.created_at > at)
        note = f"marked “later” ({later} so far)" if later else "marked “later” (none so far)"
        when = f"{at.astimezone():%Y-%m-%d %H:%M:%S}"
        self.banner.setText(f"Context as of {when}: items added after it are {note}.")

    # -- the full text of the selection -------------------------------------------------------------
    def _update_detail(self) -> None:
        value = self.model.row_value(self.view.currentIndex())
        if isinstance(value, ItemRow):
            self._show_text(value.item.id, self._item_title(value), value.item.content)
        elif isinstance(value, GroupRow):
            items = [i for i in (self.model.item(x) for x in self.model.group_item_ids(value.group.id)) if i]
            text = "\n\n".join(f"── {describe(i)} ──\n{i.content[:DETAIL_CAP]}" for i in items)
            title = f"{value.group.kind} group · {len(items)} items · {value.tokens:,} tokens"
            self._show_text(value.group.id, title, text)
        else:
            self._show_text("", "", "")

    def _item_title(self, row: ItemRow) -> str:
        item = row.item
        parts = [describe(item), f"revision {item.revision}", f"{item.token_estimate:,} tokens"]
        if item.created_at is not None:
            parts.append(f"added {item.created_at.astimezone():%Y-%m-%d %H:%M:%S}")
        if row.covered:
            parts.append("replaced by a compaction (the model does not see it)")
        elif not item.visible:
            parts.append("hidden from the model")
        if item.locked:
            parts.append("locked")
        return " · ".join(parts)

    def _show_text(self, key: str, title: str, text: str) -> None:
        full = key == self._show_all
        shown = text if full or len(text) <= DETAIL_CAP else text[:DETAIL_CAP]
        self.detail_title.setText(title)
        if self._detail_key != (key, len(shown), hash(shown)):
            self.detail.setPlainText(shown)
            self._detail_key = (key, len(shown), hash(shown))
        clipped = len(shown) < len(text)
        self.show_all_button.setVisible(clipped)
        if clipped:
            self.show_all_button.setText(f"Show all ({len(text):,} characters)")
            self.show_all_button.setToolTip(f"Only the first {DETAIL_CAP:,} characters are shown.")

    def _on_show_all(self) -> None:
        value = self.model.row_value(self.view.currentIndex())
        self._show_all = value.item.id if isinstance(value, ItemRow) else \
            value.group.id if isinstance(value, GroupRow) else None
        self._update_detail()

    def _revision(self) -> int:
        return self.model.snapshot.context_revision if self.model.snapshot else 0
