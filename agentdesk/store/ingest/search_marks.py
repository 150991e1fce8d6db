"""The search index's marks for the import's new spans: two statements per batch instead of a trigger per row.

Why: every row inserted into `spans` runs the `span_search_insert` trigger of migration 0025 (mark the span
dirty for the indexer; mark an index row whose span was overwritten as lost). SQLite spends ~9 µs a row
entering any trigger before its body runs, and the body's two inserts more: about 1.7 of the 2.6 s that the
bench's 100,000 span inserts took (docs/otel.md, "The import against json.load"). Inside the import's own
transactions the trigger is dropped; after each batch of span inserts its two statements run once for the
whole batch (the batch's ids as one JSON array), and the trigger is created again from its own stored text
before the transaction commits.

Why that is safe: SQLite's DDL is transactional. No other connection writes while this one holds the write
lock, and none ever reads a schema without the trigger: readers see the last commit, and a rollback (an error,
a cancel, a killed process) puts the trigger back with everything else. Every other writer (the receiver,
the runtimes, another program) keeps the trigger. When the stored trigger is not the one repeated here (a later
migration changed it), nothing is dropped: the trigger does its work, only slower. PostgreSQL has no such
trigger (its index reads the rows themselves): nothing happens there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection

TRIGGER = "span_search_insert"
BODY = ("INSERT OR IGNORE INTO span_search_stale(rowid, lost) SELECT rowid, 1 FROM span_search_rows "
        "WHERE span_id = new.id;",
        "INSERT OR IGNORE INTO span_search_dirty(span_id) VALUES (new.id);")
"""What the trigger does for one new row (migration 0025's text): repeated below for a batch of rows."""
EXPECTED = f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON spans BEGIN {' '.join(BODY)} END"

MARK_LOST = ("INSERT OR IGNORE INTO span_search_stale(rowid, lost) SELECT r.rowid, 1 "
             "FROM json_each(?) j CROSS JOIN span_search_rows r ON r.span_id = j.value")
MARK_DIRTY = "INSERT OR IGNORE INTO span_search_dirty(span_id) SELECT value FROM json_each(?)"
"""The trigger's two statements for a batch of new span ids (a JSON array: one statement, not one per row)."""

_DEFERRED = "agentdesk.span_search_deferred"
"""Key in the connection's `info`, present while this connection's transaction has the trigger dropped."""


def _words(sql: str) -> str:
    return " ".join(sql.split())


@contextmanager
def deferred(conn: Connection) -> Iterator[bool]:
    """Within the caller's transaction: the trigger dropped, new spans marked by `catch_up`, the trigger back at
    the end. Yields whether the trigger was dropped. Use it directly inside the unit of work, so an exception
    leaves through it to the rollback (which restores the trigger); only a normal exit re-creates it."""
    if conn.dialect.name != "sqlite" or not getattr(conn.connection.dbapi_connection, "in_transaction", False):
        yield False  # no trigger here; or no transaction open yet to take the DROP back on a rollback
        return
    stored = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                                  (TRIGGER,)).scalar()
    if stored is None or _words(stored) != _words(EXPECTED):
        yield False
        return
    conn.exec_driver_sql(f"DROP TRIGGER {TRIGGER}")
    conn.info[_DEFERRED] = True
    try:
        yield True
    finally:
        conn.info.pop(_DEFERRED, None)
    conn.exec_driver_sql(stored)


def catch_up(conn: Connection, span_ids: Sequence[str]) -> None:
    """Mark these just-inserted spans as the trigger would have (nothing while the trigger is in place).

    The import's one insert into `spans` (`rows.insert_tuples`) calls it right after each batch, so the marks
    come in the order the trigger's would: before any later update of the same rows in the transaction (whose
    own trigger is still in place) runs. The same marks as the trigger's for plain INSERTs, the import's only
    kind (an INSERT OR REPLACE would impose its REPLACE on the trigger's statements)."""
    if not span_ids or not conn.info.get(_DEFERRED):
        return
    ids = json.dumps(list(span_ids))
    conn.exec_driver_sql(MARK_LOST, (ids,))
    conn.exec_driver_sql(MARK_DIRTY, (ids,))
