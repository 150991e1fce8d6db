"""Search on both backends (issue 21): the same query finds the same spans on SQLite (FTS5) and on
PostgreSQL (migration 0019's GIN index, the query's patterns deciding); the index is what the server uses."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agentdesk.store.errors import NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search import pg_index, run_search
from agentdesk.store.search.indexer import drain
from agentdesk.store.search.query import parse
from agentdesk.store.search.run_search import search_run
from agentdesk.store.search.store_search import HitKind, search_store
from tests.store.search.test_run_search import CASES, Spans
from tests.store.search.test_run_search import spans as spans


@pytest.mark.parametrize(("query", "expected"), [*CASES, ("read_file", "read"), ("def charge", "read"),
                                                 ("src ledger", "write"), ("name:chat", "model"),
                                                 ("kind:tool status:error charge", "failed")])
def test_a_query_finds_the_same_spans_on_either_backend(source: NativeSource, spans: Spans, query: str,
                                                        expected: str) -> None:
    result = search_run(source, spans.run, query)
    assert result.span_ids == [getattr(spans, n) for n in expected.split()]
    assert result.total == len(result.span_ids) and not result.scanned


def test_the_scan_agrees_with_the_server(source: NativeSource, spans: Spans,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = {query: search_run(source, spans.run, query).span_ids for query, _ in CASES}
    monkeypatch.setattr(run_search, "indexed_engine", lambda s: None)
    monkeypatch.setattr(pg_index, "has_index", lambda e: False)
    for query, found in indexed.items():
        result = search_run(source, spans.run, query)
        assert result.scanned and result.span_ids == found, query


def test_edits_and_deletes_are_searched_as_they_are(source: NativeSource, spans: Spans) -> None:
    with source.store.write_engine.begin() as conn:
        conn.execute(text("UPDATE spans SET output_text = 'refund issued' WHERE id = :i"), {"i": spans.write})
    assert search_run(source, spans.run, "refund").span_ids == [spans.write]
    assert search_run(source, spans.run, "wrote").span_ids == []
    with source.store.write_engine.begin() as conn:
        conn.execute(text("DELETE FROM spans WHERE id = :i"), {"i": spans.write})
    assert search_run(source, spans.run, "refund").span_ids == []


def test_a_word_past_the_indexed_part_of_a_long_text_is_found(source: NativeSource, spans: Spans,
                                                               rt: AgentRuntime) -> None:
    long = rt.start_span(spans.run, "tool", "dump", input_text="filler " * 15_000 + "needle-in haystack")
    assert search_run(source, spans.run, "needle in").span_ids == [long]
    assert search_run(source, spans.run, "haystack").span_ids == [long]


def test_the_store_wide_search_counts_every_run(source: NativeSource, spans: Spans) -> None:
    found = search_store(source, "read_file")
    assert found.totals[HitKind.SPAN] == 2 and not found.scanned
    assert {h.id for g in found.groups for h in g.hits if h.kind is HitKind.SPAN} == {spans.read,
                                                                                       spans.other_run_read}


def test_an_unknown_run_is_not_found(source: NativeSource, spans: Spans) -> None:
    with pytest.raises(NotFound):
        search_run(source, "run_missing", "x")


@pytest.mark.postgres_only  # SQLite's FTS5 index: tests/store/search/test_search_index.py
def test_postgresql_answers_from_its_index(store: Store, source: NativeSource, spans: Spans) -> None:
    """Spans are found while dirty (scanned as they are), once indexed (from `span_words`, through its GIN
    index), and again as they are after a change made them dirty again."""
    assert store.is_postgres
    with store.engine.connect() as conn:
        dirty = conn.execute(text("SELECT count(*) FROM span_words_dirty")).scalar_one()
    assert dirty >= 5  # written, not yet indexed
    assert search_run(source, spans.run, "payments.py").span_ids == [spans.read]
    assert drain(store.engine) >= 5
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM span_words_dirty")).scalar_one() == 0
    assert search_run(source, spans.run, "payments.py").span_ids == [spans.read]
    assert search_run(source, spans.run, "gen_ai.request.model:gpt").span_ids == [spans.model]
    with store.write_engine.begin() as conn:
        conn.execute(text("UPDATE spans SET name = 'renamed' WHERE id = :i"), {"i": spans.write})
    assert search_run(source, spans.run, "name:renamed").span_ids == [spans.write]
    assert search_run(source, spans.run, "name:file").span_ids == [spans.read]
    params: dict[str, object] = {}
    index, _tests = pg_index.text_tests(parse("payments.py"), params)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(pg_index.NO_SEQ_SCAN)  # a tiny table: the planner would rightly scan it
        plan = "\n".join(str(r[0]) for r in conn.execute(text(f"EXPLAIN SELECT 1 FROM span_words w WHERE {index}"),
                                                          params))
        long = "\n".join(str(r[0]) for r in conn.exec_driver_sql(
            f"EXPLAIN SELECT 1 FROM spans s WHERE run_id = 'r' AND ({pg_index.LONG})"))
    assert re.search(r"Index Scan on span_words_search\s+\(", plan) and "spans_search_long" in long


@pytest.mark.postgres_only  # the server's indexer
def test_the_indexer_refuses_a_wild_batch_size(store: Store, spans: Spans) -> None:
    assert store.is_postgres
    with pytest.raises(DBAPIError, match="1 to 10000 at a time"), store.engine.begin() as conn:
        conn.execute(text(pg_index.INDEX_SQL), {"run": None, "limit": 10**9})
