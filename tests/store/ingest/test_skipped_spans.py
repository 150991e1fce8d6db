"""A span that cannot be placed in a trace is counted by reason and left out; the rest of the file is imported."""

from __future__ import annotations

import json
from pathlib import Path

from agentdesk.store.ingest.importer import import_files
from agentdesk.store.persistence.database import Store
from tests.store.ingest.traces import agent_trace, otlp_json, request_of

TRACE = "0123456789abcdef0123456789abcdef"


def span(name: str, **fields: object) -> dict[str, object]:
    return {"traceId": TRACE, "spanId": f"{abs(hash(name)) % 16**16:016x}", "name": name,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000", **fields}


def document(spans: list[dict[str, object]]) -> dict[str, object]:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}


def test_bad_spans_are_named_and_counted_and_the_good_ones_kept(tmp_path: Path, store: Store) -> None:
    no_trace = span("no trace")
    del no_trace["traceId"]
    spans = [span("kept"), no_trace, span("backwards", endTimeUnixNano="1600000000000000000"),
             span("zero trace", traceId="0" * 32), span("also kept")]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(document(spans)))
    result = import_files(store, [path])
    assert result.error is None and result.report.spans_written == 2
    assert dict(result.skipped) == {"without a traceId": 1, "with an end before its start": 1,
                                    "with an all-zero traceId": 1}
    assert result.skipped.describe() == ("3 spans skipped: 1 without a traceId, 1 with an end before its start, "
                                         "1 with an all-zero traceId")


def test_a_protobuf_file_counts_its_bad_spans_too(tmp_path: Path, store: Store) -> None:
    request = request_of(agent_trace(calls=1))
    spans = request.resource_spans[0].scope_spans[0].spans
    total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    spans[0].trace_id = b"short"
    path = tmp_path / "trace.pb"
    path.write_bytes(request.SerializeToString())
    result = import_files(store, [path])
    assert result.error is None
    assert dict(result.skipped) == {"with an invalid traceId": 1}
    assert result.report.spans_written + result.report.orphans_pending == total - 1


def test_a_clean_file_skips_nothing(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(otlp_json(agent_trace(calls=1))))
    result = import_files(store, [path])
    assert not result.skipped and result.skipped.describe() == ""
