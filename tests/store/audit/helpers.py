"""Shared by the audit tests: raw SQL tampering beside the store, and verify in one call."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentdesk.store.audit import ChainReport, verify_store
from agentdesk.store.persistence.database import Store


def verify(store: Store, anchor_file: Path | None = None) -> ChainReport:
    with store.reading() as session:
        return verify_store(session, anchor_file=anchor_file)


def sql(path: Path, statement: str, *params: object) -> None:
    """One statement by another process's hand: what someone with write access to the file can do."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def rows(path: Path, statement: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute(statement, params))
    finally:
        conn.close()


def seqs(path: Path) -> list[int]:
    return [int(str(r[0])) for r in rows(path, "SELECT seq FROM audit_log ORDER BY seq")]
