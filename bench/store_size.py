"""Bytes per span on disk, for the OTel import bench (bench/otel_import.py): SQLite and PostgreSQL.

SQLite: the store file's size after a WAL checkpoint (TRUNCATE), so the WAL is inside the file, divided by the
spans; the per-table and per-index breakdown from the `dbstat` virtual table (pages each b-tree takes, FTS5's
shadow tables included). Measured twice: right after the import, and after the search index is built (the
window builds it in the background, so that is the size an operator's store settles at).
PostgreSQL: `pg_database_size` (every relation, TOAST and index, plus the empty database's own catalogs) and
`pg_total_relation_size` per table (its TOAST and indexes included), after a VACUUM so dead tuples are gone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

TARGET_BYTES = 2.5 * 1024
"""Issue 22: <= 2.5 KB per span on disk (Arize Phoenix: 2.1 KB on the same kind of trace)."""


def sqlite_bytes(path: Path) -> tuple[int, int]:
    """(file size after a WAL checkpoint, spans) of a SQLite store."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        spans = int(conn.execute("SELECT count(*) FROM spans").fetchone()[0])
    return path.stat().st_size, spans


def sqlite_breakdown(path: Path, top: int = 14) -> list[tuple[str, int]]:
    """The largest tables and indexes by pages on disk (bytes), largest first."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    return [(str(name), int(size)) for name, size in rows[:top]]


def index_search(path: Path) -> float:
    """Build the whole search index (what the window's background job does); seconds taken."""
    import time

    from agentdesk.store.persistence.database import open_store
    from agentdesk.store.search.indexer import drain

    store = open_store(str(path))
    began = time.perf_counter()
    try:
        drain(store.engine)
    finally:
        store.close()
    return time.perf_counter() - began


def pg_bytes(url: str) -> tuple[int, int, list[tuple[str, int]]]:
    """(database size, spans, the largest tables with their TOAST and indexes) of a PostgreSQL store."""
    import psycopg

    from agentdesk.store.persistence.postgres.engine import libpq_url

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("VACUUM")
        spans = _one(conn, "SELECT count(*) FROM spans")
        size = _one(conn, "SELECT pg_database_size(current_database())")
        tables = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY 2 DESC LIMIT 10")
        return size, spans, [(str(name), int(b)) for name, b in tables]


def _one(conn: Any, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


def drop_pg(base_url: str, name: str) -> None:
    import psycopg

    from agentdesk.store.persistence.postgres.engine import libpq_url

    with psycopg.connect(libpq_url(base_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(label: str, size: int, spans: int, parts: list[tuple[str, int]]) -> float:
    """Print bytes per span and the breakdown; returns bytes per span."""
    per = size / max(spans, 1)
    print(f"  {label}: {size / 2**20:7.1f} MiB for {spans:,} spans = {per:6.0f} B/span", flush=True)
    for name, b in parts:
        print(f"      {name:<42} {b / 2**20:7.1f} MiB {b / max(spans, 1):6.0f} B/span")
    return per
