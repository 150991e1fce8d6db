"""Which system wrote a SQLite file: agentdesk, or one of the runtimes in the registry.

Detection reads only the schema (table names, `PRAGMA user_version` and, when the
file has one, the newest `schema_migrations` entry) on a read-only connection and
never writes. The version rules are not here: each runtime's `recognise` owns
them, and the first runtime in `registry.RUNTIMES` that recognises the schema wins.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence import sqlite
from agentdesk.store.sources.readonly import needs_immutable
from agentdesk.store.sources.schema import Schema


@dataclass(frozen=True, slots=True)
class Detected:
    kind: str
    version: str | None
    tables: frozenset[str]


def read_schema(path: Path, busy_timeout_s: float = 5.0) -> Schema:
    """The schema facts of `path`, or `StoreUnavailable` saying why the file cannot be read."""
    if not path.exists():
        raise StoreUnavailable(f"There is no database at {path}.")
    if path.stat().st_size and not sqlite.looks_like_sqlite(path):
        raise StoreUnavailable(f"{path} is not a SQLite database.")
    try:
        # A WAL file with no -shm (its writer stopped, or a read-only folder) is read immutable: a mode=ro
        # probe would create -wal/-shm beside it, or fail in a folder it cannot write.
        conn = sqlite.open_probe(path, busy_timeout_s, immutable=needs_immutable(path))
        try:
            tables = frozenset(sqlite.table_names(conn))
            user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            migration = _newest_migration(conn) if "schema_migrations" in tables else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{path} is not a readable SQLite database ({exc}).") from exc
    return Schema(tables, user_version, migration)


def detect(path: Path, busy_timeout_s: float = 5.0) -> Detected:
    """Name the system that wrote `path`, or refuse with what was found."""
    from agentdesk.store.sources.registry import RUNTIMES  # the registry imports every runtime

    schema = read_schema(path, busy_timeout_s)
    if not schema.tables - {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}:
        return Detected("agentdesk", None, schema.tables)  # an empty database: a store whose creation was killed
    for runtime in RUNTIMES:
        try:
            version = runtime.recognise(schema)
        except StoreUnavailable as exc:  # recognised, but a version agentdesk does not read
            raise StoreUnavailable(f"{path} {exc}") from exc
        if version is not None:
            return Detected(runtime.kind, version or None, schema.tables)
    tables = schema.tables
    shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "") if tables else "no tables"
    names = ", ".join(r.kind for r in RUNTIMES)
    raise StoreUnavailable(f"{path} is a SQLite database agentdesk does not recognise (found: {shown}); "
                           f"it is none of {names}.")


def _newest_migration(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if row is None or row[0] is None else str(row[0])
