"""An OTLP import writes the same spans on SQLite and on PostgreSQL (issue 21: COPY for the bulk rows there),
and what it wrote is searchable at once (marked dirty by the statement triggers, scanned until indexed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from agentdesk.store.ingest.importer import import_files
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
