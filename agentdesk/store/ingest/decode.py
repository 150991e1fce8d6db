"""OTLP trace payloads (JSON dicts or opentelemetry-proto messages) to validated `OtelSpan`s.

JSON is walked as plain dicts (faster and more tolerant than `json_format`, which
wants base64 ids); protobuf uses the generated messages. Both accept camelCase
and snake_case field names, and the pre-1.0 `instrumentationLibrarySpans`.
A field of the wrong type raises `BadRecord` naming the record and the span; given a
`Skipped` tally instead, a span that cannot be mapped (no trace id, an end before its
start, …) is counted by reason and left out, and the rest of the record is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.spans import BadRecord, OtelSpan

RESOURCE_SPANS_KEYS = ("resourceSpans", "resource_spans")
SCOPE_SPANS_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")
"""`instrumentationLibrary*`: OTLP before 1.0 (still written by old SDKs and Collectors)."""
SCOPE_KEYS = ("scope", "instrumentationLibrary", "instrumentation_library")


ENDS_BEFORE_START = "with an end before its start"


class Skipped(Counter[str]):
    """Spans left out because they cannot be mapped, by reason ("without a traceId": 3)."""

    def describe(self) -> str:
        """ "3 spans skipped: 2 without a traceId, 1 with an end before its start" ("" when none)."""
        total = sum(self.values())
        if not total:
            return ""
        parts = ", ".join(f"{count:,} {reason}" for reason, count in self.most_common())
        return f"{total:,} span{'' if total == 1 else 's'} skipped: {parts}"


def not_otlp(doc: dict[str, Any], expected: str = "resourceSpans or resourceLogs") -> str:
    """What a JSON object that holds no OTLP is, in a few words: "a JSON object with keys foo, bar"."""
    keys = [str(k)[:40] for k in list(doc)[:6]]
    more = ", …" if len(doc) > 6 else ""
    shown = f"a JSON object with keys {', '.join(keys)}{more}" if keys else "an empty JSON object"
    return f"{shown}; expected {expected}"


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = d.get(key)
        if value is not None:
            return value
    return None


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    value = d.get(camel)
    return d.get(snake) if value is None else value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise v.FieldError(f"{what} must be a list")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise v.FieldError(f"{what} must be an object")
    return value


def spans_from_json(doc: Any, where: str, skipped: Skipped | None = None) -> list[OtelSpan]:
    """Every span of one TracesData / ExportTraceServiceRequest JSON document."""
    if not isinstance(doc, dict):
        raise BadRecord(where, "an OTLP trace record must be a JSON object with resourceSpans")
    out: list[OtelSpan] = []
    try:
        resource_spans = _list(_first(doc, RESOURCE_SPANS_KEYS), "resourceSpans")
    except v.FieldError as exc:
        raise BadRecord(where, str(exc)) from None
    for r, rs in enumerate(resource_spans):
        out.extend(resource_spans_from_json(rs, f"{where}, resourceSpans[{r}]", skipped))
    return out


def resource_spans_from_json(rs: Any, where: str, skipped: Skipped | None = None) -> list[OtelSpan]:
    out: list[OtelSpan] = []
    try:
        rs = _dict(rs, "a resourceSpans entry")
        resource = v.json_attributes(_dict(rs.get("resource"), "resource").get("attributes"))
        scopes = _list(_first(rs, SCOPE_SPANS_KEYS), "scopeSpans")
    except v.FieldError as exc:
        raise BadRecord(where, str(exc)) from None
    for s, ss in enumerate(scopes):
        here = f"{where}, scopeSpans[{s}]"
        try:
            ss = _dict(ss, "a scopeSpans entry")
            scope = _dict(_first(ss, SCOPE_KEYS), "scope")
            scope_name, scope_version = v.text(scope.get("name"), "scope name"), v.text(
                scope.get("version"), "scope version")
            spans = _list(ss.get("spans"), "spans")
        except v.FieldError as exc:
            raise BadRecord(here, str(exc)) from None
        for n, raw in enumerate(spans):
            try:
                span = span_from_json(raw)
            except v.FieldError as exc:
                if skipped is None:
                    raise BadRecord(f"{here}, spans[{n}]", str(exc)) from None
                skipped[exc.reason] += 1
                continue
            span.resource, span.scope_name, span.scope_version = resource, scope_name, scope_version
            out.append(span)
    return out


def span_from_json(raw: Any) -> OtelSpan:
    d = _dict(raw, "a span")
    trace_id = v.hex_id(_get(d, "traceId", "trace_id"), 16, "traceId")
    span_id = v.hex_id(_get(d, "spanId", "span_id"), 8, "spanId")
    assert trace_id is not None and span_id is not None
    start = v.time_ns(_get(d, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    end = v.time_ns(_get(d, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", optional=True)
    if end and end < start:
        raise v.FieldError(f"span {span_id} ends ({end}) before it starts ({start})", ENDS_BEFORE_START)
    status = _dict(d.get("status"), "status")
    events = []
    for e in _list(d.get("events"), "events"):
        e = _dict(e, "an event")
        events.append({"time_ns": v.time_ns(_get(e, "timeUnixNano", "time_unix_nano"), "event time",
                                            optional=True),
                       "name": v.text(e.get("name"), "event name"),
                       "attributes": v.json_attributes(e.get("attributes"))})
    links = []
    for link in _list(d.get("links"), "links"):
        link = _dict(link, "a link")
        links.append({"trace_id": v.hex_id(_get(link, "traceId", "trace_id"), 16, "link traceId"),
                      "span_id": v.hex_id(_get(link, "spanId", "span_id"), 8, "link spanId"),
                      "attributes": v.json_attributes(link.get("attributes"))})
    return OtelSpan(
        trace_id=trace_id, span_id=span_id,
        parent_id=v.hex_id(_get(d, "parentSpanId", "parent_span_id"), 8, "parentSpanId", optional=True),
        name=v.text(d.get("name"), "name"), kind=v.enum(d.get("kind"), v.SPAN_KINDS, "kind"),
        start_ns=start, end_ns=end, attributes=v.json_attributes(d.get("attributes")),
        events=events, links=links, status_code=v.enum(status.get("code"), v.STATUS_CODES, "status code"),
        status_message=v.text(status.get("message"), "status message"))


def spans_from_proto(resource_spans: Iterable[Any], where: str, skipped: Skipped | None = None) -> list[OtelSpan]:
    """Every span of opentelemetry-proto `ResourceSpans` messages."""
    out: list[OtelSpan] = []
    for r, rs in enumerate(resource_spans):
        resource = v.proto_attributes(rs.resource.attributes)
        for s, ss in enumerate(rs.scope_spans):
            for n, p in enumerate(ss.spans):
                try:
                    out.append(_span_from_proto(p, resource, ss.scope.name, ss.scope.version))
                except v.FieldError as exc:
                    if skipped is None:
                        raise BadRecord(f"{where}, resourceSpans[{r}], scopeSpans[{s}], spans[{n}]",
                                        str(exc)) from None
                    skipped[exc.reason] += 1
    return out


def _span_from_proto(p: Any, resource: dict[str, Any], scope_name: str, scope_version: str) -> OtelSpan:
    trace_id = v.hex_id(p.trace_id, 16, "traceId")
    span_id = v.hex_id(p.span_id, 8, "spanId")
    assert trace_id is not None and span_id is not None
    start = v.time_ns(p.start_time_unix_nano, "startTimeUnixNano")
    end = v.time_ns(p.end_time_unix_nano, "endTimeUnixNano", optional=True)
    if end and end < start:
        raise v.FieldError(f"span {span_id} ends ({end}) before it starts ({start})", ENDS_BEFORE_START)
    return OtelSpan(
        trace_id=trace_id, span_id=span_id,
        parent_id=v.hex_id(p.parent_span_id, 8, "parentSpanId", optional=True),
        name=p.name, kind=int(p.kind), start_ns=start, end_ns=end,
        attributes=v.proto_attributes(p.attributes),
        events=[{"time_ns": int(e.time_unix_nano), "name": e.name,
                 "attributes": v.proto_attributes(e.attributes)} for e in p.events],
        links=[{"trace_id": v.hex_id(link.trace_id, 16, "link traceId"),
                "span_id": v.hex_id(link.span_id, 8, "link spanId"),
                "attributes": v.proto_attributes(link.attributes)} for link in p.links],
        status_code=int(p.status.code), status_message=p.status.message,
        resource=resource, scope_name=scope_name, scope_version=scope_version)
