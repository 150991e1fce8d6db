"""An import on PostgreSQL sees an operator waiting for the writers' turn (persistence/postgres/turn_waiters.py),
and only an operator: a runtime writer waiting beside it is taking turns with the import already.

The import asks on a login of its own level (an agent's `runtime-login` in a team), so the question is put
through an agent login too. Each "no" is shown against a "yes" the same setup could have given: the runtime
writer does wait for the turn (`pg_locks` has it), it just does not count."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from functools import partial

import psycopg
import pytest
from sqlalchemy import Engine, create_engine

from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.persistence.postgres.turn_waiters import TurnWaiters
from tests.waiting import wait_until

ANY_WAITER = ("SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
              "AND relation = 'public.agentdesk_writer_queue'::regclass")


@pytest.fixture
def asks() -> Iterator[Callable[[str], Callable[[], bool]]]:
    """asks(url)(): a fresh question each call (no answer kept from `ASK_EVERY_S` ago), as that login."""
    engines: list[Engine] = []

    def on(url: str) -> Callable[[], bool]:
        engine = create_engine(url)
        engines.append(engine)
        return partial(_ask, engine)

    yield on
    for engine in engines:
        engine.dispose()


def _ask(engine: Engine) -> bool:
    waiters = TurnWaiters(engine)
    try:
        return waiters.waiting()
    finally:
        waiters.close()


@pytest.fixture
def queue(pg_url: str) -> Iterator[Callable[[bool], None]]:
    """queue(runtime): a session that takes its place in the writers' queue (and waits) on a thread."""
    sessions: list[psycopg.Connection] = []
    threads: list[threading.Thread] = []

    def take(runtime: bool) -> None:
        conn = psycopg.connect(libpq_url(pg_url))
        sessions.append(conn)

        def wait_for_the_turn() -> None:
            with suppress(psycopg.errors.QueryCanceled):  # the test over: its wait is cancelled
                conn.execute(f"SELECT agentdesk_writer_turn({runtime})")

        thread = threading.Thread(target=wait_for_the_turn)
        thread.start()
        threads.append(thread)

    yield take
    for conn in sessions:
        conn.cancel()
    for thread in threads:
        thread.join(10)
    for conn in sessions:
        conn.close()


WAITING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
           "AND wait_event_type = 'Lock'")


@pytest.mark.parametrize("holder_runtime", [True, False], ids=["held by an import", "held by an operator"])
def test_an_operator_waiting_for_the_turn_is_seen_and_a_runtime_writer_is_not(
        pg_url: str, make_login: Callable[[str | None], tuple[str, str]], queue: Callable[[bool], None],
        asks: Callable[[str], Callable[[], bool]], holder_runtime: bool) -> None:
    """Held by a runtime writer (the import), the next runtime writer waits on the runtime queue's row; held
    by an operator, it waits for the turn itself, beside any operator: either way it does not count."""
    probe = psycopg.connect(libpq_url(pg_url), autocommit=True)
    as_owner, as_agent = asks(pg_url), asks(make_login("agent")[1])
    holder = psycopg.connect(libpq_url(pg_url))
    try:
        holder.execute(f"SELECT agentdesk_writer_turn({holder_runtime})")
        assert not as_owner() and not as_agent()
        queue(True)  # an agent's write
        wait_until(lambda: probe.execute(WAITING).fetchone()[0] == 1, what="the runtime writer to wait")
        if not holder_runtime:  # waiting for the turn itself, as an operator would: only its queue tells them apart
            assert probe.execute(ANY_WAITER).fetchone()[0] == 1
        assert not as_owner() and not as_agent()
        queue(False)  # a decision
        wait_until(lambda: probe.execute(WAITING).fetchone()[0] == 2, what="the operator to wait")
        assert as_owner() and as_agent()
    finally:
        holder.rollback()
        holder.close()
        probe.close()
