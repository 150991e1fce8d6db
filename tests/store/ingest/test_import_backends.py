"""An OTLP import writes the same spans on SQLite and on PostgreSQL (issue 21: COPY for the bulk rows there),
and what it wrote is searchable at once (marked dirty by the statement triggers, scanned until indexed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import event, text

from agentdesk.store.ingest import importer
from agentdesk.store.ingest.importer import ImportResult, import_files
from agentdesk.store.ingest.outbox import Outbox
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.search.run_search import search_run
from agentdesk.store.timeline.read import span_columns


def otlp_file(path: Path, spans: int, per_trace: int, first: int = 0) -> Path:
    """OTLP/JSON Lines of `spans` spans in traces of `per_trace`: an agent, then chat and execute_tool spans;
    trace ids from `first` + 1."""
    base = 1_790_000_000_000_000_000
    with path.open("w", encoding="utf-8") as out:
        for t in range(first, first + spans // per_trace):
            root = f"{t + 1:08x}00000000"
            rows = [{"traceId": f"{t + 1:032x}", "spanId": root, "name": "invoke_agent planner",
                     "startTimeUnixNano": str(base), "endTimeUnixNano": str(base + per_trace * 2_000_000),
                     "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]
            for n in range(1, per_trace):
                op = "chat" if n % 2 else "execute_tool"
                rows.append({"traceId": f"{t + 1:032x}", "spanId": f"{t + 1:08x}{n:08x}", "parentSpanId": root,
                             "name": f"{op} {n}", "startTimeUnixNano": str(base + n * 2_000_000),
                             "endTimeUnixNano": str(base + n * 2_000_000 + 1_000_000),
                             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": op}}]})
            out.write(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                     "scopeSpans": [{"scope": {"name": "t"}, "spans": rows}]}]}) + "\n")
    return path


@pytest.mark.parametrize(("spans", "per_trace"), [(60, 20), (300, 300)])
def test_an_import_writes_every_span_and_they_are_found(store: Store, source: NativeSource, tmp_path: Path,
                                                         spans: int, per_trace: int) -> None:
    """Small traces (one unit of work each) and one trace written staged, in slices."""
    result = import_files(store, [otlp_file(tmp_path / "t.jsonl", spans, per_trace)], helper=False)
    assert result.error is None and result.report.spans_written == spans
    with store.engine.connect() as conn:
        runs = [r[0] for r in conn.execute(text("SELECT DISTINCT run_id FROM spans"))]
        if store.is_postgres:  # every written span waits for the indexer
            assert conn.execute(text("SELECT count(*) FROM span_words_dirty")).scalar_one() == spans
    assert len(runs) == spans // per_trace
    columns = span_columns(source, runs[0])
    assert len(columns) == per_trace and sorted(columns.names)[0] == "chat 1"
    assert search_run(source, runs[0], "execute_tool").total == (per_trace - 1) // 2


def _round_trips(store: Store, run: Callable[[], object], monkeypatch: pytest.MonkeyPatch) -> int:
    """Statements `run` sends through SQLAlchemy on the store's write engine, and on PostgreSQL the sends of the
    writes queued for a round trip (`outbox`: one wait for the server however many statements it holds; it also
    holds the small inserts, which go past SQLAlchemy). COPY's own statements (large batches) are not counted."""
    engine = store.engine if store.is_postgres else store.write_engine
    sent: list[str] = []

    def count(conn: object, cursor: object, statement: str, *rest: object) -> None:
        sent.append(statement)

    real_send = Outbox.send

    def send(box: Outbox, raw: object, read: tuple[str, object] | None = None) -> list[tuple[object, ...]]:
        if box.pending or read is not None:  # (a post does not wait: it is not a round trip)
            sent.append("outbox")
        return real_send(box, raw, read)  # type: ignore[arg-type]

    monkeypatch.setattr(Outbox, "send", send)
    event.listen(engine, "before_cursor_execute", count)
    try:
        run()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(sent)


def test_a_small_trace_costs_a_few_round_trips(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: each statement is a round trip on PostgreSQL; a 20-span trace took ~25 (six lookups that
    all said "not there", a read per trace for the marks, three updates), then 13 (one probe, inserts, a
    roll-up read and one update, each its own wait). Now the writes that need no answer wait in the outbox
    and go with the next read, and a new run's roll-up is summed from the rows it inserts: a trace is one
    probe (2.7 measured, with each transaction's own: the writers' turn, the change log and the last
    trace's writes). The bound holds at one trace per transaction (1 + 3); a wait per statement fails it."""
    traces = 30
    path = otlp_file(tmp_path / "t.jsonl", traces * 20, 20)
    result: list[ImportResult] = []
    sent = _round_trips(store, lambda: result.append(import_files(store, [path], helper=False)), monkeypatch)
    assert result[0].report.spans_written == traces * 20 and result[0].report.traces == traces
    # SQLite (in-process, no round trips) also sends each change-log row and a PRAGMA per transaction
    bound = 4 if store.is_postgres else 18
    assert sent / traces <= bound, f"{sent / traces:.1f} round trips per trace"


def _import_into(store: Store, path: Path, results: list[ImportResult]) -> None:
    results.append(import_files(store, [path], helper=False))


@pytest.mark.postgres_only  # SQLite has no round trips to save
def test_traces_in_one_transaction_wait_for_no_answer_on_postgresql(store: Store, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: on PostgreSQL a trace asked where it goes (its probe) and waited for the answer, which came
    after the server had inserted the trace before it: ~0.9 ms of waiting a trace. Now a transaction asks
    for its traces together (`lookahead`) and each trace's writes are posted without waiting: an import of
    30 traces in one transaction waits for the server as often as an import of one (the stale check, the
    writers' turn, the probes, the change log, the marks, the audit record), plus one more batch of probes."""
    monkeypatch.setattr(importer, "IMPORT_SLICE_S", 60.0)  # all 30 traces in one transaction
    counts = {}
    for traces, first in ((1, 1000), (30, 0)):
        path = otlp_file(tmp_path / f"t{traces}.jsonl", traces * 20, 20, first)
        result: list[ImportResult] = []
        counts[traces] = _round_trips(store, partial(_import_into, store, path, result), monkeypatch)
        assert result[0].report.spans_written == traces * 20 and result[0].report.traces == traces
    assert counts[30] - counts[1] <= 1, f"{counts[30]} round trips for 30 traces, {counts[1]} for one"
