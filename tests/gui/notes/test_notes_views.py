"""Notes and labels in the window: the dialog, the Shift notes table, the detail panels, flags and reveal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QDialogButtonBox, QStyleOptionViewItem, QToolTip

from agentdesk.gui.notes.dialog import MarkDialog
from agentdesk.gui.notes.shift_view import ShiftNotesView
from agentdesk.gui.tree.delegate import TreeDelegate
from agentdesk.gui.window.main_window import TIMELINE_TAB, MainWindow
from agentdesk.model.notes.cache import run_mark_text
from agentdesk.model.notes.shift import ShiftNotesModel
from agentdesk.model.notes.writes import MarkRequest
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.notes import commands
from agentdesk.store.notes.marks import Target
from tests.gui.conftest import World


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def another_window_writes(world: World) -> NativeSource:
    """A second process's view of the store: what it writes reaches the window only through the bus."""
    return NativeSource.open(str(world.path))


def test_the_dialog_refuses_a_hidden_label_and_says_what_changes(qtbot: Any, world: World) -> None:
    dialog = MarkDialog(Target("span", world.tool_span_id, world.run_id), ("regression",))
    qtbot.addWidget(dialog)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    dialog.custom.setText("needs\u200breview")
    assert not ok.isEnabled() and "U+200B" in dialog.problem.text()
    dialog.custom.setText("flaky-network")
    dialog.checks["needs-review"].setChecked(True)
    dialog.checks["regression"].setChecked(False)
    dialog.note.setPlainText("look")
    assert ok.isEnabled()
    request = dialog.request()
    assert request.add == ("flaky-network", "needs-review") and request.remove == ("regression",)


def test_shift_notes_list_what_another_process_writes(services: Services, world: World, qtbot: Any,
                                                      qtmodeltester: Any) -> None:
    view = ShiftNotesView(services)
    qtbot.addWidget(view)
    view.refresh()
    qtbot.waitUntil(lambda: "0 entries" in view.summary.text())
    other = another_window_writes(world)
    try:
        commands.add_note(other.store, "span", world.tool_span_id, "wrong tool \x1b[31m", "alice")
        commands.add_label(other.store, "span", world.tool_span_id, "bad-tool-choice", "alice")
        commands.add_label(other.store, "run", world.run_id, "regression", "bob")
    finally:
        other.close()
    qtbot.waitUntil(lambda: view.model.rowCount() == 3, timeout=3000)
    qtmodeltester.check(view.model)
    texts = [view.model.index(row, 5).data() for row in range(3)]
    assert "wrong tool ⟨ESC⟩[31m" in texts and not any("\x1b" in t for t in texts)
    view.label.setCurrentText("bad-tool-choice")
    view.refresh()
    qtbot.waitUntil(lambda: view.model.rowCount() == 2)
    assert {view.model.entry_at(r).target.id for r in range(2)} == {world.tool_span_id}  # type: ignore[union-attr]


def test_a_bad_since_is_one_sentence(services: Services, qtbot: Any) -> None:
    model = ShiftNotesModel(services)
    with qtbot.waitSignal(model.loaded) as said:
        model.load("yesterday-ish")
    assert "is neither a duration" in said.args[0]


def make_window(services: Services, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    return window


def test_the_window_marks_flags_and_lists_them(services: Services, world: World, qtbot: Any) -> None:
    other = another_window_writes(world)
    try:
        commands.add_note(other.store, "span", world.tool_span_id, "hidden \u202eevil", "alice")
        commands.add_label(other.store, "span", world.tool_span_id, "needs-review", "alice")
    finally:
        other.close()
    window = make_window(services, qtbot)
    window.show_in_timeline(world.run_id, world.tool_span_id)
    panel = window.notes.span_panel
    qtbot.waitUntil(lambda: panel.isVisible() and "needs-review" in panel.labels.text(), timeout=3000)
    assert "⟨U+202E⟩evil" in panel.notes.toPlainText() and "\u202e" not in panel.notes.toPlainText()
    assert "RIGHT-TO-LEFT OVERRIDE" in panel.banner.text() and not panel.banner.isHidden()
    qtbot.waitUntil(lambda: window.timeline.item.flag_lanes is not None, timeout=3000)
    lane = window.timeline.data.lane_of[world.tool_span_id]  # type: ignore[union-attr]
    assert lane in window.timeline.item.flag_lanes.tolist()  # type: ignore[union-attr]
    assert window.notes.cache.run_text(world.run_id) == run_mark_text(1, ("needs-review",))


def test_adding_from_the_panel_writes_and_reveal_opens_it(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.select("approval", world.approval_ids[0])
    panel = window.notes.approval_panel
    qtbot.waitUntil(lambda: panel.target is not None and panel.add_button.isEnabled(), timeout=3000)
    panel.open_dialog()
    dialog = panel.dialog
    assert dialog is not None
    dialog.note.setPlainText("ask the payments team first")
    dialog.checks["needs-review"].setChecked(True)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: "needs-review" in panel.labels.text() and "payments team" in panel.notes.toPlainText(),
                    timeout=3000)
    window.notes.show_shift()
    shift = window.notes.shift
    qtbot.waitUntil(lambda: shift.model.rowCount() == 2, timeout=3000)
    assert {shift.model.index(r, 1).data() for r in range(2)} == {"tester"}
    window.notes.reveal("span", world.error_span_id, world.run_id)
    assert window.tabs.currentIndex() == TIMELINE_TAB
    qtbot.waitUntil(lambda: window.timeline.details.span_id == world.error_span_id)


def test_a_refused_write_reaches_the_message_bar(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.show_in_timeline(world.run_id, world.tool_span_id)
    panel = window.notes.span_panel
    qtbot.waitUntil(lambda: panel.target is not None)
    store = window.notes.cache.store
    assert store is not None
    commands.add_label(store, "span", world.tool_span_id, "regression", "bob")
    panel.write(MarkRequest(Target("span", world.tool_span_id, world.run_id), "", ("regression",), ()))
    qtbot.waitUntil(lambda: any("already labelled" in m for m in window.message_bar.messages), timeout=3000)


def test_a_marked_runs_tooltip_says_what_is_on_it(services: Services, world: World, qtbot: Any) -> None:
    other = another_window_writes(world)
    try:
        commands.add_label(other.store, "run", world.run_id, "regression", "alice")
    finally:
        other.close()
    window = make_window(services, qtbot)
    window.select("run", world.run_id)
    qtbot.waitUntil(lambda: window.notes.cache.run_text(world.run_id) != "", timeout=3000)
    view = window.tree.view
    qtbot.waitUntil(lambda: window.tree.current_selection() == ("run", world.run_id), timeout=3000)
    index = view.currentIndex().siblingAtColumn(0)
    delegate = view.itemDelegate()
    assert isinstance(delegate, TreeDelegate)
    rect = view.visualRect(index)
    event = QHelpEvent(QEvent.Type.ToolTip, rect.center(), view.viewport().mapToGlobal(rect.center()))
    option = QStyleOptionViewItem()
    assert delegate.helpEvent(event, view, option, index)
    assert "⚑ regression" in QToolTip.text()


def test_a_note_is_edited_and_removed_from_its_menu(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    store = window.notes.cache.store
    assert store is not None
    commands.add_note(store, "span", world.tool_span_id, "first words", "alice")
    window.show_in_timeline(world.run_id, world.tool_span_id)
    panel = window.notes.span_panel
    qtbot.waitUntil(lambda: "first words" in panel.notes.toPlainText(), timeout=3000)
    menu = panel.note_menu()
    edit, remove = menu.actions()[:2]
    edit.trigger()
    assert panel.editor is not None
    panel.editor.setTextValue("better words")
    panel.editor.accept()
    qtbot.waitUntil(lambda: "better words" in panel.notes.toPlainText() and "edited by tester" in
                    panel.notes.toPlainText(), timeout=3000)
    remove.trigger()  # the menu was built at revision 1: refused, with who changed it
    qtbot.waitUntil(lambda: any("changed by tester" in m for m in window.message_bar.messages), timeout=3000)
    panel.note_menu().actions()[1].trigger()
    qtbot.waitUntil(lambda: not panel.marks.notes, timeout=3000)
