"""Writing OTLP payloads that arrive whole (a receiver request, a test): one transaction per call.

This is the API the OTLP receiver calls; the file importer uses the same
`writer` underneath but stages large files first (see importer.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentdesk.store.ids import new_id
from agentdesk.store.ingest.decode import spans_from_json, spans_from_proto
from agentdesk.store.ingest.events import attach
from agentdesk.store.ingest.logs import LogBatch
from agentdesk.store.ingest.prepare import Prepared, prepare_all
from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.spans import OtelSpan
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.writer import write_trace
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.schema import AgentRow, RunRow
from agentdesk.store.uow import UnitOfWork

RECEIVER_ACTOR = "otel-receiver"


def ingest_request(store: Store, request: Any, *, default_project: str | None = None,
                   actor: str = RECEIVER_ACTOR) -> IngestReport:
    """Write one `ExportTraceServiceRequest` (or `TracesData`) message; return what it did.

    Contract:
    - One call is one transaction: all of the request's spans become visible together, or
      none (an invalid span raises `BadRecord`/`InvalidInput`, exit code 2, and nothing is written).
    - Idempotent on (trace id, span id): spans already stored are counted in `duplicates` and
      left alone, except that a stored span still open (no end time) is completed when it
      arrives again ended (`completed`).
    - Batches may arrive in any order. A span whose parent has not arrived is written at
      once under its trace's root (or at the top when the root has not arrived either),
      marked with the attribute `agentdesk.orphan`, and counted in `orphans_pending`; the call
      that brings the parent moves it under the parent (`placed`).
    - Safe to call repeatedly from one writer thread; concurrent writers are serialised by
      the store's write lock (SQLite: BEGIN IMMEDIATE, busy timeout), and a lock held past
      the timeout raises `StoreUnavailable` with nothing written: answer 503 and let the
      exporter retry.
    - The audit log gets one record per call (`otel.ingest`); the change log one `span_batch`
      row per trace plus the hierarchy rows created; views refresh once per call.
    - Project: `openinference.project.name`, else the resource's `service.name`, else
      `default_project`, else "OpenTelemetry". Session: the trace's `gen_ai.conversation.id` /
      `session.id`, else the trace itself. Run: the trace.
    """
    return ingest_spans(store, spans_from_proto(request.resource_spans, "request"),
                        default_project=default_project, actor=actor)


def ingest_json(store: Store, document: Any, *, default_project: str | None = None,
                actor: str = RECEIVER_ACTOR) -> IngestReport:
    """`ingest_request` for an OTLP/JSON document already parsed to dicts (same contract)."""
    return ingest_spans(store, spans_from_json(document, "request"), default_project=default_project,
                        actor=actor)


def group_by_trace(spans: Iterable[Prepared]) -> dict[str, list[Prepared]]:
    traces: dict[str, list[Prepared]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return traces


def ingest_spans(store: Store, spans: Iterable[OtelSpan], *, default_project: str | None = None,
                 actor: str = RECEIVER_ACTOR, action: str = "otel.ingest") -> IngestReport:
    return ingest_prepared(store, prepare_all(list(spans)), default_project=default_project, actor=actor,
                           action=action)


def ingest_payload(store: Store, payload: Any, *, default_project: str | None = None,
                   actor: str = RECEIVER_ACTOR) -> IngestReport:
    """What the receiver's writer is handed: spans already prepared (as plain tuples, from the
    decoding process) or a whole `ExportTraceServiceRequest`. Same contract as `ingest_request`."""
    if isinstance(payload, LogBatch):
        return ingest_logs(store, payload, actor=actor)
    if isinstance(payload, list):
        return ingest_prepared(store, [p if isinstance(p, Prepared) else Prepared._make(p) for p in payload],
                               default_project=default_project, actor=actor)
    return ingest_request(store, payload, default_project=default_project, actor=actor)


def ingest_prepared(store: Store, spans: Iterable[Prepared], *, default_project: str | None = None,
                    actor: str = RECEIVER_ACTOR, action: str = "otel.ingest") -> IngestReport:
    """`ingest_spans` for spans already mapped by `prepare` (the receiver maps them while decoding)."""
    report = IngestReport()
    traces = group_by_trace(spans)
    if not traces:
        return report
    with UnitOfWork(store) as uow:
        for trace_id, trace_spans in traces.items():
            index = TraceIndex(trace_id)
            for span in trace_spans:
                index.add(span)
            report.add(write_trace(uow, index, [trace_spans], default_project))
        uow.audit(actor, action, "import", new_id("imp"),
                  {"spans": report.spans_written, "duplicates": report.duplicates, "traces": report.traces,
                   "completed": report.completed, "placed": report.placed, "retyped": report.retyped,
                   "runs": report.run_ids[:50]})
    return report


def ingest_logs(store: Store, batch: LogBatch, *, actor: str = RECEIVER_ACTOR) -> IngestReport:
    """Join log records to their spans in one transaction (`events.attach`): applied to spans stored, kept
    durably for spans still to come. The runs whose spans changed get a `span_batch` change row."""
    report = IngestReport(logs_unplaced=batch.unplaced)
    if not batch.logs and not batch.unplaced:
        return report
    with UnitOfWork(store) as uow:
        conn = uow.session.connection()
        touched: set[str] = set()
        login = store.login
        rebuild = conn.dialect.name != "postgresql" or login is None or login.owner  # `TraceWriter.may_rebuild`
        report.events_joined, report.events_waiting, runs = attach(conn, batch.logs, touched, rebuild=rebuild)
        for agent_id in sorted(touched):  # the Context tab of each agent whose calls' messages came now
            agent = uow.session.get(AgentRow, agent_id)
            if agent is not None:
                agent.context_revision += 1
                uow.session.flush()
                uow.record("context", "update", agent_id, {"agent": agent_id, "session": agent.session_id})
        for run_id in sorted(runs):
            run = uow.session.get(RunRow, run_id)
            if run is not None:
                uow.record("span_batch", "update", run_id, {"project": run.project_id, "task": run.task_id,
                                                            "session": run.session_id, "agent": run.agent_id,
                                                            "run": run_id})
        uow.audit(actor, "otel.logs", "import", new_id("imp"),
                  {"joined": report.events_joined, "waiting": report.events_waiting,
                   "unplaced": report.logs_unplaced, "runs": sorted(runs)[:50]})
    return report
