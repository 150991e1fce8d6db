"""An OTLP import writes the same spans on SQLite and on PostgreSQL (issue 21: COPY for the bulk rows there),
and what it wrote is searchable at once (marked dirty by the statement triggers, scanned until indexed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import event, text

from agentdesk.store.ingest.importer import ImportResult, import_files
from agentdesk.store.ingest.outbox import Outbox
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.search.run_search import search_run
from agentdesk.store.timeline.read import span_columns


def otlp_file(path: Path, spans: int, per_trace: int) -> Path:
    """OTLP/JSON Lines of `spans` spans in traces of `per_trace`: an agent, then chat and execute_tool spans."""
    base = 1_790_000_000_000_000_000
    with path.open("w", encoding="utf-8") as out:
        for t in range(spans // per_trace):
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
        if box.queued or read is not None:
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


def test_orphans_waiting_and_placed_are_counted_as_stored(store: Store, tmp_path: Path) -> None:
    """A new run's waiting orphans are counted from what the write inserted, not read back: the count must
    still equal the stored rows, and the parent's later arrival places them all."""
    whole = otlp_file(tmp_path / "whole.jsonl", 40, 20)
    children, roots = tmp_path / "children.jsonl", tmp_path / "roots.jsonl"
    with children.open("w") as kids, roots.open("w") as tops:
        for line in whole.read_text().splitlines():
            doc = json.loads(line)
            spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
            for out, keep in ((kids, [s for s in spans if "parentSpanId" in s]),
                              (tops, [s for s in spans if "parentSpanId" not in s])):
                doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = keep
                out.write(json.dumps(doc) + "\n")
    first = import_files(store, [children], helper=False).report
    with store.engine.connect() as conn:
        waiting = conn.execute(text("SELECT count(*) FROM otel_orphans")).scalar_one()
    assert first.orphans_pending == waiting == 38 and first.placed == 0
    second = import_files(store, [roots], helper=False).report
    with store.engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM otel_orphans")).scalar_one()
        marked = conn.execute(text("SELECT count(*) FROM spans WHERE name LIKE '(orphan)%'")).scalar_one()
        statuses = {r[0] for r in conn.execute(text("SELECT status FROM runs"))}
    assert second.placed == 38 and second.orphans_pending == left == marked == 0
    assert statuses == {"done"}
    again = import_files(store, [whole], helper=False).report  # everything there: duplicates, nothing new
    assert again.spans_written == 0 and again.duplicates == 40 and again.orphans_pending == 0
