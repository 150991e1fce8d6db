"""Turning one OTLP/HTTP request body into an `ExportTraceServiceRequest`, or one clear refusal.

The receiver accepts what the OTLP/HTTP spec allows and what exporters really
send: protobuf or JSON, optionally gzip-compressed; ids in hex (the spec) or
base64 (many exporters). Everything is bounded before it is parsed: the
compressed and the decompressed size (a gzip bomb stops at the limit), and JSON
nesting (Python's parser would otherwise recurse until it fails).
Over HTTP, aiohttp inflates gzip bodies itself (within the body limit); `decode_body`
inflates them when given raw bytes with their Content-Encoding.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.errors import InvalidInput
from agentdesk.store.ingest.decode import RESOURCE_SPANS_KEYS, not_otlp, spans_from_json, spans_from_proto
from agentdesk.store.ingest.logs import RESOURCE_LOGS_KEYS, LogBatch, logs_from_json, logs_from_proto
from agentdesk.store.ingest.prepare import prepare_all
from agentdesk.store.ingest.spans import OtelSpan
from agentdesk.store.ingest.values import FieldError, hex_id
from agentdesk.store.text.jsonsafe import lone_surrogate_in

JSON_TYPES = frozenset({"application/json"})
PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})
ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})


class BodyRefused(ValueError):
    """The request cannot be taken as it is; `status` is the HTTP answer, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type[BodyRefused], tuple[int, str]]:  # it crosses from the decoding process
        return (BodyRefused, (self.status, str(self)))


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_media(content_type: str | None, content_encoding: str | None) -> None:
    """Refuse (415) before reading a body we could not use anyway."""
    kind = media_type(content_type)
    if kind not in JSON_TYPES | PROTOBUF_TYPES:
        raise BodyRefused(415, f"Content-Type {kind or '(none)'} is not accepted; send application/x-protobuf "
                               "or application/json.")
    encoding = (content_encoding or "").strip().lower()
    if encoding not in ENCODINGS:
        raise BodyRefused(415, f"Content-Encoding {encoding} is not accepted; send gzip, deflate or no "
                               "compression.")


def decode_body(body: bytes, content_type: str | None, content_encoding: str | None,
                limit: int) -> ExportTraceServiceRequest:
    check_media(content_type, content_encoding)
    if (content_encoding or "").strip().lower() in ("gzip", "x-gzip", "deflate"):
        body = gunzip(body, limit)
    if media_type(content_type) in PROTOBUF_TYPES:
        return parse_protobuf(body)
    return parse_json(body)


def gunzip(body: bytes, limit: int) -> bytes:
    """Decompress every gzip (or zlib) member, refusing (413) as soon as the output would pass `limit`."""
    out = bytearray()
    data = body
    while data:
        inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # gzip or zlib header, detected
        try:
            out += inflater.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise BodyRefused(400, f"The body is not valid gzip: {exc}.") from None
        if len(out) > limit:
            raise BodyRefused(413, f"The body decompresses to more than {limit:,} bytes, the limit.")
        if not inflater.eof:
            raise BodyRefused(400, "The gzip body is truncated.")
        data = inflater.unused_data
    return bytes(out)


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise BodyRefused(400, f"The body is not a protobuf ExportTraceServiceRequest: {exc}.") from None


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        doc = json.loads(body)
    except RecursionError:
        raise BodyRefused(400, "The JSON body is nested too deeply to be an OTLP request.") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BodyRefused(400, f"The body is not valid JSON: {exc}.") from None
    if not isinstance(doc, dict):
        raise BodyRefused(400, "The JSON body must be an object with resourceSpans.")
    try:
        normalise_ids(doc)
        return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (FieldError, TypeError, AttributeError) as exc:
        raise BodyRefused(400, f"The JSON body is not an OTLP trace request: {exc}.") from None
    except (json_format.ParseError, RecursionError) as exc:
        raise BodyRefused(400, f"The JSON body is not an OTLP trace request: {exc}.") from None


def normalise_ids(doc: dict[str, Any]) -> None:
    """OTLP/JSON writes ids in hex, proto3 JSON parsing wants base64: rewrite them (hex or base64 in)."""
    for r, resource_spans in enumerate(_list(doc, "resourceSpans")):
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans")):
            for n, span in enumerate(_list(scope_spans, "spans")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                _fix(span, "traceId", 16, where)
                _fix(span, "spanId", 8, where)
                _fix(span, "parentSpanId", 8, where, optional=True)
                for k, link in enumerate(_list(span, "links")):
                    _fix(link, "traceId", 16, f"{where}.links[{k}]")
                    _fix(link, "spanId", 8, f"{where}.links[{k}]")


def _list(parent: Any, key: str) -> list[Any]:
    if not isinstance(parent, dict):
        raise FieldError(f"expected an object holding {key}")
    value = parent.get(key) or []
    if not isinstance(value, list):
        raise FieldError(f"{key} must be a list")
    return value


def _fix(holder: dict[str, Any], key: str, size: int, where: str, *, optional: bool = False) -> None:
    if key not in holder:
        return
    try:
        value = hex_id(holder[key], size, key, optional=optional)
    except FieldError as exc:
        raise FieldError(f"{where}: {exc}") from None
    if value is None:
        del holder[key]
    else:
        holder[key] = base64.b64encode(bytes.fromhex(value)).decode()


def json_document(body: bytes) -> dict[str, Any]:
    """An OTLP/JSON body parsed to dicts, or a 400 saying why it is none."""
    try:
        doc = json.loads(body)
    except RecursionError:
        raise BodyRefused(400, "The JSON body is nested too deeply to be an OTLP request.") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BodyRefused(400, f"The body is not valid JSON: {exc}.") from None
    if not isinstance(doc, dict):
        raise BodyRefused(400, "The JSON body must be an object with resourceSpans.")
    if (bad := lone_surrogate_in(doc)) is not None:
        raise BodyRefused(400, f"The JSON body holds a lone UTF-16 surrogate escape, which is no character ({bad}).")
    return doc


def decode_spans(body: bytes, content_type: str | None, content_encoding: str | None,
                 limit: int) -> list[OtelSpan]:
    """A request's spans, decoded by the same code as `agentdesk import` (`decode.py`): JSON is walked as
    dicts (camelCase or snake_case fields and AnyValues, hex or base64 ids, pre-1.0
    `instrumentationLibrarySpans`), protobuf parsed by opentelemetry-proto. An invalid span is a 400."""
    check_media(content_type, content_encoding)
    if (content_encoding or "").strip().lower() in ("gzip", "x-gzip", "deflate"):
        body = gunzip(body, limit)
    try:
        if media_type(content_type) in PROTOBUF_TYPES:
            return spans_from_proto(parse_protobuf(body).resource_spans, "request")
        doc = json_document(body)
        if doc and not any(key in doc for key in RESOURCE_SPANS_KEYS):
            raise BodyRefused(400, f"The JSON body is {not_otlp(doc, 'resourceSpans')}.")
        return spans_from_json(doc, "request")
    except InvalidInput as exc:
        raise BodyRefused(400, str(exc)) from None


def decode_prepared(body: bytes, content_type: str | None, content_encoding: str | None,
                    limit: int, *, pack: bool = False) -> tuple[list[tuple[Any, ...]], int]:
    """Decode a request and map its spans (`prepare`): all the work that needs no store, so the
    receiver does it in its decoding process while the writer writes. An invalid span is a 400.
    `pack`: deflate the attributes ahead too (a SQLite store; `deflate.pack_head`)."""
    spans = decode_spans(body, content_type, content_encoding, limit)
    return [tuple(p) for p in prepare_all(spans, pack=pack)], len(spans)


def decode_logs(body: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> LogBatch:
    """A `/v1/logs` request's records (ExportLogsServiceRequest, JSON or protobuf) as events for their spans."""
    check_media(content_type, content_encoding)
    if (content_encoding or "").strip().lower() in ("gzip", "x-gzip", "deflate"):
        body = gunzip(body, limit)
    batch = LogBatch()
    try:
        if media_type(content_type) in PROTOBUF_TYPES:
            try:
                request = ExportLogsServiceRequest.FromString(body)
            except (DecodeError, RecursionError, ValueError) as exc:
                raise BodyRefused(400, f"The body is not a protobuf ExportLogsServiceRequest: {exc}.") from None
            batch.extend(logs_from_proto(request.resource_logs, "request"))
            return batch
        doc = json_document(body)
        if doc and not any(key in doc for key in RESOURCE_LOGS_KEYS):
            raise BodyRefused(400, f"The JSON body is {not_otlp(doc, 'resourceLogs')}.")
        batch.extend(logs_from_json(doc, "request"))
        return batch
    except InvalidInput as exc:
        raise BodyRefused(400, str(exc)) from None
