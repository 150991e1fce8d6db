"""The fast way through an OTLP/JSON document (`json_spans`) reads exactly what the walker reads, or leaves it to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentdesk.store.ingest import formats, json_spans
from agentdesk.store.ingest.decode import Skipped
from agentdesk.store.ingest.formats import ImportLimits, TraceFile
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.spans import OtelSpan
from agentdesk.store.persistence.database import open_store
from tests.store.ingest.traces import agent_trace, otlp_json


def read(path: Path, limits: ImportLimits, *, walker: bool,
         monkeypatch: pytest.MonkeyPatch) -> tuple[list[OtelSpan], Skipped, int, bool]:
    """Every span of the file as the importer gets it, what was skipped and cut, and whether `json_spans` read it."""
    with monkeypatch.context() as patch:
        if walker:
            patch.setattr(formats, "plan_file", lambda *_: None)
        trace_file = TraceFile(path, limits)
        spans: list[OtelSpan] = []
        skipped, cut, fast = Skipped(), 0, False
        try:
            for record in trace_file.records():
                if record.chunk is not None:
                    decoded, dropped, n = json_spans.decode_chunk(record.chunk)
                    spans += decoded
                    skipped.update(dropped)
                    cut += n
                else:
                    spans += record.spans
            fast = trace_file.decoded_later
        finally:
            trace_file.close()
        skipped.update(trace_file.skipped)
        return spans, skipped, cut + trace_file.strings_cut, fast


def both(path: Path, monkeypatch: pytest.MonkeyPatch, limits: ImportLimits | None = None) -> bool:
    """Read `path` both ways and check they agree; whether `json_spans` took it."""
    limits = limits or ImportLimits()
    fast = read(path, limits, walker=False, monkeypatch=monkeypatch)
    slow = read(path, limits, walker=True, monkeypatch=monkeypatch)
    assert fast[:3] == slow[:3]
    assert not slow[3]
    return fast[3]


HEX = "0123456789abcdef"
words = st.characters(exclude_characters="puU", exclude_categories=["Cs"])
"""Any text but the keys `json_spans` counts (each has a p or a u): a value spelling one is the walker's (below)."""
scalars = st.one_of(
    st.fixed_dictionaries({"stringValue": st.text(words, max_size=40)}),
    st.fixed_dictionaries({"intValue": st.integers(-2**63, 2**63 - 1).map(str)}),
    st.fixed_dictionaries({"doubleValue": st.floats(allow_nan=False, allow_infinity=False)}),
    st.fixed_dictionaries({"boolValue": st.booleans()}),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(inner, max_size=3)})}),
    st.fixed_dictionaries({"kvlistValue": st.fixed_dictionaries({"values": st.lists(
        st.fixed_dictionaries({"key": st.text(words, max_size=8), "value": inner}), max_size=3)})})), max_leaves=6)
attributes = st.lists(st.fixed_dictionaries({"key": st.text(words, min_size=1, max_size=12), "value": values}),
                      max_size=4)


@st.composite
def spans(draw: st.DrawFn) -> dict[str, Any]:
    start = draw(st.integers(0, 2**62))
    span: dict[str, Any] = {
        "traceId": draw(st.sampled_from(["ab" * 16, "cd" * 16, "", "xyz"])),
        "spanId": draw(st.text(HEX, min_size=16, max_size=16)),
        "name": draw(st.text(words, max_size=30)),
        "kind": draw(st.integers(0, 5)),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + draw(st.integers(-5, 10**9))),
        "attributes": draw(attributes),
    }
    if draw(st.booleans()):
        span["parentSpanId"] = draw(st.text(HEX, min_size=16, max_size=16))
    if draw(st.booleans()):
        span["events"] = [{"timeUnixNano": str(start), "name": draw(st.text(words, max_size=10)),
                           "attributes": draw(attributes)}]
    if draw(st.booleans()):
        span["status"] = {"code": draw(st.integers(0, 2)), "message": draw(st.text(words, max_size=20))}
    return span


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    resource_spans = []
    for _ in range(draw(st.integers(1, 3))):
        entry: dict[str, Any] = {}
        if draw(st.booleans()):
            entry["resource"] = {"attributes": draw(attributes)}
        scopes = []
        for _ in range(draw(st.integers(0, 3))):
            scope: dict[str, Any] = {}
            if draw(st.booleans()):
                scope["scope"] = {"name": draw(st.text(words, max_size=10)),
                                  "version": draw(st.text(words, max_size=5))}
            scope["spans"] = draw(st.lists(spans(), max_size=5))
            if draw(st.booleans()):
                scope["schemaUrl"] = "https://opentelemetry.io/schemas/1.24.0"
            scopes.append(scope)
        entry["scopeSpans"] = scopes
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents(), ascii_only=st.booleans(), indent=st.sampled_from([None, 1]),
       limit=st.sampled_from([json_spans.SHORTEST_LIMIT, 1_000_000]))
def test_it_reads_any_document_as_the_walker_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  doc: dict[str, Any], ascii_only: bool, indent: int | None,
                                                  limit: int) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc, ensure_ascii=ascii_only, indent=indent), encoding="utf-8")
    assert both(path, monkeypatch, ImportLimits(max_string_chars=limit))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(documents(), min_size=2, max_size=4), ending=st.sampled_from(["\n", "\r\n", "\n\n  \n"]),
       last=st.sampled_from(["", "\n", "\n \n"]))
def test_it_reads_json_lines_as_the_walker_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                docs: list[dict[str, Any]], ending: str, last: str) -> None:
    """A document per line (blank lines and CRLF between them too), as the OTel file exporter writes."""
    path = tmp_path / "spans.jsonl"
    path.write_bytes((ending.join(json.dumps(d) for d in docs) + last).encode())
    assert both(path, monkeypatch)
    trace_file = TraceFile(path)
    try:
        assert sum(1 for _ in trace_file.records()) >= 0 and trace_file.format == "jsonl"
    finally:
        trace_file.close()


def test_an_sdk_trace_is_read_the_fast_way_and_imported_as_the_walker_imports_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(otlp_json(agent_trace(calls=3) + agent_trace(service="other"))))
    assert both(path, monkeypatch)
    tables = {}
    for way in ("fast", "walker"):
        with monkeypatch.context() as patch:
            if way == "walker":
                patch.setattr(formats, "plan_file", lambda *_: None)
            store = open_store(str(tmp_path / f"{way}.sqlite"))
            try:
                result = import_files(store, [path], helper=way == "fast")
                assert result.error is None and result.spans_read == 18
                with store.reading() as s:
                    tables[way] = [s.execute(text(f"SELECT * FROM {table} ORDER BY 1")).all() for table in (
                        "spans", "agents", "context_items", "context_groups", "otel_resources")]
            finally:
                store.close()
    assert tables["fast"] == tables["walker"]
    assert all(tables["fast"])


def write(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "doc.json"
    path.write_bytes(body)
    return path


SPAN = '{"traceId": "%s", "spanId": "00000000000000%02x", "name": "s", "startTimeUnixNano": "1"}'


def doc(*, spans: str = SPAN % ("ab" * 16, 1), resource: str = '"resource": {"attributes": []}, ',
        scope: str = '"scope": {"name": "n"}, ', tail: str = "") -> bytes:
    return f'{{"resourceSpans": [{{{resource}"scopeSpans": [{{{scope}"spans": [{spans}]}}]}}]{tail}}}'.encode()


LEFT_TO_THE_WALKER = {
    "a repeated spans key": doc(spans=SPAN % ("ab" * 16, 1) + '], "spans": [' + SPAN % ("ab" * 16, 2)),
    "a repeated resource key": doc(resource='"resource": {"attributes": [{"key": "a", "value": {"intValue": 1}}]}, '
                                            '"resource": {"attributes": []}, '),
    "a resource after its scopes": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + (SPAN % ("ab" * 16, 1)).encode()
                                    + b']}], "resource": {"attributes": []}}]}'),
    "a scope after its spans": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + (SPAN % ("ab" * 16, 1)).encode()
                                + b'], "scope": {"name": "late"}}]}]}'),
    "a value spelling a key": doc(spans=SPAN.replace('"s"', '"scope"') % ("ab" * 16, 1)),
    "a span without a start": doc(spans='{"traceId": "%s", "spanId": "0000000000000001"}' % ("ab" * 16)),
    "NaN": doc(spans=SPAN.replace('"name": "s"', '"name": "s", "x": NaN') % ("ab" * 16, 1)),
    "two documents on one line": doc() + b" " + doc(spans=SPAN % ("cd" * 16, 2)),
    "a document over several lines beside another": doc().replace(b", ", b",\n") + b"\n" + doc(),
    "one line of JSON Lines left to the walker": doc() + b"\n" + doc(spans="").replace(b'"spans": []',
                                                                                     b'"spans": null'),
    "a byte-order mark": b"\xef\xbb\xbf" + doc(),
    "bytes that are not UTF-8": doc(spans=SPAN.replace('"s"', '"\xff"') % ("ab" * 16, 1)).replace(
        "\xff".encode(), b"\xff"),
    "a lone surrogate escape": doc(spans=SPAN.replace('"s"', '"\\ud800"') % ("ab" * 16, 1)),
    "snake_case keys": doc().replace(b"resourceSpans", b"resource_spans").replace(b"scopeSpans", b"scope_spans"),
    "pre-1.0 keys": doc(scope="").replace(b"scopeSpans", b"instrumentationLibrarySpans"),
    "log records too": doc(tail=', "resourceLogs": []'),
    "not OTLP": b'{"foo": 1}',
    "cut short": doc()[:-5],
    "spans that are null": doc(spans="").replace(b'"spans": []', b'"spans": null'),
}


@pytest.mark.parametrize("name", LEFT_TO_THE_WALKER)
def test_what_it_cannot_read_exactly_is_left_to_the_walker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           name: str) -> None:
    body = LEFT_TO_THE_WALKER[name]
    assert json_spans.plan_file(body, 1_000_000) is None
    path = write(tmp_path, body)
    fast: object = None
    walker: object = None
    try:
        fast = read(path, ImportLimits(), walker=False, monkeypatch=monkeypatch)[:3]
    except formats.BadRecord as exc:
        fast = str(exc)
    try:
        walker = read(path, ImportLimits(), walker=True, monkeypatch=monkeypatch)[:3]
    except formats.BadRecord as exc:
        walker = str(exc)
    assert fast == walker


def test_the_plain_form_of_those_documents_is_read_the_fast_way(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case above differs from a document this reads by the one thing the case names."""
    assert json_spans.plan(doc(), 1_000_000) is not None
    assert json_spans.plan(doc(), json_spans.SHORTEST_LIMIT - 1) is None  # the walker would cut its keys
    assert both(write(tmp_path, doc(spans=SPAN % ("ab" * 16, 1) + ", " + SPAN % ("ab" * 16, 2))), monkeypatch)


def test_a_number_msgspec_refuses_is_read_as_json_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = doc(spans=SPAN.replace('"name": "s"', '"name": "s", "attributes": [{"key": "big", "value": '
                                                  '{"doubleValue": 1e400}}]') % ("ab" * 16, 1))
    path = write(tmp_path, body)
    assert both(path, monkeypatch)
    (span,), _, _, _ = read(path, ImportLimits(), walker=False, monkeypatch=monkeypatch)
    assert span.attributes["big"] == float("inf")


def test_long_strings_are_cut_and_counted_as_the_walker_cuts_them(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    long, limit = "x" * 100, ImportLimits(max_string_chars=json_spans.SHORTEST_LIMIT)
    resource = '"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "LONG"}}]}, '
    body = doc(resource=resource.replace("LONG", long), spans=SPAN.replace('"s"', f'"{long}"') % ("ab" * 16, 1))
    path = write(tmp_path, body)
    assert both(path, monkeypatch, limit)
    (span,), _, cut, _ = read(path, limit, walker=False, monkeypatch=monkeypatch)
    assert cut == 2 and span.name == "x" * 64 + "… (truncated: 100 characters in all)"


def test_a_file_larger_than_the_bound_is_the_walkers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walker's memory is one span whatever the file's size; the fast way keeps a small object per span."""
    path = write(tmp_path, doc())
    assert both(path, monkeypatch)
    monkeypatch.setattr(json_spans, "MAX_BYTES", path.stat().st_size - 1)
    assert not both(path, monkeypatch)
