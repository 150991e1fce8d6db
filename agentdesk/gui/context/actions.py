"""The context editor's five commands as actions: keys, toolbar order, and why each is disabled.

The toggles and Edit are shortcuts of the tree only (Space and Enter mean other
things elsewhere); Compact and Undo work anywhere in the editor. A disabled
action's tooltip carries the refusal from `model.context.rules`, so the operator sees
why before trying.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QToolBar, QWidget

from agentdesk.gui.context.commands import ContextCommands
from agentdesk.gui.context.view import ContextTreeView
from agentdesk.model.context import rules as rules
from agentdesk.model.context.model import LOCKED, VISIBLE, ContextModel
from agentdesk.model.plain import tooltip

TREE = Qt.ShortcutContext.WidgetShortcut
EDITOR = Qt.ShortcutContext.WidgetWithChildrenShortcut


class ContextActions:
    def __init__(self, owner: QWidget, view: ContextTreeView, commands: ContextCommands) -> None:
        self._model: ContextModel = commands.model
        self._view = view
        self.edit = _action(owner, "Edit…", ["Return", "Enter", "F2"], commands.edit, view, TREE)
        self.compact = _action(owner, "Compact…", ["Ctrl+K"], commands.compact, owner, EDITOR)
        self.undo = _action(owner, "Undo compaction", ["Ctrl+Z"], commands.undo, owner, EDITOR)
        self.visible = _action(owner, "Hide turn", ["Space"], lambda: commands.toggle(VISIBLE), view, TREE)
        self.lock = _action(owner, "Lock", ["L"], lambda: commands.toggle(LOCKED), view, TREE)

    def add_to(self, toolbar: QToolBar) -> None:
        for action in (self.visible, self.lock, self.edit, self.compact, self.undo):
            toolbar.addAction(action)

    def update(self) -> None:
        """Enable what the current selection allows; name the toggles after what they would do."""
        model, value = self._model, self._view.current_value()
        _enable(self.edit, "Edit the item's text (Enter, F2)", rules.edit_refusal(model, value))
        _enable(self.compact, "Replace the selected items by a summary (Ctrl+K)",
                rules.compact_refusal(model, self._view.selected_item_ids()))
        _enable(self.undo, "Bring back the items this summary replaced (Ctrl+Z)", rules.undo_plan(model, value)[1])
        self._toggle(self.visible, VISIBLE, "Show or hide the whole turn group (Space)", ("Hide turn", "Show turn"))
        self._toggle(self.lock, LOCKED, "Lock the item against edits, hiding and compaction (L)", ("Unlock", "Lock"))

    def _toggle(self, action: QAction, column: int, hint: str, names: tuple[str, str]) -> None:
        index = self._view.currentIndex().siblingAtColumn(column)
        on = self._model.data(index, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
        action.setText(names[0] if on else names[1])
        refusal = self._model.toggle_refusal(index) if index.isValid() else "Select an item first."
        _enable(action, hint, refusal)


def _action(owner: QWidget, text: str, keys: list[str], slot: Callable[[], object], on: QWidget,
            context: Qt.ShortcutContext) -> QAction:
    action = QAction(text, owner)
    action.setShortcuts([QKeySequence(k) for k in keys])
    action.setShortcutContext(context)
    action.setProperty("keys_where", "Context")  # the F1 sheet groups it
    action.triggered.connect(lambda: slot())  # not `slot` itself: `triggered` would pass `checked` along
    on.addAction(action)
    return action


def _enable(action: QAction, hint: str, refusal: str | None) -> None:
    action.setEnabled(refusal is None)
    action.setToolTip(tooltip(refusal or hint))  # plain: an escaped apostrophe would show as &#x27;
