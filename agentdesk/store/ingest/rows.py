"""Rows into agentdesk's tables fast, on each backend: the import's bulk inserts.

Why: SQLAlchemy's per-row parameter processing was a third of an import's time on SQLite, and on
PostgreSQL an executemany is a round trip per row. Here SQLite gets an executemany straight to the driver
(rows in primary-key order), PostgreSQL one INSERT ... VALUES queued in the `outbox` for a small batch and a
COPY for a large one (through a temporary table where row-level security refuses COPY). The values are
passed through as given: this module never converts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, insert

from agentdesk.store.ingest import search_marks
from agentdesk.store.ingest.outbox import flush, run_numbered
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.payloads import pack_rows

IN_CHUNK = 500
"""Bound parameters per IN (...) lookup: well under SQLite's limit."""


SORT_KEYS = {"spans": "id", "context_items": "id", "context_item_revisions": "item_id",
             "span_context_items": "span_id"}
"""Tables whose rows may be inserted in primary-key order (agents may not: parents come first)."""


SPAN_COLUMNS = ("id", "run_id", "parent_span_id", "kind", "name", "status", "started_at", "ended_at",
                "input_tokens", "output_tokens", "cost_usd", "attributes", "input_text", "output_text", "error",
                "context_revision")
"""The order of `_span_row`'s tuples (the id first: sorting the tuples sorts by primary key)."""


VALUES_MAX_ROWS = 200
"""PostgreSQL: up to this many rows go in as one INSERT ... VALUES written straight to the driver (one round
trip); a COPY costs two (the COPY, then its data and end) and pays only for more rows. An executemany through
SQLAlchemy was slower than either (its per-row processing)."""


@lru_cache(maxsize=64)
def _placeholders(width: int, count: int) -> str:
    """`($1, $2), ($3, $4)` for `count` rows of `width` values (a small trace's shapes repeat: built once)."""
    return ", ".join("(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")" for r in range(count))


def copy_rows(conn: Connection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """PostgreSQL: the rows through `COPY ... FROM STDIN` on the transaction's own connection (psycopg 3);
    up to `VALUES_MAX_ROWS` rows (a small trace's spans, its agent) as one INSERT instead, queued in the
    `outbox` (sent with the next statement that needs an answer).

    An executemany sends one INSERT per row and waits for its answer; COPY streams every row in one
    statement, a third of the time at 20,000 spans. It needs exactly the INSERT privilege on the table
    and fires the same triggers, so a login writes through it only what it could INSERT. A login bound
    by the table's row-level security (an agent: migration 0013) may not COPY into it at all ("COPY FROM
    not supported with row-level security"): its rows are copied into a temporary table of the same
    shape and moved with one INSERT ... SELECT, which the policies and triggers check row by row as
    they check an INSERT.

    Whether the login is bound is asked once per connection and table (`info` lives as long as the
    connection; a login's policies change only with a migration), not once per COPY: it was a round trip
    per trace."""
    raw = conn.connection.driver_connection
    known: dict[str, bool] = conn.connection.info.setdefault("agentdesk_row_security", {})
    names = ", ".join(columns)
    rows = list(rows)
    if not rows:
        return
    if len(rows) <= VALUES_MAX_ROWS:  # an INSERT: the policies check it as any other (no COPY needed)
        run_numbered(conn, f"INSERT INTO public.{table} ({names}) VALUES {_placeholders(len(columns), len(rows))}",
                     [value for row in rows for value in row])  # queued: sent with the next read (`outbox`)
        return
    flush(conn)  # what is queued goes first (a pipeline cannot hold a COPY)
    with raw.cursor() as cursor:  # type: ignore[union-attr]
        if table not in known:
            answer = cursor.execute("SELECT row_security_active(%s::regclass)", (f"public.{table}",)).fetchone()
            known[table] = bool(answer is not None and answer[0])
        target = f"public.{table}"
        if known[table]:
            target = f"agentdesk_copy_{table}"
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {target} (LIKE public.{table} INCLUDING DEFAULTS) "
                           "ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        if target != f"public.{table}":
            cursor.execute(f"INSERT INTO public.{table} ({names}) SELECT {names} FROM {target}")
            cursor.execute(f"TRUNCATE {target}")


def insert_tuples(conn: Connection, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """executemany of ready tuples straight to the driver (SQLAlchemy's per-row processing is slow);
    COPY on PostgreSQL (`copy_rows`)."""
    if conn.dialect.name == "postgresql":
        copy_rows(conn, table, columns, rows)
        return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(sc.Base.metadata.tables[table]), [dict(zip(columns, r, strict=True)) for r in rows])
        return
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    conn.exec_driver_sql(sql, pack_rows(table, columns, rows))  # large payloads compressed (payloads.py)
    if table == sc.SpanRow.__tablename__:
        search_marks.catch_up(conn, [row[0] for row in rows])  # when the import dropped the index's trigger


def _copy_defaults(table: type[sc.Base], columns: Sequence[str]) -> dict[str, Any] | None:
    """The scalar Python-side defaults of the columns not given (a Core insert fills them; COPY would
    not), or None when one is computed (a callable): the Core insert then."""
    filled: dict[str, Any] = {}
    for column in table.__table__.columns:
        if column.name in columns or column.default is None:
            continue
        if not column.default.is_scalar:
            return None
        filled[column.name] = column.default.arg  # type: ignore[attr-defined]
    return filled


def bulk_insert(conn: Connection, table: type[sc.Base], rows: list[dict[str, Any]]) -> None:
    """executemany straight to the driver on SQLite (SQLAlchemy's per-row parameter processing
    was a third of the import time); COPY on PostgreSQL; the portable Core insert elsewhere."""
    if conn.dialect.name == "postgresql" and rows:
        given = list(rows[0])
        defaults = _copy_defaults(table, given)
        if defaults is not None and all(len(r) == len(given) for r in rows):
            columns = [*given, *defaults]
            fixed = tuple(defaults.values())
            copy_rows(conn, table.__tablename__, columns, (tuple(r[c] for c in given) + fixed for r in rows))
            return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(table), rows)
        return
    columns = list(rows[0])
    key = SORT_KEYS.get(table.__tablename__)
    if key is not None:  # in key order, each chunk's B-tree inserts touch neighbouring pages
        rows = sorted(rows, key=itemgetter(key))
    sql = (f"INSERT INTO {table.__tablename__} ({', '.join(columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)})")
    conn.exec_driver_sql(sql, list(map(itemgetter(*columns), rows)) if len(columns) > 1
                         else [(r[columns[0]],) for r in rows])
