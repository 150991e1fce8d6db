"""The run controls in the window (pytest-qt): Pause / Resume / Stop… on the toolbar and in the tree's menu,
enabled per state, live through the bus; stop asks first; a foreign runtime's controls say why they are off."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QLabel, QMenu
from sqlalchemy import func, select

from agentdesk.gui.control.stop_dialog import StopDialog
from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.services import Services
from agentdesk.model.tree.model import ControlRole
from agentdesk.store.control import commands as control
from agentdesk.store.control.state import Action
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.readmodel import ControlState
from tests.gui.conftest import World
from tests.gui.foreign_helpers import Opened
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture


def settle(qtbot: Any, services: Services, window: MainWindow) -> None:
    """At the end of a test, before pytest-qt closes the window: every change the test made has reached the
    window (the watcher's high-water mark is the log's last seq, the bridge holds nothing) and every read it
    caused has been answered (the timeline's debounced refresh too), so no answer arrives for a closed window."""
    store = services.source.store  # type: ignore[attr-defined]
    watcher = services.source.watcher
    feed = window.timeline.feed

    def quiet() -> bool:
        with store.reading() as s:
            top = s.execute(select(func.max(sc.ChangeRow.seq))).scalar() or 0
        bridge = services.bridge
        return (watcher is not None and watcher.high_water >= top and not bridge._pending
                and not bridge._timer.isActive() and services.runner.in_flight == 0
                and not feed.busy and not feed._timer.isActive())

    qtbot.waitUntil(quiet, timeout=5000)


def opened_on_run(services: Services, world: World, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.tree.run_selected, timeout=5000):
        window.tree.select_entity("run", world.run_id)
    qtbot.waitUntil(lambda: window.run_control.shown is not None, timeout=5000)
    return window


def enabled(window: MainWindow) -> dict[Action, bool]:
    return {a: q.isEnabled() for a, q in window.run_controls.actions_by.items()}


def state_of(window: MainWindow) -> ControlState | None:
    shown = window.run_control.shown
    return None if shown is None else shown.control.state


def test_pause_resume_and_stop_from_the_toolbar(services: Services, world: World, qtbot: Any) -> None:
    window = opened_on_run(services, world, qtbot)
    bar = window.run_controls
    assert enabled(window) == {Action.PAUSE: True, Action.RESUME: False, Action.STOP: True}
    assert bar.actions_by[Action.RESUME].toolTip() == "The run is not paused."

    bar.actions_by[Action.PAUSE].trigger()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.PAUSED, timeout=5000)
    qtbot.waitUntil(lambda: enabled(window) == {Action.PAUSE: False, Action.RESUME: True, Action.STOP: True},
                    timeout=5000)
    assert "paused by tester" in bar.state.text()

    bar.actions_by[Action.RESUME].trigger()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.RUNNING, timeout=5000)
    qtbot.waitUntil(bar.actions_by[Action.STOP].isEnabled, timeout=5000)  # the resume's answer is in

    bar.actions_by[Action.STOP].trigger()  # asks first
    dialog = window.findChild(StopDialog)
    assert dialog is not None and dialog.isVisible() and state_of(window) is ControlState.RUNNING
    dialog.reason.setText("wrong branch")
    dialog.stop_button.click()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.STOPPING, timeout=5000)
    assert enabled(window) == {Action.PAUSE: False, Action.RESUME: False, Action.STOP: False}
    assert "stop requested by tester" in bar.state.text() and "wrong branch" in bar.state.text()
    settle(qtbot, services, window)


def test_a_cancelled_stop_changes_nothing(services: Services, world: World, qtbot: Any) -> None:
    window = opened_on_run(services, world, qtbot)
    qtbot.waitUntil(window.run_controls.actions_by[Action.STOP].isEnabled, timeout=5000)
    window.run_controls.actions_by[Action.STOP].trigger()
    dialog = window.findChild(StopDialog)
    assert dialog is not None
    dialog.reject()
    assert NativeSource(services.source.store).run_control(world.run_id).state is ControlState.RUNNING  # type: ignore[attr-defined]
    settle(qtbot, services, window)


def test_another_windows_pause_shows_live_in_the_toolbar_and_the_tree(services: Services, world: World,
                                                                     qtbot: Any) -> None:
    window = opened_on_run(services, world, qtbot)
    other = NativeSource.open(str(world.path))
    try:
        control.pause(other.store, world.run_id, "bob", "lunch")
    finally:
        other.close()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.PAUSED, timeout=5000)
    index = window.tree.view.currentIndex()
    qtbot.waitUntil(lambda: index.data(ControlRole) == "paused", timeout=5000)
    assert "paused by bob" in window.run_controls.state.text()
    settle(qtbot, services, window)


def test_the_tree_menu_controls_a_run_and_an_agents_open_run(services: Services, world: World, qtbot: Any) -> None:
    window = opened_on_run(services, world, qtbot)
    menu = window.tree.context_menu_for(window.tree.view.currentIndex())
    assert isinstance(menu, QMenu)
    actions = {a.text(): a for a in menu.actions()}
    assert actions["Pause"].isEnabled() and not actions["Resume"].isEnabled()
    actions["Pause"].trigger()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.PAUSED, timeout=5000)

    with qtbot.waitSignal(window.tree.agent_selected, timeout=5000):
        window.tree.select_entity("agent", world.agent_id)
    qtbot.waitUntil(lambda: window.tree.view.currentIndex().data(ControlRole) == "running", timeout=5000)
    qtbot.waitUntil(lambda: _agent_menu(window).get("Its open run: Resume") is not None and
                    _agent_menu(window)["Its open run: Resume"].isEnabled(), timeout=5000)
    _agent_menu(window)["Its open run: Resume"].trigger()
    qtbot.waitUntil(lambda: state_of(window) is ControlState.RUNNING, timeout=5000)
    settle(qtbot, services, window)


def _agent_menu(window: MainWindow) -> dict[str, Any]:
    menu = window.tree.context_menu_for(window.tree.view.currentIndex())
    return {} if menu is None else {a.text(): a for a in menu.actions()}


def test_a_foreign_runtimes_controls_are_off_with_the_reason(qtbot: Any, tmp_path: Path) -> None:
    path = tmp_path / "stageflow.sqlite"
    build_stageflow_fixture(path)
    opened = Opened(qtbot, path, allow_writes=True)  # even with writes allowed: stageflow has no such state
    try:
        window = opened.window
        with qtbot.waitSignal(window.tree.run_selected, timeout=5000):
            window.tree.select_entity("run", "trn_rc3")
        qtbot.waitUntil(lambda: window.run_control.run_id == "trn_rc3", timeout=5000)
        assert not any(enabled(window).values())
        tip = html.unescape(window.run_controls.actions_by[Action.PAUSE].toolTip())
        assert "cannot pause, resume or stop" in tip
        assert "cannot pause" in window.run_controls.state.text()
        qtbot.waitUntil(lambda: opened.services.runner.in_flight == 0, timeout=5000)  # no answer after the close
    finally:
        opened.close()


NO_PAUSE = "lensagent has no paused state: a run can only be stopped."


def test_a_lensagent_run_can_be_stopped_but_not_paused(qtbot: Any, tmp_path: Path) -> None:
    """lensagent: Stop… enabled (toolbar and tree menu), Pause and Resume off with the reason; a stop ends the run
    cancelled at once and the window follows it through the bus."""
    path = tmp_path / "lensagent.sqlite"
    build_lensagent_fixture(path)
    opened = Opened(qtbot, path, allow_writes=True)
    try:
        window = opened.window
        with qtbot.waitSignal(window.tree.run_selected, timeout=5000):
            window.tree.select_entity("run", "run_1")
        qtbot.waitUntil(lambda: window.run_control.shown is not None, timeout=5000)
        assert enabled(window) == {Action.PAUSE: False, Action.RESUME: False, Action.STOP: True}
        for action in (Action.PAUSE, Action.RESUME):
            assert html.unescape(window.run_controls.actions_by[action].toolTip()) == NO_PAUSE
        assert window.run_controls.state.text() == NO_PAUSE
        menu = _agent_menu(window)
        assert menu["Stop…"].isEnabled() and not menu["Pause"].isEnabled() and not menu["Resume"].isEnabled()
        assert menu["Pause"].toolTip() == NO_PAUSE
        window.run_controls.actions_by[Action.STOP].trigger()
        dialog = window.findChild(StopDialog)
        assert dialog is not None
        assert "ends cancelled now" in dialog.findChild(QLabel).text()
        dialog.reason.setText("wrong branch")
        dialog.stop_button.click()
        qtbot.waitUntil(lambda: window.run_control.shown is not None and window.run_control.shown.status ==
                        "cancelled", timeout=5000)
        assert not any(enabled(window).values())
        assert "stopped by tester" in window.run_controls.state.text()
        assert "The run has finished (cancelled)." in window.run_controls.actions_by[Action.STOP].toolTip()
        qtbot.waitUntil(lambda: window.tree.view.currentIndex().data(ControlRole) == "stopped", timeout=5000)
        qtbot.waitUntil(lambda: opened.services.runner.in_flight == 0, timeout=5000)  # no answer after the close
    finally:
        opened.close()
