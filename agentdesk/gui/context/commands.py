"""The context editor's commands, from the operator's gesture to the store's answer.

Every change goes to the store as a command guarded by the revision the operator
was looking at; the tree only changes when the resulting event reloads it. When
someone else got there first the store refuses, the message bar says so once the
reload shows the newer revision, and nothing is overwritten. A refused edit
keeps the operator's text, to reopen at the new revision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDialog, QWidget

from agentdesk.gui.context.view import ContextTreeView
from agentdesk.gui.context.widgets import CompactDialog, EditItemDialog, MessageBar
from agentdesk.model.context import rules as rules
from agentdesk.model.context.model import ContextModel
from agentdesk.model.context.tree import ItemRow
from agentdesk.store.errors import Conflict, StaleRevision

Retry = Callable[[], None]
D = TypeVar("D", bound=QDialog)


class ContextCommands(QObject):
    conflict = Signal(str)
    """A command lost to someone else's change: one sentence for the status bar."""

    def __init__(self, model: ContextModel, view: ContextTreeView, message_bar: MessageBar,
                 dialog_parent: QWidget) -> None:
        super().__init__(dialog_parent)
        self.model, self.view, self.message_bar = model, view, message_bar
        self._dialog_parent = dialog_parent
        self._pending_conflict: int | None = None
        """The revision a command lost with was based on, until the reload shows the new one."""
        self._retry: Retry | None = None
        model.command_failed.connect(lambda exc, basis: self._failed(exc, basis, "do that"))

    def forget_conflict(self) -> None:
        self._pending_conflict = None

    # -- the five commands ---------------------------------------------------------------------
    def toggle(self, column: int) -> None:
        """Flip the Visible or Locked toggle of the current row (Space, L)."""
        index = self.view.currentIndex().siblingAtColumn(column)
        value = self.model.row_value(index)
        if value is None or self.model.toggle_refusal(index) is not None:
            return
        on = self.model.data(index, Qt.ItemDataRole.CheckStateRole) != Qt.CheckState.Checked
        fail = self._on_error(self.model.context_revision, "change the item")
        self.model.set_toggle(value, column, on, on_error=fail)

    def edit(self, text: str | None = None) -> EditItemDialog | None:
        value = self.view.current_value()
        if not isinstance(value, ItemRow) or rules.edit_refusal(self.model, value) is not None:
            return None
        dialog = EditItemDialog(value.item, self.model.context_revision, text, self._dialog_parent)
        return _open(dialog, lambda: self._save_edit(dialog))

    def compact(self) -> CompactDialog | None:
        ids = self.view.selected_item_ids()
        if rules.compact_refusal(self.model, ids) is not None:
            return None
        items = [i for i in (self.model.item(x) for x in ids) if i is not None]
        dialog = CompactDialog(items, self.model.context_revision, self._dialog_parent)
        return _open(dialog, lambda: self._save_compaction(dialog))

    def undo(self) -> None:
        comp, why = rules.undo_plan(self.model, self.view.current_value())
        if comp is None or why is not None:
            return
        first = comp.covered_item_ids[0] if comp.covered_item_ids else None
        self.view.select_after_reload(lambda: ("item", first) if first else None)
        self.model.undo_compaction(comp.id, on_error=self._on_error(self.model.context_revision,
                                                                    "undo the compaction"))

    # -- what an accepted dialog sends ---------------------------------------------------------
    def _save_edit(self, dialog: EditItemDialog) -> None:
        text, item_id = dialog.text(), dialog.item_id

        def reopen() -> None:
            self.view.select_key(("item", item_id))
            if self.edit(text) is None:
                why = rules.edit_refusal(self.model, self.view.current_value())
                self.message_bar.show_message(f"Your edit cannot be reopened: {why}")

        self.model.edit_item(item_id, text, dialog.revision,
                             on_error=self._on_error(dialog.context_revision, "save the edit", reopen))

    def _save_compaction(self, dialog: CompactDialog) -> None:
        def done(compaction_id: str) -> None:
            self.view.select_after_reload(lambda: self._summary_key(compaction_id))

        self.model.compact(dialog.item_ids, dialog.summary_text(), dialog.focus_text(),
                           dialog.context_revision, on_done=done,
                           on_error=self._on_error(dialog.context_revision, "compact"))

    def _summary_key(self, compaction_id: str) -> tuple[str, str] | None:
        comp = self.model.compaction(compaction_id)
        return ("item", comp.summary_item_id) if comp else None

    # -- conflicts -----------------------------------------------------------------------------
    def _on_error(self, basis: int, what: str, retry: Retry | None = None) -> Callable[[BaseException], None]:
        return lambda exc: self._failed(exc, basis, what, retry)

    def _failed(self, exc: BaseException, basis: int, what: str, retry: Retry | None = None) -> None:
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

    def resolve_conflict(self) -> None:
        """After a reload: name the revision that won, now that the tree shows it."""
        if self._pending_conflict is None:
            return
        basis, self._pending_conflict = self._pending_conflict, None
        lost = " Your text was kept: reopen it to apply it to the new version." if self._retry else ""
        self._announce(f"Someone else changed this context (revision {basis} → {self.model.context_revision}). "
                       f"Reloaded; nothing was overwritten.{lost}", True)


def _open(dialog: D, on_accept: Callable[[], None]) -> D:
    """Open without `exec()`: the dialog answers through `finished`, then goes away."""
    def finished(result: int) -> None:
        dialog.deleteLater()
        if result == QDialog.DialogCode.Accepted:
            on_accept()

    dialog.finished.connect(finished)
    dialog.open()
    return dialog
