"""The approval queue: decisions from the keyboard, decisions made elsewhere, expiry, and plain agent text."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import shiboken6
from PySide6.QtCore import Qt

from agentdesk.gui.approvals.dialogs import EditArgumentsDialog, ReasonDialog
from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.model.approval_format import utc_now
from agentdesk.model.approvals.decided import DecidedApprovalModel
from agentdesk.model.approvals.pending import AGE, AGENT, EXPIRES, ExpiredRole, PendingApprovalModel
from agentdesk.model.services import Services
from agentdesk.model.tree.model import PendingRole
from agentdesk.store import readmodel as rm
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.conftest import World


def stored(world: World, approval_id: str) -> rm.Approval:
    source = NativeSource.open(str(world.path))
    try:
        return source.approval(approval_id)
    finally:
        source.close()


@pytest.fixture
def runtime(world: World) -> Iterator[AgentRuntime]:
    source = NativeSource.open(str(world.path))
    yield AgentRuntime(source.store)
    source.close()


def make_queue(services: Services, qtbot: Any, **kwargs: Any) -> ApprovalQueue:
    queue = ApprovalQueue(services, **kwargs)
    qtbot.addWidget(queue)
    queue.resize(640, 560)
    queue.show()
    queue.activateWindow()
    qtbot.waitUntil(lambda: queue.pending_model.is_loaded and queue.decided_model.is_loaded)
    return queue


@pytest.fixture
def queue(services: Services, qtbot: Any) -> ApprovalQueue:
    return make_queue(services, qtbot)


def select(queue: ApprovalQueue, *approval_ids: str) -> None:
    """Select these pending rows, the first one current, as shift/ctrl-clicks would."""
    model, selection = queue.pending_model, queue.pending_table.selectionModel()
    flags = selection.SelectionFlag
    selection.clearSelection()
    for approval_id in approval_ids:
        selection.select(model.index(model.row_of(approval_id), 0), flags.Select | flags.Rows)
    selection.setCurrentIndex(model.index(model.row_of(approval_ids[0]), 0), flags.NoUpdate)
    queue.pending_table.setFocus()


def test_models_pass_the_model_tester(services: Services, runtime: AgentRuntime, world: World,
                                      qtbot: Any, qtmodeltester: Any) -> None:
    pending = PendingApprovalModel(services, tick_ms=20)
    decided = DecidedApprovalModel(services)
    qtbot.waitUntil(lambda: pending.rowCount() == 3 and decided.is_loaded)
    qtmodeltester.check(pending, force_py=True)  # and it keeps checking as rows come and go
    runtime.request_approval(world.run_id, "deploy", {"env": "prod"})
    source = NativeSource.open(str(world.path))
    source.decide(world.approval_ids[0], True, "bob")
    source.close()
    qtbot.waitUntil(lambda: pending.rowCount() == 3 and decided.rowCount() == 1)
    # The tester follows one model at a time and never lets go of the first: the pending model's
    # countdown ticks would otherwise be checked against the decided model's row count.
    pending.deleteLater()
    qtbot.waitUntil(lambda: not shiboken6.isValid(pending))
    qtmodeltester.check(decided, force_py=True)


def test_queue_lists_pending_oldest_first_and_counts(queue: ApprovalQueue, world: World) -> None:
    assert queue.pending_model.ids() == world.approval_ids
    assert queue.tabs.tabText(0) == "Pending (3)"
    minutes, seconds = queue.pending_model.index(0, EXPIRES).data().split(":")  # 600 s deadline: "9:5x"
    assert minutes in ("9", "10") and len(seconds) == 2


def test_countdown_is_in_view_at_the_docks_default_width(queue: ApprovalQueue, qtbot: Any) -> None:
    queue.resize(431, 560)  # the main window gives its dock 450 px, this much of it to the queue
    table, header = queue.pending_table, queue.pending_table.horizontalHeader()
    qtbot.waitUntil(lambda: table.viewport().width() < 431)
    assert header.sectionViewportPosition(EXPIRES) + header.sectionSize(EXPIRES) <= table.viewport().width()


def test_approve_with_a_key_updates_store_tree_and_moves_on(
        world: World, services: Services, queue: ApprovalQueue, qtbot: Any) -> None:
    tree = ProjectTree(services)
    qtbot.addWidget(tree)
    with qtbot.waitSignal(tree.run_selected, timeout=3000):
        tree.select_entity("run", world.run_id)
    run_pending = lambda: tree.model.find("run", world.run_id).data(PendingRole)  # noqa: E731
    project_pending = lambda: tree.model.find("project", world.project_id).data(PendingRole)  # noqa: E731
    assert run_pending() == 3
    counts: list[int] = []
    queue.pending_count_changed.connect(counts.append)
    select(queue, world.approval_ids[0])
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000) as report:
        qtbot.keyClick(queue.pending_table, Qt.Key.Key_A)
    assert report.args == ["approved 1"]
    approval = stored(world, world.approval_ids[0])
    assert approval.status == "approved" and approval.decided_by == "tester"
    qtbot.waitUntil(lambda: queue.pending_model.row_of(world.approval_ids[0]) < 0)
    assert queue.current_approval().id == world.approval_ids[1]  # type: ignore[union-attr]
    assert queue.pending_table.hasFocus()
    qtbot.waitUntil(lambda: run_pending() == 2 and project_pending() == 2)
    assert counts[-1] == 2 and queue.note.isHidden()  # our own decision is a result, not a note
    assert queue.decided_model.ids()[0] == world.approval_ids[0]


def test_decision_by_another_process_leaves_the_queue_and_says_who(
        world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(world.path), "approve",
                    world.approval_ids[1], "--actor", "bob"], check=True, timeout=60, capture_output=True)
    qtbot.waitUntil(lambda: queue.pending_model.row_of(world.approval_ids[1]) < 0)  # how fast: bench/
    assert queue.note.isVisible()
    assert queue.note.text() == f"{world.approval_ids[1]} (write_file) was approved by bob"
    assert queue.note.textFormat() == Qt.TextFormat.PlainText
    assert queue.results.item(0).text() == f"• {world.approval_ids[1]} (write_file) was approved by bob"


def test_a_selected_row_decided_elsewhere_hands_selection_on(
        world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    select(queue, world.approval_ids[1])
    source = NativeSource.open(str(world.path))
    source.decide(world.approval_ids[1], False, "bob", "no")
    source.close()
    qtbot.waitUntil(lambda: queue.pending_model.row_of(world.approval_ids[1]) < 0)
    assert queue.current_approval() is not None and queue.approve_button.isEnabled()


def test_deny_asks_for_a_reason(world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    select(queue, world.approval_ids[2])
    qtbot.keyClick(queue.pending_table, Qt.Key.Key_D)
    dialog = queue._dialog
    assert isinstance(dialog, ReasonDialog) and dialog.isVisible()
    assert not dialog.deny_button.isEnabled()  # a denial needs a reason
    assert stored(world, world.approval_ids[2]).status == "pending"  # nothing happens before it is given
    qtbot.keyClicks(dialog.reason_edit, "Never email <script>")
    assert dialog.deny_button.isEnabled()
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000) as report:
        dialog.deny_button.click()
    assert report.args == ["denied 1"]
    lines = [queue.results.item(n).text() for n in range(queue.results.count())]
    assert lines == ["Σ Denied 1", f"⊘ {world.approval_ids[2]} (send_email) denied"]  # no tick for a denial
    approval = stored(world, world.approval_ids[2])
    assert approval.status == "denied" and approval.reason == "Never email <script>"


def test_cancelled_denial_changes_nothing(world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    select(queue, world.approval_ids[0])
    queue.deny_selected()
    assert isinstance(queue._dialog, ReasonDialog)
    queue._dialog.reject()
    assert queue._dialog is None
    assert stored(world, world.approval_ids[0]).status == "pending"


def test_edit_arguments_validates_json_live(world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    select(queue, world.approval_ids[0])
    qtbot.keyClick(queue.pending_table, Qt.Key.Key_E)
    dialog = queue._dialog
    assert isinstance(dialog, EditArgumentsDialog)
    assert '"cmd": "pytest -x tests/test_settle.py"' in dialog.editor.toPlainText()
    assert dialog.approve_button.isEnabled()
    dialog.editor.setPlainText('{"cmd": "pytest",\n "x": }')
    assert not dialog.approve_button.isEnabled()
    assert dialog.message.text().startswith("✖ Not valid JSON") and "line 2" in dialog.message.text()
    dialog.accept()  # Enter cannot slip past the check
    assert dialog.isVisible()
    dialog.editor.setPlainText("[1, 2]")
    assert dialog.message.text() == "✖ The arguments must be a JSON object."
    dialog.editor.setPlainText('{"cmd": "pytest -x -k settle"}')
    assert dialog.approve_button.isEnabled() and dialog.message.text() == "✔ Valid JSON object."
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000):
        dialog.approve_button.click()
    approval = stored(world, world.approval_ids[0])
    assert approval.status == "approved" and approval.edited_arguments == '{"cmd":"pytest -x -k settle"}'
    assert approval.arguments == '{"cmd":"pytest -x tests/test_settle.py"}'


def test_multi_approve_reports_each_decision(world: World, qtbot: Any) -> None:
    source = NativeSource.open(str(world.path))
    source.watch(poll_interval_s=30)  # bob's denial reaches us only through our own failed decision
    services = Services.create(source, actor="alice", coalesce_ms=10)
    try:
        queue = make_queue(services, qtbot)
        bob = NativeSource.open(str(world.path))
        bob.decide(world.approval_ids[1], False, "bob", "not today")
        bob.close()
        select(queue, *world.approval_ids)
        assert queue.pending_model.rowCount() == 3
        with qtbot.waitSignal(queue.decisions_reported, timeout=3000) as report:
            queue.approve_button.click()
        assert report.args == ["approved 2, 1 already denied by bob"]
        assert queue.result_line.text() == ""  # the summary joined the log: later news is never under it
        assert queue.results.item(0).text() == "Σ Approved 2, 1 already denied by bob"
        lines = sorted(queue.results.item(n).text() for n in range(1, queue.results.count()))
        assert len(lines) == 3 and sum(line.startswith("✔") for line in lines) == 2
        assert f"✖ {world.approval_ids[1]} (write_file) was already denied by bob" in lines
        qtbot.waitUntil(lambda: queue.pending_model.rowCount() == 0)
        assert [stored(world, i).status for i in world.approval_ids] == ["approved", "denied", "approved"]
    finally:
        services.close()
        source.close()


def test_expired_approvals_cannot_be_approved(world: World, services: Services, qtbot: Any) -> None:
    shift = [timedelta(hours=1)]  # every deadline has passed, until the control below turns it back
    queue = make_queue(services, qtbot, clock=lambda: utc_now() + shift[0])
    reports: list[str] = []
    queue.decisions_reported.connect(reports.append)
    select(queue, world.approval_ids[0])
    assert queue.pending_model.index(0, EXPIRES).data() == "expired"
    assert queue.pending_model.index(0, 0).data(ExpiredRole) is True
    assert not queue.approve_button.isEnabled() and not queue.deny_button.isEnabled()
    tooltip = queue.approve_button.toolTip()
    assert "expired" in tooltip and "can no longer be approved" in tooltip
    qtbot.keyClick(queue.pending_table, Qt.Key.Key_A)
    # Control: with the clock back, the same key on another row does decide; had the expired
    # press started a decision, its report would have come first (one flow, in order).
    shift[0] = timedelta(0)
    select(queue, world.approval_ids[1])
    qtbot.waitUntil(queue.approve_button.isEnabled)
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000):
        qtbot.keyClick(queue.pending_table, Qt.Key.Key_A)
    assert reports == ["approved 1"]
    assert stored(world, world.approval_ids[1]).status == "approved"
    assert stored(world, world.approval_ids[0]).status == "pending"


def test_expired_rows_in_a_multi_selection_are_skipped(world: World, services: Services, qtbot: Any) -> None:
    past_first = lambda: utc_now() + timedelta(seconds=700)  # noqa: E731  only the 600 s deadline passed
    queue = make_queue(services, qtbot, clock=past_first)
    select(queue, world.approval_ids[0], world.approval_ids[1])
    assert queue.approve_button.isEnabled()
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000) as report:
        qtbot.keyClick(queue.pending_table, Qt.Key.Key_A)
    assert report.args == ["approved 1, 1 expired"]
    assert [stored(world, i).status for i in world.approval_ids[:2]] == ["pending", "approved"]


def test_store_refuses_an_expired_approval_the_queue_still_showed(
        world: World, services: Services, runtime: AgentRuntime, qtbot: Any) -> None:
    approval_id = runtime.request_approval(world.run_id, "late", {"n": 1}, timeout_s=0.2)
    earlier = lambda: utc_now() - timedelta(hours=1)  # noqa: E731  the queue's clock lags
    queue = make_queue(services, qtbot, clock=earlier)
    qtbot.waitUntil(lambda: queue.pending_model.row_of(approval_id) >= 0)
    expires_at = stored(world, approval_id).expires_at
    assert expires_at is not None
    qtbot.waitUntil(lambda: utc_now() > expires_at)  # the store's deadline has passed
    select(queue, approval_id)
    with qtbot.waitSignal(queue.decisions_reported, timeout=3000) as report:
        queue.approve_selected()
    assert report.args == ["approved 0, 1 expired"]
    assert stored(world, approval_id).status == "pending"


def test_countdown_updates_only_its_column(services: Services, qtbot: Any) -> None:
    model = PendingApprovalModel(services, tick_ms=10)
    qtbot.waitUntil(lambda: model.rowCount() == 3)
    spans: list[tuple[int, int, int, int]] = []
    model.dataChanged.connect(
        lambda tl, br, roles=(): spans.append((tl.row(), br.row(), tl.column(), br.column())))
    qtbot.waitUntil(lambda: len(spans) >= 12)
    assert {(left, right) for _, _, left, right in spans} <= {(EXPIRES, EXPIRES), (AGE, AGE)}
    assert (EXPIRES, EXPIRES) in {(left, right) for _, _, left, right in spans}
    assert all((top, bottom) == (0, 2) for top, bottom, _, _ in spans)


def test_agent_text_is_shown_as_plain_text(world: World, services: Services, runtime: AgentRuntime,
                                           qtbot: Any) -> None:
    agent_id = runtime.create_agent(world.session_id, "<b>x</b>", "m")
    run_id = runtime.start_run(agent_id, "<i>run</i>")
    approval_id = runtime.request_approval(run_id, "<script>tool</script>", {"html": "<img src=x onerror=1>"})
    queue = make_queue(services, qtbot)
    qtbot.waitUntil(lambda: queue.pending_model.row_of(approval_id) >= 0)
    queue.select_approval(approval_id)
    assert queue.title.textFormat() == Qt.TextFormat.PlainText
    assert queue.title.text() == "<script>tool</script> · <b>x</b> · Payments service"
    assert queue.meta.textFormat() == Qt.TextFormat.PlainText
    assert '"html": "<img src=x onerror=1>"' in queue.arguments.toPlainText()
    row = queue.pending_model.row_of(approval_id)
    assert queue.pending_model.index(row, AGENT).data() == "<b>x</b>"
    tooltip = queue.pending_model.index(row, AGENT).data(Qt.ItemDataRole.ToolTipRole)
    assert tooltip.startswith("<qt>") and "&lt;b&gt;x&lt;/b&gt;" in tooltip and "<b>" not in tooltip
    queue.deny_selected()
    assert isinstance(queue._dialog, ReasonDialog)
    assert queue._dialog.prompt.textFormat() == Qt.TextFormat.PlainText
    assert "<script>tool</script> (<b>x</b>)" in queue._dialog.prompt.text()
    queue._dialog.reject()


def test_show_in_timeline_and_context_keys(world: World, queue: ApprovalQueue, qtbot: Any) -> None:
    select(queue, world.approval_ids[0])
    with qtbot.waitSignal(queue.show_in_timeline, timeout=1000) as shown:
        qtbot.keyClick(queue.pending_table, Qt.Key.Key_T)
    assert shown.args == [world.run_id, world.tool_span_id]
    with qtbot.waitSignal(queue.show_context, timeout=1000) as shown:
        qtbot.keyClick(queue.pending_table, Qt.Key.Key_C)
    assert shown.args == [world.agent_id, world.approval_ids[0]]
    select(queue, world.approval_ids[2])
    with qtbot.waitSignal(queue.show_in_timeline, timeout=1000) as shown:
        queue.timeline_button.click()
    assert shown.args == [world.run_id, ""]


def test_select_approval_waits_for_it_to_load(world: World, services: Services, qtbot: Any) -> None:
    queue = ApprovalQueue(services)
    qtbot.addWidget(queue)
    queue.select_approval(world.approval_ids[1])  # before the first load arrives
    qtbot.waitUntil(lambda: queue.current_approval() is not None)
    assert queue.current_approval().id == world.approval_ids[1]  # type: ignore[union-attr]
