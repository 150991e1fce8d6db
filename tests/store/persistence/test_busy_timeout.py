"""`--busy-timeout` bounds every wait for a lock, on SQLite and on PostgreSQL (issue 21: a decision waited 33 s
with a 5 s busy timeout): a decision behind another transaction's lock fails as one sentence, exit 5, and
decides once the lock is gone."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentdesk.cli import main as cli
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.conftest import PgLocation, World


@contextmanager
def _held(store_path: Path, approval: str, what: str) -> Iterator[None]:
    """Another program holding the lock a decision needs: SQLite's write lock; on PostgreSQL the approval's
    row, or the whole table (as a maintenance job's `LOCK TABLE` or `ALTER TABLE` does: reads wait too)."""
    if isinstance(store_path, PgLocation):
        import psycopg

        from agentdesk.store.persistence.postgres.engine import libpq_url

        with psycopg.connect(libpq_url(str(store_path))) as conn:
            if what == "row":
                conn.execute("SELECT 1 FROM approvals WHERE id = %s FOR UPDATE", (approval,))
            else:
                conn.execute("LOCK TABLE approvals IN ACCESS EXCLUSIVE MODE")
            yield
            conn.rollback()
        return
    conn = sqlite3.connect(str(store_path), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_a_decision_behind_a_lock_fails_at_the_busy_timeout_in_one_sentence(
        store_path: Path, store: Store, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    decided_after_the_lock(store_path, store, world, capsys, "row")


@pytest.mark.postgres_only  # SQLite locks the whole file either way: the row case above is that case
def test_a_decision_behind_a_table_lock_fails_at_the_busy_timeout_in_one_sentence(
        store_path: Path, store: Store, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert isinstance(store_path, PgLocation)
    decided_after_the_lock(store_path, store, world, capsys, "table")


def decided_after_the_lock(store_path: Path, store: Store, world: World, capsys: pytest.CaptureFixture[str],
                           what: str) -> None:
    argv = ["--store", str(store_path), "--busy-timeout", "0.3", "approve", world.approval, "--actor", "alice"]
    with _held(store_path, world.approval, what):
        code = cli.main(argv)
        err = capsys.readouterr().err.strip()
    assert code == 5 and "\n" not in err and "locked" in err and "Traceback" not in err
    assert NativeSource(store).approval(world.approval).status == "pending"
    assert cli.main(argv) == 0  # the lock gone: the same decision goes through
    assert NativeSource(store).approval(world.approval).status == "approved"
