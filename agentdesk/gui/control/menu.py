"""Pause / Resume / Stop… in the tree's context menu, on a run and on an agent (its newest open run).

Built from the rows the tree has loaded (status and control state are in its row cache), never a store read:
the menu opens at once. The window adds these through the tree's menu hook; the tree knows nothing of them.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QMenu, QWidget

from agentdesk.gui.control.stop_dialog import ask_to_stop
from agentdesk.model.control.run_control import LABELS, RunControlModel, Shown, why_not
from agentdesk.model.tree.model import NAME, ControlRole, EntityRole, StatusRole
from agentdesk.store.control.state import Action
from agentdesk.store.readmodel import ControlState, RunControl

OPEN = ("running", "waiting", "pending")


def shown_of(run: QModelIndex) -> Shown:
    key = run.data(EntityRole)
    state = ControlState(str(run.data(ControlRole) or "running"))
    return Shown(str(key[1]), str(run.siblingAtColumn(NAME).data() or ""), str(run.data(StatusRole) or ""),
                 RunControl(str(key[1]), state, set_by="" if state is not ControlState.RUNNING else None))


def open_run_of(agent: QModelIndex) -> QModelIndex | None:
    """The agent's newest loaded run that has not ended (runs are listed newest first)."""
    model = agent.model()
    for row in range(model.rowCount(agent)):
        child = model.index(row, NAME, agent)
        key = child.data(EntityRole)
        if key and key[0] == "run" and child.data(StatusRole) in OPEN:
            return child
    return None


def add_control_actions(menu: QMenu, model: RunControlModel, index: QModelIndex, parent: QWidget) -> None:
    """Append the run controls for a run row, or for an agent row's open run, to `menu`."""
    entity = index.data(EntityRole)[0]
    run = index if entity == "run" else open_run_of(index) if entity == "agent" else None
    if entity not in ("run", "agent"):
        return
    if not menu.isEmpty():
        menu.addSeparator()
    shown = shown_of(run) if run is not None else None
    prefix = "" if entity == "run" else "Its open run: "
    for action in Action:
        qaction = menu.addAction(prefix + LABELS[action])
        qaction.setObjectName(f"menu_run_{action.value}")
        why = ("No open run of this agent is loaded (expand the agent to load its runs)." if shown is None
               else why_not(action, shown, model.action_reason(action)) or ("Waiting for the store to answer."
                                                                    if model.busy else ""))
        qaction.setEnabled(not why)
        qaction.setToolTip(why)
        if shown is None or why:
            continue
        run_id, title = shown.run_id, shown.title
        if action is Action.STOP:
            qaction.triggered.connect(lambda _=False, r=run_id, t=title: ask_to_stop(
                parent, t, lambda reason: model.act(Action.STOP, reason, r), model.stop_consequence()))
        else:
            qaction.triggered.connect(lambda _=False, a=action, r=run_id: model.act(a, None, r))
    menu.setToolTipsVisible(True)
