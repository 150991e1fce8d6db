"""Turns other processes' commits to an agentdesk store into bus events.

The thread, the `PRAGMA data_version` probe, the back-off and the probe reopen are
the shared `PollLoop` (`store/changes/polling.py`, also what follows foreign databases): the
change log is read only when another connection committed (on a server database,
when its high-water mark moved). Each poll publishes at most one coalesced batch, so
a runtime writing ten thousand changes a second costs a subscriber one callback per
poll interval, and an idle store costs one cheap pragma per interval.

When the watcher cannot follow the feed exactly (the log was pruned past its
high-water mark, it fell too far behind, or the feed went backwards because the
file was replaced) it publishes one `reset` change: subscribers reload. It does the
same after a lost PostgreSQL server came back (once it has caught up on the change
log): reads a window made while the server was gone failed, and what they would have
shown is not in the log any more, so every view reloads once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from agentdesk.store.changes.polling import LoopWatcher, PollLoop
from agentdesk.store.persistence.bus import RESET, Change, ChangeBus
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import outage_line
from agentdesk.store.persistence.postgres.listener import NotifyLoop
from agentdesk.store.persistence.schema import ChangeRow

DEFAULT_POLL_INTERVAL_S = 0.04
"""bench/bus_latency.py, 2-core VM: at 40 ms, commit→callback p99 ≈ 45 ms and idle ≈ 0.3% of a core.

At 25 ms p99 was ≈ 30 ms but idle ≈ 0.45%; 40 ms keeps both targets (p99 ≤ 100 ms,
idle < 1%) with at least a 2x margin on a slower or busier machine.
"""
NOTIFY_MIN_INTERVAL_S = 0.01
"""On PostgreSQL, reads after a NOTIFY are at least this far apart: a burst becomes ≤ 100 batches/s."""
READ_BATCH = 5_000
NEW_CHANGES_SQL = f"""
    SELECT b.lo, b.hi, c.seq, c.at, c.origin, c.entity, c.op, c.entity_id, c.parents, c.revision
    FROM (SELECT min(seq) AS lo, max(seq) AS hi FROM {ChangeRow.__tablename__}) b
    LEFT JOIN LATERAL (SELECT * FROM {ChangeRow.__tablename__} WHERE seq > %s ORDER BY seq LIMIT %s) c ON true
    ORDER BY c.seq
"""
"""PostgreSQL, after a NOTIFY: the gap check's bounds and the rows past the high-water mark in one statement
(one snapshot, one round trip on the listener's autocommit connection); at least one row, the bounds."""
MAX_CATCH_UP = 50_000
"""Further behind than this, reloading is cheaper for subscribers than replaying: publish a reset."""


def logged_origin(store: Store) -> str:
    """The origin this process's changes carry in the change log: on PostgreSQL `login/origin`, as the server
    logs it (migration 0012); elsewhere the store's origin."""
    login = getattr(store, "login", None)
    return store.origin if login is None else f"{login.name}/{store.origin}"


class ChangeWatcher(LoopWatcher):
    """Background thread publishing foreign changes on `store.bus`.

    `include_own` is for tools like `agentdesk watch` that want every change,
    including those written through the same Store object; such a tool, which shows
    changes rather than views, passes `reload_after_outage=False` (the catch-up read
    after a reconnect already gave it every change). `healthy` is False
    until started and whenever the last poll failed; `high_water` is the last
    change-log seq read. The thread, probe and back-off are the shared `PollLoop`.
    """

    def __init__(self, store: Store, *, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
                 include_own: bool = False, bus: ChangeBus | None = None, reload_after_outage: bool = True) -> None:
        self.store = store
        self.bus = bus or store.bus
        self.poll_interval_s = poll_interval_s
        self.include_own = include_own
        self._own = frozenset({store.origin, logged_origin(store)})
        """The origins this process's own writes are logged under: on PostgreSQL the server logs the login before
        ours (migration 0012), so another login passing our origin is not skipped (it cannot hide a change)."""
        self.high_water = 0
        self.last_change_at: float | None = None
        self.resets = 0
        self._poll_lock = threading.RLock()
        self._loop: PollLoop | NotifyLoop
        if store.is_postgres:  # a server pushes NOTIFY on commit: no probe, no polling
            # The default interval exists to bound polling cost; a pushed wake-up costs nothing idle, so only
            # bursts are coalesced, over a shorter window (the GUI bridge coalesces again at 30 ms).
            spacing = NOTIFY_MIN_INTERVAL_S if poll_interval_s == DEFAULT_POLL_INTERVAL_S else poll_interval_s
            self._loop = NotifyLoop(store.url, self.poll_once, lambda: self.high_water, name="agentdesk-watcher",
                                    min_interval_s=spacing, outage=store.outage,
                                    on_reconnect=self._after_outage if reload_after_outage else None)
        else:
            self._loop = PollLoop(store.path, self.poll_once, interval_s=poll_interval_s, name="agentdesk-watcher",
                                  moved=lambda: self._current_max_seq() != self.high_water)

    @property
    def reconnecting(self) -> bool:
        """True while a lost server connection is being re-established (the window says so)."""
        return isinstance(self._loop, NotifyLoop) and self._loop.reconnecting

    def _after_outage(self) -> None:
        """The server is back and the log read up to its end: subscribers reload what failed meanwhile."""
        self.bus.publish([Change("*", RESET, "*", seq=self.high_water, at=time.time())])

    @property
    def outage_line(self) -> str | None:
        """While the server is lost: "PostgreSQL at HOST unreachable since 12:03:04, retrying" (the status bar's
        and `agentdesk watch`'s one line); None while it answers."""
        loop = self._loop
        if not isinstance(loop, NotifyLoop) or not loop.reconnecting or loop.down_since is None:
            return None
        return outage_line(self.store.outage.server, self.store.outage.since or loop.down_since)

    def start(self, from_seq: int | None = None) -> ChangeWatcher:
        """Start after the current end of the feed (or after `from_seq`)."""
        if self.running:
            return self

        def prime() -> None:
            self.high_water = self._current_max_seq() if from_seq is None else from_seq

        # Replaying from an older seq must not wait for someone else's commit: read at once.
        self._loop.start(prime, read_first=from_seq is not None)
        return self

    def _current_max_seq(self) -> int:
        with self.store.reading() as session:
            return int(session.execute(select(func.max(ChangeRow.seq))).scalar() or 0)

    def poll_once(self) -> int:
        """Read everything past the high-water mark and publish it as one batch; returns its size."""
        with self._poll_lock:
            changes = self._read_new()
            if changes:
                self.last_change_at = time.time()
                self.bus.publish(changes)
            return len(changes)

    def _read_new(self) -> list[Change]:
        if isinstance(self._loop, NotifyLoop):
            rows = self._loop.query(NEW_CHANGES_SQL, (self.high_water, READ_BATCH))
            if rows is not None:
                return self._from_listener(rows)
        return self._read_in_session()

    def _from_listener(self, rows: list[tuple[Any, ...]]) -> list[Change]:
        """The read after a NOTIFY, on the listener's connection: one statement per batch (NEW_CHANGES_SQL)."""
        assert isinstance(self._loop, NotifyLoop)
        settled = self._settled_by_bounds(rows[0][0], rows[0][1])
        if settled is not None:
            return settled
        changes: list[Change] = []
        while True:
            found = [row[2:] for row in rows if row[2] is not None]
            self._take(found, changes)
            if len(found) < READ_BATCH:
                return changes
            more = self._loop.query(NEW_CHANGES_SQL, (self.high_water, READ_BATCH))
            if more is None:
                return changes
            rows = more

    def _read_in_session(self) -> list[Change]:
        C = ChangeRow
        columns = (C.seq, C.at, C.origin, C.entity, C.op, C.entity_id, C.parents, C.revision)
        changes: list[Change] = []
        with self.store.reading() as session:  # one snapshot: gap check and rows agree
            lowest, highest = session.execute(select(func.min(C.seq), func.max(C.seq))).one()
            settled = self._settled_by_bounds(lowest, highest)
            if settled is not None:
                return settled
            while True:
                rows = session.execute(select(*columns).where(C.seq > self.high_water)
                                       .order_by(C.seq).limit(READ_BATCH)).all()
                self._take(rows, changes)
                if len(rows) < READ_BATCH:
                    return changes

    def _settled_by_bounds(self, lowest: int | None, highest: int | None) -> list[Change] | None:
        """The answer the log's bounds alone give (nothing new, or a reset); None when rows must be read."""
        if highest is None or highest == self.high_water:
            return []
        if lowest is not None and self._lost_track(lowest, highest):
            self.high_water = highest
            self.resets += 1
            return [Change("*", RESET, "*", seq=highest, at=time.time())]
        return None

    def _take(self, rows: Sequence[Sequence[Any]], into: list[Change]) -> None:
        """Advance the high-water mark over `rows` (seq order), keeping the changes this watcher reports."""
        for seq, at, origin, entity, op, entity_id, parents, revision in rows:
            self.high_water = seq
            if origin not in self._own or self.include_own:
                into.append(Change(entity, op, entity_id, json.loads(parents), revision, seq, origin, at))

    def _lost_track(self, lowest: int, highest: int) -> bool:
        pruned_past_us = lowest > self.high_water + 1
        went_backwards = highest < self.high_water
        too_far_behind = highest - self.high_water > MAX_CATCH_UP
        return pruned_past_us or went_backwards or too_far_behind
