"""The diff window and the cross-store search dialog on small runs, and their entries in the main window."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QModelIndex
from pytestqt.qtbot import QtBot

from agentdesk.gui.diff.window import DiffWindow
from agentdesk.gui.search.dialog import SearchDialog
from agentdesk.model.search.results import HIT_ROLE
from agentdesk.model.services import Services
from agentdesk.store.analysis.align import Change
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World

SHOTS = os.environ.get("AGENTDESK_SHOTS")
"""Set to a folder to save the screenshots at 1920x1080 and 1366x768 for a look."""


def second_run(world: World) -> str:
    """Another run of the same agent: the same tool, plus one more tool call and different context."""
    from agentdesk.store.native import NativeSource
    source = NativeSource.open(str(world.path))
    rt = AgentRuntime(source.store)
    run = rt.start_run(world.agent_id, "Investigate failure again")
    root = rt.start_span(run, "agent", "planner")
    group = rt.new_turn_group(world.agent_id, "turn")
    rt.append_context(world.agent_id, group, "message", "user", "Also check the ledger \u202eevil")
    model = rt.start_span(run, "model", "claude-sonnet-4 chat", parent_span_id=root, context_of_agent=world.agent_id)
    rt.finish_span(model, "ok", "reading", input_tokens=1500, output_tokens=200, cost_usd=0.02)
    tool = rt.start_span(run, "tool", "read_file", parent_span_id=root, attributes={"path": "settle.py"})
    rt.finish_span(tool, "ok", "same file")
    extra = rt.start_span(run, "tool", "write_file", parent_span_id=root, input_text='{"path": "ledger.py"}')
    rt.finish_span(extra, "ok", "wrote ledger.py")
    rt.finish_span(root)
    source.close()
    return run


def shoot(widget: object, name: str) -> None:
    if not SHOTS:
        return
    for w, h in ((1920, 1080), (1366, 768)):
        widget.resize(w, h)  # type: ignore[attr-defined]
        widget.grab().save(str(Path(SHOTS) / f"{name}-{w}x{h}.png"))  # type: ignore[attr-defined]


def test_diff_window_shows_totals_waterfall_and_context(services: Services, world: World, qtbot: QtBot) -> None:
    run_b = second_run(world)
    window = DiffWindow(services)
    qtbot.addWidget(window)
    window.start_from(world.run_id)
    qtbot.waitUntil(lambda: window.run_b_box.count() == 1, timeout=5000)
    assert window.run_b_box.itemData(0) == run_b
    with qtbot.waitSignal(window.loader.loaded, timeout=10_000):
        window.compare_button.click()
    rows = window.waterfall._rows
    assert rows is not None
    changes = [r.change for r in rows.rows]
    assert changes.count(Change.ADDED) == 1  # write_file
    assert Change.REMOVED in changes  # run_shell and the open sub-agent
    assert "write_file" in [r.label for r in rows.rows if r.change is Change.ADDED]
    assert window.context_tree.topLevelItemCount() == 1
    shown = window.context_tree.topLevelItem(0).child(0).text(0)  # type: ignore[union-attr]
    assert "\u202e" not in shown and "U+202E" in shown  # hidden characters made visible
    with qtbot.waitSignal(window.open_span, timeout=2000) as opened:
        window._row_clicked(0)
    assert opened.args[0] == run_b
    shoot(window, "diff")
    window.resize(1366, 768)
    assert window.waterfall.width() > 600


def test_diff_window_says_why_for_an_unknown_run(services: Services, world: World, qtbot: QtBot) -> None:
    window = DiffWindow(services)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loader.failed, timeout=5000):
        window.compare(world.run_id, "run_nope")
    assert "run_nope" in window.message.text()


def test_search_dialog_groups_hits_by_run_and_opens_one(services: Services, world: World, qtbot: QtBot) -> None:
    run_b = second_run(world)
    dialog = SearchDialog(services)
    qtbot.addWidget(dialog)
    dialog.start("settle")
    with qtbot.waitSignal(dialog.results.finished, timeout=10_000):
        dialog.run_query()
    result = dialog.results.last
    assert result is not None
    runs = {g.run_id for g in result.groups}
    assert runs == {world.run_id, run_b}
    assert dialog.status.text() == "1 span, 2 approvals, 3 context items in 2 runs"
    model = dialog.results
    span_hits = [model.index(row, 0, model.index(top, 0)) for top in range(model.rowCount())
                 for row in range(model.rowCount(model.index(top, 0)))
                 if model.index(row, 1, model.index(top, 0)).data() == "span"]
    assert len(span_hits) == 1
    hit = span_hits[0]
    assert hit.data(HIT_ROLE) == (world.run_id, world.model_span_id)
    with qtbot.waitSignal(dialog.open_hit, timeout=2000) as opened:
        dialog._activated(hit)
    assert opened.args[1] != ""
    shoot(dialog, "search")


def test_search_dialog_shows_a_bad_query_as_one_sentence(services: Services, qtbot: QtBot) -> None:
    dialog = SearchDialog(services)
    qtbot.addWidget(dialog)
    dialog.start("kind:banana")
    with qtbot.waitSignal(dialog.results.finished, timeout=5000):
        dialog.run_query()
    assert "banana" in dialog.status.text() and dialog.results.rowCount() == 0
    dialog._activated(QModelIndex())  # nothing selected: nothing happens


@pytest.mark.parametrize("action", ["Search all runs…", "Compare this run with…"])
def test_window_menu_opens_them(services: Services, world: World, qtbot: QtBot, action: str) -> None:
    from agentdesk.gui.window.main_window import MainWindow
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.timeline.show_run(world.run_id)
    qtbot.waitUntil(lambda: window.timeline.run_id == world.run_id, timeout=5000)
    found = [a for menu in window.menuBar().actions() if menu.menu() is not None
             for a in menu.menu().actions() if a.text() == action]  # type: ignore[union-attr]
    assert len(found) == 1
    found[0].trigger()
    opened = window._search_dialog if action.startswith("Search") else window._diff_window
    assert opened.isVisible()
