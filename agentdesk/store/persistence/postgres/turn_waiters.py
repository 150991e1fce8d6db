"""PostgreSQL: whether an operator waits for the writers' turn that a bulk writer holds.

Why: an import holds the writers' turn for a slice of its work, and an operator's decision waits for the
slice to end. SQLite's writer gate says when an operator starts waiting, so there a slice can be long (1 s)
and still end at once for the operator. On PostgreSQL the import could not tell, so its slices were 50 ms:
a 100,000-span trace took ~130 transactions, and each began with the server idle while the client prepared
its first rows (about 1 s of a 16 s import). A writer waiting for the turn shows in `pg_locks` as an
ungranted lock on `agentdesk_writer_queue` (migration 0012: the turn is an EXCLUSIVE lock on that table),
which every login may read. A runtime writer (an agent, another import) waits there too, but holding the
row of `agentdesk_runtime_queue` it queued on first: it is not an operator, and the import does not step
aside for it (as on SQLite: runtime writers take turns in their queue). It is asked on a connection of its
own, in autocommit (one round trip a question), not on the importer's: that one has writes in flight
(`ingest.outbox`), and a question there would wait for them. It is asked at most every `ASK_EVERY_S`, so
an operator waits at most that long beyond the piece of work in progress.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, Engine, text

ASK_EVERY_S = 0.01
WAITING_SQL = text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks w WHERE w.locktype = 'relation' AND NOT w.granted "
    "AND w.relation = to_regclass('public.agentdesk_writer_queue') "
    "AND NOT EXISTS (SELECT 1 FROM pg_locks q WHERE q.pid = w.pid AND q.locktype = 'relation' AND q.granted "
    "AND q.relation = to_regclass('public.agentdesk_runtime_queue')))")
"""An operator waits: a session waiting for the turn that did not queue as a runtime writer first."""


class TurnWaiters:
    """The last answer to "does an operator wait for the turn?", asked again once it is `ASK_EVERY_S` old.
    Holds a connection from the first question until `close`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._asked = float("-inf")
        self._waiting = False

    def waiting(self) -> bool:
        now = time.monotonic()
        if now - self._asked >= ASK_EVERY_S:
            if self._conn is None:
                self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._waiting = bool(self._conn.execute(WAITING_SQL).scalar())
            self._asked = time.monotonic()
        return self._waiting

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
