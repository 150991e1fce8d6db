"""Runs blocking store calls off the GUI thread and brings results back to it.

The store is synchronous (SQLAlchemy + SQLite), so every call goes to a small
thread pool. Completions are delivered on the GUI thread through a queued
signal, which works under any Qt event loop (qasync's in the app, pytest-qt's
in tests). `run()` is the coroutine form for `@asyncSlot` handlers.
Models put `model.latest.Latest` around their reads, which drops answers that
a newer request (or a reset) superseded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)
T = TypeVar("T")

OnDone = Callable[[Any], None]
OnError = Callable[[BaseException], None]


class StoreRunner(QObject):
    """A thread pool for store calls whose callbacks run on the thread that owns this object."""

    _completed = Signal(object, object, object, object)  # result, error, on_done, on_error
    error = Signal(str)
    """Errors nobody handled, as one sentence for the status bar."""
    busy_changed = Signal(int)

    def __init__(self, max_workers: int = 4, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agentdesk-store")
        # Queued even on the same thread: a job that finishes before its callback is attached must
        # still answer later, from the event loop, never inside the caller's own stack.
        self._completed.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self._in_flight = 0
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any, on_done: OnDone | None = None,
               on_error: OnError | None = None) -> Future[T]:
        if self._closed:  # a late timer after the window closed: nothing left to answer to
            future: Future[T] = Future()
            future.cancel()
            return future
        self._in_flight += 1
        self.busy_changed.emit(self._in_flight)
        future = self._pool.submit(fn, *args)

        def finished(f: Future[T]) -> None:
            exc = f.exception()
            self._completed.emit(None if exc else f.result(), exc, on_done, on_error)

        future.add_done_callback(finished)
        return future

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Await a store call from an `@asyncSlot` coroutine on the qasync loop.

        Counted in `in_flight` like `submit()` (the status bar's "loading…", screenshots waiting for quiet);
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

    def _deliver(self, result: Any, exc: BaseException | None, on_done: OnDone | None,
                 on_error: OnError | None) -> None:
        self._in_flight -= 1
        self.busy_changed.emit(self._in_flight)
        try:
            if exc is not None:
                if on_error is not None:
                    on_error(exc)
                else:
                    log.error("store call failed: %s", exc, exc_info=exc)
                    self.error.emit(str(exc))
            elif on_done is not None:
                on_done(result)
        except Exception as callback_error:  # a broken callback must not kill the event loop
            log.exception("store call callback failed")
            self.error.emit(str(callback_error))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def shutdown(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
