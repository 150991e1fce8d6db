"""OTLP log records (`/v1/logs`, `ResourceLogs` in a file) decoded to the span events they stand for.

Since the 2025 GenAI conventions, what a model was sent and answered travels as *events*: OTLP log
records with an event name (`gen_ai.client.inference.operation.details`, or the earlier per-message
`gen_ai.user.message` … `gen_ai.choice`), tied to their span by trace id + span id. A log record with
both ids becomes an event of that span (its attributes, and its body's fields when the body is a map;
any other body as `body`); `events.py` joins it to the span, whichever arrives first. A record without
a span cannot be placed and is counted (`LogBatch.unplaced`), never silently dropped.
JSON (camelCase or snake_case, hex or base64 ids) and protobuf decode to the same `OtelLog`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.spans import BadRecord

RESOURCE_LOGS_KEYS = ("resourceLogs", "resource_logs")
SCOPE_LOGS_KEYS = ("scopeLogs", "scope_logs", "instrumentationLibraryLogs", "instrumentation_library_logs")
RECORD_KEYS = ("logRecords", "log_records")
EVENT_NAME_KEY = "event.name"
"""Where events were named before `LogRecord.event_name` (OTLP 1.5)."""
SEVERITY_KEY = "otel.severity"


@dataclass(slots=True)
class OtelLog:
    trace_id: str | None
    span_id: str | None
    event: dict[str, Any]
    """As a span event: {"time_ns", "name", "attributes"} (the shape `OtelSpan.events` holds)."""


@dataclass(slots=True)
class LogBatch:
    logs: list[OtelLog] = field(default_factory=list)
    unplaced: int = 0
    """Records with no trace or span id: nothing to join them to."""

    def extend(self, logs: Iterable[OtelLog]) -> None:
        for log in logs:
            if log.trace_id and log.span_id:
                self.logs.append(log)
            else:
                self.unplaced += 1


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if d.get(key) is not None:
            return d[key]
    return None


def _event(name: str, time_ns: int, attributes: dict[str, Any], body: Any, severity: str) -> dict[str, Any]:
    attrs = dict(attributes)
    name = name or str(attrs.pop(EVENT_NAME_KEY, "") or "") or "log"
    attrs.pop(EVENT_NAME_KEY, None)
    if isinstance(body, dict):
        for key, value in body.items():
            attrs.setdefault(key, value)
    elif body is not None:
        attrs.setdefault("body", body)
    if severity:
        attrs[SEVERITY_KEY] = severity
    return {"time_ns": time_ns, "name": name, "attributes": attrs}


def logs_from_json(doc: Any, where: str) -> list[OtelLog]:
    """Every record of one LogsData / ExportLogsServiceRequest JSON document."""
    if not isinstance(doc, dict):
        raise BadRecord(where, "an OTLP log record must be a JSON object with resourceLogs")
    out: list[OtelLog] = []
    resource_logs = _first(doc, RESOURCE_LOGS_KEYS) or []
    if not isinstance(resource_logs, list):
        raise BadRecord(where, "resourceLogs must be a list")
    for r, rl in enumerate(resource_logs):
        out.extend(logs_from_resource_json(rl, f"{where}, resourceLogs[{r}]"))
    return out


def logs_from_resource_json(rl: Any, where: str) -> list[OtelLog]:
    out: list[OtelLog] = []
    if not isinstance(rl, dict):
        raise BadRecord(where, "a resourceLogs entry must be an object")
    scopes = _first(rl, SCOPE_LOGS_KEYS) or []
    if not isinstance(scopes, list):
        raise BadRecord(where, "scopeLogs must be a list")
    for s, sl in enumerate(scopes):
        records = _first(sl, RECORD_KEYS) if isinstance(sl, dict) else None
        if not isinstance(records or [], list):
            raise BadRecord(f"{where}, scopeLogs[{s}]", "logRecords must be a list")
        for n, raw in enumerate(records or []):
            try:
                out.append(_log_from_json(raw))
            except v.FieldError as exc:
                raise BadRecord(f"{where}, scopeLogs[{s}], logRecords[{n}]", str(exc)) from None
    return out


def _log_from_json(raw: Any) -> OtelLog:
    if not isinstance(raw, dict):
        raise v.FieldError("a log record must be an object")
    time = (v.time_ns(_first(raw, ("timeUnixNano", "time_unix_nano")), "log time", optional=True)
            or v.time_ns(_first(raw, ("observedTimeUnixNano", "observed_time_unix_nano")), "log time",
                         optional=True))
    body_raw = raw.get("body")
    body = v.json_any_value(body_raw) if body_raw is not None else None
    return OtelLog(
        v.hex_id(_first(raw, ("traceId", "trace_id")), 16, "traceId", optional=True),
        v.hex_id(_first(raw, ("spanId", "span_id")), 8, "spanId", optional=True),
        _event(v.text(_first(raw, ("eventName", "event_name")), "eventName"), time,
               v.json_attributes(raw.get("attributes")), body,
               v.text(_first(raw, ("severityText", "severity_text")), "severityText")))


def logs_from_proto(resource_logs: Iterable[Any], where: str) -> list[OtelLog]:
    """Every record of opentelemetry-proto `ResourceLogs` messages."""
    out: list[OtelLog] = []
    for r, rl in enumerate(resource_logs):
        for s, sl in enumerate(rl.scope_logs):
            for n, p in enumerate(sl.log_records):
                try:
                    body = v.proto_any_value(p.body) if p.HasField("body") else None
                    out.append(OtelLog(
                        v.hex_id(p.trace_id, 16, "traceId", optional=True),
                        v.hex_id(p.span_id, 8, "spanId", optional=True),
                        _event(getattr(p, "event_name", ""), int(p.time_unix_nano or p.observed_time_unix_nano),
                               v.proto_attributes(p.attributes), body, p.severity_text)))
                except v.FieldError as exc:
                    raise BadRecord(f"{where}, resourceLogs[{r}], scopeLogs[{s}], logRecords[{n}]",
                                    str(exc)) from None
    return out
