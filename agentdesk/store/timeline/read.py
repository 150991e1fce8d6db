"""A run's span columns from any source: our schema packed (`packed` on SQLite, `postgres` on PostgreSQL)
or row by row, others by `span_table`.

`first` asks for just the earliest spans: the timeline draws those at once and lays out the rest
after.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agentdesk.store.persistence.database import Store, own_store
from agentdesk.store.persistence.sqlite import lenient_text
from agentdesk.store.source import Source
from agentdesk.store.timeline.columns import ColumnBuilder, SpanColumns, from_table
from agentdesk.store.timeline.packed import _extent, _packed

PREFETCH_OVER = 200_000
"""A run with at least this many spans has its slices' SQL answered ahead on a thread (`_prefetched`)."""


CHUNK = 16_384


_COLUMNS = ("id, parent_span_id, kind, name, status, started_at, ended_at, input_tokens, output_tokens, "
            "cost_usd")


def span_columns(source: Source, run_id: str, first: int | None = None) -> SpanColumns:
    """A run's span columns: our schema packed (`packed`), else by rows; other sources through
    `span_table`. `first`: only the earliest that many."""
    store = own_store(source)
    if store is not None:
        return _native(store, run_id, first)
    return from_table(source.span_table(run_id))


class _Decoded(dict[bytes, str]):
    """Distinct TEXT values decoded once each (invalid UTF-8 with replacement marks, as the store reads it)."""

    def __missing__(self, raw: bytes) -> str:
        text = self[raw] = lenient_text(raw)
        return text


def _texts(values: Sequence[bytes | None]) -> list[str]:
    """Unique strings (ids): decoded in C, a chunk at a time; lenient only for a chunk that needs it."""
    try:
        return list(map(bytes.decode, values))  # type: ignore[arg-type]
    except (UnicodeDecodeError, TypeError):
        return [lenient_text(v) if v is not None else "" for v in values]


def _bytes_cursor(session: Any) -> tuple[sqlite3.Connection, Any]:
    """The session's own DB-API connection with TEXT read as bytes (restore `text_factory` after):
    the connection's lenient decoder is a Python call per value (five million at a million spans, ~3 s);
    here each packed column or id decodes in C and repeated strings once each."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    factory = raw.text_factory
    raw.text_factory = bytes
    return raw, factory


def _native(store: Store, run_id: str, first: int | None) -> SpanColumns:
    if store.is_postgres:
        from agentdesk.store.timeline import postgres  # psycopg is an optional extra: only for its stores

        with store.reading() as session:
            packed = postgres.read(session, run_id, first)
            return packed if packed is not None else postgres.rows(session, run_id, first)
    with store.reading() as session:
        raw, factory = _bytes_cursor(session)
        cursor = raw.cursor()
        try:
            extent = _extent(cursor, run_id, first)
            prefetch = first is None and extent.total >= PREFETCH_OVER
            packed = _packed(cursor, run_id, first, extent, prefetch=prefetch)
        finally:
            cursor.close()
            raw.text_factory = factory
        return packed if packed is not None else _rows(session, run_id, first)


def _rows(session: Any, run_id: str, first: int | None) -> SpanColumns:
    """The row by row read: for runs whose values do not pack (see `packed._packed`)."""
    limit = "" if first is None else f" LIMIT {int(first)}"
    raw, factory = _bytes_cursor(session)
    cursor = raw.cursor()
    try:
        total = int(cursor.execute("SELECT count(*) FROM (SELECT 1 FROM spans WHERE run_id = ?"
                                   f"{'' if first is None else ' LIMIT ' + str(int(first) + 1)})",
                                   (run_id,)).fetchone()[0])  # a lower bound with `first` (see `_extent`)
        # `spans_by_run` (run_id, started_at, and the rowid every index ends with) yields the rows
        # in this order: no sort step, and the same order for both passes of one transaction
        order = f" FROM spans WHERE run_id = ? ORDER BY started_at, rowid{limit}"
        # Ids first, on their own: they are the strings kept. Read beside the other columns, each
        # kept id sat among a row's worth of short-lived objects, and the freed space around a
        # million of them stayed in the process (about 200 MB at a million spans).
        ids: list[str] = []
        cursor.execute("SELECT id" + order, (run_id,))
        while chunk := cursor.fetchmany(CHUNK):
            ids.extend(_texts([row[0] for row in chunk]))
        builder = ColumnBuilder(ns=True)
        decoded = _Decoded()
        cursor.execute(f"SELECT {_COLUMNS.replace('id, ', 'NULL, ', 1)}" + order, (run_id,))
        while chunk := cursor.fetchmany(CHUNK):
            cols: list[Sequence[Any]] = list(zip(*chunk, strict=True))
            parents = [None if p is None else decoded[p] for p in cols[1]]
            cols[1:5] = [parents, *(list(map(decoded.__getitem__, c)) for c in cols[2:5])]
            builder.add_columns(cols)
        if len(builder.ids) != len(ids):  # cannot happen in one read transaction; never mix two reads
            raise RuntimeError("the run's spans changed between the two passes of one read")
        builder.ids = ids
    finally:
        cursor.close()
        raw.text_factory = factory
    return builder.columns(total)
