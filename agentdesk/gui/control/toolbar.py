"""The run controls above the timeline: Pause, Resume, Stop… for the run the window shows, and its state.

Each button is enabled only when its action fits the run now (the model's `why_not`, the same table the store
guards with); a disabled one says why in its tooltip and, for a store whose runs cannot be controlled (another
runtime's database, a viewer's login), in the state line too. The state follows the bus: another window's
pause shows here within a moment. Stop asks first (stop_dialog.py).
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QWidget

from agentdesk.gui.control.stop_dialog import ask_to_stop
from agentdesk.gui.shared.elided import ElidedLabel
from agentdesk.model.control.run_control import LABELS, RunControlModel
from agentdesk.model.plain import shown_line
from agentdesk.store.control.state import Action

TIPS = {Action.PAUSE: "Pause the run: its agent blocks at its next checkpoint until resumed",
        Action.RESUME: "Resume the paused run: its agent goes on from its checkpoint",
        Action.STOP: "Stop the run: its agent ends it cancelled at its next checkpoint (asks first)"}
STOP_NOW = "Stop the run: it ends cancelled now, its open calls interrupted (asks first)"


class RunControlBar(QWidget):
    """A row of tool buttons, not a QToolBar: a toolbar hides what does not fit behind an overflow arrow, and
    the state line is the part an operator must read."""

    def __init__(self, model: RunControlModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("run_controls")
        self.model = model
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 4, 0)
        row.addWidget(QLabel("Run:", self))
        self.actions_by: dict[Action, QAction] = {}
        for action in Action:
            qaction = QAction(LABELS[action], self)
            qaction.setObjectName(f"run_{action.value}")
            qaction.triggered.connect(lambda _=False, a=action: self.trigger(a))
            button = QToolButton(self)
            button.setDefaultAction(qaction)
            row.addWidget(button)
            self.actions_by[action] = qaction
        self.state = ElidedLabel("", self, min_chars=10)
        self.state.setObjectName("run_control_state")
        self.state.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        row.addWidget(self.state, 1)
        model.changed.connect(self.refresh)
        self.refresh()

    def trigger(self, action: Action) -> None:
        if self.model.why_not(action):
            return
        if action is Action.STOP:
            shown = self.model.shown
            label = shown.title if shown is not None else (self.model.run_id or "")
            ask_to_stop(self, label, lambda reason: self.model.act(Action.STOP, reason), self.model.stop_consequence())
            return
        self.model.act(action)

    def refresh(self) -> None:
        for action, qaction in self.actions_by.items():
            why = self.model.why_not(action)
            qaction.setEnabled(not why)
            at_once = action is Action.STOP and bool(self.model.stop_consequence())
            qaction.setToolTip(why or (STOP_NOW if at_once else TIPS[action]))
        reason = self.model.source_reason
        line = reason if reason and self.model.run_id else self.model.state_text()
        if not line and self.model.run_id:  # a runtime that can only stop (lensagent) says so beside the buttons
            line = self.model.limits()
        self.state.setText(shown_line(line, 600))
