"""The writer drains durable requests: merged bursts, entries done in order, the bad one set aside, retries."""

from __future__ import annotations

import json
import threading
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.ingest import ingest_request
from agentdesk.store.ingest.receiver_decode import parse_json
from agentdesk.store.ingest.receiver_writer import Entry, IngestWriter, span_count
from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.store.server.conftest import document, span_json
from tests.waiting import wait_until


def request(trace: str, spans: int) -> ExportTraceServiceRequest:
    doc = document(*[span_json(trace, f"{n + 1:016x}", name=f"s{n}") for n in range(spans)])
    return parse_json(json.dumps(doc).encode())


def entry(payload: ExportTraceServiceRequest, done: list[str], name: str) -> Entry:
    return Entry(payload, span_count(payload), None, lambda: done.append(name))


def test_a_burst_is_merged_and_a_bad_entry_is_set_aside_alone(store: Store) -> None:
    hold = threading.Event()
    calls: list[int] = []
    rejected: list[tuple[int, BaseException]] = []

    def held_ingest(s: Store, r: ExportTraceServiceRequest) -> Any:
        calls.append(span_count(r))
        hold.wait(30)
        return ingest_request(s, r)

    writer = IngestWriter(store, held_ingest, rejected=lambda e, exc: rejected.append((e.spans, exc))).start()
    done: list[str] = []
    writer.submit(entry(request("b1" * 16, 5), done, "b1"))
    wait_until(lambda: calls, what="the writer to take the first entry")
    broken = request("b2" * 16, 3)
    broken.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = 2**63  # absurd: the ingest refuses
    for name, payload in (("b3", request("b3" * 16, 4)), ("b2", broken), ("b4", request("b4" * 16, 2))):
        writer.submit(entry(payload, done, name))
    hold.set()
    assert writer.wait_idle(10)
    writer.stop()
    assert calls[:2] == [5, 9]  # the three waiting entries went in as one call, which the bad span failed
    assert done == ["b1", "b3", "b2", "b4"]  # in spool order, the refused one too (it is kept aside)
    assert [spans for spans, _ in rejected] == [3] and writer.rejected == 1
    source = NativeSource(store)
    assert len(source.span_table(run_row_id("b3" * 16))) == 4 and len(source.span_table(run_row_id("b4" * 16))) == 2


def test_an_unavailable_store_is_retried_and_stopping_leaves_the_rest_in_the_spool(store: Store) -> None:
    down = threading.Event()
    down.set()
    attempts: list[int] = []

    def flaky_ingest(s: Store, r: ExportTraceServiceRequest) -> Any:
        attempts.append(span_count(r))
        if down.is_set() and len(attempts) < 3:
            raise StoreUnavailable("the store is locked")
        return ingest_request(s, r)

    writer = IngestWriter(store, flaky_ingest, retry_s=0.01).start()
    done: list[str] = []
    writer.submit(entry(request("c1" * 16, 2), done, "c1"))
    assert writer.wait_idle(10) and done == ["c1"] and len(attempts) == 3
    assert len(NativeSource(store).span_table(run_row_id("c1" * 16))) == 2

    def never(s: Store, r: ExportTraceServiceRequest) -> Any:
        raise StoreUnavailable("the server is gone")

    stuck = IngestWriter(store, never, retry_s=0.01).start()
    stuck.submit(entry(request("c2" * 16, 2), done, "c2"))
    assert not stuck.wait_idle(0.2)
    stuck.stop(10)
    assert stuck.abandoned and done == ["c1"]  # never done: its spool record stays for the next start
