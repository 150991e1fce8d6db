"""The Rules panel, the queue's draft-rule marks, gone requesters and the tray notifier (pytest-qt)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget
from sqlalchemy import update

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.rules.panel import RulesPanel
from agentdesk.gui.window.notify import TrayNotifier
from agentdesk.model.approvals.pending import EXPIRES, TOOL, GoneRole, SettlesRole
from agentdesk.model.rules.dry_run import ACTUAL, DIFFERS, DiffersRole
from agentdesk.model.rules.table import EFFECT, HITS
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.rules.commands import list_rules
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World


@pytest.fixture
def runtime(world: World) -> Iterator[AgentRuntime]:
    source = NativeSource.open(str(world.path))
    yield AgentRuntime(source.store)
    source.close()


def make_panel(services: Services, qtbot: Any, **kwargs: Any) -> RulesPanel:
    panel = RulesPanel(services, **kwargs)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    return panel


def make_queue(services: Services, qtbot: Any) -> ApprovalQueue:
    queue = ApprovalQueue(services)
    qtbot.addWidget(queue)
    queue.resize(640, 560)
    queue.show()
    qtbot.waitUntil(lambda: queue.pending_model.is_loaded)
    return queue


def test_a_draft_shows_its_dry_run_and_saving_lists_the_rule(services: Services, qtbot: Any, world: World,
                                                               runtime: AgentRuntime) -> None:
    source = NativeSource(runtime.store)
    yes = runtime.request_approval(world.run_id, "run_shell", {"cmd": "npm test"})
    no = runtime.request_approval(world.run_id, "run_shell", {"cmd": "npm test"})
    source.decide(yes, True, "alice")
    source.decide(no, False, "bob", "flaky")
    panel = make_panel(services, qtbot)
    settles: list[tuple[set[str], str]] = []
    panel.draft_settles.connect(lambda ids, effect: settles.append((ids, effect)))
    editor = panel.editor
    editor.tool.setText("run_shell")
    editor.command_field.setText("cmd")
    editor.commands.setPlainText("npm test")
    panel.run_dry_run()
    qtbot.waitUntil(lambda: panel.dry_model.rowCount() == 2, timeout=5000)
    model = panel.dry_model
    differing = [r for r in range(2) if model.index(r, 0).data(DiffersRole)]
    assert len(differing) == 1
    row = differing[0]
    assert model.index(row, ACTUAL).data() == "denied" and model.index(row, DIFFERS).data() == "differs"
    assert model.index(row, 0).data(Qt.ItemDataRole.BackgroundRole) is not None
    assert "1 differ" in panel.summary.text()
    assert settles and settles[-1] == (set(), "allow")  # world's pending run_shell uses another command
    panel.save()
    qtbot.waitUntil(lambda: panel.rules_model.rowCount() == 1, timeout=5000)
    assert panel.rules_model.index(0, EFFECT).data() == "ALLOW"
    assert panel.rules_model.index(0, HITS).data() == "0"
    rule = list_rules(runtime.store)[0]
    assert rule.matcher["commands"] == [["npm", "test"]] and rule.created_by == "tester"
    hit = runtime.request_approval(world.run_id, "run_shell", {"cmd": "npm test"})
    assert source.approval(hit).decided_by_rule == rule.id
    qtbot.waitUntil(lambda: panel.rules_model.index(0, HITS).data() == "1", timeout=5000)


def test_a_rule_from_the_selected_approval_and_the_queue_marks(services: Services, qtbot: Any,
                                                                world: World) -> None:
    queue = make_queue(services, qtbot)
    panel = make_panel(services, qtbot, current_approval=queue.current_approval)
    panel.draft_settles.connect(queue.pending_model.set_settles)
    row = queue.pending_model.row_of(world.approval_ids[0])
    queue.pending_table.selectRow(row)
    panel.propose_from_selected()
    assert panel.editor.kind.currentData() == "shell" and panel.editor.command_field.text() == "cmd"
    assert panel.editor.commands.toPlainText() == "pytest -x tests/test_settle.py"
    assert panel.editor.agent.text() == world.agent_id
    panel.run_dry_run()
    qtbot.waitUntil(lambda: bool(queue.pending_model.index(row, TOOL).data(SettlesRole)), timeout=5000)
    assert queue.pending_model.index(row, TOOL).data().startswith("✓ ")
    assert "would allow" in queue.pending_model.index(row, TOOL).data(Qt.ItemDataRole.ToolTipRole)
    others = [r for r in range(queue.pending_model.rowCount()) if r != row]
    assert all(queue.pending_model.index(r, TOOL).data(SettlesRole) is None for r in others)


def test_gone_requesters_are_greyed_sorted_last_and_dismissed(services: Services, qtbot: Any, world: World,
                                                              runtime: AgentRuntime) -> None:
    first = world.approval_ids[0]
    with runtime.store.engine.begin() as conn:
        conn.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == first)
                     .values(requester_heartbeat_at=time.time() - 120))
    queue = make_queue(services, qtbot)
    model = queue.pending_model
    qtbot.waitUntil(lambda: model.row_of(first) == model.rowCount() - 1, timeout=5000)
    last = model.rowCount() - 1
    assert model.index(last, EXPIRES).data() == "gone"
    assert "Requester gone" in model.index(last, EXPIRES).data(Qt.ItemDataRole.ToolTipRole)
    assert model.index(last, 0).data(GoneRole) is True
    assert model.index(last, 0).data(Qt.ItemDataRole.ForegroundRole) is not None
    assert model.index(0, 0).data(GoneRole) is False  # never beat: a foreign-style requester, nothing new
    assert queue.dismiss_gone_button.isVisible() and "1 gone requester" in queue.dismiss_gone_button.text()
    queue.dismiss_gone_button.click()
    qtbot.waitUntil(lambda: model.row_of(first) < 0, timeout=5000)
    stored = NativeSource(runtime.store).approval(first)
    assert (stored.status, stored.reason, stored.decided_by) == ("denied", "requester gone", "tester")
    qtbot.waitUntil(lambda: not queue.dismiss_gone_button.isVisible(), timeout=5000)


def test_a_live_heartbeat_is_not_gone(services: Services, qtbot: Any, world: World,
                                      runtime: AgentRuntime) -> None:
    live, stale = world.approval_ids[1], world.approval_ids[0]
    with runtime.store.engine.begin() as conn:
        conn.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == live)
                     .values(requester_heartbeat_at=time.time()))
        conn.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == stale)  # the control
                     .values(requester_heartbeat_at=time.time() - 120))
    queue = make_queue(services, qtbot)
    model = queue.pending_model
    with qtbot.waitSignal(model.ticked, timeout=5000):  # a tick re-judges every row against the clock
        pass
    assert model.index(model.row_of(stale), 0).data(GoneRole) is True
    assert model.index(model.row_of(live), 0).data(GoneRole) is False
    assert queue.dismiss_gone_button.isVisible() and "1 gone requester" in queue.dismiss_gone_button.text()


def test_the_tray_notifier_rate_limits_offscreen(qtbot: Any) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    now = [0.0]
    notifier = TrayNotifier(window, min_interval_s=0.3, clock=lambda: now[0])
    shown: list[str] = []
    notifier.shown.connect(shown.append)
    notifier.pending_changed(1)
    now[0] = 0.1
    notifier.pending_changed(2)
    notifier.pending_changed(3)
    assert shown == ["1 approval waiting for you"]
    now[0] = 0.5
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=3000)
    assert shown[1] == "3 approvals waiting for you"


def test_ctrl_r_in_the_window_proposes_a_rule_from_the_selected_approval(services: Services, qtbot: Any,
                                                                          world: World) -> None:
    from agentdesk.gui.window.main_window import RULES_TAB, MainWindow

    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    queue = window.queue
    qtbot.waitUntil(lambda: queue.pending_model.is_loaded and queue.pending_model.rowCount() == 3)
    queue.pending_table.selectRow(queue.pending_model.row_of(world.approval_ids[1]))
    window.rule_from_selected_approval()
    assert window.tabs.currentIndex() == RULES_TAB
    assert window.rules.editor.tool.text() == "write_file" and window.rules.editor.kind.currentData() == "fields"
    assert '"path": {"equals": "settle.py"}' in window.rules.editor.fields.text()
    qtbot.waitUntil(lambda: bool(queue.pending_model.index(
        queue.pending_model.row_of(world.approval_ids[1]), 0).data(SettlesRole)), timeout=5000)
    window.tabs.setCurrentIndex(0)
    assert queue.pending_model.index(queue.pending_model.row_of(world.approval_ids[1]), 0).data(SettlesRole) is None


def test_disabling_greys_the_rule_and_a_stale_edit_is_refused(services: Services, qtbot: Any,
                                                              runtime: AgentRuntime) -> None:
    from agentdesk.store.rules.commands import add_rule, update_rule

    rule = add_rule(runtime.store, "allow", "read_file", {"kind": "any"}, "alice")
    panel = make_panel(services, qtbot)
    qtbot.waitUntil(lambda: panel.rules_model.rowCount() == 1, timeout=5000)
    panel.table.selectRow(0)
    assert panel.toggle_button.isEnabled() and panel.toggle_button.text() == "Disable"
    panel.toggle_selected()
    qtbot.waitUntil(lambda: panel.rules_model.index(0, 0).data(Qt.ItemDataRole.ForegroundRole) is not None,
                    timeout=5000)
    assert panel.toggle_button.text() == "Enable"
    update_rule(runtime.store, rule.id, 2, "bob", note="changed elsewhere")  # revision 3 now
    panel.editor.note.setText("my edit")
    panel.save()  # the editor still holds revision 2
    qtbot.waitUntil(lambda: "changed since you loaded it" in panel.message.text(), timeout=5000)
    assert list_rules(runtime.store)[0].note == "changed elsewhere"


def test_a_rule_with_no_matcher_says_it_covers_every_call_and_asks_first(services: Services, qtbot: Any,
                                                                         runtime: AgentRuntime) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    panel = make_panel(services, qtbot)
    editor = panel.editor
    editor.tool.setText("read_file")
    assert not editor.every_call.isVisible()
    editor.kind.setCurrentIndex(editor.kind.findData("any"))
    assert editor.every_call.isVisible()
    assert "it would allow every call of read_file, whatever its arguments" in editor.every_call.text()
    seen: list[str] = []

    def answer(button: QMessageBox.StandardButton) -> None:
        box = panel.every_call_box
        assert box is not None
        seen.append(box.text())
        box.button(button).click()

    QTimer.singleShot(0, lambda: answer(QMessageBox.StandardButton.Cancel))
    panel.save()
    assert "every call of read_file" in seen[0] and "without asking anyone" in seen[0]
    assert "Not saved" in panel.message.text() and list_rules(runtime.store) == []
    QTimer.singleShot(0, lambda: answer(QMessageBox.StandardButton.Save))
    panel.save()
    qtbot.waitUntil(lambda: panel.rules_model.rowCount() == 1, timeout=5000)
    assert list_rules(runtime.store)[0].matcher == {"kind": "any"} and len(seen) == 2
    assert "every call" in panel.rules_model.index(0, 2).data()


@pytest.mark.parametrize("width", [480, 1200])
def test_the_editor_fields_and_buttons_are_readable_at_any_width(services: Services, qtbot: Any,
                                                                 width: int) -> None:
    panel = make_panel(services, qtbot)
    panel.resize(width, 700)
    qtbot.waitUntil(lambda: panel.width() == width)
    editor = panel.editor
    for field in (editor.tool, editor.fields, editor.note):
        assert field.width() >= 150, f"a field is {field.width()} px wide at {width} px"
    for button in (panel.new_button, panel.propose_button, panel.dry_button, panel.save_button):
        assert button.width() >= button.sizeHint().width()  # "From selected approval" whole
        assert button.mapTo(panel, button.rect().topRight()).x() <= panel.width()
