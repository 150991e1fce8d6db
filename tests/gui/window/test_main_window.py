"""The window wires the views together, shows the bus state and restores itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from agentdesk.gui.window.main_window import CONTEXT_TAB, TIMELINE_TAB, MainWindow
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def make_window(services: Services, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    return window


def test_pending_count_reaches_dock_title_and_status_bar(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    qtbot.waitUntil(lambda: window.queue_dock.windowTitle() == "Approvals (3 pending)")
    waiting = {a.agent_id for a in services.source.approvals(None, 100) if a.id in world.approval_ids[:3]}
    agents = f"{len(waiting)} agent{'s' if len(waiting) != 1 else ''} waiting for you"
    assert window.status.pending_label.text() == f"3 pending approvals · {agents}"
    qtbot.waitUntil(lambda: window.status.live_label.text() == "● live")
    assert str(world.path) in window.status.store_label.text()

    NativeSource.open(str(world.path)).decide(world.approval_ids[0], False, "bob", "not now")
    qtbot.waitUntil(lambda: window.queue_dock.windowTitle() == "Approvals (2 pending)", timeout=2000)
    window.status.refresh()
    assert window.status.last_change_label.text().startswith("last change")


def test_selecting_a_run_fills_timeline_and_context(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.select("run", world.run_id)
    qtbot.waitUntil(lambda: window.timeline.run_id == world.run_id and window.timeline.data is not None)
    qtbot.waitUntil(lambda: window.context_editor.model.agent_id == world.agent_id)
    assert window.tree.current_selection() == ("run", world.run_id)


def test_show_in_timeline_and_show_context_switch_tabs(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.show_in_timeline(world.run_id, world.error_span_id)
    assert window.tabs.currentIndex() == TIMELINE_TAB
    qtbot.waitUntil(lambda: window.timeline.details.span_id == world.error_span_id)
    window.show_context(world.agent_id, world.approval_ids[0])
    qtbot.waitUntil(lambda: window.tabs.currentIndex() == CONTEXT_TAB)
    qtbot.waitUntil(lambda: window.context_editor.model.as_of is not None)


def test_layout_and_selection_are_restored(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.select("run", world.run_id)
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("run", world.run_id))
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, window.queue_dock)  # rearranged
    window.close()

    again = make_window(services, qtbot)
    again.restore_state()
    qtbot.waitUntil(lambda: again.tree.current_selection() == ("run", world.run_id))
    assert again.dockWidgetArea(again.queue_dock) == Qt.DockWidgetArea.BottomDockWidgetArea


def test_first_start_on_a_store_selects_its_busiest_run(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.restore_state()  # nothing saved for this store yet
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("run", world.run_id))


def _quiet_run(world: World) -> str:
    """A second run with a single span: never the busiest, so never the one chosen by default."""
    from agentdesk.store.runtime import AgentRuntime

    source = NativeSource.open(str(world.path))
    try:
        rt = AgentRuntime(source.store)
        run_id = rt.start_run(world.agent_id, "A quiet run")
        rt.start_span(run_id, "agent", "quiet")
        return run_id
    finally:
        source.close()


@pytest.mark.parametrize("remembered", [False, True])
def test_an_explicit_selection_wins_over_the_remembered_or_busiest_run(
        services: Services, world: World, qtbot: Any, remembered: bool) -> None:
    """`agentdesk gui --select RUN`: what app.py does at start, on a new store and on a known one."""
    quiet = _quiet_run(world)
    if remembered:
        first = make_window(services, qtbot)
        first.select("run", world.run_id)
        qtbot.waitUntil(lambda: first.tree.current_selection() == ("run", world.run_id))
        first.close()
    window = make_window(services, qtbot)
    window.restore_state(restore_selection=False)
    window.select("run", quiet)
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("run", quiet))
    # Had restore_state asked for the default run, that call went to the runner before our select;
    # in_flight falls to 0 only once every answer, a late default selection too, has been delivered.
    qtbot.waitUntil(lambda: services.runner.in_flight == 0)
    assert services.source.showcase_run() not in (None, quiet)  # control: a default would have moved it
    assert window.tree.current_selection() == ("run", quiet)
    assert window.timeline.run_id == quiet


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (1600, 972)])
def test_span_details_get_room_and_keep_the_size_the_operator_gave_them(
        services: Services, world: World, qtbot: Any, width: int, height: int) -> None:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    window.show_in_timeline(world.run_id, "")
    qtbot.waitUntil(lambda: window.timeline.data is not None)
    sizes = window.timeline.splitter.sizes()  # nothing selected: the details fold to their one line
    assert sizes[1] <= 90 and sizes[0] > 4 * sizes[1]
    window.timeline.select_span(world.model_span_id)
    details = window.timeline.details
    qtbot.waitUntil(lambda: details.view is not None and details.output.edit.toPlainText() != "")
    lines = details.output.edit.viewport().height() / details.output.edit.fontMetrics().lineSpacing()
    assert lines >= 8, f"the output shows only {lines:.1f} lines"

    splitter = window.timeline.splitter
    total = sum(splitter.sizes())
    splitter.moveSplitter(int(total * 0.3), 1)  # the operator drags the details up to 70 %
    [share] = window.timeline.split_shares().values()
    assert share == pytest.approx(0.7, abs=0.05)
    window.close()

    again = MainWindow(services)
    qtbot.addWidget(again)
    again.resize(width, height)
    again.show()
    again.restore_state(restore_selection=False)
    again.show_in_timeline(world.run_id, world.model_span_id)  # a span shown: the details open as dragged
    qtbot.waitUntil(lambda: again.timeline.details.view is not None)
    qtbot.waitUntil(lambda: again.timeline.splitter.sizes()[1] / sum(again.timeline.splitter.sizes())
                    == pytest.approx(share, abs=0.05))


def test_the_queue_folds_to_a_strip_while_nothing_is_pending_and_opens_for_a_new_approval(
        services: Services, world: World, qtbot: Any) -> None:
    source = NativeSource.open(str(world.path))
    for approval_id in world.approval_ids:
        source.decide(approval_id, False, "bob", "not now")
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    qtbot.waitUntil(lambda: window.queue_fold.folded)
    qtbot.waitUntil(lambda: window.queue_dock.width() <= 40)  # the timeline gets the width
    assert "none pending" in window.queue_fold.strip.text()

    rt = AgentRuntime(source.store)
    rt.request_approval(world.run_id, "run_shell", {"cmd": "ls"}, timeout_s=600)
    qtbot.waitUntil(lambda: not window.queue_fold.folded, timeout=3000)
    qtbot.waitUntil(lambda: window.queue_dock.width() >= 280)
    source.close()


def test_a_click_on_the_strip_opens_the_queue(services: Services, world: World, qtbot: Any) -> None:
    source = NativeSource.open(str(world.path))
    for approval_id in world.approval_ids:
        source.decide(approval_id, True, "bob")
    source.close()
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    qtbot.waitUntil(lambda: window.queue_fold.folded)
    qtbot.mouseClick(window.queue_fold.strip, Qt.MouseButton.LeftButton)
    assert not window.queue_fold.folded
    qtbot.waitUntil(lambda: window.queue_dock.width() >= 280)
