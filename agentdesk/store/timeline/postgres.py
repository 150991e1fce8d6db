"""Our schema's spans read on PostgreSQL: the server joins each column into one string per slice.

The same packing as SQLite's (`packed`): `string_agg` prints a slice's ids, parents, kinds, names and
statuses joined by the unit separator and its numbers as integers joined by commas (times in
nanoseconds since the run's first start, costs in picodollars), and `packed._unpack` splits them in
C. Text arrives as bytes (`_Bytes`): the ids then go straight into fixed-width numpy arrays.

Slices follow the `spans_by_run` index in (start, id) order, `SLICE` rows each, the next one after
the last (start, id) of the one before (keyset paging: every slice is an index range, never an
OFFSET). Measured at 100,000 spans on the 2-core test machine: ~0.15 s for the server's part, about
what SQLite's packed read costs; psycopg's row tuples took ~0.6 s for the same run. A value out of
the packing's range is clamped in SQL (an overflowing cast would abort the read transaction) and
then seen by `_unpack`, which sends the run to the row by row read (`rows`), as on SQLite. The plan is
pinned to the index for the read's transaction (`_PLAN`): statistics that do not know the run made the
first 10,000 of 100,000 spans cost a bitmap scan and a sort of all of them (3x SQLite's time).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.adapt import Loader

from agentdesk.store.text.times import READABLE_NS_BELOW, UNREADABLE_NS
from agentdesk.store.timeline.columns import ColumnBuilder, SpanColumns
from agentdesk.store.timeline.id_index import Keys
from agentdesk.store.timeline.packed import _NONE, _SEP, _Job, _Piece, _unpack, assemble
from agentdesk.store.timeline.strings import StringTable

SLICE = 65_536
"""Rows per packed statement: each slice's split holds the GIL for milliseconds, not the whole run's."""

_CLAMP = "greatest(least({x}, 9.2e18), -9.2e18)"
"""Past int64 a cast fails (and aborts the transaction): clamped, `_unpack` sees the value as too far.
`least` and `greatest` skip NULLs (`least(NULL, 9.2e18)` is 9.2e18): a NULL end is tested first."""

_TIME = f"least(greatest({{x}}, {UNREADABLE_NS}), {READABLE_NS_BELOW})"
"""A stored time (bigint nanoseconds) kept within [unreadable, the last readable) before the run's first
start (kept so too) is taken from it: the difference then fits int64 whatever a login wrote (an overflow
would abort the read's transaction), and stays an exact integer subtraction."""

_ORDER = "ORDER BY started_at, id"
"""Start order, ties by id: one order for every slice, from the `spans_by_run` index."""


_COLUMNS = "id, parent_span_id, kind, name, status, started_at, ended_at, input_tokens, output_tokens, cost_usd"


def _aggregates(t0: str) -> str:
    """The packed columns of the rows in FROM (in their order), times rebased to `t0` (SQL)."""
    sep = f"E'\\x{ord(_SEP):02x}'"
    start = _TIME.format(x="started_at") + f" - {t0}"
    end = _TIME.format(x="ended_at") + f" - {t0}"
    cost = _CLAMP.format(x="coalesce(cost_usd, 0) * 1e12")
    return (f"count(*), string_agg(id, {sep}), string_agg(coalesce(parent_span_id, ''), {sep}), "
            f"string_agg(coalesce(kind, ''), {sep}), string_agg(coalesce(name, ''), {sep}), "
            f"string_agg(coalesce(status, ''), {sep}), "
            f"string_agg(({start})::text, ','), "
            f"string_agg(CASE WHEN ended_at IS NULL THEN {_NONE} ELSE {end} END::text, ','), "
            "string_agg(coalesce(input_tokens, 0)::text, ','), string_agg(coalesce(output_tokens, 0)::text, ','), "
            f"string_agg(round({cost})::bigint::text, ','), max(started_at)")


def _packed_sql(after: bool, limit: int) -> str:
    keyset = " AND (started_at, id) > (%(last_start)s, %(last_id)s)" if after else ""
    return (f"SELECT {_aggregates('%(t0)s')} FROM (SELECT {_COLUMNS} FROM spans "
            f"WHERE run_id = %(run)s{keyset} {_ORDER} LIMIT {int(limit)}) s")


def _first_sql(first: int) -> str:
    """The first spans in one statement: their packed columns (times rebased to the run's first start, the
    top entry of `spans_by_run`), the run counted up to `first + 1` (a lower bound of its size past
    `first`, as `packed._extent` counts) and the first start. One round trip. Measured at 100,000 spans
    (server and transfer, first 10,000): 12 ms, against 15 ms for one pass numbering the rows with window
    functions and packing those within `first` (`FILTER`), and ~20 ms for an earlier form that read the
    rows into a materialized CTE and sorted them again (the CTE's order is not the planner's to rely on)."""
    t0 = "(SELECT " + _TIME.format(x="min(started_at)") + " FROM spans WHERE run_id = %(run)s)"
    return (f"SELECT {_aggregates(t0)}, (SELECT count(*) FROM (SELECT 1 FROM spans WHERE run_id = %(run)s "
            f"LIMIT {int(first) + 1}) c), min(started_at) "
            f"FROM (SELECT {_COLUMNS} FROM spans WHERE run_id = %(run)s {_ORDER} LIMIT {int(first)}) s")


_PLAN = ("SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; "
         "SET LOCAL jit = off")
"""The read's plan, whatever the statistics say: through `spans_by_run` in index order (an incremental
sort puts the ties of a start in id order), never a bitmap scan of the whole run sorted after. A run
the statistics do not know yet (imported or grown since the last ANALYZE: the planner guesses 0.5 %
of the table) was read that way, every row of it, for its first 10,000 spans: 65 ms of the server's
time at 100,000 spans against 10 ms through the index, and each keyset slice of the whole read sorted
the rest of the run again. `jit` off: a big run's cost estimate would have the server compile the
expressions (tens of ms). `SET LOCAL` ends with the read's transaction (`Store.reading`); the four in
one simple-protocol statement (no parameters) are one round trip."""


class _Bytes(Loader):
    """TEXT as the bytes the server sent (UTF-8): the packed ids become fixed-width arrays without decoding."""

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _cursor(session: Any) -> psycopg.Cursor[Any]:
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    return raw.cursor()


def read(session: Any, run_id: str, first: int | None) -> SpanColumns | None:
    """The run's columns packed, or None when the run has no spans or a value does not pack."""
    with _cursor(session) as cursor:
        cursor.adapters.register_loader("text", _Bytes)  # before the first statement: loaders are cached
        cursor.adapters.register_loader("varchar", _Bytes)
        cursor.execute(_PLAN)
        if first is not None:
            return _first(cursor, run_id, first)
        # The first start only (the top of `spans_by_run`): counting the run's entries first cost a pass
        # over the index; the slices count them anyway
        row = cursor.execute("SELECT min(started_at) FROM spans WHERE run_id = %s", (run_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        t0 = _first_start(row[0])
        job = _Job("", run_id, t0, (StringTable(), StringTable(), StringTable()), Keys())
        pieces: list[_Piece] = []
        params: dict[str, Any] = {"run": run_id, "t0": t0}
        got = 0
        while True:
            size = SLICE
            answer = cursor.execute(_packed_sql(bool(pieces), size), params).fetchone()
            if answer is None or not answer[0]:
                break  # the run shrank under a concurrent delete: what is there
            piece = _unpack(answer[:11], job, got)
            if piece is None:
                return None
            pieces.append(piece)
            got += int(answer[0])
            last_id = piece.ids[-1]
            params["last_id"] = last_id.decode() if isinstance(last_id, bytes) else str(last_id)
            params["last_start"] = int(answer[11])
            if int(answer[0]) < size:
                break
        return assemble(job, pieces, got, sort=False) if pieces else None


def _first(cursor: psycopg.Cursor[Any], run_id: str, first: int) -> SpanColumns | None:
    answer = cursor.execute(_first_sql(first), {"run": run_id}).fetchone()
    if answer is None or not answer[0]:
        return None
    t0 = _first_start(answer[13])
    job = _Job("", run_id, t0, (StringTable(), StringTable(), StringTable()), Keys())
    piece = _unpack(answer[:11], job, 0)
    return None if piece is None else assemble(job, [piece], int(answer[12]), sort=False)


def _first_start(value: object) -> int:
    """The run's first start as `_TIME` keeps it (integer nanoseconds)."""
    return min(max(value, UNREADABLE_NS), READABLE_NS_BELOW) if type(value) is int else 0


def rows(session: Any, run_id: str, first: int | None) -> SpanColumns:
    """The row by row read, for runs whose values do not pack (a time too far, a separator in a name)."""
    limit = "" if first is None else f" LIMIT {int(first)}"
    with _cursor(session) as cursor:
        counted = cursor.execute("SELECT count(*) FROM (SELECT 1 FROM spans WHERE run_id = %s"
                                 f"{'' if first is None else ' LIMIT ' + str(int(first) + 1)}) s",
                                 (run_id,)).fetchone()
        total = int(counted[0]) if counted else 0
        builder = ColumnBuilder(ns=True)
        cursor.execute("SELECT id, parent_span_id, coalesce(kind, ''), coalesce(name, ''), coalesce(status, ''), "
                       "started_at, ended_at, input_tokens, output_tokens, cost_usd FROM spans "
                       f"WHERE run_id = %s {_ORDER}{limit}", (run_id,))
        while chunk := cursor.fetchmany(16_384):
            builder.add(chunk)
    return builder.columns(total)

