"""Moves bus events onto the GUI thread, coalesced into one batch per short interval.

The bus calls subscribers on whatever thread published (a store worker, the
watcher thread). Qt objects may only be touched on the GUI thread, so the
callback only queues the changes and wakes the GUI thread with a queued
signal; a single-shot timer then flushes everything that arrived meanwhile as
one batch. A burst of thousands of changes costs each model one update.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from agentdesk.store.persistence.bus import Change, ChangeBus, coalesce

DEFAULT_COALESCE_MS = 30


class BusBridge(QObject):
    changes = Signal(object)
    """A coalesced tuple of `Change`, delivered on the GUI thread."""
    _wake = Signal()

    def __init__(self, bus: ChangeBus, coalesce_ms: int = DEFAULT_COALESCE_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pending: list[Change] = []
        self._lock = threading.Lock()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(coalesce_ms)
        self._timer.timeout.connect(self._flush)
        self._wake.connect(self._arm)
        self.last_change_at: float | None = None
        self.batches_delivered = 0
        self._unsubscribe = bus.subscribe(self._on_bus)

    def _on_bus(self, batch: Sequence[Change]) -> None:
        with self._lock:
            first = not self._pending
            self._pending.extend(batch)
        if first:
            self._wake.emit()

    def _arm(self) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        self.last_change_at = time.time()
        self.batches_delivered += 1
        self.changes.emit(tuple(coalesce(batch)))

    def close(self) -> None:
        self._unsubscribe()
        self._timer.stop()
