"""The context editor: what an agent's model will see next, and the operator's tools to change it.

This module lays the parts out and keeps them in step with the model; the tree
view is `context_view`, the full-text pane `context_detail`, the commands and
their conflict handling `context_commands`, and the actions with their keys
`context_actions`.
"""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QItemSelection, QModelIndex, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QStackedWidget, QToolBar, QVBoxLayout, QWidget

from agentdesk.gui.context.actions import ContextActions
from agentdesk.gui.context.commands import ContextCommands
from agentdesk.gui.context.detail import DETAIL_CAP, DetailPane
from agentdesk.gui.context.pending import PendingPanel
from agentdesk.gui.context.view import ContextTreeView
from agentdesk.gui.context.widgets import CompactDialog, EditItemDialog, MessageBar, TokenGauge, plain_label
from agentdesk.gui.shared.flow import HeightForWidth
from agentdesk.model.context.model import LOCKED, VISIBLE, ContextModel, ItemRow
from agentdesk.model.messages.pending import PendingMessages
from agentdesk.model.plain import shown_line, tooltip
from agentdesk.model.services import Services
from agentdesk.model.text import plural
from agentdesk.store import readmodel as rm
from agentdesk.store.text.times import shown_time

__all__ = ["DETAIL_CAP", "ContextEditor"]


class ContextEditor(QWidget):
    conflict = Signal(str)
    """A command lost to someone else's change: one sentence for the status bar."""
    message_requested = Signal(str, str)
    """Send a message… to (agent id, agent name): the window opens the dialog (gui/messages)."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.model = ContextModel(services, self)
        self.view = ContextTreeView(self.model)
        self.message_bar = MessageBar()
        self.commands = ContextCommands(self.model, self.view, self.message_bar, self)
        acts = self.command_actions = ContextActions(self, self.view, self.commands)
        self.edit_action, self.compact_action, self.undo_action = acts.edit, acts.compact, acts.undo
        self.visible_action, self.lock_action = acts.visible, acts.lock
        self.details = DetailPane(self.model)
        self.detail, self.detail_title = self.details.text, self.details.title
        self.show_all_button = self.details.show_all_button
        self.pending = PendingMessages(services, self)
        self.pending_panel = PendingPanel(self.pending)
        self.message_action = QAction("Send a message…", self)
        self.message_action.setProperty("keys_where", "Context")
        self.message_action.triggered.connect(self._request_message)
        self._build()
        self._connect()

    # -- building ------------------------------------------------------------------------------
    def _build(self) -> None:
        self.banner = plain_label()
        self.banner.setObjectName("asOfBanner")
        self.banner.setStyleSheet("#asOfBanner { background: rgba(240, 160, 32, 60); padding: 4px 8px; "
                                  "border-radius: 4px; }")
        self.banner.hide()
        self.toolbar = QToolBar()
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.command_actions.add_to(self.toolbar)
        self.toolbar.addSeparator()
        self.toolbar.addAction(self.message_action)
        self.placeholder = plain_label("Choose an agent to see and edit its context window.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self._build_body())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.stack)

    def _build_head(self) -> QHBoxLayout:
        """Whose context and how full it is, on the line above the tools that change it."""
        # Both wrap (a long agent or model name takes a second line, never cut at a letter); the gauge keeps
        # its width at the right.
        self.identity = plain_label(wrap=True)
        bold = self.identity.font()
        bold.setBold(True)
        self.identity.setFont(bold)
        self.summary = plain_label(wrap=True)
        for label in (self.identity, self.summary):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            HeightForWidth(label)
        self.gauge = TokenGauge()
        head = QHBoxLayout()
        head.setSpacing(12)
        head.addWidget(self.identity, 2)
        head.addWidget(self.summary, 3)
        head.addWidget(self.gauge, 0, Qt.AlignmentFlag.AlignTop)
        return head

    def _build_body(self) -> QWidget:
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        rows = QVBoxLayout(top)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.setSpacing(2)
        rows.addWidget(self.view, 1)
        rows.addWidget(self.pending_panel)  # queued messages come last: the model has not been sent them yet
        split.addWidget(top)
        split.addWidget(self.details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        body = QWidget()
        inner = QVBoxLayout(body)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addLayout(self._build_head())
        inner.addWidget(self.toolbar)
        inner.addWidget(self.banner)
        inner.addWidget(self.message_bar)
        inner.addWidget(split, 1)
        return body

    def _connect(self) -> None:
        self.model.reloaded.connect(self._on_reloaded)
        self.model.load_failed.connect(lambda text: self.message_bar.show_message(text))
        self.pending.failed.connect(lambda text: self.message_bar.show_message(text))
        self.commands.conflict.connect(self.conflict.emit)
        self.view.selectionModel().selectionChanged.connect(self._on_selection)
        self.view.selectionModel().currentChanged.connect(self._on_current)
        self.view.doubleClicked.connect(self._on_double_click)

    # -- public API ----------------------------------------------------------------------------
    def show_agent(self, agent_id: str | None, at_time: datetime | None = None) -> None:
        self.message_bar.clear()
        self.view.forget_current()
        self.details.reset()
        self.commands.forget_conflict()
        self.model.set_agent(agent_id, at_time)
        self.pending.set_agent(agent_id if at_time is None else None)
        self.stack.setCurrentIndex(0 if agent_id is None else 1)
        self._refresh()

    def shutdown(self) -> None:
        """Stop reloading; call before the services close (the window does it on quit)."""
        self.model.close()
        self.pending.close()

    def selected_item_ids(self) -> list[str]:
        """Selected items in context order; a selected group row stands for its items."""
        return self.view.selected_item_ids()

    def select_item(self, item_id: str) -> None:
        self.view.select_key(("item", item_id))

    def toggle_visible(self) -> None:
        self.commands.toggle(VISIBLE)

    def toggle_locked(self) -> None:
        self.commands.toggle(LOCKED)

    def edit_selected(self, text: str | None = None) -> EditItemDialog | None:
        return self.commands.edit(text)

    def compact_selected(self) -> CompactDialog | None:
        return self.commands.compact()

    def undo_selected(self) -> None:
        self.commands.undo()

    # -- reacting to the model and the selection --------------------------------------------------
    def _on_reloaded(self) -> None:
        self.view.restore_selection()
        self.commands.resolve_conflict()
        self._refresh()

    def _on_selection(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self.command_actions.update()

    def _on_current(self, _current: QModelIndex, _previous: QModelIndex) -> None:
        self._refresh()

    def _on_double_click(self, index: QModelIndex) -> None:
        if index.column() not in (VISIBLE, LOCKED) and isinstance(self.model.row_value(index), ItemRow):
            self.edit_selected()

    def _refresh(self) -> None:
        ctx = self.model.snapshot
        for part in (self.gauge, self.identity, self.summary):
            part.setVisible(ctx is not None)
        if ctx is not None:
            self.gauge.set_tokens(ctx.visible_tokens, ctx.budget)
            self._show_identity(ctx.agent_id, self.model.agent)
            self.summary.setText(summary_text(ctx))
        self._update_banner()
        self.command_actions.update()
        self._update_message_action()
        self.details.show_row(self.view.current_value())

    def _update_message_action(self) -> None:
        refusal = self.pending.refusal or (None if self.model.agent_id else "Choose an agent first.")
        self.message_action.setEnabled(refusal is None)
        self.message_action.setToolTip(tooltip(refusal or "Queue a message the agent reads at its next model call"))

    def _request_message(self) -> None:
        agent_id = self.model.agent_id
        if agent_id is not None:
            agent = self.model.agent
            self.message_requested.emit(agent_id, agent.name if agent is not None and agent.name else agent_id)

    def _show_identity(self, agent_id: str, agent: rm.Agent | None) -> None:
        """Name and model (the id when the source cannot name the agent), so a glance says whose context."""
        name = agent.name if agent is not None and agent.name else agent_id
        model = agent.model if agent is not None else ""
        self.identity.setText(shown_line(f"{name} · {model}" if model else name, 200))
        self.identity.setToolTip(tooltip(f"Agent {agent_id}" + (f", model {model}" if model else "")))

    def _update_banner(self) -> None:
        at, ctx = self.model.as_of, self.model.snapshot
        self.banner.setVisible(at is not None and self.model.agent_id is not None)
        if at is None:
            return
        later = sum(1 for i in (ctx.items if ctx else ()) if i.created_at is not None and i.created_at > at)
        note = f"marked “later” ({later} so far)" if later else "marked “later” (none so far)"
        self.banner.setText(f"Context as of {shown_time(at, '%Y-%m-%d %H:%M:%S')}: items added after it are {note}.")


def summary_text(ctx: rm.AgentContext) -> str:
    """Counts of what the model is given: covered items are left out, the summaries stand for them."""
    live = [i for i in ctx.items if i.compaction_id is None]
    hidden = sum(not i.visible for i in live)
    compactions = sum(c.undone_at is None for c in ctx.compactions)
    return (f"{plural(len(live), 'item')} · {hidden:,} hidden · {plural(compactions, 'compaction')} · "
            f"revision {ctx.context_revision}")
