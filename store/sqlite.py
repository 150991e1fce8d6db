"""Everything SQLite-specific lives here, so the rest of the store stays portable.

- connection pragmas (WAL, busy timeout, foreign keys, query_only for read-only);
- `BEGIN IMMEDIATE` for write transactions: a deferred transaction that reads and
  then writes fails at once with "database is locked" after another writer
  committed, whatever the busy timeout, so writers take the lock up front;
- `PRAGMA data_version`, the cheap "did anyone else commit?" probe watchers poll.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import NullPool, Pool, QueuePool

SQLITE_MAGIC = b"SQLite format 3\x00"
IMMEDIATE = "agentdesk_immediate"


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite")


def path_of(url: str) -> Path | None:
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix:
        return None
    return Path(url[len(prefix):].split("?", 1)[0])


def looks_like_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


WAL_VERSION_OFFSET = 18
"""Bytes 18 and 19 of a SQLite header: file format write/read version, 2 for WAL (1 for a rollback journal)."""


def is_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode (read from the header: opening it could change the folder)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(WAL_VERSION_OFFSET + 2)
    except OSError:
        return False
    return len(header) == WAL_VERSION_OFFSET + 2 and header[WAL_VERSION_OFFSET] == 2


def wal_without_index(path: Path) -> bool:
    """A WAL file with no `-shm` beside it: a `mode=ro` reader would have to create `-wal`/`-shm`."""
    return is_wal(path) and not path.with_name(path.name + "-shm").exists()


def only_immutable(path: Path) -> bool:
    """Read-only access is possible only with `immutable=1`: WAL, no `-shm`, and a folder we cannot write
    (there `mode=ro` fails with "unable to open database file")."""
    return wal_without_index(path) and not os.access(path.parent, os.W_OK)


def lenient_text(raw: bytes) -> str:
    """TEXT that is not valid UTF-8 (another program wrote bytes) reads with U+FFFD replacement marks."""
    return raw.decode("utf-8", errors="replace")


def create_sqlite_engine(path: Path, *, read_only: bool, busy_timeout_s: float,
                         manage_journal: bool = True, immutable: bool = False) -> Engine:
    """An engine on one SQLite file; read-only opens use the `mode=ro` URI plus query_only.

    `manage_journal=False` is for other runtimes' databases: their journal mode is theirs
    (it persists in the file), so we never change it. `immutable=True` (read-only only) opens with
    `immutable=1`: SQLite then creates no `-wal`/`-shm` beside the file, but sees no later commits.
    """
    timeout_ms = int(busy_timeout_s * 1000)
    immutable = immutable or (read_only and only_immutable(path))

    def connect() -> sqlite3.Connection:
        uri = (f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")) if read_only else f"file:{path}"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False,
                               isolation_level=None)
        conn.text_factory = lenient_text  # one invalid UTF-8 value must not fail the whole query
        conn.execute(f"PRAGMA busy_timeout={timeout_ms}")
        conn.execute("PRAGMA foreign_keys=ON")
        if read_only:
            conn.execute("PRAGMA query_only=ON")
        elif manage_journal:
            # WAL lets the GUI read while a runtime writes; it persists, so later opens are cheap.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    # The URL names the file so SQLAlchemy treats it as one (a bare "sqlite://" means :memory: and gets a
    # SingletonThreadPool: every session of a thread would share one connection, so a read nested in another
    # read or in a write fails with "cannot start a transaction within a transaction").
    pool: type[Pool] = NullPool if read_only else QueuePool
    engine = create_engine(f"sqlite:///{path}", creator=connect, poolclass=pool)

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def writer_engine(engine: Engine) -> Engine:
    return engine.execution_options(**{IMMEDIATE: True})


def open_probe(path: Path, busy_timeout_s: float, *, immutable: bool = False) -> sqlite3.Connection:
    """A dedicated autocommit connection for `data_version` polling (never pooled, never shared)."""
    immutable = immutable or only_immutable(path)
    uri = f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


def data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def alembic_version(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT version_num FROM alembic_version LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def table_names(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
    return [r[0] for r in rows]
