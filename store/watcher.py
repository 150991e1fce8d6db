"""Turns other processes' commits into bus events.

On SQLite a dedicated connection polls `PRAGMA data_version`, which moves only
when another connection committed; the change log is read only then. Elsewhere
the watcher polls the change log's high-water mark. Each poll publishes at most
one coalesced batch, so a runtime writing ten thousand changes a second costs a
subscriber one callback per poll interval.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from sqlalchemy import func, select

from . import sqlite
from .bus import RESET, Change, ChangeBus
from .database import Store
from .schema import ChangeRow

log = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL_S = 0.025
READ_BATCH = 20_000


class ChangeWatcher:
    """Background thread publishing foreign changes on `store.bus`.

    `include_own` is for tools like `agentdesk watch` that want every change,
    including those written through the same Store object.
    """

    def __init__(self, store: Store, *, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
                 include_own: bool = False, bus: ChangeBus | None = None) -> None:
        self.store = store
        self.bus = bus or store.bus
        self.poll_interval_s = poll_interval_s
        self.include_own = include_own
        self.high_water = 0
        self.last_change_at: float | None = None
        self.healthy = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._probe: sqlite3.Connection | None = None
        self._last_version: int | None = None

    def start(self, from_seq: int | None = None) -> ChangeWatcher:
        self.high_water = self._current_max_seq() if from_seq is None else from_seq
        path = self.store.path
        if path is not None:
            self._probe = sqlite.open_probe(path, 5.0)
            self._last_version = sqlite.data_version(self._probe)
        self._thread = threading.Thread(target=self._run, name="agentdesk-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._probe is not None:
            self._probe.close()

    def _run(self) -> None:
        moved: Callable[[], bool] = self._data_version_moved if self._probe else self._max_seq_moved
        while not self._stop.wait(self.poll_interval_s):
            try:
                if moved():
                    self.poll_once()
                self.healthy = True
            except Exception:  # keep watching: a locked or busy moment must not kill live updates
                self.healthy = False
                log.exception("change watcher poll failed")

    def _data_version_moved(self) -> bool:
        assert self._probe is not None
        version = sqlite.data_version(self._probe)
        if version != self._last_version:
            self._last_version = version
            return True
        return False

    def _max_seq_moved(self) -> bool:
        return self._current_max_seq() != self.high_water

    def _current_max_seq(self) -> int:
        with self.store.reading() as session:
            return int(session.execute(select(func.max(ChangeRow.seq))).scalar() or 0)

    def poll_once(self) -> int:
        """Read everything past the high-water mark and publish it as one batch."""
        changes: list[Change] = []
        with self.store.reading() as session:
            lowest = session.execute(select(func.min(ChangeRow.seq))).scalar()
            if lowest is not None and lowest > self.high_water + 1 and self.high_water > 0:
                changes.append(Change("*", RESET, "*", at=time.time()))  # the feed was pruned past us
            while True:
                rows = session.execute(
                    select(ChangeRow).where(ChangeRow.seq > self.high_water)
                    .order_by(ChangeRow.seq).limit(READ_BATCH)).scalars().all()
                for row in rows:
                    self.high_water = row.seq
                    if row.origin == self.store.origin and not self.include_own:
                        continue
                    changes.append(Change(row.entity, row.op, row.entity_id, json.loads(row.parents),
                                          row.revision, row.seq, row.origin, row.at))
                if len(rows) < READ_BATCH:
                    break
        if changes:
            self.last_change_at = time.time()
            self.bus.publish(changes)
        return len(changes)
