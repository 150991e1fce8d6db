"""Runs out as OTLP/JSON (one document) or OTLP JSON Lines, with GenAI attributes.

Imported runs go out as they came in (their ids, kinds, events, links, resources and
original attributes, with the real parent of a still-orphaned span), so export →
import reproduces the same read model. Runs agentdesk recorded itself get derived
ids (hashes of its ids) and GenAI attributes (`gen_ai.operation.name`, model, usage,
`gen_ai.input.messages` from what the model saw, tool name/arguments/result,
agent name, the session as `gen_ai.conversation.id`), plus `agentdesk.*` attributes
for what GenAI has no name for. Approvals become spans (or attributes of their gate
span) carrying their decision. Spans are written in chunks: memory stays bounded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, TextIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.ingest import names as n
from agentdesk.store.ingest import values as v
from agentdesk.store.ingest.marks_otel import decorate, strip_stored
from agentdesk.store.ingest.prices import ESTIMATED_KEY
from agentdesk.store.ingest.spans import split_span_row_id
from agentdesk.store.ingest.writer import EXTRA_KEYS, original_name
from agentdesk.store.notes.marks import Marks
from agentdesk.store.notes.reads import marks_by_target, readable
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.text.jsonsafe import bounded, loads
from agentdesk.store.text.times import ns_of_seconds, readable_ns, readable_seconds

FORMATS = ("otlp-json", "otlp-jsonl", "otlp-proto")
BINARY_FORMATS = frozenset({"otlp-proto"})
"""Written as bytes: a binary `ExportTraceServiceRequest` (what Phoenix, Jaeger and Tempo take over OTLP/HTTP)."""
CHUNK = 1000
SCOPE = {"name": "agentdesk", "version": "0.1.0"}
KIND_OPERATION = {"model": n.CHAT_OPERATION, "tool": n.TOOL_OPERATION, "agent": n.AGENT_OPERATION,
                  "sub_agent": n.AGENT_OPERATION}


def _hex(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def trace_hex(run_id: str) -> str:
    return run_id[4:] if run_id.startswith("otr_") and len(run_id) == 36 else _hex(run_id, 32)


def span_hex(row_id: str) -> str:
    parts = split_span_row_id(row_id)
    return parts[1] if parts else _hex(row_id, 16)


def _ns(seconds: float | None) -> str:
    """OTLP nanoseconds of a time agentdesk keeps in seconds (a native run's, an approval's); a stored time
    that is no time (±1e300, 9.2e18, text) is written as 0, unknown."""
    readable = readable_seconds(seconds)
    return "0" if readable is None else str(ns_of_seconds(readable))


def _span_ns(stored: int | None) -> str:
    """A span's stored time (integer nanoseconds) as OTLP writes it: the very integer that was imported;
    one that is no time (unreadable, or a float or a word written into the column) is 0, unknown."""
    return str(stored) if type(stored) is int and readable_ns(stored) is not None else "0"


def runs_of(store: Store, run_id: str | None, project: str | None) -> list[str]:
    with store.reading() as s:
        if run_id is not None:
            if s.get(sc.RunRow, run_id) is None:
                raise NotFound(f"There is no run with id {run_id}.")
            return [run_id]
        assert project is not None
        row = s.get(sc.ProjectRow, project) or s.execute(
            select(sc.ProjectRow).where(sc.ProjectRow.name == project)).scalars().first()
        if row is None:
            raise NotFound(f"There is no project named or with id {project}.")
        return list(s.execute(select(sc.RunRow.id).where(sc.RunRow.project_id == row.id)
                              .order_by(sc.RunRow.started_at)).scalars())


RUN_TITLE_KEY = "agentdesk.run.title"
"""On an exported run's root span: the run's title (import uses it instead of the root span's name)."""
SPOOL_BYTES = 16 * 1024 * 1024
"""An export is held in memory up to this size, then in a temporary file, until it is whole."""


def export(store: Store, out: TextIO, *, run_id: str | None = None, project: str | None = None,
           fmt: str = "otlp-json") -> int:
    """Write the run (or every run of the project) to `out`; returns the number of spans written."""
    if fmt not in FORMATS:
        raise InvalidInput(f"Unknown export format {fmt}; use one of {', '.join(FORMATS)}.")
    if (run_id is None) == (project is None):
        raise InvalidInput("Export either one run (RUN_ID) or one project (--project), not both or neither.")
    runs = list(runs_of(store, run_id, project))  # an unknown run or project fails before a byte is written
    if fmt in BINARY_FORMATS:
        binary: BinaryIO | None = getattr(out, "buffer", None)
        if binary is None:
            raise InvalidInput("otlp-proto is binary: write it to a file (-o FILE) or a pipe, not to a terminal.")
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b") as raw:
            total = _write_proto(store, raw, runs)  # type: ignore[arg-type]
            raw.seek(0)
            out.flush()
            shutil.copyfileobj(raw, binary)
            binary.flush()
        return total
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+", encoding="utf-8") as spool:
        total = _write(store, spool, runs, fmt)  # type: ignore[arg-type]
        spool.seek(0)
        shutil.copyfileobj(spool, out)  # only a whole document reaches `out`: a failure above emits nothing
    return total


def _write_proto(store: Store, out: BinaryIO, runs: list[str]) -> int:
    """One binary ExportTraceServiceRequest: each ResourceSpans chunk serialised as its field 1 (concatenated
    messages are one message), so the file streams and `agentdesk import` reads it back by its first byte."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from agentdesk.store.ingest.receiver_decode import normalise_ids

    total = 0
    for rid in runs:
        for resource_spans in _run_chunks(store, rid):
            total += sum(len(ss["spans"]) for ss in resource_spans["scopeSpans"])
            doc = {"resourceSpans": [resource_spans]}
            normalise_ids(doc)  # proto3 JSON wants base64 ids
            out.write(json_format.ParseDict(doc, ExportTraceServiceRequest()).SerializeToString())
    return total


def _write(store: Store, out: TextIO, runs: list[str], fmt: str) -> int:
    total, first = 0, True
    if fmt == "otlp-json":
        out.write('{"resourceSpans":[')
    for rid in runs:
        for resource_spans in _run_chunks(store, rid):
            total += sum(len(ss["spans"]) for ss in resource_spans["scopeSpans"])
            text = json.dumps(resource_spans, ensure_ascii=False, separators=(",", ":"))
            if fmt == "otlp-json":
                out.write(("" if first else ",\n") + text)
            else:
                out.write('{"resourceSpans":[' + text + "]}\n")
            first = False
    if fmt == "otlp-json":
        out.write("]}\n")
    return total


def _run_chunks(store: Store, run_id: str) -> Iterator[dict[str, Any]]:
    """The run's spans as ResourceSpans dicts of at most CHUNK spans, grouped by resource and scope."""
    with store.reading() as s:
        run = s.get(sc.RunRow, run_id)
        assert run is not None
        imported = run_id.startswith("otr_")
        marks = marks_by_target(s, run_id) if readable(store) else {}
        facts = _NativeFacts(s, run, marks) if not imported else None
        placed = _ImportedMarks(s, run_id, marks) if imported else None
        orphans = {span_id: parent for span_id, parent in s.execute(
            select(sc.OtelOrphanRow.span_id, sc.OtelOrphanRow.parent_id).where(sc.OtelOrphanRow.run_id == run_id))}
        resources: dict[str, dict[str, Any]] = {}
        rows = s.execute(select(sc.SpanRow).where(sc.SpanRow.run_id == run_id)
                         .order_by(sc.SpanRow.started_at, sc.SpanRow.id)).scalars()
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        if facts is not None:
            facts.plan_root(s)
            if facts.synthetic_root is not None:
                groups[("", SCOPE["name"], SCOPE["version"])] = [facts.synthetic_root]
        for count, row in enumerate(_prefetching(rows, facts), 1):
            attrs = _stored_json(row.attributes)
            if placed is not None:
                span, key = _imported_span(row, strip_stored(attrs), orphans), (
                    str(attrs.get("otel.resource", "")), str(attrs.get("otel.scope", "")),
                    str(attrs.get("otel.scope_version", "")))
                placed.decorate(span, row)
            else:
                assert facts is not None
                span, key = facts.span(row, attrs), ("", SCOPE["name"], SCOPE["version"])
            groups.setdefault(key, []).append(span)
            if count % CHUNK == 0:
                yield from _flush(s, groups, resources, facts)
                groups = {}
        if facts is not None:
            for extra in facts.approval_spans():
                groups.setdefault(("", SCOPE["name"], SCOPE["version"]), []).append(extra)
        yield from _flush(s, groups, resources, facts)


def _prefetching(rows: Iterable[sc.SpanRow], facts: _NativeFacts | None) -> Iterator[sc.SpanRow]:
    """The rows, CHUNK at a time, with the context each chunk's model calls were sent read in one statement
    (`_NativeFacts.prefetch_sent`): one statement per model call cost a server round trip each, and made an
    export on PostgreSQL twice as long as on SQLite at 100,000 spans."""
    batch: list[sc.SpanRow] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            if facts is not None:
                facts.prefetch_sent([r.id for r in batch if r.kind == "model"])
            yield from batch
            batch = []
    if facts is not None:
        facts.prefetch_sent([r.id for r in batch if r.kind == "model"])
    yield from batch


EXPORT_DEPTH = 256
"""Deeper attribute values (an agent's 50,000-level payload) are exported as the display's marker
rather than crashing `json.dumps`: an OTel tool could not show them anyway."""


def _stored_json(text: str | None) -> Any:
    """A stored attributes column as a value `json.dumps` can write: parsed without recursion, bounded."""
    return bounded(loads(text or "{}"), EXPORT_DEPTH)


def _flush(s: Session, groups: dict[tuple[str, str, str], list[dict[str, Any]]],
           resources: dict[str, dict[str, Any]], facts: _NativeFacts | None) -> Iterator[dict[str, Any]]:
    for (res_key, scope_name, scope_version), spans in groups.items():
        if facts is not None:
            attributes = facts.resource
        else:
            if res_key not in resources:
                row = s.get(sc.OtelResourceRow, res_key) if res_key else None
                resources[res_key] = _stored_json(row.attributes) if row else {}
            attributes = resources[res_key]
        scope: dict[str, Any] = {"name": scope_name}
        if scope_version:
            scope["version"] = scope_version
        yield {"resource": {"attributes": v.to_attributes(attributes)},
               "scopeSpans": [{"scope": scope, "spans": spans}]}


def _status(row: sc.SpanRow, message: str | None) -> dict[str, Any]:
    if row.status == "error":
        return {"code": 2, "message": message or row.error or ""}
    return {"code": 1} if row.status == "ok" else {}


def _imported_span(row: sc.SpanRow, attrs: dict[str, Any], orphans: dict[str, str]) -> dict[str, Any]:
    parts = split_span_row_id(row.id)
    assert parts is not None
    trace_id, span_id = parts
    parent = orphans.get(row.id, row.parent_span_id)
    span: dict[str, Any] = {
        "traceId": trace_id, "spanId": span_id, "name": original_name(row.name) if row.id in orphans else row.name,
        "kind": v.SPAN_KINDS.get(str(attrs.get("otel.kind")), 0),
        "startTimeUnixNano": _span_ns(row.started_at), "endTimeUnixNano": _span_ns(row.ended_at),
        "attributes": v.to_attributes({k: val for k, val in attrs.items() if k not in EXTRA_KEYS})}
    if parent:
        span["parentSpanId"] = span_hex(parent)
    if attrs.get("otel.events"):
        span["events"] = [{"timeUnixNano": str(e.get("time_ns", 0)), "name": e.get("name", ""),
                           "attributes": v.to_attributes(e.get("attributes") or {})} for e in attrs["otel.events"]]
    if attrs.get("otel.links"):
        span["links"] = [{"traceId": link.get("trace_id"), "spanId": link.get("span_id"),
                          "attributes": v.to_attributes(link.get("attributes") or {})} for link in attrs["otel.links"]]
    status = _status(row, attrs.get("otel.status_message"))
    if status:
        span["status"] = status
    return span


class _ImportedMarks:
    """Where an imported run's notes and labels go: a span's on it, an approval's on the span that carries it,
    the run's on its first root span."""

    def __init__(self, s: Session, run_id: str, marks: dict[tuple[str, str], Marks]) -> None:
        self.run_id, self.marks = run_id, marks
        self.approvals: dict[str, list[str]] = {}
        if any(kind == "approval" for kind, _ in marks):
            for a, span in s.execute(select(sc.ApprovalRow.id, sc.ApprovalRow.span_id)
                                     .where(sc.ApprovalRow.run_id == run_id)).all():
                if span:
                    self.approvals.setdefault(span, []).append(a)
        self.run_placed = False

    def decorate(self, span: dict[str, Any], row: sc.SpanRow) -> None:
        if not self.marks:
            return
        targets = [("span", row.id), *(("approval", a) for a in self.approvals.get(row.id, ()))]
        if not self.run_placed and "parentSpanId" not in span:
            targets.append(("run", self.run_id))
            self.run_placed = True
        decorate(span, [(kind, self.marks[(kind, i)]) for kind, i in targets if (kind, i) in self.marks])


class _NativeFacts:
    """What a native run's spans need from around them: agent, session, context, approvals."""

    def __init__(self, s: Session, run: sc.RunRow, marks: dict[tuple[str, str], Marks] | None = None) -> None:
        self.s, self.run = s, run
        self.marks = marks or {}
        self._prefetched: dict[str, list[dict[str, Any]]] = {}
        self.trace = trace_hex(run.id)
        agent = s.get(sc.AgentRow, run.agent_id)
        project = s.get(sc.ProjectRow, run.project_id)
        self.agent_name = agent.name if agent else "agent"
        self.model = agent.model if agent else ""
        self.resource = {"service.name": project.name if project else "agentdesk",
                         "agentdesk.project.id": run.project_id}
        self.approvals = list(s.execute(select(sc.ApprovalRow).where(sc.ApprovalRow.run_id == run.id)
                                        .order_by(sc.ApprovalRow.created_at)).scalars())
        self.by_span = {a.span_id: a for a in self.approvals if a.span_id}
        self.seen_spans: set[str] = set()
        self.root: str | None = None
        self.root_is_own = False
        self.synthetic_root: dict[str, Any] | None = None

    def plan_root(self, s: Session) -> None:
        """The run as one trace: its own top-level agent span is the root when it has exactly one; otherwise
        (spans recorded without one: a run of gate spans) a root `invoke_agent` span stands for the run, and
        every top-level span goes under it. Either root names the agent, its model and the run's title, so a
        re-import finds the same agent, model and title."""
        S = sc.SpanRow
        tops = s.execute(select(S.id, S.kind).where(S.run_id == self.run.id, S.parent_span_id.is_(None))
                         .limit(2)).all()
        if len(tops) == 1 and tops[0].kind == "agent":
            self.root, self.root_is_own = tops[0].id, True
            return
        self.root = "run:" + self.run.id
        self.root_is_own = False
        status = {"failed": {"code": 2, "message": self.run.error or ""}, "done": {"code": 1}}.get(self.run.status)
        span: dict[str, Any] = {
            "traceId": self.trace, "spanId": _hex(self.root, 16), "name": self.run.title, "kind": 1,
            "startTimeUnixNano": _ns(self.run.started_at), "endTimeUnixNano": _ns(self.run.ended_at),
            "attributes": v.to_attributes(self.root_attributes())}
        if status:
            span["status"] = status
        self._decorate(span, [("run", self.run.id)])
        self.synthetic_root = span

    def root_attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {n.OPERATION: n.AGENT_OPERATION, n.AGENT_NAME: self.agent_name,
                               n.CONVERSATION_ID: self.run.session_id, RUN_TITLE_KEY: self.run.title}
        if self.model:
            out[n.REQUEST_MODEL] = self.model
        return out

    def span(self, row: sc.SpanRow, attrs: dict[str, Any]) -> dict[str, Any]:
        self.seen_spans.add(row.id)
        out = dict(attrs)
        op = KIND_OPERATION.get(row.kind)
        if op:
            out[n.OPERATION] = op
        else:
            out["agentdesk.span.kind"] = row.kind
        if row.id == self.root:
            out.update(self.root_attributes())
        if row.kind == "model":
            out[n.REQUEST_MODEL] = self.model
            out[n.INPUT_TOKENS] = row.input_tokens
            out[n.OUTPUT_TOKENS] = row.output_tokens
            sent = self._sent(row.id)
            if sent:
                out[n.INPUT_MESSAGES] = json.dumps(sent, ensure_ascii=False)
        elif row.kind == "tool":
            out[n.TOOL_NAME] = row.name
            if row.input_text is not None:
                out[n.TOOL_CALL_ARGUMENTS] = row.input_text
            if row.output_text is not None:
                out[n.TOOL_CALL_RESULT] = row.output_text
        elif row.kind in ("agent", "sub_agent"):
            out[n.AGENT_NAME] = self.agent_name if row.kind == "agent" else row.name
        if row.cost_usd and not attrs.get(ESTIMATED_KEY):  # an estimate is made again on import, never sent
            out["agentdesk.cost_usd"] = row.cost_usd
        if row.status == "cancelled":
            out["agentdesk.span.status"] = "cancelled"
        if row.input_text is not None:
            out["agentdesk.input_text"] = row.input_text
        if row.output_text is not None:
            out["agentdesk.output_text"] = row.output_text
        approval = self.by_span.get(row.id)
        if approval is not None:
            out.update(_approval_attributes(approval))
        span: dict[str, Any] = {
            "traceId": self.trace, "spanId": span_hex(row.id), "name": row.name, "kind": 1,
            "startTimeUnixNano": _span_ns(row.started_at), "endTimeUnixNano": _span_ns(row.ended_at),
            "attributes": v.to_attributes(out)}
        if row.parent_span_id:
            span["parentSpanId"] = span_hex(row.parent_span_id)
        elif self.synthetic_root is not None:
            span["parentSpanId"] = self.synthetic_root["spanId"]
        status = _status(row, None)
        if status:
            span["status"] = status
        targets = [("span", row.id)] + ([("approval", approval.id)] if approval is not None else [])
        self._decorate(span, targets + ([("run", self.run.id)] if row.id == self.root and self.root_is_own else []))
        return span

    def _decorate(self, span: dict[str, Any], targets: list[tuple[str, str]]) -> None:
        found = [(kind, self.marks[(kind, i)]) for kind, i in targets if (kind, i) in self.marks]
        if found:
            decorate(span, found)

    def prefetch_sent(self, span_ids: list[str]) -> None:
        """What these model calls were sent, in one statement (`_sent` then answers from it)."""
        self._prefetched = {span_id: [] for span_id in span_ids}
        if not span_ids:
            return
        L, R, Item = sc.SpanContextRow, sc.ContextItemRevisionRow, sc.ContextItemRow
        rows = self.s.execute(select(L.span_id, Item.role, R.content).select_from(L)
                              .join(R, (R.item_id == L.item_id) & (R.revision == L.item_revision))
                              .join(Item, Item.id == L.item_id).where(L.span_id.in_(span_ids))
                              .order_by(L.span_id, L.position))
        for span_id, role, content in rows:
            self._prefetched[span_id].append(
                {"role": role or "user", "parts": [{"type": "text", "content": content}]})

    def _sent(self, span_id: str) -> list[dict[str, Any]]:
        found = self._prefetched.pop(span_id, None)
        if found is not None:
            return found
        L, R, Item = sc.SpanContextRow, sc.ContextItemRevisionRow, sc.ContextItemRow
        rows = self.s.execute(select(Item.role, Item.kind, R.content).select_from(L)
                              .join(R, (R.item_id == L.item_id) & (R.revision == L.item_revision))
                              .join(Item, Item.id == L.item_id).where(L.span_id == span_id)
                              .order_by(L.position)).all()
        return [{"role": role or "user", "parts": [{"type": "text", "content": content}]}
                for role, _kind, content in rows]

    def approval_spans(self) -> list[dict[str, Any]]:
        """Approvals not attached to an exported span, as spans of their own under the run's root."""
        out = []
        for a in self.approvals:
            if a.span_id in self.seen_spans:
                continue
            span: dict[str, Any] = {
                "traceId": self.trace, "spanId": _hex(a.id, 16), "name": f"approval {a.tool_name}", "kind": 1,
                "startTimeUnixNano": _ns(a.created_at), "endTimeUnixNano": _ns(a.decided_at or a.created_at),
                "attributes": v.to_attributes({"agentdesk.span.kind": "gate", **_approval_attributes(a)}),
                "status": {"code": 1}}
            if self.synthetic_root is not None:
                span["parentSpanId"] = self.synthetic_root["spanId"]
            elif self.root:
                span["parentSpanId"] = span_hex(self.root)
            self._decorate(span, [("approval", a.id)])
            out.append(span)
        return out


def _approval_attributes(a: sc.ApprovalRow) -> dict[str, Any]:
    attrs: dict[str, Any] = {"agentdesk.approval.id": a.id, "agentdesk.approval.status": a.status,
                             "agentdesk.approval.tool": a.tool_name, "agentdesk.approval.arguments": a.arguments,
                             n.TOOL_NAME: a.tool_name}
    for key, value in (("decided_by", a.decided_by), ("reason", a.reason),
                       ("edited_arguments", a.edited_arguments)):
        if value:
            attrs[f"agentdesk.approval.{key}"] = value
    return attrs
