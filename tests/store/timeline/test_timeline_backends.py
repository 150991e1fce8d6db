"""A run's span columns read the same on SQLite and on PostgreSQL (issue 21): the packed read against the
row read, in slices or whole, the first spans alone, and values that do not pack falling back to rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.timeline import packed as packed_read
from agentdesk.store.timeline import read as span_read
from agentdesk.store.timeline.columns import SpanColumns, from_table


def _run(rt: AgentRuntime, store: Store, spans: int = 13) -> str:
    """One run: a root, children with distinct starts, some open, tokens and costs, a second run beside."""
    session = rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s")
    run = rt.start_run(rt.create_agent(session, "a", "m"), "r")
    other = rt.start_run(rt.create_agent(session, "b", "m"), "other")
    root = rt.start_span(run, "agent", "root")
    rt.start_span(other, "tool", "elsewhere")
    for i in range(spans):
        span = rt.start_span(run, "tool" if i % 2 else "model", f"step {i}", parent_span_id=root)
        if i % 3:
            rt.finish_span(span, "ok" if i % 4 else "error", None, input_tokens=i, output_tokens=2 * i,
                           cost_usd=0.000123 * i)
    with store.engine.begin() as conn:  # starts out of insertion order (the feed sorts by start)
        conn.execute(text("UPDATE spans SET started_at = started_at + (CASE WHEN name LIKE '%3' THEN 5 ELSE 0 END) "
                          "WHERE run_id = :run AND name <> 'root'"), {"run": run})
    return run


def _row_read(store: Store, run: str, first: int | None = None) -> SpanColumns:
    with store.reading() as session:
        if store.is_postgres:
            from agentdesk.store.timeline import postgres

            return postgres.rows(session, run, first)
        return span_read._rows(session, run, first)


def _same(fast: SpanColumns, slow: SpanColumns) -> None:
    assert list(fast.ids) == list(slow.ids) and list(fast.parent_ids) == list(slow.parent_ids)
    assert list(fast.names) == list(slow.names) and list(fast.kinds) == list(slow.kinds)
    assert list(fast.statuses) == list(slow.statuses) and fast.total == slow.total
    assert np.allclose(fast.start, slow.start, rtol=0, atol=1e-6)
    assert np.array_equal(np.isnan(fast.end), np.isnan(slow.end))
    assert np.allclose(fast.end, slow.end, rtol=0, atol=1e-6, equal_nan=True)
    assert fast.input_tokens.tolist() == slow.input_tokens.tolist()
    assert np.allclose(fast.cost, slow.cost, rtol=1e-12, atol=1e-15)


def _slices(store: Store, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    if store.is_postgres:
        from agentdesk.store.timeline import postgres

        monkeypatch.setattr(postgres, "SLICE", size)
    else:
        monkeypatch.setattr(packed_read, "ROWID_SLICE", size)


@pytest.mark.parametrize("slice_size", [4, 65_536])
def test_the_packed_read_is_the_row_read_on_both_backends(store: Store, source: NativeSource, rt: AgentRuntime,
                                                          monkeypatch: pytest.MonkeyPatch, slice_size: int) -> None:
    run = _run(rt, store)
    _slices(store, monkeypatch, slice_size)
    fast = span_read.span_columns(source, run)
    assert fast.keys is not None  # the packed read ran (the row read builds no id index)
    _same(fast, _row_read(store, run))
    table = from_table(source.span_table(run))  # the seam every other source reads through: same spans
    assert sorted(fast.ids) == sorted(table.ids) and len(fast) == 14
    assert fast.start.tolist() == sorted(fast.start.tolist())


def test_the_first_spans_alone_and_the_run_counted_past_them(store: Store, source: NativeSource,
                                                             rt: AgentRuntime) -> None:
    run = _run(rt, store)
    first = span_read.span_columns(source, run, 5)
    whole = span_read.span_columns(source, run)
    assert list(first.ids) == list(whole.ids)[:5] and first.total > 5 and not first.complete
    _same(first, _row_read(store, run, 5))


@pytest.mark.parametrize(("column", "value"), [("ended_at", 9.1e18), ("started_at", -10**13), ("cost_usd", 1e8),
                                               ("name", "a\x1fb")])
def test_a_value_that_does_not_pack_reads_by_rows(store: Store, source: NativeSource, rt: AgentRuntime,
                                                  column: str, value: Any) -> None:
    """A time centuries off, a cost past the packing's integers, a separator inside a name: the packed
    read declines the run (on PostgreSQL without aborting the read transaction) and the row read gives it."""
    run = _run(rt, store)
    with store.engine.begin() as conn:
        conn.execute(text(f"UPDATE spans SET {column} = :v WHERE id = (SELECT id FROM spans WHERE run_id = :run "
                          "AND ended_at IS NOT NULL ORDER BY id LIMIT 1)"), {"v": value, "run": run})
    columns = span_read.span_columns(source, run)
    assert columns.keys is None  # read by rows
    _same(columns, _row_read(store, run))
    assert len(columns) == 14


def test_a_run_without_spans_reads_empty(store: Store, source: NativeSource, rt: AgentRuntime) -> None:
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    assert len(span_read.span_columns(source, run)) == 0


@pytest.mark.parametrize("first", [3, 14, 20])
def test_the_first_spans_with_ties_in_start_order_then_id(store: Store, source: NativeSource, rt: AgentRuntime,
                                                          first: int) -> None:
    """Starts shared by several spans (each backend breaks the ties its own way: SQLite by rowid,
    PostgreSQL by id, the row read alike); `first` at, below and past the run's size; a separator in a
    name past the first spans does not send the first spans to the row read."""
    run = _run(rt, store)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE spans SET started_at = (SELECT min(started_at) FROM spans WHERE run_id = :run) + 1 "
                          "WHERE run_id = :run AND name <> 'root'"), {"run": run})
    last = _row_read(store, run, 14).ids[-1]  # last in this backend's tie order: past any first spans read
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE spans SET name = 'a\x1fb' WHERE id = :id"), {"id": last})
    columns = span_read.span_columns(source, run, first)
    _same(columns, _row_read(store, run, first))
    ids = list(columns.ids)
    assert len(ids) == min(first, 14) and columns.start.tolist() == sorted(columns.start.tolist())
    assert columns.complete == (first >= 14)
    if first < 14:
        assert columns.keys is not None  # packed: the separator is past the first spans


@pytest.mark.postgres_only
def test_the_read_goes_through_the_run_index_whatever_the_statistics(store: Store, rt: AgentRuntime) -> None:
    """A run the planner's statistics do not know (never analysed here) is still read through
    `spans_by_run` in order, not by a bitmap scan of the whole run sorted after (issue 21's first spans)."""
    from agentdesk.store.timeline import postgres

    run = _run(rt, store)
    with store.reading() as session:
        cursor = postgres._cursor(session)
        cursor.execute(postgres._PLAN)
        plans = []
        for sql, params in ((postgres._first_sql(5), {"run": run}),
                            (postgres._packed_sql(True, 4), {"run": run, "t0": 0.0, "last_start": 0.0,
                                                             "last_id": ""})):
            plans.append("\n".join(str(row[0]) for row in cursor.execute("EXPLAIN " + sql, params).fetchall()))
    for plan in plans:
        assert "spans_by_run" in plan and "Bitmap" not in plan and "Seq Scan" not in plan, plan
        assert "\n  ->  Sort" not in plan and " Sort  (" not in plan.replace("Incremental Sort  (", ""), plan
