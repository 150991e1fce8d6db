"""The GUI thread keeps running while the store is slow: every store call happens off it."""

from __future__ import annotations

import itertools
import time
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource

from .conftest import World

SLOW_S = 1.2


class SlowSource:
    """The real source, except that the reads the views start with take `SLOW_S` seconds."""

    def __init__(self, inner: NativeSource) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def projects(self) -> Any:
        time.sleep(SLOW_S)
        return self._inner.projects()

    def approvals(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_S)
        return self._inner.approvals(*args, **kwargs)


def event_loop_gaps(qtbot: Any, seconds: float) -> list[float]:
    """Run the event loop for `seconds` with a 10 ms timer; return the gaps between its ticks."""
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    qtbot.wait(int(seconds * 1000))
    timer.stop()
    return [b - a for a, b in itertools.pairwise(ticks)]


def test_views_stay_responsive_while_the_store_is_slow(world: World, qtbot: Any) -> None:
    source = NativeSource.open(str(world.path))
    services = Services.create(SlowSource(source), actor="tester", coalesce_ms=10)  # type: ignore[arg-type]
    try:
        started = time.perf_counter()
        tree = ProjectTree(services)
        queue = ApprovalQueue(services)
        qtbot.addWidget(tree)
        qtbot.addWidget(queue)
        built_in = time.perf_counter() - started
        assert built_in < SLOW_S / 2, "building the views waited for the store"

        gaps = event_loop_gaps(qtbot, SLOW_S * 0.8)
        assert tree.model.rowCount() == 0, "the slow read cannot have finished yet"
        assert len(gaps) > 20 and max(gaps) < 0.15, f"the GUI thread stalled for {max(gaps):.3f} s"
        tree.filter_edit.setText("Payments")  # typing still works while the store is busy
        QApplication.processEvents()
        assert tree.filter_edit.text() == "Payments"

        qtbot.waitUntil(lambda: tree.model.rowCount() == 1, timeout=int(SLOW_S * 4000))
        qtbot.waitUntil(lambda: queue.pending_model.rowCount() == len(world.approval_ids),
                        timeout=int(SLOW_S * 4000))
    finally:
        services.close()
        source.close()
