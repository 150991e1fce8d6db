"""Request bodies: what the receiver reads, and the one clear refusal for everything else."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.ingest.receiver_decode import BodyRefused, decode_body, gunzip

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
PARENT = "eee19b7ec3c1b173"
LIMIT = 1_000_000


def otlp_json(trace: str = TRACE, span: str = SPAN, parent: str | None = PARENT) -> dict[str, object]:
    raw: dict[str, object] = {"traceId": trace, "spanId": span, "name": "chat gpt-4.1", "kind": 3,
                              "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000001000000000,
                              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
                              "links": [{"traceId": trace, "spanId": PARENT}], "unknownField": {"x": 1}}
    if parent:
        raw["parentSpanId"] = parent
    return {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"scope": {"name": "s"}, "spans": [raw]}]}]}


def only_span(request: ExportTraceServiceRequest) -> object:
    return request.resource_spans[0].scope_spans[0].spans[0]


def test_json_with_hex_ids_becomes_the_same_request_as_protobuf() -> None:
    decoded = decode_body(json.dumps(otlp_json()).encode(), "application/json; charset=utf-8", None, LIMIT)
    span = only_span(decoded)
    assert span.trace_id.hex() == TRACE and span.span_id.hex() == SPAN  # type: ignore[attr-defined]
    assert span.parent_span_id.hex() == PARENT  # type: ignore[attr-defined]
    assert span.links[0].span_id.hex() == PARENT  # type: ignore[attr-defined]
    assert span.start_time_unix_nano == 1700000000000000000  # type: ignore[attr-defined]
    again = decode_body(decoded.SerializeToString(), "application/x-protobuf", None, LIMIT)
    assert again == decoded


def test_base64_ids_are_accepted_too() -> None:
    b64 = otlp_json(base64.b64encode(bytes.fromhex(TRACE)).decode(), base64.b64encode(bytes.fromhex(SPAN)).decode())
    span = only_span(decode_body(json.dumps(b64).encode(), "application/json", None, LIMIT))
    assert span.trace_id.hex() == TRACE  # type: ignore[attr-defined]


def test_gzip_bodies_are_decompressed() -> None:
    body = gzip.compress(json.dumps(otlp_json()).encode())
    assert only_span(decode_body(body, "application/json", "gzip", LIMIT)).name == "chat gpt-4.1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("body", "ctype", "encoding", "status", "words"), [
    (b"{not json", "application/json", None, 400, "not valid JSON"),
    (b"[1, 2]", "application/json", None, 400, "must be an object"),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", None, 400, "nested too deeply"),
    (b"\xff\xfe\x00garbage", "application/x-protobuf", None, 400, "not a protobuf"),
    (b"<xml/>", "text/xml", None, 415, "Content-Type text/xml"),
    (b"{}", None, None, 415, "(none)"),
    (b"{}", "application/json", "br", 415, "Content-Encoding br"),
    (b"\x1f\x8b\x08garbage", "application/json", "gzip", 400, "not valid gzip"),
    (gzip.compress(b"{}", mtime=0)[:-6], "application/json", "gzip", 400, "truncated"),
])
def test_bad_bodies_get_one_clear_refusal(body: bytes, ctype: str | None, encoding: str | None, status: int,
                                          words: str) -> None:
    with pytest.raises(BodyRefused) as caught:
        decode_body(body, ctype, encoding, LIMIT)
    assert caught.value.status == status and words in str(caught.value)


def test_bad_ids_name_the_span() -> None:
    doc = otlp_json(span="zz" * 8)
    with pytest.raises(BodyRefused) as caught:
        decode_body(json.dumps(doc).encode(), "application/json", None, LIMIT)
    assert caught.value.status == 400 and "spans[0]" in str(caught.value)


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)
    assert len(bomb) < 100_000
    with pytest.raises(BodyRefused) as caught:
        gunzip(bomb, LIMIT)
    assert caught.value.status == 413


def test_concatenated_gzip_members_are_all_read() -> None:
    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"cd"), LIMIT) == b"abcd"


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["application/json", "application/x-protobuf"]),
       st.sampled_from([None, "gzip"]))
def test_arbitrary_bytes_never_escape_as_anything_but_a_refusal(body: bytes, ctype: str,
                                                                encoding: str | None) -> None:
    try:
        result = decode_body(body, ctype, encoding, LIMIT)
    except BodyRefused as exc:
        assert exc.status in (400, 413)
    else:
        assert isinstance(result, ExportTraceServiceRequest)
