"""Agents blocked at a checkpoint over HTTP: long polls released from the change bus, as decisions are.

A paused agent asks `POST /runs/{id}/control/wait`; the wait is a future keyed by run id, woken when a change
of that run is heard (this process's bus, or the decision waits' watcher of other processes' commits:
`DecisionWaits.listen`), then one read says whether the run is still held. Nothing is polled: a resume
reaches the agent within the watcher's poll of the commit (40 ms on SQLite; LISTEN on PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import Executor

from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.control.state import RunControl
from agentdesk.store.persistence.bus import RESET, Change, EntityKind
from agentdesk.store.persistence.database import Store

log = logging.getLogger(__name__)


def still_held(control: RunControl) -> bool:
    """Whether a waiting agent should go on waiting: paused, and its block already reported."""
    return control.held


class ControlWaits:
    def __init__(self, store: Store, pool: Executor) -> None:
        self.store = store
        self._pool = pool
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, set[asyncio.Future[RunControl]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.wakeups = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def heard(self, batch: Sequence[Change]) -> None:
        """A bus callback on any thread: hand the woken run ids (None: everything) to the loop."""
        ids: set[str] | None = set()
        for change in batch:
            if change.op == RESET:
                ids = None
                break
            if change.entity == EntityKind.RUN:
                assert ids is not None
                ids.add(change.id)
        if (ids is None or ids) and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake, ids)

    def _wake(self, ids: set[str] | None) -> None:
        for run_id in set(self._waiting) if ids is None else ids & set(self._waiting):
            task = asyncio.get_running_loop().create_task(self._check(run_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _check(self, run_id: str) -> None:
        try:
            control = await asyncio.get_running_loop().run_in_executor(self._pool, read_control, self.store, run_id)
        except Exception:  # the store is busy for a moment: the next change wakes it again, or the wait times out
            log.warning("agent API: reading run control of %s failed", run_id, exc_info=True)
            return
        if still_held(control):
            return
        for future in self._waiting.get(run_id, ()):
            if not future.done():
                self.wakeups += 1
                future.set_result(control)

    async def wait(self, run_id: str, timeout_s: float) -> RunControl:
        """The run's control once it is no longer held (resumed, stopping, paused again), or as it is after
        `timeout_s` (the agent asks again)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RunControl] = loop.create_future()
        self._waiting.setdefault(run_id, set()).add(future)  # before the read: no resume slips between
        try:
            control = await loop.run_in_executor(self._pool, read_control, self.store, run_id)
            if not still_held(control):
                return control
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except TimeoutError:
                return control
        finally:
            futures = self._waiting.get(run_id)
            if futures is not None:
                futures.discard(future)
                if not futures:
                    del self._waiting[run_id]

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for futures in self._waiting.values():
            for future in futures:
                if not future.done():
                    future.cancel()
