"""LISTEN/NOTIFY: wake a change-log reader the moment another process commits to a PostgreSQL store.

The NOTIFY side is a statement trigger on `change_log` (migration 0005_postgres):
one notification per inserting statement, delivered only on commit, whose
payload is just the highest seq written. The listener never trusts payloads for
content: it only uses them to skip wake-ups it has already read past, and reads
the change log past its high-water mark (so nothing is missed, and nothing is
applied twice, however notifications are merged or lost).

It runs on its own daemon thread with its own autocommit connection, never the
GUI thread's. When the connection drops (server restart, network) it is marked
unhealthy, `reconnecting` turns True, and it reconnects with exponential
back-off; after LISTEN is re-established it reads once to catch up on whatever
committed while it was away. Idle, it wakes every `IDLE_WAKE_S` only to notice
a stop request: no polling queries. Given the store's `Outage`, it tells it when the server went
away and when it is back: that is the one line the window's status bar and `agentdesk watch` show
("PostgreSQL at HOST unreachable since 12:03:04, retrying").
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from agentdesk.store.persistence.outage import Outage
from agentdesk.store.persistence.postgres.engine import CONNECT_TIMEOUT_S, libpq_url
from agentdesk.store.persistence.threads import StoppableThread

log = logging.getLogger(__name__)

CHANNEL = "agentdesk_changes"
IDLE_WAKE_S = 0.5
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0
"""As every agentdesk process waits for a lost server (store/persistence/outage.py): back within 2 s of it."""
BEHIND_CHECK_S = 1.0
"""At most this often, a notification naming a seq below the mark wakes a read anyway (see `_wait_and_read`)."""


class NotifyLoop:
    """Calls `read()` on its own thread whenever a NOTIFY names a seq past `seen()`, and after reconnecting.

    Reads are at least `min_interval_s` apart (the watcher's poll interval): a burst coalesces.

    Same surface as `store.polling.PollLoop` (start/stop/healthy/running/failures), so
    `ChangeWatcher` drives either without knowing which backend it follows.
    """

    def __init__(self, url: str, read: Callable[[], object], seen: Callable[[], int], *, name: str,
                 min_interval_s: float = 0.04, channel: str = CHANNEL, outage: Outage | None = None,
                 on_reconnect: Callable[[], object] | None = None) -> None:
        self.url = url
        self.outage = outage
        self._on_reconnect = on_reconnect
        self.min_interval_s = min_interval_s
        self.name = name
        self.channel = channel
        self.healthy = False
        self.reconnecting = False
        self.down_since: float | None = None
        """When the connection was lost (wall clock), while `reconnecting`."""
        self.failures = 0
        self.reconnects = 0
        self._read = read
        self._seen = seen
        self._thread = StoppableThread(name)
        self._conn: Any = None
        self._last_read = 0.0
        self._last_behind_check = 0.0
        self._reader: int | None = None
        """The thread id of a `read()` this loop is making: `query` runs on the listener's connection only there."""

    def start(self, prime: Callable[[], object] | None = None, *, read_first: bool = False) -> None:
        """LISTEN first, then `prime`: a commit between the two still wakes the first wait."""
        if self._thread.started:
            return
        self._connect()
        if prime is not None:
            prime()
        if read_first:
            self._read_here()
        self.healthy = True
        self._thread.start(self._run)

    def stop(self) -> None:
        self._thread.stop()
        self._close()
        self.healthy = False
        self.reconnecting = False

    @property
    def running(self) -> bool:
        return self._thread.running

    def next_wait(self) -> float:
        return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** min(self.failures, 10))

    def _connect(self) -> None:
        import psycopg

        self._conn = psycopg.connect(libpq_url(self.url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                     application_name=f"agentdesk {self.name}")
        self._conn.execute(f"LISTEN {self.channel}")

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close; it is gone either way
                self._conn.close()
            self._conn = None

    def _run(self) -> None:
        while not self._thread.stopping:
            try:
                if self._conn is None:
                    self._connect()
                    self._read_here()  # catch up from the high-water mark on whatever committed meanwhile
                    self.reconnects += 1
                    log.info("%s reconnected after %d failed attempts", self.name, self.failures)
                    if self.outage is not None:
                        self.outage.back()
                    if self._on_reconnect is not None:
                        self._on_reconnect()
                self.failures = 0
                self.healthy = True
                self.reconnecting = False
                self._wait_and_read()
            except Exception as exc:  # keep following: a restart must not end live updates
                self._failed(exc)
                self._thread.wait(self.next_wait())

    def _wait_and_read(self) -> None:
        """Block up to IDLE_WAKE_S for notifications; read once if any names a seq not read yet.

        A notification below the mark is usually a commit already read; but when the log went backwards
        (a row with a huge seq was written by hand and deleted again), every new commit names a seq below
        the mark and would never be read: so such a notification also wakes a read, at most once per
        `BEHIND_CHECK_S`, whose bounds check resets the reader onto the log as it is (it heals, not goes silent).
        """
        news = behind = False
        # stop_after=1 ends the wait at the first packet but still yields every notification in it:
        # breaking out of the generator instead would drop the rest of the packet, and with it the wake-up
        # for the newest commits when the first one named a seq already read (the last changes of a
        # stream then waited for the next commit).
        for notify in self._conn.notifies(timeout=IDLE_WAKE_S, stop_after=1):
            seq, seen = _seq(notify.payload), self._seen()
            news = news or seq > seen
            behind = behind or seq < seen
        if not news and behind and time.monotonic() - self._last_behind_check >= BEHIND_CHECK_S:
            self._last_behind_check = time.monotonic()
            news = True
        if news:
            # Coalesce: at most one read per min_interval_s, so a burst of commits costs subscribers
            # one batch per interval. The first change after a quiet spell is read at once.
            # Spaced from the start of the last read: the read's own time does not add to the next wait.
            rest = self._last_read + self.min_interval_s - time.monotonic()
            if rest > 0 and self._thread.wait(rest):
                return
            self._last_read = time.monotonic()
            self._read_here()

    def _read_here(self) -> None:
        """`read()` on this thread, which may then use the listener's own connection (`query`)."""
        self._reader = threading.get_ident()
        try:
            self._read()
        finally:
            self._reader = None

    def query(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]] | None:
        """Rows of one statement on the listener's autocommit connection; None when not in this loop's read.

        Why: the read a NOTIFY wakes was a pooled SQLAlchemy session (pre-ping, BEGIN, two
        queries, ROLLBACK: five round trips to a backend process, each a scheduling delay on a
        busy machine); one statement on the connection that is already awake is one round trip
        and its own snapshot. Only the loop's thread may use it (it holds it while waiting for
        notifications); any other caller is told to use its own session. A failure here is a
        lost connection: it propagates, and the loop reconnects and catches up.
        """
        if self._conn is None or self._reader != threading.get_ident():
            return None
        return list(self._conn.execute(sql, params).fetchall())

    def _failed(self, exc: Exception) -> None:
        self.healthy = False
        self.reconnecting = True
        self.failures += 1
        if self.failures == 1:  # the one line people see is the outage's; this is for the log file
            self.down_since = time.time()
            log.info("%s: lost the server (%s: %s); reconnecting with back-off", self.name,
                     type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        if self.outage is not None:
            self.outage.lost()  # said from the second failure on: a restart that is over at once says nothing
        self._close()


def _seq(payload: str) -> int:
    """A notification's seq; anything unreadable counts as news (reading once more is always safe)."""
    try:
        return int(payload)
    except ValueError:
        return 1 << 62
