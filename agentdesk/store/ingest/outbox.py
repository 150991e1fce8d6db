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
SQLite has no round trips: there `run` executes at once and `ask` reads at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg
from sqlalchemy.exc import DBAPIError

_KEY = "agentdesk_outbox"
_listening: weakref.WeakSet[Engine] = weakref.WeakSet()
Params = Sequence[Any] | Mapping[str, Any]


class Outbox:
    """The statements queued on one PostgreSQL connection: (SQL, parameters, `$n` placeholders?)."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, Params, bool]] = []

    def send(self, raw: Any, read: tuple[str, Params] | None = None) -> list[tuple[Any, ...]]:
        """Everything queued, then `read` (`%(name)s` placeholders), in one round trip; `read`'s rows."""
        statements, self.queued = self.queued, []
        if read is not None:
            statements.append((read[0], read[1], False))
        if not statements:
            return []
        import psycopg  # there whenever PostgreSQL is

        try:
            return _send(raw, statements, read is not None)
        except psycopg.Error as exc:  # as SQLAlchemy wraps it: the unit of work's translations apply
            sql = "; ".join(statement[0] for statement in statements)
            raise DBAPIError.instance(sql, None, exc, psycopg.Error) from exc


def _send(raw: Any, statements: list[tuple[str, Params, bool]], read: bool) -> list[tuple[Any, ...]]:
    from psycopg import RawCursor

    if len(statements) == 1:  # one statement: no pipeline (its Sync) to pay for
        sql, params, dollar = statements[0]
        with (RawCursor(raw) if dollar else raw.cursor()) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if read else []
    with raw.pipeline(), RawCursor(raw) as numbered, raw.cursor() as named:
        for sql, params, dollar in statements:
            (numbered if dollar else named).execute(sql, params)
        # the read was sent last, on `named`: fetching it syncs the pipeline (all above have run, in order)
        return list(named.fetchall()) if read else []


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


def flush(conn: Connection) -> None:
    """Send what is queued now (before a COPY, which a pipeline cannot hold)."""
    if is_postgres(conn):
        box = conn.connection.info.get(_KEY)
        if box is not None and box.queued:
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
        if box is not None and box.queued:
            box.send(conn.connection.driver_connection)

    def dropped(conn: Connection) -> None:
        box = conn.connection.info.get(_KEY)
        if box is not None:
            box.queued.clear()

    def returned(_dbapi: Any, record: Any) -> None:
        box = record.info.get(_KEY)
        if box is not None:
            box.queued.clear()

    event.listen(target, "before_cursor_execute", before)
    event.listen(target, "commit", before)
    event.listen(target, "rollback", dropped)
    event.listen(target, "checkin", returned)
