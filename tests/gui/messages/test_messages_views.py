"""Messages in the window: "Send a message…" from the tree, the timeline and the context editor opens one
dialog; the editor lists the pending message last ("pending — queued by …") with Cancel, and after delivery
shows it as an ordinary item whose role names its author. Text is plain, hidden characters marked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from agentdesk.gui.window.main_window import CONTEXT_TAB, MainWindow
from agentdesk.model.context.rows import ROLE
from agentdesk.model.services import Services
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.reads import pending_messages, read_message
from agentdesk.store.native import NativeSource
from tests.gui.conftest import World

SHOTS = os.environ.get("AGENTDESK_SHOTS")
"""Set to a folder to save the window with the dialog and the pending row at 1920x1080 and 1366x768."""


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def open_window(services: Services, world: World, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    with qtbot.waitSignal(window.tree.agent_selected, timeout=5000):
        window.tree.select_entity("agent", world.agent_id)
    return window


def test_send_from_the_tree_then_cancel_in_the_context_editor(services: Services, world: World,
                                                              qtbot: Any) -> None:
    window = open_window(services, world, qtbot)
    menu = window.tree.context_menu_for(window.tree.view.currentIndex())
    assert menu is not None
    [action] = [a for a in menu.actions() if a.text().startswith("Send a message")]
    assert action.isEnabled()
    action.trigger()
    dialog = window.messaging.dialog
    assert dialog is not None and "planner" in dialog.windowTitle()
    assert not dialog.send_button.isEnabled()  # nothing written yet
    dialog.editor.setPlainText("Look at the ledger lock\u200b first.")
    assert dialog.warning.isVisible() and "1 hidden character:" in dialog.warning.text()
    if SHOTS:
        dialog.grab().save(str(Path(SHOTS) / "messages-dialog.png"))
    dialog.send_button.click()
    store = NativeSource.open(str(world.path))
    try:
        qtbot.waitUntil(lambda: len(pending_messages(store.store, world.agent_id)) == 1, timeout=5000)
        [queued] = pending_messages(store.store, world.agent_id)
        assert queued.created_by == "tester" and queued.content == "Look at the ledger lock\u200b first."
        editor = window.context_editor
        qtbot.waitUntil(lambda: len(editor.pending_panel.rows) == 1, timeout=5000)
        row = editor.pending_panel.rows[0]
        assert row.mark.text().startswith("pending — queued by tester at ")
        assert "1 hidden character (shown as marks)" in row.mark.text() and "\u200b" not in row.text.text()
        assert row.text.textFormat() == Qt.TextFormat.PlainText
        if SHOTS:
            for w, h in ((1920, 1080), (1366, 768)):
                window.resize(w, h)
                window._show_tab(CONTEXT_TAB)
                qtbot.wait(50)
                window.grab().save(str(Path(SHOTS) / f"messages-pending-{w}x{h}.png"))
        row.cancel.click()
        qtbot.waitUntil(lambda: not editor.pending_panel.rows, timeout=5000)
        cancelled = read_message(store.store, queued.id)
        assert cancelled is not None and (cancelled.status, cancelled.settled_by) == ("cancelled", "tester")
    finally:
        store.close()


def test_a_delivered_message_is_a_context_item_with_its_author(services: Services, world: World,
                                                               qtbot: Any) -> None:
    window = open_window(services, world, qtbot)
    editor = window.context_editor
    store = NativeSource.open(str(world.path))
    try:
        messages.send(store.store, world.agent_id, "Use the read replica.", "alice")
        qtbot.waitUntil(lambda: len(editor.pending_panel.rows) == 1, timeout=5000)
        [delivered] = messages.take(store.store, world.agent_id, "planner-process")
    finally:
        store.close()
    qtbot.waitUntil(lambda: not editor.pending_panel.rows and editor.model.item(delivered.item_id) is not None,
                    timeout=5000)
    index = editor.model.index_of("item", delivered.item_id, ROLE)
    assert index.data() == "user · alice"
    assert "from the operator alice" in index.data(Qt.ItemDataRole.ToolTipRole)


def test_the_timeline_and_the_editor_ask_for_the_same_dialog(services: Services, world: World,
                                                             qtbot: Any) -> None:
    window = open_window(services, world, qtbot)
    window.timeline.show_run(world.run_id)
    qtbot.waitUntil(lambda: window.timeline.data is not None and window.timeline.run is not None, timeout=5000)
    data = window.timeline.data
    assert data is not None
    agent_lane = next(n for n in range(len(data)) if str(data.kind_names[n]) == "agent")
    menu = window.timeline.context_menu(agent_lane)
    assert menu is not None
    [action] = menu.actions()
    assert action.text() == "Send a message to planner…" and action.isEnabled()
    with qtbot.waitSignal(window.timeline.message_requested) as asked:
        action.trigger()
    assert asked.args == [world.agent_id, "planner"]
    qtbot.waitUntil(lambda: window.context_editor.message_action.isEnabled()
                    and window.context_editor.model.agent is not None, timeout=5000)  # its name is read
    with qtbot.waitSignal(window.context_editor.message_requested) as asked:
        window.context_editor.message_action.trigger()
    assert asked.args == [world.agent_id, "planner"]
    assert window.messaging.dialog is not None and "planner" in window.messaging.dialog.windowTitle()


def lensagent_editor(path: Path, qtbot: Any, *, allow_writes: bool) -> tuple[Any, Services]:
    from agentdesk.gui.context.editor import ContextEditor
    from agentdesk.store.sources import open_source
    source = open_source(str(path), allow_writes=allow_writes)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    editor = ContextEditor(services)
    qtbot.addWidget(editor)
    editor.resize(1000, 700)
    editor.show()
    editor.show_agent("agt_main")
    return editor, services


def test_a_lensagent_pending_message_shows_and_read_only_says_why(tmp_path: Path, qtbot: Any) -> None:
    from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
    path = tmp_path / "lensagent.sqlite"
    build_lensagent_fixture(path, "0.1.2", volume=False)
    editor, services = lensagent_editor(path, qtbot, allow_writes=False)
    try:
        qtbot.waitUntil(lambda: len(editor.pending_panel.rows) == 1, timeout=5000)
        row = editor.pending_panel.rows[0]
        assert row.mark.text().startswith("pending — queued by a lensagent user at ")
        assert row.text.text() == "Also keep the fix minimal, please."
        assert not row.cancel.isEnabled() and "--allow-writes" in row.cancel.toolTip()
        qtbot.waitUntil(lambda: editor.model.snapshot is not None, timeout=5000)
        assert not editor.message_action.isEnabled() and "--allow-writes" in editor.message_action.toolTip()
    finally:
        editor.shutdown()
        services.close()
        services.source.close()


def test_other_runtimes_disable_the_action_with_the_reason(tmp_path: Path, qtbot: Any) -> None:
    from agentdesk.gui.context.editor import ContextEditor
    from agentdesk.store.sources import open_source
    from tests.store.sources.fixtures_vgxness import build_vgxness_fixture
    path = tmp_path / "vgxness.sqlite"
    build_vgxness_fixture(path)
    source = open_source(str(path), allow_writes=True)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    try:
        editor = ContextEditor(services)
        qtbot.addWidget(editor)
        editor._update_message_action()
        assert not editor.message_action.isEnabled()
        assert editor.message_action.toolTip().startswith("vgxness has no queue agentdesk can put a message in")
        editor.shutdown()
    finally:
        services.close()
        source.close()
