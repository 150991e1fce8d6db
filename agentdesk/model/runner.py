"""Runs blocking store calls off the GUI thread: the window awaits them on the qasync loop.

The store is synchronous (SQLAlchemy + SQLite/PostgreSQL), so every call goes to
a small thread pool; `run()` is the coroutine the window's `async def` methods
await (started with `model.tasks.spawn`, `LatestTask` or `Tickets`, or as
`@asyncSlot`s), so the answer is applied on the GUI thread and the GUI thread
never waits on the database. Unhandled failures reach the status bar through
`error`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

T = TypeVar("T")

OnDone = Callable[[Any], None]
OnError = Callable[[BaseException], None]


class StoreRunner(QObject):
    """A thread pool for store calls, awaited from coroutines on the qasync loop."""

    error = Signal(str)
    """Errors nobody handled, as one sentence for the status bar."""
    busy_changed = Signal(int)

    def __init__(self, max_workers: int = 4, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agentdesk-store")
        self._in_flight = 0
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Await a store call from a coroutine on the qasync loop.

        Counted in `in_flight` (the status bar's "loading…", screenshots waiting for quiet);
        after `shutdown()` the awaiting coroutine is cancelled, as nothing is left to answer to.
        """
        if self._closed:
            raise asyncio.CancelledError
        self._in_flight += 1
        self.busy_changed.emit(self._in_flight)
        try:
            return await asyncio.wrap_future(self._pool.submit(fn, *args))
        finally:
            self._in_flight -= 1
            if not self._closed:  # a coroutine closed after the window (and this object) went away
                self.busy_changed.emit(self._in_flight)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def shutdown(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
