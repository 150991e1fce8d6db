"""An approval past its deadline that no one has swept yet is counted the same in the window and the CLI
(issue 21: the window said 30 pending where `agentdesk approvals` listed 25): not pending, in both."""

from __future__ import annotations

from typing import Any

from agentdesk.cli.main import select_approvals
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from tests.gui.approvals.test_approvals import make_queue
from tests.gui.conftest import World


def test_an_overdue_unswept_approval_is_not_pending_in_the_window_or_the_cli(
        world: World, services: Services, qtbot: Any) -> None:
    writer = NativeSource.open(str(world.path))
    try:
        rt = AgentRuntime(writer.store)
        overdue = rt.request_approval(world.run_id, "shell", {"cmd": "late"}, timeout_s=0.001)
    finally:
        writer.close()
    queue = make_queue(services, qtbot)
    qtbot.waitUntil(lambda: queue.pending_model.row_of(overdue) >= 0)  # still listed (swept later), marked
    cli = select_approvals(services.source, "pending", 100)
    assert overdue not in {a.id for a in cli} and len(cli) == len(world.approval_ids)
    qtbot.waitUntil(lambda: queue.pending_model.awaiting_count() == len(cli))
    assert queue.tabs.tabText(0) == f"Pending ({len(cli)})"
    assert queue.pending_model.rowCount() == len(cli) + 1
