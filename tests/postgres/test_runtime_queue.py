"""On PostgreSQL an operator's decision queues ahead of all but one waiting runtime write.

The writers' queue is an EXCLUSIVE lock on `agentdesk_writer_queue` (migration 0012), granted in queue
order; runtime writes first queue among themselves on the row of `agentdesk_runtime_queue`, so at most
one of them waits for the writers' lock beside the operator. Commit order is read from the change
log's seq (taken under the lock), not from thread timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import select

from agentdesk.store.approvals.commands import decide
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster
from tests.waiting import wait_until

RUNTIMES = 6


@pytest.fixture
def pg_store(pg_cluster: PgCluster) -> Iterator[tuple[Store, str]]:
    url = pg_cluster.fresh_database()
    store = open_store(url)
    yield store, url
    store.close()
    pg_cluster.drop(url)


def waiting(conn: object) -> int:
    """Sessions of this database waiting for a lock (here: a turn in the writers' queue)."""
    row = conn.execute(  # type: ignore[attr-defined]
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0])


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 20.0) -> None:
    wait_until(condition, timeout_s=timeout_s, what=what)


def test_a_decision_waits_for_at_most_one_queued_runtime_write(pg_store: tuple[Store, str]) -> None:
    import psycopg

    store, url = pg_store
    rt = AgentRuntime(store)
    pid = rt.create_project("queue")
    sid = rt.create_session(rt.create_task(pid, "t"), "s")
    run = rt.start_run(rt.create_agent(sid, "a", "m"), "r")
    approval = rt.request_approval(run, "shell", {"command": "ls"}, timeout_s=None)
    holder = psycopg.connect(libpq_url(url))
    probe = psycopg.connect(libpq_url(url), autocommit=True)
    holder.execute("SELECT agentdesk_writer_turn(false)")  # another writer, mid-transaction
    errors: list[BaseException] = []

    def runtime_write(n: int) -> None:
        try:
            rt.create_project(f"queued {n}")
        except BaseException as exc:
            errors.append(exc)

    def operator() -> None:
        try:
            decide(store, approval, True, "operator")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=runtime_write, args=(n,)) for n in range(RUNTIMES)]
    try:
        for t in threads:
            t.start()
        queued = lambda: waiting(probe)  # noqa: E731
        wait_for(lambda: queued() == RUNTIMES, "the runtime writes to queue")
        decider = threading.Thread(target=operator)
        decider.start()
        threads.append(decider)
        wait_for(lambda: queued() == RUNTIMES + 1, "the decision to queue")
        holder.commit()  # the lock is free: who goes next?
        for t in threads:
            t.join(60)
    finally:
        holder.close()
        probe.close()
    assert not errors
    with store.reading() as s:
        rows = s.execute(select(sc.ChangeRow.seq, sc.ChangeRow.entity, sc.ChangeRow.op)
                         .where((sc.ChangeRow.entity == "project") | (sc.ChangeRow.entity == "approval"))
                         .order_by(sc.ChangeRow.seq)).all()
    decided = next(seq for seq, entity, op in rows if entity == "approval" and op == "update")
    queued = [seq for seq, entity, op in rows if entity == "project" and op == "insert"][1:]  # not "queue"
    assert len(queued) == RUNTIMES
    before = [seq for seq in queued if seq < decided]
    assert len(before) <= 1, f"{len(before)} runtime writes committed before the decision"
