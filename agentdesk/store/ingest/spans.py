"""The one shape every OTLP input is decoded to before it is mapped: a plain, validated span.

JSON (hex or base64 ids, int64 as strings or numbers, enums as ints or names) and
protobuf inputs both become `OtelSpan`, so the mapping onto agentdesk's model and
the bulk writer are written once and cannot disagree between formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdesk.store.errors import InvalidInput


class BadRecord(InvalidInput):
    """One record of an OTLP input cannot be read; the message names where it is."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem

    def __reduce__(self) -> tuple[type[BadRecord], tuple[str, str]]:  # it may cross from a helper process
        return (BadRecord, (self.where, self.problem))


class NotOtlp(BadRecord):
    """The input holds no OTLP at all (`{"foo": 1}`, ConsoleSpanExporter output): one sentence says what it is."""

    def __reduce__(self) -> tuple[type[NotOtlp], tuple[str, str]]:
        return (NotOtlp, (self.where, self.problem))


@dataclass(slots=True)
class OtelSpan:
    trace_id: str
    """32 lower-case hex digits."""
    span_id: str
    """16 lower-case hex digits."""
    parent_id: str | None
    name: str
    kind: int
    """OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer."""
    start_ns: int
    end_ns: int
    """0 while the span is still open."""
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    status_code: int = 0
    """0 unset, 1 ok, 2 error."""
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""

    @property
    def row_id(self) -> str:
        return span_row_id(self.trace_id, self.span_id)


def span_row_id(trace_id: str, span_id: str) -> str:
    """agentdesk's span id for an OTel span: derived, so re-imports and late parents find it."""
    return f"o{trace_id}{span_id}"


def run_row_id(trace_id: str) -> str:
    return f"otr_{trace_id}"


def split_span_row_id(row_id: str) -> tuple[str, str] | None:
    if len(row_id) == 49 and row_id.startswith("o"):
        return row_id[1:33], row_id[33:]
    return None
