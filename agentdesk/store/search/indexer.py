"""Drains `span_search_dirty` into the full-text index, in short write transactions (on PostgreSQL
`span_words_dirty` into `span_words`, by the server: `pg_index`).

Writes to `spans` only mark a span dirty (`fts`); this module does the indexing
later, so ingest (the OTel import, the receiver, runtimes) never pays for
tokenizing. Each chunk re-indexes its spans from their *current* values (a span
deleted since is dropped from the index), in one transaction that also clears
their dirty marks, so a chunk is all-or-nothing and draining twice is harmless.
A span's old index row goes out by the values it was indexed with, which the
source view gives (`fts`: the copy the triggers kept at its first change, else
its current values); its new one goes in from the same view.

Two callers: a search drains a bounded number of its run's dirty spans first
(`drain_for_search`, never waiting on a busy lock), and `IndexSchedule` drains the
whole store on a daemon thread for as long as a window has it open. Chunks are
sized to take about `CHUNK_TARGET_S`, with a pause between them, so an operator's
decision waiting for the write lock never waits long.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError

from agentdesk.store.changes.background import BackgroundJob
from agentdesk.store.errors import StoreError
from agentdesk.store.persistence.database import Store
from agentdesk.store.search import fts, pg_index

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 2000
FIRST_CHUNK = 500
"""The schedule's first chunk (then sized by time): small, since a loaded machine makes every span slower."""
MIN_CHUNK, MAX_CHUNK = 100, 5000
CHUNK_TARGET_S = 0.05
"""A chunk holds the write lock about this long: a decision queued behind it waits < 100 ms."""
SEARCH_DRAIN_LIMIT = 5000
"""Spans a search indexes before it runs; the rest of the dirty set is scanned, still correct."""
SEARCH_CHUNK = 1000
SEARCH_PAUSE_S = 0.005

_IDS = "SELECT value FROM json_each(?)"
_ROWIDS = f"SELECT rowid FROM {fts.ROWS_TABLE} WHERE span_id IN ({_IDS})"
_FTS_COLUMNS = "rowid, name, input_text, output_text, attrs"
_CHUNK = (
    # out of the index by the values each row was indexed with (the source view: kept copies, else current)
    f"INSERT INTO {fts.FTS_TABLE}({fts.FTS_TABLE}, {_FTS_COLUMNS}) SELECT 'delete', {_FTS_COLUMNS} "
    f"FROM {fts.SOURCE_VIEW} WHERE rowid IN ({_ROWIDS})",
    f"DELETE FROM {fts.STALE_TABLE} WHERE rowid IN ({_ROWIDS})",
    f"DELETE FROM {fts.ROWS_TABLE} WHERE span_id IN ({_IDS})",
    f"INSERT INTO {fts.ROWS_TABLE}(span_id, run_id, started_at) "
    f"SELECT s.id, s.run_id, s.started_at FROM spans s WHERE s.id IN ({_IDS}) ORDER BY s.run_id, s.started_at",
    # into the index from the same view, so what is indexed is what a later delete repeats
    f"INSERT INTO {fts.FTS_TABLE}({_FTS_COLUMNS}) SELECT {_FTS_COLUMNS} FROM {fts.SOURCE_VIEW} "
    f"WHERE rowid IN ({_ROWIDS})",
    f"DELETE FROM {fts.DIRTY_TABLE} WHERE span_id IN ({_IDS})",
)
_UNREMOVABLE = (
    f"SELECT count(*) FROM {fts.ROWS_TABLE} r LEFT JOIN {fts.STALE_TABLE} k ON k.rowid = r.rowid "
    f"WHERE r.span_id IN ({_IDS}) AND (k.lost OR (k.rowid IS NULL AND NOT EXISTS "
    f"(SELECT 1 FROM spans s WHERE s.id = r.span_id)))"
)
"""How many of these spans' index rows the source view has no values for: a `lost` mark (a span row overwritten
without its delete trigger), or no copy kept and no span row (one removed without it). Should always be 0."""
_OTHER_SQLITE = f"SELECT count(*) FROM {fts.META_TABLE} WHERE key = 'sqlite_version' AND value <> sqlite_version()"
"""1 when another SQLite library built the index: its JSON functions might write an attribute's words otherwise."""
_RESET = (
    f"INSERT INTO {fts.FTS_TABLE}({fts.FTS_TABLE}) VALUES ('delete-all')",
    f"INSERT OR REPLACE INTO {fts.META_TABLE}(key, value) VALUES ('sqlite_version', sqlite_version())",
    f"DELETE FROM {fts.STALE_TABLE}",
    f"DELETE FROM {fts.ROWS_TABLE}",
    f"INSERT OR IGNORE INTO {fts.DIRTY_TABLE}(span_id) SELECT id FROM spans",
)
"""Start the index again (as migration 0025 left it: empty, every span dirty) when a row cannot be removed."""


def _pick(raw: Any, limit: int, run_id: str | None) -> list[str]:
    if run_id is None:
        rows = raw.execute(f"SELECT span_id FROM {fts.DIRTY_TABLE} LIMIT ?", (limit,)).fetchall()
    else:
        rows = raw.execute(f"SELECT d.span_id FROM {fts.DIRTY_TABLE} d CROSS JOIN spans s ON s.id = d.span_id "
                           f"WHERE s.run_id = ? LIMIT ?", (run_id, limit)).fetchall()
    return [r[0] for r in rows]


def index_chunk(engine: Engine, limit: int = DEFAULT_CHUNK, run_id: str | None = None) -> int:
    """Index up to `limit` dirty spans (of `run_id`, or any) in one write transaction; how many it took.

    On PostgreSQL the server does it (`pg_index.INDEX_SQL`, migration 0019): pass the store's own engine,
    not its write engine, whose transactions queue for the writers' turn (the words are not audited)."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            return int(conn.execute(text(pg_index.INDEX_SQL), {"run": run_id, "limit": limit}).scalar_one())
    with engine.begin() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        ids = _pick(raw, limit, run_id)
        if ids:
            reindex(raw, ids)
    return len(ids)


def reindex(raw: Any, ids: Sequence[str]) -> None:
    """Re-index `ids` from their current rows and clear their marks (inside the caller's write transaction).

    An index row that cannot be removed exactly would corrupt the index for good, so then the whole index is
    emptied and every span marked dirty (logged: the triggers were bypassed, or another SQLite version built
    the index); searches stay right meanwhile, scanning what is dirty."""
    payload = json.dumps(list(ids))
    if raw.execute(_OTHER_SQLITE).fetchone()[0]:
        log.info("search index: built by another SQLite version; re-indexing all")
        _reset(raw)
    elif raw.execute(_UNREMOVABLE, (payload,)).fetchone()[0]:
        log.warning("search index: a span row was replaced or removed without its triggers; re-indexing all")
        _reset(raw)
    for statement in _CHUNK:
        raw.execute(statement, (payload,))


def _reset(raw: Any) -> None:
    for statement in _RESET:
        raw.execute(statement)


def drain(engine: Engine, *, run_id: str | None = None, limit: int | None = None,
          chunk: int = DEFAULT_CHUNK) -> int:
    """Index dirty spans chunk by chunk until none is left (or `limit` are done); how many were indexed."""
    done = 0
    while limit is None or done < limit:
        size = chunk if limit is None else min(chunk, limit - done)
        took = index_chunk(engine, size, run_id)
        done += took
        if not took:  # (not `took < size`: a chunk that restarted the index left every span dirty)
            break
    return done


def dirty_count(engine: Engine, run_id: str | None = None) -> int:
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        if run_id is None:
            return int(raw.execute(f"SELECT count(*) FROM {fts.DIRTY_TABLE}").fetchone()[0])
        return int(raw.execute(f"SELECT count(*) FROM {fts.DIRTY_TABLE} d CROSS JOIN spans s ON s.id = d.span_id "
                               f"WHERE s.run_id = ?", (run_id,)).fetchone()[0])


def drain_for_search(store: Store, run_id: str | None, limit: int = SEARCH_DRAIN_LIMIT,
                     chunk: int = SEARCH_CHUNK) -> int:
    """Before a search: index up to `limit` dirty spans if the store is writable and its lock is free.

    In chunks of `chunk` (each its own short transaction, the lock released between
    them), never waiting for the lock (busy timeout 0 for these attempts) and never
    failing the search: what stays dirty is scanned by the query instead.
    """
    if store.read_only:
        return 0
    done = 0
    with store.write_engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        before = int(raw.execute("PRAGMA busy_timeout").fetchone()[0])
        raw.execute("PRAGMA busy_timeout = 0")
        try:
            while done < limit:
                with conn.begin():
                    ids = _pick(raw, min(chunk, limit - done), run_id)
                    if ids:
                        reindex(raw, ids)
                done += len(ids)
                if len(ids) < chunk:
                    break
                time.sleep(SEARCH_PAUSE_S)  # a decision waiting on the lock gets it now
        except OperationalError as exc:
            log.debug("search skipped indexing (%s); dirty spans are scanned", exc)
        finally:
            raw.execute(f"PRAGMA busy_timeout = {before}")
    return done


INDEX_EVERY_S = 2.0
"""How often an idle schedule looks for new dirty spans."""
PAUSE_S = 0.05
"""Between two chunks: the lock is free this long for whoever waits on it (an operator's decision)."""
MAX_BACKOFF_S = 30.0
FIRST_INDEX_AFTER_S = 3.0
"""Not at start-up: a window opening reads its run first, and should not race other writers for the lock."""


class IndexSchedule(BackgroundJob):
    """Drains the dirty set on a daemon thread while the store is open (started beside `PruneSchedule`).

    Chunks adapt their size to hold the lock about `CHUNK_TARGET_S`. A locked store
    (another writer past the busy timeout) backs off, doubling up to `MAX_BACKOFF_S`,
    and is retried; any other failure is logged once and retried on the next tick.
    """

    thread_name = "agentdesk-search-index"

    def __init__(self, store: Store, *, interval_s: float = INDEX_EVERY_S, pause_s: float = PAUSE_S,
                 first_after_s: float = FIRST_INDEX_AFTER_S) -> None:
        super().__init__(store, first_after_s=first_after_s)
        self.interval_s = interval_s
        self.pause_s = pause_s
        self.chunk = FIRST_CHUNK
        self.indexed = 0
        self._backoff = pause_s
        self._warned = False

    @staticmethod
    def allowed(store: Store) -> bool:
        if store.read_only:
            return False
        return pg_index.has_index(store.engine) if store.is_postgres else fts.has_index(store.engine)

    def step(self) -> int:
        """One chunk, resized toward `CHUNK_TARGET_S`; how many spans it indexed."""
        began = time.perf_counter()
        took = index_chunk(self.store.engine if self.store.is_postgres else self.store.write_engine, self.chunk)
        spent = time.perf_counter() - began
        if took == self.chunk and spent > 0:
            self.chunk = int(min(MAX_CHUNK, max(MIN_CHUNK, self.chunk * CHUNK_TARGET_S / spent)))
        self.indexed += took
        return took

    def tick(self) -> float:
        try:
            took = self.step()
        except OperationalError as exc:
            self._backoff = min(MAX_BACKOFF_S, self._backoff * 2)
            log.debug("search indexing waits %.1f s: %s", self._backoff, exc)
            return self._backoff
        except (StoreError, DBAPIError) as exc:  # a login refused the server's indexer, say: logged once
            if not self._warned:
                log.warning("search indexing failed (%s); retrying every %.0f s", exc, self.interval_s)
                self._warned = True
            return self.interval_s
        self._backoff = self.pause_s
        return self.pause_s if took else self.interval_s
