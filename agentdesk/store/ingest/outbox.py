"""PostgreSQL: the import's writes that need no answer, sent in one round trip with the next that does.

Why: an import of small traces is round trips. A 20-span trace cost seven statements (its probe, the
session, agent, run and span inserts, the roll-up read and its update), each a wait for the server:
on two shared cores every wait is also two context switches, and PostgreSQL's import took 1.5x
SQLite's time (2.4-5.5x under load). Only two of the seven need an answer. The others are queued here
and go out in psycopg's pipeline mode together with the next statement whose answer the writer needs
(the next trace's probe; the roll-up read where one is needed: a new run's is summed from its rows,
`rollup.Totals`): a new trace costs one round trip, and the statements are the same, run in the same
order, in the same transaction.

The queue lives in the connection's `info` (per pooled connection) and is sent before anything else
uses the connection: any statement SQLAlchemy runs on it (`before_cursor_execute`), its commit (and the
change-log rows before it), a COPY. A rollback drops it (nothing queued outlives its transaction).

A writer may also `post` the queue at the end of a trace: it goes out at once on a pipeline left open,
and the server runs it while the client prepares the next trace; its answers are read (and any error
raised) with the next statement that waits. With the probes of a transaction's traces asked together
(`probe.ask_ahead`) a new trace waits for nothing, and the two processes work at once instead of
taking turns: the client waited ~0.9 ms a trace for the server to insert the trace before (cProfile).
SQLite has no round trips: there `run` executes at once and `ask` reads at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, suppress
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg
from sqlalchemy.exc import DBAPIError

_KEY = "agentdesk_outbox"
_listening: weakref.WeakSet[Engine] = weakref.WeakSet()
Params = Sequence[Any] | Mapping[str, Any]
MESSAGE_STATEMENTS = 12
"""A failed batch's error names its last statements (one of them failed; a staged slice posts dozens)."""


class Outbox:
    """The statements queued on one PostgreSQL connection: (SQL, parameters, `$n` placeholders?), and the
    pipeline they were posted on while its answers are not read yet."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, Params, bool]] = []
        self._open: _Posted | None = None

    @property
    def pending(self) -> bool:
        """Something is queued, or posted with its answers unread."""
        return bool(self.queued) or self._open is not None

    def post(self, raw: Any) -> None:
        """Send everything queued now, without waiting: the server runs it while the client goes on (the
        next trace's rows), and its answers are read at the next `send` (nobody needs them before)."""
        if not self.queued:
            return
        statements, self.queued = self.queued, []
        import psycopg  # there whenever PostgreSQL is

        try:
            if self._open is None:
                self._open = _Posted(raw)
            self._open.execute(statements)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def send(self, raw: Any, read: tuple[str, Params] | None = None) -> list[tuple[Any, ...]]:
        """Everything queued, then `read` (`%(name)s` placeholders), in one round trip; `read`'s rows. What
        was posted before has run when this returns (its errors are raised here)."""
        statements, self.queued = self.queued, []
        if read is not None:
            statements.append((read[0], read[1], False))
        if not statements and self._open is None:
            return []
        import psycopg

        try:
            if self._open is None and len(statements) == 1:  # one statement: no pipeline (its Sync) to pay for
                return _send_one(raw, statements[0], read is not None)
            if self._open is None:
                self._open = _Posted(raw)
            self._open.execute(statements)
            statements = []  # sent: named by the pipeline now, in an error's message
            rows = self._open.read() if read is not None else []
            self._open.close()
            self._open = None
            return rows
        except psycopg.Error as exc:  # as SQLAlchemy wraps it: the unit of work's translations apply
            raise self._failed(exc, statements) from exc

    def drop(self) -> None:
        """Forget what is queued and posted (a rollback: none of it outlives its transaction)."""
        self.queued.clear()
        if self._open is not None:
            posted, self._open = self._open, None
            posted.abandon()

    def _failed(self, exc: Exception, statements: list[tuple[str, Params, bool]] | None = None) -> Exception:
        sent = self._open.sent if self._open is not None else []
        sql = "; ".join([*sent, *(statement[0] for statement in statements or [])][-MESSAGE_STATEMENTS:])
        self.drop()
        import psycopg

        return DBAPIError.instance(sql, None, exc, psycopg.Error)


class _Posted:
    """A psycopg pipeline held open across calls: statements posted on it run on the server at once, and
    their results are read (`read`, `close`) only when the client needs them."""

    def __init__(self, raw: Any) -> None:
        from psycopg import RawCursor

        self._stack = ExitStack()
        self._stack.enter_context(raw.pipeline())
        self._numbered = self._stack.enter_context(RawCursor(raw))
        self._named = self._stack.enter_context(raw.cursor())
        self.sent: list[str] = []
        """The SQL posted, for the message of an error that is read only later."""

    def execute(self, statements: list[tuple[str, Params, bool]]) -> None:
        for sql, params, dollar in statements:
            (self._numbered if dollar else self._named).execute(sql, params)
            self.sent.append(sql)

    def read(self) -> list[tuple[Any, ...]]:
        """The rows of the last statement (sent on the named cursor): fetching them reads every result before."""
        return list(self._named.fetchall())

    def close(self) -> None:
        """Sync: everything posted has run (the first error is raised); the connection leaves pipeline mode."""
        self._stack.close()

    def abandon(self) -> None:
        """Leave pipeline mode whatever happened (a rollback follows): errors are the rollback's to report."""
        with suppress(Exception):  # the transaction is being thrown away
            self._stack.close()


def _send_one(raw: Any, statement: tuple[str, Params, bool], read: bool) -> list[tuple[Any, ...]]:
    from psycopg import RawCursor

    sql, params, dollar = statement
    with (RawCursor(raw) if dollar else raw.cursor()) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if read else []


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def outbox(conn: Connection) -> Outbox:
    """The connection's queue (PostgreSQL), made on first use; the engine learns to send it first."""
    info = conn.connection.info
    box = info.get(_KEY)
    if box is None:
        box = info[_KEY] = Outbox()
        _listen(conn.engine)
    return box  # type: ignore[no-any-return]


@lru_cache(maxsize=64)
def _pyformat(sql: str) -> str:
    """`:name` placeholders as psycopg's `%(name)s` (and a literal `%` doubled), as SQLAlchemy renders them."""
    return str(sql_text(sql).compile(dialect=postgresql_psycopg.dialect()))


def run(conn: Connection, sql: str, params: Params) -> None:
    """A write whose answer nobody reads (`:name` placeholders): queued on PostgreSQL, executed at once
    elsewhere."""
    if is_postgres(conn):
        outbox(conn).queued.append((_pyformat(sql), params, False))
    else:
        conn.execute(sql_text(sql), params)


def run_numbered(conn: Connection, sql: str, values: Sequence[Any]) -> None:
    """PostgreSQL only: a write with `$1, $2, ...` placeholders (psycopg's `RawCursor`: nothing to parse
    in a long VALUES list), queued."""
    outbox(conn).queued.append((sql, values, True))


def ask(conn: Connection, sql: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row of a read (`:name` placeholders); on PostgreSQL sent with everything queued, in one
    round trip."""
    if is_postgres(conn):
        rows = outbox(conn).send(conn.connection.driver_connection, (_pyformat(sql), params))
        return rows[0] if rows else None
    row = conn.execute(sql_text(sql), params).first()
    return tuple(row) if row is not None else None


def post(conn: Connection) -> None:
    """PostgreSQL: send what is queued now without waiting for it (the end of a trace's write: the server
    inserts it while the client prepares the next trace). Elsewhere nothing is queued."""
    if is_postgres(conn):
        box = conn.connection.info.get(_KEY)
        if box is not None:
            box.post(conn.connection.driver_connection)


def ask_rows(conn: Connection, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """PostgreSQL only: every row of a read (`:name` placeholders), sent with everything queued, in one
    round trip."""
    return outbox(conn).send(conn.connection.driver_connection, (_pyformat(sql), params))


def flush(conn: Connection) -> None:
    """Send what is queued now and wait for it (before a COPY, which a pipeline cannot hold)."""
    if is_postgres(conn):
        box = conn.connection.info.get(_KEY)
        if box is not None and box.pending:
            box.send(conn.connection.driver_connection)


def _listen(engine: Engine) -> None:
    """Before SQLAlchemy uses a connection (a statement, a commit), what is queued on it goes; a rollback
    or the connection's return to the pool drops it."""
    target: Engine = getattr(engine, "_proxied", None) or engine  # options' engine: the pool's own engine
    if target in _listening:
        return
    _listening.add(target)

    def before(conn: Connection, *_: Any) -> None:
        box = conn.connection.info.get(_KEY)
        if box is not None and box.pending:
            box.send(conn.connection.driver_connection)

    def dropped(conn: Connection) -> None:
        box = conn.connection.info.get(_KEY)
        if box is not None:
            box.drop()

    def returned(_dbapi: Any, record: Any) -> None:
        box = record.info.get(_KEY)
        if box is not None:
            box.drop()

    def reset(dbapi_connection: Any, connection_record: Any, reset_state: Any) -> None:
        returned(dbapi_connection, connection_record)

    event.listen(target, "before_cursor_execute", before)
    event.listen(target, "commit", before)
    event.listen(target, "rollback", dropped)
    event.listen(target, "reset", reset)  # before the pool's own rollback of a returned connection
    event.listen(target, "checkin", returned)
