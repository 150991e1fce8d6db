""""Compare with…" in the project tree's context menu opens the diff window with both runs chosen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from agentdesk.gui.tree.compare_menu import ANY_RUN
from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World

SHOTS = os.environ.get("AGENTDESK_SHOTS")
"""Set to a folder to save screenshots of the menu and the diff window at 1920x1080 and 1366x768."""


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def more_runs(world: World) -> tuple[str, str]:
    """Two newer runs of the world's agent, each with one finished span: (middle run, newest run)."""
    source = NativeSource.open(str(world.path))
    rt = AgentRuntime(source.store)
    made = []
    for title, tool in (("Second attempt", "read_file"), ("Third attempt", "write_file")):
        run = rt.start_run(world.agent_id, title)
        root = rt.start_span(run, "agent", "planner")
        span = rt.start_span(run, "tool", tool, parent_span_id=root)
        rt.finish_span(span, "ok", "done")
        rt.finish_span(root)
        made.append(run)
    source.close()
    return made[0], made[1]


def compare_menu(window: MainWindow, qtbot: Any, run_id: str) -> QMenu:
    with qtbot.waitSignal(window.tree.run_selected, timeout=5000):
        window.tree.select_entity("run", run_id)
    menu = window.tree.context_menu_for(window.tree.view.currentIndex())
    assert menu is not None
    sub = menu.actions()[0].menu()
    assert menu.actions()[0].text() == "Compare with…" and isinstance(sub, QMenu)
    return sub


def entries(sub: QMenu) -> list[QAction]:
    return [a for a in sub.actions() if not a.isSeparator()]


def test_compare_with_offers_the_previous_run_first_and_opens_the_diff(
        services: Services, world: World, qtbot: Any) -> None:
    middle, newest = more_runs(world)
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    sub = compare_menu(window, qtbot, newest)
    offered = entries(sub)
    assert offered[0].text().startswith("Previous run: Second attempt") and offered[0].data() == middle
    assert offered[1].data() == world.run_id  # the oldest next, then "Any run…"
    assert offered[-1].text() == ANY_RUN and newest not in [a.data() for a in offered]
    if SHOTS:
        sub.grab().save(str(Path(SHOTS) / "tree-compare-menu.png"))
    offered[0].trigger()
    diff = window._diff_window
    qtbot.waitUntil(lambda: diff._rows is not None, timeout=10_000)
    assert diff.isVisible()
    assert diff._rows is not None
    assert (diff._rows.diff.run_a.id, diff._rows.diff.run_b.id) == (newest, middle)
    assert diff.run_b_box.currentText() == middle
    if SHOTS:
        for w, h in ((1920, 1080), (1366, 768)):
            window.resize(w, h)
            window.grab().save(str(Path(SHOTS) / f"tree-compare-window-{w}x{h}.png"))
            diff.resize(w, h)
            diff.grab().save(str(Path(SHOTS) / f"tree-compare-diff-{w}x{h}.png"))


def test_any_run_opens_the_picker_with_the_run_as_a_and_the_oldest_run_has_no_previous(
        services: Services, world: World, qtbot: Any) -> None:
    middle, newest = more_runs(world)
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    sub = compare_menu(window, qtbot, world.run_id)
    offered = entries(sub)
    assert not any(a.text().startswith("Previous run") for a in offered)  # it is the agent's first run
    assert [a.data() for a in offered[:-1]] == [middle, newest]
    offered[-1].trigger()
    diff = window._diff_window
    qtbot.waitUntil(lambda: diff.run_b_box.count() == 2, timeout=5000)
    assert world.run_id in diff.run_a_label.text()
    assert {diff.run_b_box.itemData(i) for i in range(2)} == {middle, newest}
    assert diff._rows is None  # nothing compared until B is picked


def test_only_runs_have_compare_with(services: Services, world: World, qtbot: Any) -> None:
    """An agent's menu holds its open run's controls (tests/gui/control/test_run_controls.py) and "Send a message…"
    (tests/gui/messages/test_messages_views.py); a session has none."""
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.tree.agent_selected, timeout=5000):
        window.tree.select_entity("agent", world.agent_id)
    menu = window.tree.context_menu_for(window.tree.view.currentIndex())
    assert menu is not None and "Compare with…" not in [a.text() for a in menu.actions()]
    assert "Send a message to planner…" in [a.text() for a in menu.actions()]
    window.tree.select_entity("session", world.session_id)
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("session", world.session_id), timeout=5000)
    assert window.tree.context_menu_for(window.tree.view.currentIndex()) is None
