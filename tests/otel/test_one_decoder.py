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
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.ingest.importer import import_files
from agentdesk.store.persistence.database import open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt
from tests.receiver.conftest import post

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
            out[t] = sorted(conn.execute(f'SELECT {", ".join(columns)} FROM "{t}"').fetchall(), key=repr)
        return out
    finally:
        conn.close()


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
    """One request, or several with parents first. Not yet equal, so not drawn (docs/otel.md, "Not yet"): a trace
    whose agent spans arrive after spans they enclose (children first, or a root that is no agent)."""
    doc, tree = case
    if any(parent is None and kind != "agent" for _, parent, kind in tree):
        parts = 1
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
