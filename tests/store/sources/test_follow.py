"""The generic table follower and the shared polling loop, on a tiny schema of their own.

The runtime tests (test_lensagent, test_stageflow, ...) show each declaration set following
its runtime; these pin the follower's own rules: what a mark is, what counts as changed,
what a delete means, and that a failing poll costs one warning, not a traceback per poll.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, create_engine

from agentdesk.store.changes.polling import PollLoop
from agentdesk.store.persistence.bus import Change, EntityKind
from agentdesk.store.sources.follow import AppendOnly, Deletes, Follow, RowEvent, TableFollower, UpdatedInPlace
from agentdesk.store.sources.follow import follower as follower_module
from agentdesk.store.sources.sql import Row
from tests.waiting import wait_until

SCHEMA = """
CREATE TABLE events (id TEXT PRIMARY KEY, run_id TEXT NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT NOT NULL, title TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE asks (id TEXT PRIMARY KEY, status TEXT NOT NULL, due REAL);
"""


def _span(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.SPAN, event.op, row["id"], {"run": row["run_id"]})]


def _run(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.RUN, event.op, row["key"])]


def _ask(row: Row, event: RowEvent) -> Iterable[Change]:
    return [Change(EntityKind.APPROVAL, event.op, row["key"])]


FOLLOW = Follow("test", (
    AppendOnly("events", "x.id, x.run_id", _span, deletes=Deletes.RESET),
    UpdatedInPlace("runs", "x.status, x.title", _run, stamp="x.updated_at", signature=("status", "title"),
                   deletes=Deletes.RESET),
    UpdatedInPlace("asks", "x.status", _ask, keep="x.status = 'pending'", signature=("status",), due="x.due",
                   deletes=Deletes.DELETE),
))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, TableFollower, Connection]]:
    path = tmp_path / "t.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.executescript(SCHEMA)
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        follower = TableFollower(FOLLOW, frozenset({"events", "runs", "asks"}))
        yield writer, follower, conn
    writer.close()
    engine.dispose()


def poll(follower: TableFollower, conn: Connection) -> list[tuple[str, str, str]]:
    conn.rollback()  # a fresh snapshot, as each watcher poll has
    return [(c.entity, c.op, c.id) for c in follower.poll(conn)]


def test_existing_rows_are_never_announced_and_new_ones_once(db: tuple[sqlite3.Connection, TableFollower,
                                                                       Connection]) -> None:
    writer, follower, conn = db
    writer.execute("INSERT INTO events VALUES ('e0', 'r0')")
    writer.execute("INSERT INTO runs VALUES ('r0', 'running', 'one', '2026-01-01T00:00:00.000Z')")
    follower.prime(conn)
    assert poll(follower, conn) == []
    writer.execute("INSERT INTO events VALUES ('e1', 'r0')")
    writer.execute("INSERT INTO runs VALUES ('r1', 'running', 'two', '2026-01-01T00:00:00.000Z')")
    assert poll(follower, conn) == [("run", "insert", "r1"), ("span", "insert", "e1")]  # parents first
    assert poll(follower, conn) == []


def test_an_update_in_the_same_millisecond_is_seen_by_its_signature(
        db: tuple[sqlite3.Connection, TableFollower, Connection]) -> None:
    writer, follower, conn = db
    stamp = "2026-01-01T00:00:00.000Z"
    writer.execute("INSERT INTO runs VALUES ('r0', 'running', 'one', ?)", (stamp,))
    follower.prime(conn)
    writer.execute("UPDATE runs SET status = 'done' WHERE id = 'r0'")  # the stamp did not move
    assert poll(follower, conn) == [("run", "update", "r0")]
    writer.execute("UPDATE runs SET updated_at = ? WHERE id = 'r0'", (stamp,))  # rewritten, unchanged
    assert poll(follower, conn) == []


def test_new_rows_are_read_in_batches_within_one_poll(db: tuple[sqlite3.Connection, TableFollower, Connection],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    writer, follower, conn = db
    monkeypatch.setattr(follower_module, "READ_BATCH", 3)
    follower.prime(conn)
    writer.executemany("INSERT INTO events VALUES (?, 'r0')", [(f"e{n:02}",) for n in range(10)])
    assert [c[2] for c in poll(follower, conn)] == [f"e{n:02}" for n in range(10)]


def test_kept_rows_are_reread_until_finished_and_deletes_are_named(
        db: tuple[sqlite3.Connection, TableFollower, Connection]) -> None:
    writer, follower, conn = db
    writer.execute("INSERT INTO asks VALUES ('a0', 'pending', NULL)")
    writer.execute("INSERT INTO asks VALUES ('a1', 'pending', NULL)")
    follower.prime(conn)
    writer.execute("UPDATE asks SET status = 'approved' WHERE id = 'a0'")  # no stamp, no new rowid
    writer.execute("DELETE FROM asks WHERE id = 'a1'")
    assert sorted(poll(follower, conn)) == [("approval", "delete", "a1"), ("approval", "update", "a0")]
    writer.execute("UPDATE asks SET status = 'denied' WHERE id = 'a0'")  # finished: no longer followed
    assert poll(follower, conn) == []


def test_a_passing_deadline_asks_for_a_poll_and_reads_as_a_change(
        db: tuple[sqlite3.Connection, TableFollower, Connection]) -> None:
    writer, follower, conn = db
    deadline = time.time() + 0.3
    writer.execute("INSERT INTO asks VALUES ('a0', 'pending', ?)", (deadline,))
    follower.prime(conn)
    assert not follower.due()
    wait_until(lambda: time.time() > deadline, what="the deadline to pass")
    assert follower.due()
    assert poll(follower, conn) == [("approval", "update", "a0")]
    assert not follower.due()


def test_a_deletion_the_schema_cannot_name_resets(db: tuple[sqlite3.Connection, TableFollower, Connection]) -> None:
    writer, follower, conn = db
    writer.execute("INSERT INTO events VALUES ('e0', 'r0')")
    follower.prime(conn)
    writer.execute("DELETE FROM events")
    assert poll(follower, conn) == [("*", "reset", "*")]
    assert poll(follower, conn) == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "update", "same"]), st.integers(0, 4)), max_size=25))
def test_every_write_is_announced_once_whatever_the_polling(writes: list[tuple[str, int]]) -> None:
    """Polling after any prefix of writes: each inserted run appears once as an insert, every real update after."""
    writer = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    writer.executescript(SCHEMA)
    engine = create_engine("sqlite://", creator=lambda: writer)
    with engine.connect() as conn:
        follower = TableFollower(FOLLOW, frozenset({"runs"}))
        follower.prime(conn)
        inserted: list[str] = []
        heard: list[tuple[str, str, str]] = []
        for n, (what, target) in enumerate(writes):
            if what == "insert" or not inserted:
                inserted.append(f"r{len(inserted)}")
                writer.execute("INSERT INTO runs VALUES (?, 'running', 't', ?)", (inserted[-1], f"{n:04}"))
            elif what == "update":
                writer.execute("UPDATE runs SET title = ?, updated_at = ? WHERE id = ?",
                               (f"t{n}", f"{n:04}", inserted[target % len(inserted)]))
            if n % 3 == 0:
                heard += [(c.entity, c.op, c.id) for c in follower.poll(conn)]
        heard += [(c.entity, c.op, c.id) for c in follower.poll(conn)]
    assert [h[2] for h in heard if h[1] == "insert"] == inserted
    assert poll_is_quiet(follower, writer)


def poll_is_quiet(follower: TableFollower, writer: sqlite3.Connection) -> bool:
    engine = create_engine("sqlite://", creator=lambda: writer)
    with engine.connect() as conn:
        return follower.poll(conn) == []


def test_a_failing_poll_logs_one_warning_backs_off_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    failures = threading.Semaphore(0)
    state = {"fail": True, "reads": 0}

    def read() -> None:
        state["reads"] += 1
        if state["fail"]:
            failures.release()
            raise sqlite3.OperationalError("database is locked")

    loop = PollLoop(None, read, interval_s=0.001, name="test-watcher", moved=lambda: True)
    with caplog.at_level(logging.INFO, logger="agentdesk.store.changes.polling"):
        loop.start()
        for _ in range(5):
            assert failures.acquire(timeout=5)
        assert not loop.healthy and loop.failures >= 5
        assert loop.next_wait() > 16 * loop.interval_s  # backed off
        state["fail"] = False
        wait_until(lambda: loop.healthy, what="the loop healthy again")
        loop.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "database is locked" in warnings[0].getMessage()
    assert warnings[0].exc_info is None  # a line, not a traceback
    assert any("recovered after" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
