"""GenAI events over OTLP logs (`/v1/logs`, `resourceLogs` files) joined to their span, whichever comes first;
what is not OTLP refused in one sentence; a failed export writes nothing.

The shape is what `opentelemetry-instrumentation-openai-v2` sends with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only`: a `chat` span with no content, and one log
record per message (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.choice`) carrying the span's ids,
the content in the body. Built by hand: no network, no OpenAI client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.readback import sent_items
from agentdesk.store.ingest.spans import NotOtlp, span_row_id
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.schema import SpanRow
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt
from tests.store.server.conftest import post

ROOT = Path(__file__).resolve().parents[3]
TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def s(value: Any) -> dict[str, Any]:
    return {"stringValue": value} if isinstance(value, str) else {"intValue": str(value)}


def spans_doc() -> dict[str, Any]:
    span = {"traceId": TRACE, "spanId": SPAN, "name": "chat gpt-4o-mini", "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000002000000000",
            "attributes": [{"key": k, "value": s(v)} for k, v in {
                "gen_ai.operation.name": "chat", "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.usage.input_tokens": 21, "gen_ai.usage.output_tokens": 5}.items()]}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": s("bot")}]},
                               "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"},
                                               "spans": [span]}]}]}


def record(name: str, body: dict[str, Any], n: int, *, named_by_attribute: bool = False) -> dict[str, Any]:
    attrs = [{"key": "gen_ai.system", "value": s("openai")}]
    raw: dict[str, Any] = {"timeUnixNano": str(1_700_000_000_000_000_000 + n), "traceId": TRACE, "spanId": SPAN,
                           "severityNumber": 9, "attributes": attrs,
                           "body": {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in body.items()]}}}
    if named_by_attribute:  # SDKs before LogRecord.event_name
        attrs.append({"key": "event.name", "value": s(name)})
    else:
        raw["eventName"] = name
    return raw


def logs_doc(*, named_by_attribute: bool = False, stray: bool = False) -> dict[str, Any]:
    choice = {"index": s(0), "finish_reason": s("stop"), "message": {"kvlistValue": {"values": [
        {"key": "role", "value": s("assistant")}, {"key": "content", "value": s("Hello there!")}]}}}
    by_attr = named_by_attribute
    records = [record("gen_ai.system.message", {"content": s("You are terse.")}, 1, named_by_attribute=by_attr),
               record("gen_ai.user.message", {"content": s("Say hello")}, 2, named_by_attribute=by_attr),
               record("gen_ai.choice", choice, 3, named_by_attribute=by_attr)]
    if stray:
        records.append({"timeUnixNano": "1700000000000000009", "body": s("app started"), "severityText": "INFO"})
    return {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": s("bot")}]},
                              "scopeLogs": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"},
                                             "logRecords": records}]}]}


def the_span(store: Store) -> SpanRow:
    with store.reading() as session:
        row = session.get(SpanRow, span_row_id(TRACE, SPAN))
        assert row is not None
        session.expunge(row)
        return row


def assert_joined(store: Store) -> None:
    row = the_span(store)
    assert row.kind == "model" and (row.input_tokens, row.output_tokens) == (21, 5)
    assert row.input_text is not None and "You are terse." in row.input_text and "Say hello" in row.input_text
    assert row.output_text is not None and "Hello there!" in row.output_text
    assert [(i.role, i.content) for i in sent_items(row.id, row.attributes)] == [
        ("system", "You are terse."), ("user", "Say hello")]
    from agentdesk.store.persistence.schema import AgentRow, ContextItemRow
    with store.reading() as session:  # the agent's Context tab has the call's messages, in order
        items = [(i.role, i.content) for i in session.query(ContextItemRow).order_by(ContextItemRow.position)]
        assert items == [("system", "You are terse."), ("user", "Say hello"), ("assistant", "Hello there!")]
        assert all(a.context_revision >= 1 for a in session.query(AgentRow))
    events = json.loads(row.attributes)["otel.events"]
    assert [e["name"] for e in events] == ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"]


@pytest.mark.parametrize("logs_first", [True, False])
def test_event_only_messages_over_v1_logs_join_their_span_whichever_comes_first(tmp_path: Path,
                                                                                 logs_first: bool) -> None:
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = receiver.start()
    try:
        sends = [("logs", logs_doc(named_by_attribute=logs_first)), ("traces", spans_doc())]
        for path, doc in sends if logs_first else reversed(sends):
            assert post(f"http://{host}:{port}/v1/{path}", json.dumps(doc).encode()).status == 200
        # sent again: idempotent, nothing doubled
        assert post(f"http://{host}:{port}/v1/logs", json.dumps(logs_doc()).encode()).status == 200
        counters = receiver.stats.snapshot()
        assert (counters.spans, counters.log_records) == (1, 6)  # log records are not counted as spans
        refused = post(f"http://{host}:{port}/v1/logs", b'{"foo": 1}')
        assert refused.status == 400 and "keys foo; expected resourceLogs" in refused.json()["message"]
    finally:
        receiver.stop()
    assert_joined(store)
    store.close()


def test_protobuf_logs_over_http(tmp_path: Path) -> None:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    doc = logs_doc()
    for rl in doc["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for r in sl["logRecords"]:
                r["traceId"] = __import__("base64").b64encode(bytes.fromhex(TRACE)).decode()
                r["spanId"] = __import__("base64").b64encode(bytes.fromhex(SPAN)).decode()
    body = json_format.ParseDict(doc, ExportLogsServiceRequest(), ignore_unknown_fields=True).SerializeToString()
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = receiver.start()
    try:
        assert post(f"http://{host}:{port}/v1/logs", body, "application/x-protobuf").status == 200
        assert post(f"http://{host}:{port}/v1/traces", json.dumps(spans_doc()).encode()).status == 200
    finally:
        receiver.stop()
    assert_joined(store)
    store.close()


def test_import_of_a_log_file_and_a_trace_file(tmp_path: Path) -> None:
    (tmp_path / "logs.json").write_text(json.dumps(logs_doc(stray=True)))
    (tmp_path / "spans.json").write_text(json.dumps(spans_doc()))
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    result = import_files(store, [tmp_path / "logs.json", tmp_path / "spans.json"], helper=False)
    assert result.error is None
    assert (result.report.events_joined, result.report.logs_unplaced) == (3, 1)
    assert_joined(store)
    store.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "agentdesk.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_what_is_not_otlp_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    foo = tmp_path / "foo.json"
    foo.write_text('{"foo": 1}')
    console = tmp_path / "console.json"  # what ConsoleSpanExporter prints: one span object after another
    console.write_text(json.dumps({"name": "x", "context": {"trace_id": "0x1"}, "kind": "SpanKind.INTERNAL"},
                                  indent=4) + "\n" + json.dumps({"name": "y"}, indent=4) + "\n")
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    result = import_files(store, [foo], helper=False)
    assert isinstance(result.error, NotOtlp)
    store.close()
    done = cli("--store", str(tmp_path / "s.sqlite"), "import", "--quiet", str(foo))
    assert done.returncode == 2
    assert "a JSON object with keys foo; expected resourceSpans or resourceLogs" in done.stderr
    done = cli("--store", str(tmp_path / "s.sqlite"), "import", "--quiet", str(console))
    assert done.returncode == 2 and "keys name, context, kind; expected resourceSpans" in done.stderr
    exported = cli("--store", str(tmp_path / "s.sqlite"), "export", "nope")
    assert exported.returncode != 0 and exported.stdout == ""


def test_import_of_a_binary_log_file(tmp_path: Path) -> None:
    """A binary ExportLogsServiceRequest starts like a trace request (field 1): told apart by its first record."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    doc = logs_doc()
    for r in doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        r["traceId"] = base64.b64encode(bytes.fromhex(TRACE)).decode()
        r["spanId"] = base64.b64encode(bytes.fromhex(SPAN)).decode()
    (tmp_path / "logs.pb").write_bytes(
        json_format.ParseDict(doc, ExportLogsServiceRequest(), ignore_unknown_fields=True).SerializeToString())
    (tmp_path / "spans.json").write_text(json.dumps(spans_doc()))
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    result = import_files(store, [tmp_path / "spans.json", tmp_path / "logs.pb"], helper=False)
    assert result.error is None and result.report.events_joined == 3
    assert_joined(store)
    store.close()
