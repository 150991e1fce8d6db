"""One decoder: `agentdesk import` and the receiver read every OTLP/JSON shape alike and store the same rows.

OTLP/JSON is proto3 JSON, so field names may be camelCase (`stringValue`, `resourceSpans`) or the proto's own
(`string_value`, `resource_spans`: Phoenix's export); ids are hex (the spec) or base64 (many exporters); OTLP
before 1.0 named scopes `instrumentationLibrary`. A property test builds random small agent traces in random
shapes, sends each through a live receiver and through `import`, and compares the two stores row for row.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.ingest.importer import import_files
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.deflate import unpack
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt
from tests.store.server.conftest import post

TABLES = ("projects", "tasks", "sessions", "agents", "runs", "spans", "span_context_items", "context_items",
          "context_groups", "otel_resources", "otel_orphans")
SNAKE = {"resourceSpans": "resource_spans", "scopeSpans": "scope_spans", "traceId": "trace_id",
         "spanId": "span_id", "parentSpanId": "parent_span_id", "startTimeUnixNano": "start_time_unix_nano",
         "endTimeUnixNano": "end_time_unix_nano", "timeUnixNano": "time_unix_nano", "stringValue": "string_value",
         "intValue": "int_value", "doubleValue": "double_value", "boolValue": "bool_value",
         "arrayValue": "array_value", "kvlistValue": "kvlist_value"}
KINDS = ("agent", "model", "tool", "plain")


def rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of `TABLES`, without the `revision` counters (a trace sent in several requests is written
    several times: its run's revision and its agents' context revision count them) and agents' `created_at`
    (the first span of the write that created the agent: of the trace in one write, of a later request when
    split)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for t in TABLES:
            columns = [c[1] for c in conn.execute(f'PRAGMA table_info("{t}")') if c[1] != "revision"
                       and (t, c[1]) not in (("agents", "created_at"), ("agents", "context_revision"))]
            out[t] = sorted(as_text(conn.execute(f'SELECT {", ".join(columns)} FROM "{t}"')), key=repr)
        return out
    finally:
        conn.close()


def as_text(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with their compressed payloads as text: the stored bytes depend on where the text was deflated (the
    import's helper deflates a span's attributes ahead, `deflate.Prepacked`), the text does not."""
    return [tuple(unpack(value) for value in row) for row in rows]


def any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(x) for x in value]}}
    return {"stringValue": value}


def attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in values.items()]


def span_attributes(kind: str, n: int, extra: dict[str, Any]) -> dict[str, Any]:
    if kind == "agent":
        return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent{n % 3}", **extra}
    if kind == "model":
        return {"gen_ai.operation.name": "chat", "gen_ai.request.model": f"m{n % 2}",
                "gen_ai.usage.input_tokens": 10 + n, "gen_ai.usage.output_tokens": n,
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text",
                                                                                   "content": f"q{n}"}]}]),
                **extra}
    if kind == "tool":
        return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{n}",
                "gen_ai.tool.call.arguments": json.dumps({"n": n}), **extra}
    return extra


def rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {names.get(k, k): rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [rename(v, names) for v in value]
    return value


@st.composite
def traces(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str, str | None, str]]]:
    """A random OTLP/JSON document (one or two traces, up to 7 spans each) in a random field shape."""
    docs_spans: list[dict[str, Any]] = []
    tree: list[tuple[str, str | None, str]] = []
    b64 = draw(st.booleans())
    for t in range(draw(st.integers(1, 2))):
        trace = draw(st.binary(min_size=16, max_size=16).filter(lambda b: any(b)))
        count = draw(st.integers(1, 7))
        kinds = draw(st.lists(st.sampled_from(KINDS), min_size=count, max_size=count))
        parents = [None] + [draw(st.integers(0, n - 1)) for n in range(1, count)]
        extra = draw(st.dictionaries(st.sampled_from(["x.s", "x.i", "x.f", "x.b", "x.a"]),
                                     st.one_of(st.text(max_size=5), st.integers(-9, 9),
                                               st.floats(-2, 2, allow_nan=False), st.booleans(),
                                               st.lists(st.text(max_size=3), max_size=2)), max_size=3))
        for n, (kind, parent) in enumerate(zip(kinds, parents, strict=True)):
            span_id = bytes([t + 1, n + 1, 0, 0, 0, 0, 0, 7])
            ident = (lambda raw: base64.b64encode(raw).decode()) if b64 else (lambda raw: raw.hex())
            raw: dict[str, Any] = {
                "traceId": ident(trace), "spanId": ident(span_id), "name": f"{kind} {n}", "kind": 1,
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 1000),
                "endTimeUnixNano": str(1_700_000_001_000_000_000 - n * 1000),
                "attributes": attrs(span_attributes(kind, n, extra))}
            if parent is not None:
                raw["parentSpanId"] = ident(bytes([t + 1, parent + 1, 0, 0, 0, 0, 0, 7]))
            if draw(st.booleans()):
                raw["events"] = [{"timeUnixNano": str(1_700_000_000_500_000_000), "name": "note",
                                  "attributes": attrs({"x.i": n})}]
            docs_spans.append(raw)
            tree.append((f"{kind} {n}", None if parent is None else f"{kinds[parent]} {parent}", kind))
    scope_key, library_key = draw(st.sampled_from([("scopeSpans", "scope"),
                                                   ("instrumentationLibrarySpans", "instrumentationLibrary")]))
    doc = {"resourceSpans": [{"resource": {"attributes": attrs({"service.name": "prop"})},
                              scope_key: [{library_key: {"name": "p", "version": "1"}, "spans": docs_spans}]}]}
    if draw(st.booleans()):
        doc = rename(doc, SNAKE)
    return doc, tree


def split(doc: dict[str, Any], parts: int) -> list[dict[str, Any]]:
    """The document cut into `parts` requests, spans in their order (parents before children)."""
    rs_key = "resourceSpans" if "resourceSpans" in doc else "resource_spans"
    rs = doc[rs_key][0]
    scope_key = next(k for k in rs if k != "resource")
    scope = rs[scope_key][0]
    spans = scope["spans"]
    step = max(1, -(-len(spans) // parts))
    return [{rs_key: [{**rs, scope_key: [{**scope, "spans": spans[n:n + step]}]}]}
            for n in range(0, len(spans), step)]


def through_receiver(path: Path, *bodies: bytes) -> int:
    store = open_store(str(prebuilt(path)))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = receiver.start()
    try:
        return max(post(f"http://{host}:{port}/v1/traces", body).status for body in bodies)
    finally:
        receiver.stop()
        store.close()


def through_import(path: Path, file: Path) -> int:
    store = open_store(str(prebuilt(path)))
    try:
        result = import_files(store, [file], helper=False)
        assert result.error is None, result.error
        return result.report.spans_written
    finally:
        store.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.integers(1, 3))
def test_receive_and_import_store_the_same_rows(case: tuple[dict[str, Any], list[Any]], parts: int) -> None:
    """One request, or several with parents first (any order and batching: the test below)."""
    doc, tree = case
    body = json.dumps(doc).encode()
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        (here / "trace.json").write_bytes(body)
        bodies = [json.dumps(part).encode() for part in split(doc, parts)]
        assert through_receiver(here / "received.sqlite", *bodies) == 200
        assert through_import(here / "imported.sqlite", here / "trace.json") == len(tree)
        received, imported = rows(here / "received.sqlite"), rows(here / "imported.sqlite")
    assert len(received["spans"]) == len(tree)
    for table in TABLES:
        assert received[table] == imported[table], table


def test_snake_case_any_values_keep_every_attribute(tmp_path: Path) -> None:
    """Phoenix writes `string_value`/`int_value`: the importer used to null them (model spans became internal)."""
    span = {"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat gpt", "kind": "SPAN_KIND_CLIENT",
            "start_time_unix_nano": "1700000000000000000", "end_time_unix_nano": "1700000001000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"string_value": "chat"}},
                           {"key": "gen_ai.request.model", "value": {"string_value": "gpt-5"}},
                           {"key": "gen_ai.usage.input_tokens", "value": {"int_value": "12"}},
                           {"key": "flag", "value": {"bool_value": True}},
                           {"key": "list", "value": {"array_value": {"values": [{"double_value": 1.5}]}}}]}
    doc = {"resource_spans": [{"resource": {"attributes": [{"key": "service.name",
                                                             "value": {"string_value": "phoenix"}}]},
                               "scope_spans": [{"scope": {"name": "x"}, "spans": [span]}]}]}
    path = tmp_path / "phoenix.json"
    path.write_text(json.dumps(doc))
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    try:
        assert import_files(store, [path], helper=False).error is None
        from agentdesk.store.persistence.schema import ProjectRow, SpanRow
        with store.reading() as s:
            row = s.query(SpanRow).one()
            assert (row.kind, row.input_tokens) == ("model", 12)
            attributes = json.loads(row.attributes)
            assert attributes["flag"] is True and attributes["list"] == [1.5]
            assert [p.name for p in s.query(ProjectRow)] == ["phoenix"]
    finally:
        store.close()


def test_the_receiver_takes_pre_1_0_and_refuses_what_is_not_otlp(tmp_path: Path) -> None:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "old", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000"}
    old = {"resourceSpans": [{"instrumentationLibrarySpans": [{"instrumentationLibrary": {"name": "old"},
                                                                "spans": [span]}]}]}
    store = open_store(str(prebuilt(tmp_path / "s.sqlite")))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = receiver.start()
    try:
        url = f"http://{host}:{port}/v1/traces"
        assert post(url, json.dumps(old).encode()).status == 200
        refused = post(url, b'{"foo": 1}')
        assert refused.status == 400
        assert "a JSON object with keys foo; expected resourceSpans" in refused.json()["message"]
    finally:
        receiver.stop()
    from agentdesk.store.persistence.schema import SpanRow
    with store.reading() as s:
        assert [r.name for r in s.query(SpanRow)] == ["old"]
    store.close()


# -- children first: any order, any batching ------------------------------------------------------------------
# What a live exporter does to a trace: a BatchSpanProcessor exports a span when it ends (a child before its
# parent), cuts a trace across requests (a parent in a later one), and log records (GenAI events) come on their
# own requests, before or after their span. The receiver must end with the rows `import` writes for the file.

ORDER_TABLES = (*TABLES, "context_item_revisions", "approvals")
STAMPED = {("projects", "created_at"), ("tasks", "created_at"), ("sessions", "created_at")}
"""The time of the first span *written* of the container's first trace (docs/otel.md): not compared."""
POOL = ("Fix the build", "Run the tests", "Be careful.", "Summarise", "ok")
TRACE_ROOTS = ("agent", "agent", "plain")
NESTED = ("agent", "model", "model", "tool", "plain")


def ordered_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for t in ORDER_TABLES:
            columns = [c[1] for c in conn.execute(f'PRAGMA table_info("{t}")') if c[1] != "revision"
                       and (t, c[1]) not in {*STAMPED, ("agents", "created_at"), ("agents", "context_revision")}]
            out[t] = sorted(as_text(conn.execute(f'SELECT {", ".join(columns)} FROM "{t}"')), key=repr)
        return out
    finally:
        conn.close()


def message_attributes(style: str, n: int, inputs: list[str], answer: str) -> dict[str, Any]:
    """A model call's messages as GenAI (inline JSON), OpenInference (flattened) or none inline (event_only)."""
    if style == "genai":
        return {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": m}]}
                                                     for m in inputs]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                    {"type": "text", "content": answer}]}])}
    if style == "openinference":
        out: dict[str, Any] = {}
        for k, m in enumerate(inputs):
            out[f"llm.input_messages.{k}.message.role"] = "user"
            out[f"llm.input_messages.{k}.message.content"] = m
        out["llm.output_messages.0.message.role"] = "assistant"
        out["llm.output_messages.0.message.content"] = answer
        return out
    return {}


def event_records(trace: str, span: str, n: int, inputs: list[str], answer: str) -> list[dict[str, Any]]:
    """openai-v2 with `event_only`: one log record per message, tied to the span by its ids."""
    def record(name: str, body: dict[str, Any], k: int) -> dict[str, Any]:
        return {"timeUnixNano": str(1_700_000_000_000_000_000 + n * 1000 + k), "traceId": trace, "spanId": span,
                "eventName": name, "attributes": attrs({"gen_ai.system": "openai"}),
                "body": {"kvlistValue": {"values": [{"key": key, "value": value} for key, value in body.items()]}}}
    choice = {"index": {"intValue": "0"}, "message": {"kvlistValue": {"values": [
        {"key": "role", "value": {"stringValue": "assistant"}}, {"key": "content", "value": {"stringValue": answer}}]}}}
    return [*(record("gen_ai.user.message", {"content": {"stringValue": m}}, k) for k, m in enumerate(inputs)),
            record("gen_ai.choice", choice, len(inputs))]


def live_span_attributes(kind: str, n: int, style: str, draw: st.DrawFn) -> tuple[dict[str, Any], list[str], str]:
    oi = style == "openinference"
    if kind == "agent":
        name = f"agent{draw(st.integers(0, 2))}"
        return ({"openinference.span.kind": "AGENT", "agent.name": name} if oi else
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}), [], ""
    if kind == "model":
        inputs = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=3))
        answer = f"a{n % 3}"
        tokens = ({"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 10 + n,
                   "llm.token_count.completion": n} if oi else
                  {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                   "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 10 + n,
                   "gen_ai.usage.output_tokens": n})
        if draw(st.booleans()):
            tokens["llm.cost.total"] = 0.001 * n
        return {**tokens, **message_attributes(style, n, inputs, answer)}, inputs, answer
    if kind == "tool":
        return ({"openinference.span.kind": "TOOL", "tool.name": f"t{n}", "input.value": "{}"} if oi else
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{n}",
                 "gen_ai.tool.call.arguments": json.dumps({"n": n})}), [], ""
    return {}, [], ""


@st.composite
def live_traces(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Spans of one to three random agent traces (agents nested in agents, model and tool calls under them;
    GenAI inline, OpenInference, or GenAI event_only with the messages as log records), and those records."""
    spans: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 3))):
        trace = bytes([t + 1] * 4 + [7] * 12).hex()
        count = draw(st.integers(2, 9))
        kinds = [draw(st.sampled_from(TRACE_ROOTS))] + [draw(st.sampled_from(NESTED)) for _ in range(1, count)]
        parents = [None] + [draw(st.integers(0, n - 1)) for n in range(1, count)]
        conversation = draw(st.sampled_from([None, f"conv-{t}"]))
        on_root_only = draw(st.booleans())  # GenAI puts it on the agent span, which arrives last
        for n, (kind, parent) in enumerate(zip(kinds, parents, strict=True)):
            style = draw(st.sampled_from(["genai", "openinference", "event_only"]))
            values, inputs, answer = live_span_attributes(kind, n, style, draw)
            if conversation and (n == 0 or not on_root_only):
                values["gen_ai.conversation.id"] = conversation
            span_id = bytes([t + 1, n + 1, 0, 0, 0, 0, 0, 9]).hex()
            depth, up = 0, parent
            while up is not None:
                depth, up = depth + 1, parents[up]
            raw: dict[str, Any] = {
                "traceId": trace, "spanId": span_id, "name": f"{kind} {n}", "kind": 1,
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 1_000_000),
                "endTimeUnixNano": str(1_700_000_100_000_000_000 - depth * 1_000_000_000 - n),
                "attributes": attrs(values)}
            if parent is not None:
                raw["parentSpanId"] = bytes([t + 1, parent + 1, 0, 0, 0, 0, 0, 9]).hex()
            spans.append(raw)
            if kind == "model" and style == "event_only":
                records.extend(event_records(trace, span_id, n, inputs, answer))
    return spans, records


def spans_document(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": attrs({"service.name": "live"})},
                               "scopeSpans": [{"scope": {"name": "p", "version": "1"}, "spans": spans}]}]}


def logs_document(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceLogs": [{"resource": {"attributes": attrs({"service.name": "live"})},
                              "scopeLogs": [{"scope": {"name": "openai_v2"}, "logRecords": records}]}]}


def requests_of(draw: st.DrawFn, spans: list[dict[str, Any]],
                records: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    """The spans in a random order (children before parents too) cut into random requests, the log records in
    random requests placed anywhere among them."""
    order = draw(st.permutations(spans))
    requests: list[tuple[str, bytes]] = []
    start = 0
    while start < len(order):
        size = draw(st.integers(1, 4))
        requests.append(("traces", json.dumps(spans_document(list(order[start:start + size]))).encode()))
        start += size
    logs = list(draw(st.permutations(records)))
    while logs:
        size = draw(st.integers(1, 4))
        where = draw(st.integers(0, len(requests)))
        requests.insert(where, ("logs", json.dumps(logs_document(logs[:size])).encode()))
        logs = logs[size:]
    return requests


def receive_all(path: Path, requests: list[tuple[str, bytes]]) -> None:
    store = open_store(str(path))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = receiver.start()
    try:
        for signal, body in requests:
            answer = post(f"http://{host}:{port}/v1/{signal}", body)
            assert answer.status == 200, answer.body
    finally:
        receiver.stop()
        store.close()


def import_all(path: Path, folder: Path, spans: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    files = [folder / "trace.json"]
    files[0].write_text(json.dumps(spans_document(spans)))
    if records:
        files.append(folder / "logs.json")
        files[1].write_text(json.dumps(logs_document(records)))
    store = open_store(str(path))
    try:
        result = import_files(store, files, helper=False)
        assert result.error is None, result.error
    finally:
        store.close()


def assert_same_stores(received: dict[str, list[Any]], imported: dict[str, list[Any]]) -> None:
    """Equal, or the rows of the first table that differs, each side's own (short enough to read)."""
    for table in ORDER_TABLES:
        only_received = [r for r in received[table] if r not in imported[table]]
        only_imported = [r for r in imported[table] if r not in received[table]]
        assert received[table] == imported[table], "\n".join(
            [table, "received only:", *map(str, only_received), "imported only:", *map(str, only_imported)])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_traces(), st.data())
def test_receive_in_any_order_and_batching_stores_what_import_does(
        case: tuple[list[dict[str, Any]], list[dict[str, Any]]], data: st.DataObject) -> None:
    """Agents and their sub-agent typing, runs, spans, model calls, tokens, costs and messages: equal row for row,
    whatever order and batching the spans and their log records arrive in."""
    spans, records = case
    requests = requests_of(data.draw, spans, records)
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        receive_all(here / "received.sqlite", requests)
        import_all(here / "imported.sqlite", here, spans, records)
        received, imported = ordered_rows(here / "received.sqlite"), ordered_rows(here / "imported.sqlite")
    assert len(received["spans"]) == len(spans)
    assert_same_stores(received, imported)
