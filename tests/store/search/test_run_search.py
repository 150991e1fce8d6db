"""Search within a run: the query language, the FTS index (kept by the indexer), and the scan fallback agreeing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import text

from agentdesk.store.errors import NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search import run_search
from agentdesk.store.search.indexer import drain
from agentdesk.store.search.query import QueryError, parse
from agentdesk.store.search.run_search import SearchResult, search_run


@dataclass
class Spans:
    run: str
    read: str
    write: str
    model: str
    failed: str
    other_run_read: str


@pytest.fixture
def spans(rt: AgentRuntime) -> Spans:
    pid = rt.create_project("P")
    sid = rt.create_session(rt.create_task(pid, "T"), "S")
    aid = rt.create_agent(sid, "coder", "m")
    run = rt.start_run(aid, "r")
    read = rt.start_span(run, "tool", "read_file", attributes={"path": "src/payments.py", "lines": 40},
                         input_text='{"path": "src/payments.py"}')
    rt.finish_span(read, output_text="def charge(card): ...")
    write = rt.start_span(run, "tool", "write_file", attributes={"path": "src/ledger.py"})
    rt.finish_span(write, output_text="wrote 12 lines to src/ledger.py")
    model = rt.start_span(run, "model", "chat gpt-x", input_text="Please fix the payments bug")
    rt.finish_span(model, output_text="I will retry the charge", attributes={"gen_ai.request.model": "gpt-x"})
    failed = rt.start_span(run, "tool", "shell")
    rt.finish_span(failed, status="error", error="boom", output_text="Traceback: KeyError in charge")
    other = rt.start_run(aid, "r2")
    other_read = rt.start_span(other, "tool", "read_file", attributes={"path": "src/payments.py"})
    return Spans(run, read, write, model, failed, other_read)


class ScanOnly(NativeSource):
    """The same store searched by the fallback: what a foreign source or PostgreSQL gets."""


@pytest.fixture
def scan_source(source: NativeSource, monkeypatch: pytest.MonkeyPatch) -> NativeSource:
    monkeypatch.setattr(run_search, "indexed_engine", lambda s: None)
    return source


CASES = [
    ("payments", "read model"),
    ("payments.py", "read"),
    ("PAY", "read model"),
    ("ments", ""),
    ("kind:tool", "read write failed"),
    ("status:error", "failed"),
    ("kind:tool charge", "read failed"),
    ("path:ledger", "write"),
    ("path:payments.py", "read"),
    ("gen_ai.request.model:gpt", "model"),
    ("name:file", "read write"),
    ('"retry the charge"', "model"),
    ("lines:40", "read"),
    ("nothingmatches", ""),
]


@pytest.mark.parametrize(("query", "expected"), CASES)
def test_indexed_search_finds_the_expected_spans(source: NativeSource, spans: Spans, query: str,
                                                 expected: str) -> None:
    assert run_search.indexed_engine(source) is not None
    result = search_run(source, spans.run, query)
    assert result.span_ids == [getattr(spans, n) for n in expected.split()]
    assert result.total == len(result.span_ids) and not result.scanned


@pytest.mark.parametrize(("query", "expected"), CASES)
def test_scan_fallback_agrees_with_the_index(scan_source: NativeSource, spans: Spans, query: str,
                                             expected: str) -> None:
    result = search_run(scan_source, spans.run, query)
    assert result.scanned
    assert result.span_ids == [getattr(spans, n) for n in expected.split()]


def test_duration_terms(source: NativeSource, spans: Spans, rt: AgentRuntime) -> None:
    with source.store.write_engine.begin() as conn:
        # span times are integer nanoseconds (migration 0023): 100 s to 103 s, 104 s to 104.05 s
        conn.execute(text("UPDATE spans SET started_at = 100000000000, ended_at = 103000000000 WHERE id = :i"),
                     {"i": spans.read})
        conn.execute(text("UPDATE spans SET started_at = 104000000000, ended_at = 104050000000 WHERE id = :i"),
                     {"i": spans.write})
    assert set(search_run(source, spans.run, "dur>2s").span_ids) == {spans.read}
    assert spans.write in search_run(source, spans.run, "dur<100ms").span_ids
    assert spans.read not in search_run(source, spans.run, "dur<100ms").span_ids


def test_updates_and_deletes_keep_the_index_in_step(source: NativeSource, spans: Spans) -> None:
    with source.store.write_engine.begin() as conn:
        conn.execute(text("UPDATE spans SET output_text = 'refund issued' WHERE id = :i"), {"i": spans.write})
    assert search_run(source, spans.run, "refund").span_ids == [spans.write]
    assert search_run(source, spans.run, "wrote").span_ids == []
    with source.store.write_engine.begin() as conn:
        conn.execute(text("DELETE FROM spans WHERE id = :i"), {"i": spans.write})
    assert search_run(source, spans.run, "refund").span_ids == []
    drain(source.store.write_engine)  # every span of the store, the other run's too
    with source.store.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM span_search_rows")).scalar_one()
    assert rows == 4


def test_a_span_with_attributes_that_are_not_json_is_still_written(source: NativeSource, spans: Spans) -> None:
    with source.store.write_engine.begin() as conn:
        conn.execute(text("UPDATE spans SET attributes = 'not json' WHERE id = :i"), {"i": spans.read})
    assert search_run(source, spans.run, "path:payments").span_ids == []
    assert search_run(source, spans.run, "charge").span_ids == [spans.read, spans.model, spans.failed]


@pytest.mark.parametrize("query", ["", "   ", '"open', "kind:banana", "status:meh", "dur>fast", "path:",
                                   "!!!", "kind:tool kind:model", " ".join(["w"] * 17)])
def test_bad_queries_are_one_sentence(query: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(query)
    message = str(caught.value)
    assert message.endswith(".") and "\n" not in message


def test_unknown_run_is_not_found(source: NativeSource, spans: Spans, scan_source: NativeSource) -> None:
    with pytest.raises(NotFound):
        search_run(source, "run_missing", "x")


def test_result_shape(source: NativeSource, spans: Spans) -> None:
    assert search_run(source, spans.run, "kind:model") == SearchResult([spans.model], 1)
