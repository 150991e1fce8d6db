"""The context editor: tree of turn groups, toggles through the store, edit/compact/undo, and conflicts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, qInstallMessageHandler
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QAbstractItemModelTester

from agentdesk.gui.context.editor import DETAIL_CAP, ContextEditor
from agentdesk.gui.context.widgets import WARN_COLOUR, CompactDialog, EditItemDialog
from agentdesk.gui.shared.palette import ERROR_COLOUR
from agentdesk.model.context.model import (
    KIND,
    LOCKED,
    PREVIEW,
    VISIBLE,
    AddedAfterRole,
    ContextModel,
    ItemIdRole,
    NodeTypeRole,
)
from agentdesk.model.services import Services
from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World

Checked, Unchecked = Qt.CheckState.Checked, Qt.CheckState.Unchecked


@pytest.fixture
def other(world: World) -> Iterator[NativeSource]:
    """A second writer on the same store file: 'someone else'."""
    source = NativeSource.open(str(world.path))
    yield source
    source.close()


@pytest.fixture
def make_editor(services: Services, qtbot) -> Iterator[Callable[..., ContextEditor]]:
    made: list[ContextEditor] = []

    def make(agent_id: str, at_time: datetime | None = None) -> ContextEditor:
        widget = ContextEditor(services)
        qtbot.addWidget(widget)
        widget.resize(1000, 640)
        made.append(widget)
        with qtbot.waitSignal(widget.model.reloaded, timeout=3000):
            widget.show_agent(agent_id, at_time)
        return widget

    yield make
    for widget in made:  # before the services (runner, bridge) shut down
        widget.shutdown()


@pytest.fixture
def editor(make_editor: Callable[..., ContextEditor], world: World) -> ContextEditor:
    return make_editor(world.agent_id)


def wait_for(qtbot, editor: ContextEditor, check: Callable[[rm.AgentContext], bool]) -> None:
    qtbot.waitUntil(lambda: editor.model.snapshot is not None and check(editor.model.snapshot), timeout=3000)


def tree(model: ContextModel, parent=None) -> list:
    """The model as nested (type, id, children) tuples."""
    parent = parent or QModelIndex()
    rows = []
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        rows.append((index.data(NodeTypeRole), index.data(ItemIdRole), tree(model, index)))
    return rows


def select(editor: ContextEditor, *item_ids: str) -> None:
    selection = editor.view.selectionModel()
    selection.clearSelection()
    for n, item_id in enumerate(item_ids):
        index = editor.model.index_of("item", item_id)
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        if n == 0:
            selection.setCurrentIndex(index, flags)
        else:
            selection.select(index, flags)


def store_item(source: NativeSource, agent_id: str, item_id: str) -> rm.ContextItem:
    return next(i for i in source.context(agent_id).items if i.id == item_id)


def test_items_in_order_grouped_by_turn(editor: ContextEditor, world: World) -> None:
    i = world.item_ids
    assert tree(editor.model) == [
        ("group", world.group_ids[0], [("item", i[0], []), ("item", i[1], [])]),
        ("group", world.group_ids[1], [("item", i[2], []), ("item", i[3], [])]),
        ("group", world.group_ids[2], [("item", i[4], [])]),
    ]
    model = editor.model
    first = model.index_of("item", i[1])
    assert first.siblingAtColumn(KIND).data() == "message"
    assert first.siblingAtColumn(1).data() == "user"
    assert first.siblingAtColumn(PREVIEW).data() == "The settlement test fails about 1 in 20 runs."
    assert model.index_of("item", i[2]).data() == "tool call"
    assert model.index_of("group", world.group_ids[1]).data() == "Tool turn 2"


def test_model_passes_qtmodeltester_through_changes(editor: ContextEditor, world: World, other: NativeSource,
                                                    qtbot, qtmodeltester) -> None:
    qtmodeltester.check(editor.model, force_py=True)
    ctx = other.context(world.agent_id)
    comp = other.compact(world.agent_id, world.item_ids[1:4], "summary", "", ctx.context_revision, "someone")
    wait_for(qtbot, editor, lambda c: any(x.id == comp for x in c.compactions))
    summary = editor.model.index_of("item", editor.model.compaction(comp).summary_item_id)
    assert editor.model.rowCount(summary) == 3
    other.set_group_visibility(world.group_ids[2], False, ctx.groups[2].revision, "someone")
    AgentRuntime(other.store).append_context(world.agent_id, world.group_ids[0], "message", "user", "more")
    other.undo_compaction(comp, "someone")
    wait_for(qtbot, editor, lambda c: all(x.compaction_id is None for x in c.items) and len(c.items) == 6)
    assert tree(editor.model) == tree(fresh_model(editor, qtbot))


def test_model_passes_qt_cpp_modeltester(editor: ContextEditor, world: World, other: NativeSource,
                                         qtbot) -> None:
    """Qt's own tester logs failures as 'FAIL!' warnings, which pytest-qt does not see: collect them."""
    failures: list[str] = []
    previous = qInstallMessageHandler(lambda _mode, _ctx, text: failures.append(text) if "FAIL" in text
                                      else None)
    try:
        tester = QAbstractItemModelTester(editor.model, QAbstractItemModelTester.FailureReportingMode.Warning)
        revision = other.context(world.agent_id).context_revision
        comp = other.compact(world.agent_id, world.item_ids[0:3], "summary", "", revision, "someone")
        wait_for(qtbot, editor, lambda c: bool(c.compactions))
        other.undo_compaction(comp, "someone")
        wait_for(qtbot, editor, lambda c: c.compactions[0].undone_at is not None)
        del tester
    finally:
        qInstallMessageHandler(previous)
    assert failures == []


def fresh_model(editor: ContextEditor, qtbot) -> ContextModel:
    """A model loaded from scratch, to compare with one that applied changes incrementally."""
    model = ContextModel(editor.services, editor)
    with qtbot.waitSignal(model.reloaded, timeout=3000):
        model.set_agent(editor.model.agent_id)
    model.close()
    return model


def test_visibility_toggle_hides_whole_group_and_updates_gauge(editor: ContextEditor, services: Services,
                                                               world: World, qtbot) -> None:
    model, before = editor.model, editor.model.snapshot
    assert before is not None
    share = before.visible_tokens / 8000
    assert editor.gauge.text() == f"{before.visible_tokens:,} / 8,000 tokens ({share:.0%})"
    result = model.index_of("item", world.item_ids[3], VISIBLE)  # an item row acts on its whole group
    assert model.setData(result, Unchecked.value, Qt.ItemDataRole.CheckStateRole)
    assert result.data(Qt.ItemDataRole.CheckStateRole) == Checked  # the cache waits for the store
    wait_for(qtbot, editor, lambda c: c.context_revision > before.context_revision)
    items = {i.id: i for i in services.source.context(world.agent_id).items}
    assert not items[world.item_ids[2]].visible and not items[world.item_ids[3]].visible
    assert items[world.item_ids[0]].visible
    group = model.index_of("group", world.group_ids[1], VISIBLE)
    assert group.data(Qt.ItemDataRole.CheckStateRole) == Unchecked
    hidden = before.visible_tokens - sum(items[i].token_estimate for i in world.item_ids[2:4])
    assert editor.gauge.text().startswith(f"{hidden:,} / 8,000 tokens")


def test_keyboard_space_toggles_group_and_l_locks(editor: ContextEditor, services: Services, world: World,
                                                  qtbot) -> None:
    with qtbot.waitActive(editor):
        editor.show()
        editor.activateWindow()
    editor.view.setFocus()
    select(editor, world.item_ids[4])
    revision = editor.model.snapshot.context_revision
    qtbot.keyClick(editor.view, Qt.Key.Key_Space)
    wait_for(qtbot, editor, lambda c: c.context_revision > revision)
    assert not store_item(services.source, world.agent_id, world.item_ids[4]).visible
    qtbot.keyClick(editor.view, Qt.Key.Key_L)
    wait_for(qtbot, editor, lambda c: any(i.locked for i in c.items))
    assert store_item(services.source, world.agent_id, world.item_ids[4]).locked
    select(editor, world.item_ids[1])
    qtbot.keyClick(editor.view, Qt.Key.Key_F2)
    dialogs = [d for d in editor.findChildren(EditItemDialog) if d.isVisible()]
    assert [d.item_id for d in dialogs] == [world.item_ids[1]]
    dialogs[0].reject()
    select(editor, world.item_ids[0], world.item_ids[1])
    qtbot.keyClick(editor.view, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    compacting = [d for d in editor.findChildren(CompactDialog) if d.isVisible()]
    assert [d.item_ids for d in compacting] == [world.item_ids[0:2]]
    compacting[0].reject()


def test_gauge_warns_near_and_over_budget(editor: ContextEditor) -> None:
    gauge = editor.gauge
    gauge.set_tokens(7_400, 8_000)
    assert gauge.text() == "7,400 / 8,000 tokens (92%)"
    assert gauge.palette().color(QPalette.ColorRole.Highlight) == QColor(WARN_COLOUR)
    gauge.set_tokens(9_000, 8_000)
    assert gauge.text() == "9,000 / 8,000 tokens (112%)" and gauge.value() == gauge.maximum()
    assert gauge.palette().color(QPalette.ColorRole.Highlight) == QColor(ERROR_COLOUR)
    gauge.set_tokens(120, 0)
    assert gauge.text() == "120 tokens (no budget set)"


def test_lock_prevents_edit(editor: ContextEditor, services: Services, world: World, qtbot) -> None:
    item_id = world.item_ids[1]
    select(editor, item_id)
    assert editor.edit_action.isEnabled()
    editor.toggle_locked()
    wait_for(qtbot, editor, lambda c: any(i.locked for i in c.items))
    assert store_item(services.source, world.agent_id, item_id).locked
    assert editor.view.currentIndex().data(ItemIdRole) == item_id  # selection kept across the reload
    assert not editor.edit_action.isEnabled()
    assert "locked" in editor.edit_action.toolTip()
    assert editor.edit_selected() is None
    hide = editor.model.index_of("group", world.group_ids[0], VISIBLE)
    assert "unlock" in editor.model.toggle_refusal(hide)


def test_edit_saves_with_revision(editor: ContextEditor, services: Services, world: World, qtbot) -> None:
    item_id = world.item_ids[4]
    select(editor, item_id)
    dialog = editor.edit_selected()
    assert dialog is not None and dialog.revision == 1
    assert dialog.text() == "The race is in the ledger lock. ✓ ünïcode"
    dialog.editor.setPlainText("The race is in the ledger lock; hold it during settle().")
    dialog.accept()
    wait_for(qtbot, editor, lambda c: any(i.revision == 2 for i in c.items))
    stored = store_item(services.source, world.agent_id, item_id)
    assert stored.content == "The race is in the ledger lock; hold it during settle()."
    assert stored.revision == 2
    assert editor.detail.toPlainText() == stored.content
    assert not editor.message_bar.isVisible()


def test_stale_edit_shows_conflict_and_overwrites_nothing(editor: ContextEditor, services: Services,
                                                         world: World, other: NativeSource, qtbot) -> None:
    item_id = world.item_ids[4]
    select(editor, item_id)
    dialog = editor.edit_selected()
    assert dialog is not None
    basis = editor.model.snapshot.context_revision
    other.edit_item(item_id, "Someone else's words.", 1, "someone")  # behind the editor's back
    dialog.editor.setPlainText("My words.")
    with qtbot.waitSignal(editor.conflict, timeout=3000) as signal:
        dialog.accept()
    now = services.source.context(world.agent_id).context_revision
    text = f"Someone else changed this context (revision {basis} → {now}). Reloaded; nothing was overwritten."
    assert signal.args[0].startswith(text)
    assert editor.message_bar.text().startswith(text)
    assert store_item(services.source, world.agent_id, item_id).content == "Someone else's words."
    assert editor.model.item(item_id).content == "Someone else's words."
    assert editor.detail.toPlainText() == "Someone else's words."
    editor.message_bar.action_button.click()  # "Reopen my edit": the operator's text at the new revision
    reopened = next(d for d in editor.findChildren(EditItemDialog) if d.isVisible())
    assert reopened.text() == "My words." and reopened.revision == 2
    reopened.reject()


def test_stale_checkbox_click_shows_conflict(editor: ContextEditor, services: Services, world: World,
                                             other: NativeSource, qtbot) -> None:
    basis = editor.model.snapshot.context_revision
    group = other.context(world.agent_id).groups[1]
    other.set_group_visibility(group.id, False, group.revision, "someone")
    visible = editor.model.index_of("group", group.id, VISIBLE)  # the editor has not heard of it yet
    with qtbot.waitSignal(editor.conflict, timeout=3000) as signal:
        editor.model.setData(visible, Unchecked, Qt.ItemDataRole.CheckStateRole)
    now = services.source.context(world.agent_id).context_revision
    assert signal.args[0] == (f"Someone else changed this context (revision {basis} → {now}). "
                              "Reloaded; nothing was overwritten.")
    assert editor.model.index_of("group", group.id, VISIBLE).data(Qt.ItemDataRole.CheckStateRole) == Unchecked
    assert not editor.message_bar.action_button.isVisibleTo(editor.message_bar)


def test_compact_replaces_items_and_gauge_drops(editor: ContextEditor, services: Services, world: World,
                                                qtbot) -> None:
    before = editor.model.snapshot
    covered = world.item_ids[1:4]
    select(editor, *covered)
    assert editor.compact_action.isEnabled()
    dialog = editor.compact_selected()
    assert dialog is not None
    tokens = sum(i.token_estimate for i in before.items if i.id in covered)
    dialog.summary.setPlainText("User reports a flaky test; settle.py was read.")
    assert dialog.saving_text() == f"3 items, {tokens:,} tokens → 12 tokens, saves {tokens - 12:,}"
    dialog.focus_edit.setText("flaky test")
    dialog.accept()
    wait_for(qtbot, editor, lambda c: bool(c.compactions))
    ctx = services.source.context(world.agent_id)
    comp = ctx.compactions[0]
    assert comp.covered_item_ids == tuple(covered) and comp.focus == "flaky test"
    assert ctx.visible_tokens == before.visible_tokens - tokens + 12
    qtbot.waitUntil(lambda: editor.view.currentIndex().data(ItemIdRole) == comp.summary_item_id, timeout=2000)
    shape = tree(editor.model)
    assert [row[0:2] for row in shape] == [("group", world.group_ids[0]), ("group", ctx.items[1].group_id),
                                          ("group", world.group_ids[2])]
    summary = shape[1][2][0]
    assert summary[1] == comp.summary_item_id and [c[1] for c in summary[2]] == covered
    assert editor.gauge.text().startswith(f"{ctx.visible_tokens:,} / 8,000")
    assert editor.undo_action.isEnabled()


def test_compact_refuses_gaps_hidden_and_locked_with_reasons(editor: ContextEditor, world: World, qtbot,
                                                              services: Services) -> None:
    select(editor, world.item_ids[0], world.item_ids[2])
    assert not editor.compact_action.isEnabled() and "consecutive" in editor.compact_action.toolTip()
    select(editor, world.item_ids[4])
    editor.toggle_locked()
    wait_for(qtbot, editor, lambda c: any(i.locked for i in c.items))
    select(editor, world.item_ids[3], world.item_ids[4])
    assert not editor.compact_action.isEnabled() and "Locked" in editor.compact_action.toolTip()
    assert editor.compact_selected() is None
    select(editor, world.item_ids[1])
    editor.toggle_visible()
    wait_for(qtbot, editor, lambda c: not c.items[0].visible)
    select(editor, world.item_ids[0], world.item_ids[1])
    assert "Hidden" in editor.compact_action.toolTip()


def test_undo_restores_exactly(editor: ContextEditor, services: Services, world: World, qtbot) -> None:
    original, shape = services.source.context(world.agent_id), tree(editor.model)
    select(editor, *world.item_ids[2:5])
    dialog = editor.compact_selected()
    dialog.summary.setPlainText("Read settle.py; the race is in the ledger lock.")
    dialog.accept()
    wait_for(qtbot, editor, lambda c: bool(c.compactions))
    qtbot.waitUntil(lambda: editor.undo_action.isEnabled(), timeout=2000)
    editor.undo_selected()
    wait_for(qtbot, editor, lambda c: c.compactions[0].undone_at is not None)
    restored = services.source.context(world.agent_id)
    assert restored.items == original.items
    assert restored.visible_tokens == original.visible_tokens
    assert tree(editor.model) == shape
    assert editor.view.currentIndex().data(ItemIdRole) == world.item_ids[2]


def test_html_looking_content_shows_literally(editor: ContextEditor, world: World) -> None:
    index = editor.model.index_of("item", world.item_ids[3], PREVIEW)
    assert index.data() == "<b>def settle():</b> …"
    tip = index.data(Qt.ItemDataRole.ToolTipRole)
    assert "&lt;b&gt;def settle():&lt;/b&gt;" in tip and "<b>" not in tip
    select(editor, world.item_ids[3])
    assert editor.detail.toPlainText().startswith("<b>def settle():</b>\n")
    assert editor.detail_title.textFormat() == Qt.TextFormat.PlainText
    assert editor.message_bar.label.textFormat() == Qt.TextFormat.PlainText
    assert editor.banner.textFormat() == Qt.TextFormat.PlainText


def test_large_content_is_capped_with_show_all(editor: ContextEditor, world: World, qtbot) -> None:
    rt = AgentRuntime(editor.services.source.store)
    big = rt.append_context(world.agent_id, world.group_ids[2], "result", "tool", "line\n" * 400_000)
    wait_for(qtbot, editor, lambda c: len(c.items) == 6)
    select(editor, big)  # how fast is bench/display_bench.py's question; here: capped, with "Show all"
    assert len(editor.detail.toPlainText()) == DETAIL_CAP
    assert editor.show_all_button.isVisible() or not editor.isVisible()
    assert "2,000,000" in editor.show_all_button.text()
    editor.show_all_button.click()
    assert len(editor.detail.toPlainText()) == 2_000_000


def test_as_of_marks_items_added_later(make_editor: Callable[..., ContextEditor], services: Services,
                                      world: World) -> None:
    at = datetime.now(UTC)
    time.sleep(0.01)
    rt = AgentRuntime(services.source.store)
    later = rt.append_context(world.agent_id, world.group_ids[2], "message", "user", "And the retry?")
    widget = make_editor(world.agent_id, at)
    assert not widget.banner.isHidden()
    assert widget.banner.text().startswith("Context as of ")
    assert "items added after it are marked" in widget.banner.text()
    marked = [i for i in widget.model.snapshot.items
              if widget.model.index_of("item", i.id).data(AddedAfterRole)]
    assert [i.id for i in marked] == [later]
    assert widget.model.index_of("item", later).data().endswith("later")
    widget.show_agent(world.agent_id)
    assert widget.banner.isHidden()


def test_read_only_source_disables_commands_with_reasons(make_editor: Callable[..., ContextEditor],
                                                         world: World, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(NativeSource, "capabilities", property(lambda self: frozenset()))
    widget = make_editor(world.agent_id)
    select(widget, world.item_ids[1])
    for action in (widget.edit_action, widget.compact_action, widget.visible_action, widget.lock_action):
        assert not action.isEnabled()
        assert action.toolTip() == "The store is open read-only."
    locked = widget.model.index_of("item", world.item_ids[1], LOCKED)
    assert not widget.model.flags(locked) & Qt.ItemFlag.ItemIsUserCheckable


def test_summary_names_the_agent_read_off_the_gui_thread(make_editor: Callable[..., ContextEditor], world: World,
                                                          monkeypatch: pytest.MonkeyPatch, qtbot) -> None:
    on_gui_thread: list[bool] = []
    agent = NativeSource.agent

    def spy(self: NativeSource, agent_id: str) -> rm.Agent:
        on_gui_thread.append(threading.current_thread() is threading.main_thread())
        return agent(self, agent_id)

    monkeypatch.setattr(NativeSource, "agent", spy)
    widget = make_editor(world.agent_id)
    assert on_gui_thread and not any(on_gui_thread)
    assert widget.identity.text() == "planner · claude-sonnet-4" and widget.identity.isVisibleTo(widget)
    revision = widget.model.snapshot.context_revision
    assert widget.summary.text() == f"5 items · 0 hidden · 0 compactions · revision {revision}"
    select(widget, *world.item_ids[1:4])
    dialog = widget.compact_selected()
    dialog.summary.setPlainText("A flaky settlement test.")
    dialog.accept()
    wait_for(qtbot, widget, lambda c: bool(c.compactions))
    assert widget.summary.text().startswith("3 items · 0 hidden · 1 compaction · ")


def test_summary_falls_back_to_the_agent_id(make_editor: Callable[..., ContextEditor], world: World,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(self: NativeSource, agent_id: str) -> rm.Agent:
        raise NotFound(f"There is no agent with id {agent_id}.")

    monkeypatch.setattr(NativeSource, "agent", missing)
    widget = make_editor(world.agent_id)
    assert widget.identity.text() == world.agent_id
    assert widget.summary.text().startswith("5 items")


def test_no_agent_shows_placeholder(editor: ContextEditor) -> None:
    editor.show_agent(None)
    assert editor.model.rowCount() == 0
    assert editor.stack.currentWidget() is editor.placeholder


def test_a_stream_of_changes_cannot_postpone_the_reload_forever(services: Services, world: World,
                                                                 qtbot) -> None:
    """Batches closer together than the debounce: the model still reloads while they keep coming."""
    from PySide6.QtCore import QTimer

    from agentdesk.model.context.model import RELOAD_DEBOUNCE_MS
    from agentdesk.store.persistence.bus import Change

    model = ContextModel(services)
    with qtbot.waitSignal(model.reloaded, timeout=3000):
        model.set_agent(world.agent_id)
    change = Change("context", "update", world.agent_id, {"agent": world.agent_id})
    ticker = QTimer(interval=RELOAD_DEBOUNCE_MS // 4)
    ticker.timeout.connect(lambda: services.source.bus.publish([change]))
    reloads: list[bool] = []  # whether the stream of changes was still running at each reload
    model.reloaded.connect(lambda: reloads.append(ticker.isActive()))
    ticker.start()
    try:
        qtbot.waitUntil(lambda: len(reloads) >= 3, timeout=5000)
    finally:
        ticker.stop()
        model.close()
    assert all(reloads)  # every one of them during the stream
