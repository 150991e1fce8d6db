"""Which system wrote a SQLite file: agentdesk, lensagent, stageflow, vgxness or maka.

Detection reads only the schema (table names, `schema_migrations`, `PRAGMA
user_version`), on a read-only connection, and never writes.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentdesk.store import sqlite
from agentdesk.store.errors import StoreUnavailable

AGENTDESK_TABLES = {"agentdesk_meta", "change_log", "audit_log"}
LENSAGENT_TABLES = {"projects", "tasks", "sessions", "agents", "runs", "steps", "calls", "context_items",
                    "context_turn_groups"}
STAGEFLOW_TABLES = {"agent_sessions", "agent_turns", "agent_spans", "agent_approvals"}
VGXNESS_TABLES = {"schema_migrations", "runs", "run_events", "run_approvals"}
MAKA_TABLES = {"session_metadata", "core_agent_runs", "runtime_events", "core_interaction_requests"}
MAKA_USER_VERSIONS = {11}


@dataclass(frozen=True, slots=True)
class Detected:
    kind: str
    version: str | None
    tables: frozenset[str]


def detect(path: Path, busy_timeout_s: float = 5.0) -> Detected:
    """Name the system that wrote `path`, or refuse with what was found."""
    if not path.exists():
        raise StoreUnavailable(f"There is no database at {path}.")
    if path.stat().st_size and not sqlite.looks_like_sqlite(path):
        raise StoreUnavailable(f"{path} is not a SQLite database.")
    try:
        conn = sqlite.open_probe(path, busy_timeout_s)
        try:
            tables = frozenset(sqlite.table_names(conn))
            user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            migrations = _vgxness_migrations(conn) if "schema_migrations" in tables else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{path} is not a readable SQLite database ({exc}).") from exc
    if tables & AGENTDESK_TABLES:
        return Detected("agentdesk", None, tables)
    if tables >= MAKA_TABLES:
        if user_version not in MAKA_USER_VERSIONS:
            raise StoreUnavailable(f"{path} looks like a maka runtime store, but of schema version {user_version}; "
                                   f"agentdesk understands version(s) {sorted(MAKA_USER_VERSIONS)}.")
        return Detected("maka", str(user_version), tables)
    if tables >= STAGEFLOW_TABLES:
        return Detected("stageflow", None, tables)
    if tables >= VGXNESS_TABLES:
        return Detected("vgxness", migrations, tables)
    if migrations is not None and migrations.endswith(".sql"):
        raise StoreUnavailable(f"{path} looks like a vgxness store at migration {migrations}; agentdesk reads "
                               "vgxness from 005_run_approvals.sql on (runs, run events, run approvals).")
    if tables >= LENSAGENT_TABLES:
        return Detected("lensagent", "0.1.2" if "context_compactions" in tables else "0.1.0", tables)
    shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "") if tables else "no tables"
    raise StoreUnavailable(f"{path} is a SQLite database agentdesk does not recognise (found: {shown}); "
                           "it is none of agentdesk, lensagent, stageflow, vgxness or maka.")


def _vgxness_migrations(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if row is None or row[0] is None else str(row[0])
