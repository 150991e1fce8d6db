"""`StoreRunner.run`, the coroutine form the window's `@asyncSlot` handlers await, on qasync's loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from PySide6.QtWidgets import QWidget
from qasync import asyncSlot

from agentdesk.model.runner import StoreRunner


def test_run_counts_in_flight_and_returns_on_the_gui_thread(qtbot: Any, qasync_loop: Any) -> None:
    runner = StoreRunner(max_workers=1)
    gate, seen = threading.Event(), []
    busy: list[int] = []
    runner.busy_changed.connect(busy.append)

    def store_call(x: int) -> int:
        gate.wait(5)
        return x * 2

    class Handler:
        @asyncSlot()
        async def go(self) -> None:
            seen.append((await runner.run(store_call, 21), threading.current_thread() is threading.main_thread()))

    Handler().go()
    qtbot.waitUntil(lambda: runner.in_flight == 1)
    gate.set()
    qtbot.waitUntil(lambda: seen == [(42, True)])
    assert runner.in_flight == 0 and busy[-1] == 0
    runner.shutdown()


def test_a_failed_store_call_raises_in_the_coroutine(qtbot: Any, qasync_loop: Any) -> None:
    runner = StoreRunner(max_workers=1)
    caught: list[str] = []

    def broken() -> None:
        raise ValueError("stale revision")

    async def go() -> None:
        try:
            await runner.run(broken)
        except ValueError as exc:
            caught.append(str(exc))

    task = asyncio.ensure_future(go())
    qtbot.waitUntil(lambda: caught == ["stale revision"] and task.done())
    assert runner.in_flight == 0
    runner.shutdown()


def test_after_shutdown_the_coroutine_is_cancelled(qasync_loop: Any) -> None:
    runner = StoreRunner(max_workers=1)
    runner.shutdown()
    with pytest.raises(asyncio.CancelledError):
        runner.run(lambda: 1).send(None)


def test_a_decision_in_flight_when_the_window_closes_ends_quietly(qtbot: Any, qasync_loop: Any, world: Any,
                                                                  services: Any) -> None:
    """The runner shut down under an awaiting decision: the coroutine returns, no CancelledError traceback."""
    from agentdesk.gui.approvals.decisions import DecisionFlow
    from agentdesk.gui.approvals.report import Batch
    from agentdesk.model.approvals.pending import PendingApprovalModel

    pending = PendingApprovalModel(services)
    holder = QWidget()
    flow = DecisionFlow(services, pending, holder)
    approval = services.source.approval(world.approval_ids[0])
    services.runner.shutdown()
    task = flow.record(Batch("Approved", 1, None), [approval], True, None, None)
    qtbot.waitUntil(task.done)
    assert not task.cancelled() and task.exception() is None
