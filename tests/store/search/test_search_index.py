"""The index kept off the write path: dirty marks, the indexer, and search = index UNION dirty scan."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search import fts, indexer, run_search, store_search
from agentdesk.store.search.indexer import IndexSchedule, dirty_count, drain
from agentdesk.store.search.query import parse
from agentdesk.store.search.run_search import search_run
from agentdesk.store.search.store_search import HitKind, search_store
from tests.conftest import prebuilt


def _run(rt: AgentRuntime) -> str:
    pid = rt.create_project("P")
    sid = rt.create_session(rt.create_task(pid, "T"), "S")
    return rt.start_run(rt.create_agent(sid, "coder", "m"), "r")


@pytest.fixture
def no_search_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches that do not index first: what a read-only open or a locked store gets."""
    monkeypatch.setattr(run_search, "drain_for_search", lambda store, run_id: 0)
    monkeypatch.setattr(store_search, "drain_for_search", lambda store, run_id: 0)


def _indexed_rows(source: NativeSource) -> int:
    with source.store.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {fts.ROWS_TABLE}")).scalar_one())


def _write(source: NativeSource, sql: str, **params: object) -> None:
    with source.store.write_engine.begin() as conn:
        conn.execute(text(sql), params)


def test_writes_only_mark_spans_dirty(source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="ls payments")
    assert dirty_count(source.store.engine, run) == 1 and _indexed_rows(source) == 0
    assert drain(source.store.write_engine) == 1
    assert dirty_count(source.store.engine) == 0 and _indexed_rows(source) == 1
    rt.finish_span(span, output_text="done")  # output_text is indexed: dirty again
    assert dirty_count(source.store.engine) == 1


def test_a_span_not_yet_indexed_is_found(source: NativeSource, rt: AgentRuntime, no_search_drain: None) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="refund the ledger")
    assert _indexed_rows(source) == 0
    assert search_run(source, run, "ledger").span_ids == [span]
    assert search_run(source, run, "kind:tool refund").span_ids == [span]
    assert search_run(source, run, "kind:model refund").span_ids == []
    assert search_store(source, "ledger").totals[HitKind.SPAN] == 1


def test_an_updated_span_is_found_by_its_new_text_only(source: NativeSource, rt: AgentRuntime,
                                                       no_search_drain: None) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="old words", attributes={"path": "a.py"})
    drain(source.store.write_engine)
    _write(source, "UPDATE spans SET input_text = 'new words', attributes = '{\"path\": \"b.py\"}' WHERE id = :i",
           i=span)
    for drained in (False, True):
        assert search_run(source, run, "new").span_ids == [span], drained
        assert search_run(source, run, "old").span_ids == [], drained
        assert search_run(source, run, "path:b").span_ids == [span], drained
        assert search_run(source, run, "path:a").span_ids == [], drained
        assert search_store(source, "old").totals[HitKind.SPAN] == 0, drained
        drain(source.store.write_engine)


def test_a_deleted_span_is_not_found(source: NativeSource, rt: AgentRuntime, no_search_drain: None) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="doomed text")
    keep = rt.start_span(run, "tool", "shell", input_text="doomed but kept")
    drain(source.store.write_engine)
    _write(source, "DELETE FROM spans WHERE id = :i", i=span)
    assert search_run(source, run, "doomed").span_ids == [keep]
    assert search_store(source, "doomed").totals[HitKind.SPAN] == 1
    drain(source.store.write_engine)
    assert _indexed_rows(source) == 1 and dirty_count(source.store.engine) == 0
    assert search_run(source, run, "doomed").span_ids == [keep]


def test_the_drain_is_idempotent(source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    spans = [rt.start_span(run, "tool", f"step {n}", input_text=f"word{n} common") for n in range(7)]
    assert drain(source.store.write_engine, chunk=3) == 7
    assert drain(source.store.write_engine) == 0
    with source.store.write_engine.begin() as conn:
        conn.exec_driver_sql(fts.MARK_ALL)  # everything dirty again: re-indexing changes nothing
    assert drain(source.store.write_engine, chunk=2) == 7
    assert _indexed_rows(source) == 7
    with source.store.engine.connect() as conn:
        docs = conn.execute(text(f"SELECT count(*) FROM {fts.FTS_TABLE}")).scalar_one()
    assert docs == 7
    assert search_run(source, run, "common").span_ids == spans
    assert search_run(source, run, "word3").span_ids == [spans[3]]


def test_search_drains_its_run_first(source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    rt.start_span(run, "tool", "shell", input_text="x")
    other = _run(rt)
    rt.start_span(other, "tool", "shell", input_text="y")
    search_run(source, run, "x")
    assert dirty_count(source.store.engine, run) == 0 and dirty_count(source.store.engine, other) == 1


def test_read_only_search_scans_the_dirty_spans(store_path: Path, source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="unindexed words")
    read_only = NativeSource(open_store(str(store_path), read_only=True))
    try:
        assert search_run(read_only, run, "unindexed").span_ids == [span]
    finally:
        read_only.close()
    assert dirty_count(source.store.engine) == 1


def test_the_schedule_drains_in_the_background(source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    for n in range(30):
        rt.start_span(run, "tool", f"s{n}")
    schedule = IndexSchedule(source.store)
    schedule.chunk = 10
    while schedule.step():
        pass
    assert schedule.indexed == 30 and dirty_count(source.store.engine) == 0


WORDS = ("alpha", "beta", "gamma", "delta")
QUERIES = ("alpha", "beta gamma", "kind:tool alpha", "name:delta", "path:beta", "status:error", "gam",
           "kind:model")
op = st.one_of(
    st.tuples(st.just("insert"), st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(("tool", "model"))),
    st.tuples(st.just("update"), st.integers(0, 30), st.sampled_from(WORDS), st.sampled_from(WORDS)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
    st.tuples(st.just("drain"), st.integers(1, 4)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=25))
def test_index_backed_search_always_equals_the_scan(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(str(prebuilt(Path(folder) / "s.sqlite")))
        source, rt = NativeSource(store), AgentRuntime(store)
        try:
            run = _run(rt)
            spans: list[str] = []
            for step in ops:
                _apply(source, rt, run, spans, step)
                for query in QUERIES:
                    parsed = parse(query)
                    scanned = run_search._scan(source, parsed, source.span_table(run)).span_ids
                    assert run_search._search_sql(store.engine, parsed, run).span_ids == scanned, (query, step)
                    assert store_search._spans_sql(store.engine, parsed, 500)[1] == len(scanned), (query, step)
        finally:
            source.close()


def _apply(source: NativeSource, rt: AgentRuntime, run: str, spans: list[str], step: tuple[object, ...]) -> None:
    kind = step[0]
    if kind == "insert":
        _, name, word, span_kind = step
        spans.append(rt.start_span(run, str(span_kind), f"{name} op", attributes={"path": f"{word}.py"},
                                   input_text=f"{word} text"))
    elif kind == "update" and spans:
        _, index, word, other = step
        span = spans[int(index) % len(spans)]  # type: ignore[call-overload]
        _write(source, "UPDATE spans SET output_text = :o, attributes = :a, status = 'error' WHERE id = :i",
               o=f"{word} {other}", a=f'{{"path": "{other}.py"}}', i=span)
    elif kind == "delete" and spans:
        span = spans.pop(int(step[1]) % len(spans))  # type: ignore[call-overload]
        _write(source, "DELETE FROM spans WHERE id = :i", i=span)
    elif kind == "drain":
        indexer.drain(source.store.write_engine, limit=int(step[1]), chunk=2)  # type: ignore[call-overload]


def test_a_search_on_a_locked_store_does_not_wait_and_stays_right(source: NativeSource, rt: AgentRuntime) -> None:
    run = _run(rt)
    span = rt.start_span(run, "tool", "shell", input_text="locked words")
    with source.store.write_engine.begin():  # another writer holds the lock
        assert indexer.drain_for_search(source.store, run) == 0
        assert search_run(source, run, "locked").span_ids == [span]
    assert dirty_count(source.store.engine) == 1
    assert indexer.drain_for_search(source.store, run, chunk=1) == 1
