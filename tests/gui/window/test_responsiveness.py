"""The GUI thread keeps running while the store is slow: every store call happens off it.

No clock is read: the store's first reads block on a gate the test holds shut, so "the views were built,
the event loop turned and typing worked while the store had not answered" is a fact, not a timing.
"""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from tests.gui.conftest import World


class GatedSource:
    """The real source, except that the reads the views start with wait until the test opens the gate."""

    def __init__(self, inner: NativeSource) -> None:
        self._inner = inner
        self.gate = threading.Event()
        self.waiting = threading.Semaphore(0)
        """Released once per read that reached the gate: the read really is in progress, off the GUI thread."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _wait(self) -> None:
        if threading.current_thread() is threading.main_thread():
            raise AssertionError("a store read ran on the GUI thread")  # fail at once rather than hang
        self.waiting.release()
        assert self.gate.wait(60), "the test never opened the gate"

    def projects(self) -> Any:
        self._wait()
        return self._inner.projects()

    def approvals(self, *args: Any, **kwargs: Any) -> Any:
        self._wait()
        return self._inner.approvals(*args, **kwargs)


def test_views_stay_responsive_while_the_store_is_slow(world: World, qtbot: Any) -> None:
    source = NativeSource.open(str(world.path))
    gated = GatedSource(source)
    services = Services.create(gated, actor="tester", coalesce_ms=10)  # type: ignore[arg-type]
    try:
        tree = ProjectTree(services)  # returns although no read can have finished: the gate is shut
        queue = ApprovalQueue(services)
        qtbot.addWidget(tree)
        qtbot.addWidget(queue)
        qtbot.waitUntil(lambda: gated.waiting.acquire(blocking=False), timeout=10_000)  # a read is blocked

        ticks: list[int] = []
        timer = QTimer()
        timer.setInterval(5)
        timer.timeout.connect(lambda: ticks.append(1))
        timer.start()
        qtbot.waitUntil(lambda: len(ticks) >= 20, timeout=10_000)  # the event loop turns while the read waits
        timer.stop()
        tree.filter_edit.setText("Payments")  # typing still works while the store is busy
        QApplication.processEvents()
        assert tree.filter_edit.text() == "Payments"
        assert tree.model.rowCount() == 0, "the gated read cannot have answered yet"

        gated.gate.set()
        qtbot.waitUntil(lambda: tree.model.rowCount() == 1, timeout=10_000)
        qtbot.waitUntil(lambda: queue.pending_model.rowCount() == len(world.approval_ids), timeout=10_000)
    finally:
        gated.gate.set()
        services.close()
        source.close()
