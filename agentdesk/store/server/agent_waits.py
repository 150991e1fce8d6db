"""Agents waiting for decisions over HTTP: long polls released from the change bus, not by polling.

Every held wait is a future keyed by approval id. Decisions reach this process two ways: made
through the same `Store` (the window's own receiver: `store.bus`, after commit), or by another
process (an operator's window or `agentdesk approve`: a private `ChangeWatcher`, which follows
the change log as every window does). Either way an approval change wakes only the futures of
that approval, and one read answers all approvals woken together. An idle receiver with a
thousand waits costs the watcher's probe and one heartbeat transaction every
`HEARTBEAT_INTERVAL_S` for all of them (a held connection *is* a requester still waiting), no
per-waiter work. Deadlines are timers: an approval past its `expires_at` is expired when its
timer fires, like `poll_decision` does for a local agent.

A lost PostgreSQL server ends no held wait: reads and beats are tried again with the outage's
back-off (one line in the log, "PostgreSQL at HOST unreachable since …, retrying"), and the
watcher, once reconnected, catches up on the change log, so a decision reaches the agents after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store.approvals.commands import expire_overdue
from agentdesk.store.approvals.heartbeat import HEARTBEAT_INTERVAL_S, beat_many
from agentdesk.store.changes.watcher import ChangeWatcher
from agentdesk.store.errors import ServerUnreachable
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import RESET, Change, ChangeBus, ChangeOp, EntityKind
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import Pauses
from agentdesk.store.runtime import Decision

log = logging.getLogger(__name__)

EXPIRY_SLACK_S = 0.02
KNOWN_PENDING_S = 120.0
"""A re-poll of an approval this process read as pending, and has heard nothing of since, is not read
again for this long: an agent's next long poll then costs no query (the change bus would have said)."""
MAX_KNOWN = 100_000


class ShuttingDown(Exception):
    """The receiver is stopping: the waiter should reconnect (to the next one) and wait again."""


class Gone(Exception):
    """The agent's connection closed while it waited (it was killed, or gave up): stop beating for it."""


@dataclass(frozen=True, slots=True)
class State:
    decision: Decision | None
    """None while pending."""
    expires_at: float | None


def read_states(store: Store, approval_ids: Iterable[str], *, actor: str = "agentdesk") -> dict[str, State]:
    """Each approval's state (unknown ids are left out), expiring overdue ones first; one read for all."""
    ids = list(approval_ids)
    found = _read(store, ids)
    now = time.time()
    if any(s.decision is None and s.expires_at is not None and now >= s.expires_at for s in found.values()):
        expire_overdue(store, actor=actor)
        found = _read(store, ids)
    return found


def _read(store: Store, ids: Sequence[str]) -> dict[str, State]:
    A = sc.ApprovalRow
    found: dict[str, State] = {}
    with store.reading() as s:
        for n in range(0, len(ids), 500):
            for row in s.execute(select(A.id, A.status, A.reason, A.arguments, A.edited_arguments, A.decided_by,
                                        A.expires_at).where(A.id.in_(ids[n:n + 500]))):
                decision = None if row.status == "pending" else Decision(
                    row.status, row.reason, row.edited_arguments or row.arguments, row.decided_by)
                found[row.id] = State(decision, row.expires_at)
    return found


class DecisionWaits:
    def __init__(self, store: Store, pool: Executor, *, heartbeat_s: float = HEARTBEAT_INTERVAL_S,
                 watch: bool = True, on_tokens_changed: Callable[[], object] | None = None,
                 on_asks: Callable[[set[str] | None], object] | None = None) -> None:
        self.store = store
        self._on_tokens_changed = on_tokens_changed
        self._on_asks = on_asks
        """Called on the loop with the ids of asks that changed (None: anything may have), from the same bus and
        watcher that wake decisions: the agent API's question waits (store/server/agent_api.py)."""
        self._known: dict[str, tuple[float | None, float]] = {}
        """Approvals read as pending: (expires_at, when read, monotonic); dropped when any change of one is heard."""
        self._epoch = 0
        self._pool = pool
        self.heartbeat_s = heartbeat_s
        self._watch = watch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, set[asyncio.Future[Decision]]] = {}
        self._alive: dict[asyncio.Future[Decision], Callable[[], bool]] = {}
        """Whether each waiter's connection is still open: a dead agent's request is not beaten for."""
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._due: set[str] = set()
        self._checker: asyncio.Task[None] | None = None
        self._beater: asyncio.Task[None] | None = None
        self._unsubscribe: list[object] = []
        self._watcher: ChangeWatcher | None = None
        self.wakeups = 0
        """Approval changes that woke a held wait (for tests and the bench)."""
        self._listeners: list[Callable[[Sequence[Change]], None]] = []

    def listen(self, listener: Callable[[Sequence[Change]], None]) -> None:
        """Also hand every batch heard (this process's and, watched, other processes') to `listener`: the run
        control waits share the one watcher instead of starting a second."""
        self._listeners.append(listener)

    @property
    def held(self) -> int:
        return sum(len(f) for f in self._waiting.values())

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._unsubscribe.append(self.store.bus.subscribe(self._heard))
        if self._watch:
            foreign = ChangeBus()  # other processes' commits; this process's own arrive on store.bus
            self._unsubscribe.append(foreign.subscribe(self._heard))
            self._watcher = ChangeWatcher(self.store, bus=foreign).start()
        self._beater = loop.create_task(self._beat_loop())

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()  # type: ignore[operator]
        self._unsubscribe.clear()
        for task in (self._beater, self._checker):
            if task is not None:
                task.cancel()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for futures in self._waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(ShuttingDown())
        if self._watcher is not None:
            watcher, self._watcher = self._watcher, None
            await asyncio.get_running_loop().run_in_executor(None, watcher.stop)

    # -- one wait --------------------------------------------------------------------------
    async def wait(self, approval_id: str, timeout_s: float,
                   alive: Callable[[], bool] | None = None) -> Decision | None:
        """The decision, or None when `timeout_s` passed first (the caller asks again).

        `alive` says whether the waiting agent is still connected; once it is not, the wait ends
        (`Gone`) at the next heartbeat round instead of being beaten for until `timeout_s`.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decision] = loop.create_future()
        self._waiting.setdefault(approval_id, set()).add(future)  # before the read: no decision slips between
        if alive is not None:
            self._alive[future] = alive
        try:
            known = self._known.get(approval_id)
            if known is not None and time.monotonic() - known[1] < KNOWN_PENDING_S:
                expires_at = known[0]
            else:
                epoch = self._epoch
                states = await loop.run_in_executor(self._pool, read_states, self.store, [approval_id])
                state = states.get(approval_id)
                if state is None or state.decision is not None:
                    return None if state is None else state.decision
                expires_at = state.expires_at
                if self._epoch == epoch:  # nothing heard meanwhile that this read might predate
                    self._remember(approval_id, expires_at)
            if expires_at is not None and approval_id not in self._timers:
                delay = max(0.0, expires_at - time.time()) + EXPIRY_SLACK_S
                self._timers[approval_id] = loop.call_later(delay, self._wake, {approval_id})
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except TimeoutError:
                return None
        finally:
            self._alive.pop(future, None)
            futures = self._waiting.get(approval_id)
            if futures is not None:
                futures.discard(future)
                if not futures:
                    del self._waiting[approval_id]
                    timer = self._timers.pop(approval_id, None)
                    if timer is not None:
                        timer.cancel()

    def _remember(self, approval_id: str, expires_at: float | None) -> None:
        """After a read found it pending, and no approval change was woken on since the read was sent: a
        change the read predates is heard later, and its `_wake` drops the entry again."""
        if len(self._known) >= MAX_KNOWN:
            self._known.clear()
        self._known[approval_id] = (expires_at, time.monotonic())

    # -- waking ----------------------------------------------------------------------------
    def _heard(self, batch: Sequence[Change]) -> None:
        """A bus callback, on whatever thread committed or watched: hand the approval ids to the loop."""
        for listener in self._listeners:
            listener(batch)
        ids: set[str] | None = set()
        if self._on_tokens_changed is not None and any(
                c.op == RESET or c.entity == EntityKind.AGENT_TOKEN for c in batch):
            self._on_tokens_changed()  # a token made or revoked: forget every verified one, at once
        if self._on_asks is not None and self._loop is not None and not self._loop.is_closed():
            asked = None if any(c.op == RESET for c in batch) else {c.id for c in batch if c.entity == EntityKind.ASK}
            if asked is None or asked:
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._on_asks, asked)
        for change in batch:
            if change.op == RESET:
                ids = None
                break
            if change.entity == EntityKind.APPROVAL and change.op != ChangeOp.HEARTBEAT:
                assert ids is not None
                ids.add(change.id)
        if (ids is None or ids) and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._wake, ids)

    def _wake(self, ids: set[str] | None) -> None:
        self._epoch += 1
        if ids is None:
            self._known.clear()
        else:
            for approval_id in ids:
                self._known.pop(approval_id, None)
        wanted = set(self._waiting) if ids is None else {i for i in ids if i in self._waiting}
        if not wanted:
            return
        self._due |= wanted
        if self._checker is None or self._checker.done():
            self._checker = asyncio.get_running_loop().create_task(self._check())

    async def _check(self) -> None:
        loop = asyncio.get_running_loop()
        outage = Pauses()
        while self._due:
            ids, self._due = self._due, set()
            try:
                states = await loop.run_in_executor(self._pool, read_states, self.store, ids)
            except ServerUnreachable:  # the waiters keep waiting; the outage says so once
                self.store.outage.lost()
                await asyncio.sleep(outage.next())
                self._due |= ids
                continue
            except Exception:  # the store is busy for a moment: the waiters keep waiting
                log.warning("agent API: reading decisions failed", exc_info=True)
                await asyncio.sleep(0.2)
                self._due |= ids
                continue
            for approval_id, state in states.items():
                if state.decision is None:
                    continue
                for future in self._waiting.get(approval_id, ()):
                    if not future.done():
                        self.wakeups += 1
                        future.set_result(state.decision)

    def _any_alive(self, futures: set[asyncio.Future[Decision]]) -> bool:
        """True when some waiter of an approval is still connected; the others' waits end here."""
        found = False
        for future in list(futures):
            alive = self._alive.get(future)
            if alive is None or alive():
                found = True
            elif not future.done():
                future.set_exception(Gone())
        return found

    async def _beat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.heartbeat_s)
            ids = [approval_id for approval_id, futures in self._waiting.items() if self._any_alive(futures)]
            if not ids:
                continue
            try:
                await loop.run_in_executor(self._pool, beat_many, self.store, ids)
            except ServerUnreachable:
                self.store.outage.lost()  # the next round beats again; the agents' connections are held meanwhile
            except Exception:
                log.warning("agent API: heartbeat for %d waiting agents failed", len(ids), exc_info=True)
