"""The PostgreSQL outbox (store/ingest/outbox.py): queued writes run before anything else reads the
connection, in order, in the same transaction; a rollback drops them; a refused one fails like a statement
SQLAlchemy ran (so the unit of work's translations apply)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from agentdesk.store.errors import InvalidInput
from agentdesk.store.ingest.outbox import ask, outbox, post, run
from agentdesk.store.persistence.database import Store
from agentdesk.store.uow import UnitOfWork

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)

PROJECT = "INSERT INTO projects (id, name, created_at, revision) VALUES (:id, :name, 1.0, 1)"


def names(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT name FROM projects ORDER BY name"))]


def test_queued_writes_are_seen_by_the_next_read_of_any_kind_and_commit(store: Store) -> None:
    with UnitOfWork(store) as uow:
        conn = uow.session.connection()
        run(conn, PROJECT, {"id": "p1", "name": "first"})
        run(conn, PROJECT, {"id": "p2", "name": "second"})
        assert ask(conn, "SELECT count(*) FROM projects WHERE name LIKE :n || '%'", {"n": "firs"}) == (1,)
        run(conn, "UPDATE projects SET name = :name WHERE id = :id", {"id": "p2", "name": "renamed"})
        # a statement SQLAlchemy runs sends what is queued first
        assert conn.execute(text("SELECT name FROM projects WHERE id = 'p2'")).scalar_one() == "renamed"
        run(conn, PROJECT, {"id": "p3", "name": "third"})  # sent at the commit
    assert names(store) == ["first", "renamed", "third"]
    if store.is_postgres:
        with store.engine.connect() as conn:
            assert not outbox(conn).queued


def test_a_rollback_drops_what_was_queued(store: Store) -> None:
    with pytest.raises(RuntimeError), UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p1", "name": "never"})
        raise RuntimeError("the write fails before anything read the queue")
    with UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p2", "name": "kept"})
    assert names(store) == ["kept"]


def test_a_refused_queued_write_fails_the_unit_of_work_as_a_refused_statement(store: Store) -> None:
    with UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p1", "name": "first"})
    with pytest.raises(InvalidInput, match="refused"), UnitOfWork(store) as uow:
        conn = uow.session.connection()
        run(conn, PROJECT, {"id": "p1", "name": "again"})  # the same key: refused here on SQLite, at the read
        ask(conn, "SELECT 1", {})  # on PostgreSQL, as SQLAlchemy's IntegrityError (the unit of work translates it)
    assert names(store) == ["first"]


def test_posted_writes_run_at_once_and_are_committed_with_the_transaction(store: Store) -> None:
    with UnitOfWork(store) as uow:
        conn = uow.session.connection()
        run(conn, PROJECT, {"id": "p1", "name": "first"})
        post(conn)
        if store.is_postgres:
            assert not outbox(conn).queued and outbox(conn).pending  # sent; its answers not read yet
        run(conn, PROJECT, {"id": "p2", "name": "second"})
        post(conn)
        assert ask(conn, "SELECT count(*) FROM projects", {}) == (2,)
        run(conn, PROJECT, {"id": "p3", "name": "third"})
        post(conn)  # read by the commit
    assert names(store) == ["first", "second", "third"]


def test_a_refused_posted_write_fails_the_next_read_and_leaves_the_connection_usable(store: Store) -> None:
    with UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p1", "name": "first"})
    with pytest.raises(InvalidInput, match="refused"), UnitOfWork(store) as uow:
        conn = uow.session.connection()
        run(conn, PROJECT, {"id": "p1", "name": "again"})
        post(conn)  # on PostgreSQL nothing is read here: the refusal comes with the next answer
        run(conn, PROJECT, {"id": "p2", "name": "after"})
        ask(conn, "SELECT 1", {})
    for _ in range(3):  # every pooled connection is out of pipeline mode, its transaction rolled back
        with UnitOfWork(store) as uow:
            assert ask(uow.session.connection(), "SELECT count(*) FROM projects", {}) == (1,)
    assert names(store) == ["first"]


def test_a_rollback_after_a_post_drops_it(store: Store) -> None:
    with pytest.raises(RuntimeError), UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p1", "name": "never"})
        post(uow.session.connection())
        raise RuntimeError("the write fails before anything read the posted writes")
    with UnitOfWork(store) as uow:
        run(uow.session.connection(), PROJECT, {"id": "p2", "name": "kept"})
        post(uow.session.connection())
    assert names(store) == ["kept"]
