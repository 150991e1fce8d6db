"""The window's one async style: store work as coroutines on the qasync loop.

Models and widgets write their store work as `async def` methods that `await
runner.run(...)` (the call itself runs on `StoreRunner`'s pool, so the GUI
thread never waits on the database) and start them with `spawn` or, for a read
where only the newest request matters, `LatestTask.start`.

`spawn` finds the qasync loop the app (or the test) installed; a host that has
none — a bench, a script, a Qt test without the GUI fixtures — gets one bound to
its running `QCoreApplication`, so the coroutine runs as Qt processes events,
exactly as under the app's `loop.run_forever()`.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import warnings
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

import qasync

from agentdesk.model.runner import StoreRunner

log = logging.getLogger(__name__)

OnError = Callable[[BaseException], None]


def qt_loop() -> asyncio.AbstractEventLoop:
    """The qasync loop coroutines run on: the running or installed one, else a new one installed now."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    with warnings.catch_warnings():  # asking must not create a plain asyncio loop nobody would drive
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_event_loop()
        except RuntimeError:
            current = None
    if isinstance(current, qasync.QEventLoop) and not current.is_closed():
        return current
    made = qasync.QEventLoop(already_running=False)
    asyncio.set_event_loop(made)
    atexit.register(_close, made)  # while its Qt objects live: at garbage collection they may be gone
    return made


def _close(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.close()


def report(on_error: OnError | None, error_signal: Any | None = None) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback sending a task's failure to `on_error`, else to the log and `error_signal` (a Qt signal)."""

    def done(task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if on_error is not None:
            try:
                on_error(exc)
            except Exception as handler_error:  # a broken handler must not go unseen
                log.exception("store error handler failed")
                if error_signal is not None:
                    error_signal.emit(str(handler_error))
            return
        log.error("store work failed: %s", exc, exc_info=exc)
        if error_signal is not None:
            error_signal.emit(str(exc))

    return done


def spawn(work: Coroutine[Any, Any, Any], on_error: OnError | None = None,
          error_signal: Any | None = None) -> asyncio.Task[Any]:
    """Run `work` on the qasync loop; a failure goes to `on_error` (else logged and sent to `error_signal`).

    Cancellation is quiet: a coroutine cancelled because the runner shut down (the window closed) or because
    a newer request replaced it simply ends.
    """
    task = qt_loop().create_task(work)
    # A read still awaiting the pool when the window (or a test's loop) closes is dropped, as its answer has
    # nothing left to reach: no "Task was destroyed but it is pending" warning for that ordinary ending.
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    task.add_done_callback(report(on_error, error_signal))
    return task


class LatestTask:
    """Latest request wins: starting one cancels the one in flight, so a superseded answer is never applied.

    The coroutine awaits its store call (`await runner.run(...)`) and then applies the answer with no further
    `await` in between, so once `start` or `cancel` has cancelled it, it can no longer reach the model: the
    cancellation lands at the `await`, even when the pool already finished the call. Failures of the current
    request go to the one `on_error` given here (else the runner's status-bar signal); a cancelled
    request's failure is dropped with it.
    """

    def __init__(self, runner: StoreRunner, on_error: OnError | None = None) -> None:
        self._error_signal = runner.error
        self._on_error = on_error
        self._task: asyncio.Task[Any] | None = None

    def start(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Cancel the request in flight, if any, and run `work` in its place."""
        self.cancel()
        self._task = spawn(work, self._on_error, self._error_signal)
        return self._task

    def cancel(self) -> None:
        """Drop the request in flight: its answer and its error never arrive."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    @property
    def pending(self) -> bool:
        """A request is in flight."""
        return self._task is not None and not self._task.done()


class Tickets:
    """Requests side by side, each with a ticket from one rising counter; a reset cancels them all.

    For models that apply answers per row (tree rows, approval rows): several reads are in flight at once, the
    coroutine is handed its ticket, and `fresh(key, ticket)` keeps the newest answer per key, since reads
    finish on the pool in any order. `cancel` (a reset: another store, a feed gap) cancels every request in
    flight, so none of their answers or errors arrive, and forgets what the rows showed.
    """

    def __init__(self, runner: StoreRunner) -> None:
        self._error_signal = runner.error
        self._tickets = itertools.count(1)
        self._newest: dict[Hashable, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def add(self, work: Callable[[int], Coroutine[Any, Any, Any]], on_error: OnError | None = None) -> int:
        """Run `work(ticket)` beside the requests in flight; its failure goes to `on_error` unless cancelled."""
        ticket = next(self._tickets)
        task = spawn(work(ticket), on_error, self._error_signal)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return ticket

    def cancel(self) -> None:
        """Drop every request in flight and the per-key record."""
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self._newest.clear()

    def fresh(self, key: Hashable, ticket: int) -> bool:
        """True, and remembered, unless `key` already shows an answer newer than `ticket`."""
        if ticket < self._newest.get(key, 0):
            return False
        self._newest[key] = ticket
        return True
