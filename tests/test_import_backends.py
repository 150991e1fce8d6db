"""An OTLP import writes the same spans on SQLite and on PostgreSQL (issue 21: COPY for the bulk rows there),
and what it wrote is searchable at once (marked dirty by the statement triggers, scanned until indexed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from agentdesk.store.ingest.importer import import_files
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.search.run_search import search_run
from agentdesk.store.timeline.read import span_columns
from bench.load_bench import otlp_file


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
