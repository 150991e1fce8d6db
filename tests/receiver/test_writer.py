"""The writer's admission: bounded in requests and in expected waiting time; merged bursts; errors to their sender."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentdesk.store.errors import InvalidInput
from agentdesk.store.ingest import ingest_request
from agentdesk.store.ingest.receiver_decode import parse_json
from agentdesk.store.ingest.receiver_writer import IngestWriter, QueueFull, span_count
from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.receiver.conftest import document, span_json
from tests.waiting import wait_until


def request(trace: str, spans: int) -> ExportTraceServiceRequest:
    doc = document(*[span_json(trace, f"{n + 1:016x}", name=f"s{n}") for n in range(spans)])
    return parse_json(json.dumps(doc).encode())


class Settled:
    def __init__(self) -> None:
        self.results: list[tuple[Any, BaseException | None]] = []
        self.event = threading.Event()

    def __call__(self, report: Any, error: BaseException | None) -> None:
        self.results.append((report, error))
        self.event.set()


def test_refuses_when_the_queued_work_would_wait_too_long(store: Store) -> None:
    hold = threading.Event()
    calls: list[int] = []
    now = [0.0]  # the writer's clock: a write "takes" what slow_ingest says, whatever the machine's speed

    def slow_ingest(s: Store, r: ExportTraceServiceRequest) -> Any:
        calls.append(span_count(r))
        if len(calls) == 1:
            now[0] += 0.5  # the first write teaches the writer about 200 spans/s
        else:
            hold.wait(30)
        return ingest_request(s, r)

    writer = IngestWriter(store, slow_ingest, max_queued=100, max_wait_s=4.0, clock=lambda: now[0]).start()
    try:
        first = Settled()
        writer.submit(request("a1" * 16, 100), 100, first)
        assert first.event.wait(10) and first.results[0][1] is None
        assert writer.spans_per_s is not None and writer.spans_per_s < 300
        assert writer.merge_limit() < 300  # a merged transaction is kept to about a second of writing
        writer.submit(request("a2" * 16, 10), 10, Settled())  # taken by the writer, which now holds
        wait_until(lambda: len(calls) >= 2, what="the writer to take the second request")
        writer.submit(request("a3" * 16, 500), 500, Settled())  # ~2.5 s of waiting work: still fine
        with pytest.raises(QueueFull, match="s of writing is already waiting"):
            writer.submit(request("a4" * 16, 500), 500, Settled())  # ~5 s > 4 s: refused, not queued
        assert writer.queued == 1
    finally:
        hold.set()
        writer.stop()
    source = NativeSource(store)
    assert [len(source.span_table(run_row_id(t * 16))) for t in ("a1", "a2", "a3")] == [100, 10, 500]
    assert source.projects() and all(p.name == "receiver-test" for p in source.projects())


def test_a_burst_is_merged_and_a_bad_request_only_fails_itself(store: Store) -> None:
    hold = threading.Event()
    calls: list[int] = []

    def held_ingest(s: Store, r: ExportTraceServiceRequest) -> Any:
        calls.append(span_count(r))
        hold.wait(30)
        return ingest_request(s, r)

    writer = IngestWriter(store, held_ingest, max_queued=10).start()
    good, bad, other = Settled(), Settled(), Settled()
    writer.submit(request("b1" * 16, 5), 5, Settled())
    wait_until(lambda: calls, what="the writer to take the first request")
    broken = request("b2" * 16, 3)
    broken.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = 2**63  # absurd: the ingest refuses
    writer.submit(request("b3" * 16, 4), 4, good)
    writer.submit(broken, 3, bad)
    writer.submit(request("b4" * 16, 2), 2, other)
    hold.set()
    assert good.event.wait(10) and bad.event.wait(10) and other.event.wait(10)
    writer.stop()
    assert calls[:2] == [5, 9]  # the three waiting requests went in as one call, which the bad span failed
    assert good.results[0][1] is None and other.results[0][1] is None
    assert isinstance(bad.results[0][1], InvalidInput)
    source = NativeSource(store)
    assert len(source.span_table(run_row_id("b3" * 16))) == 4 and len(source.span_table(run_row_id("b4" * 16))) == 2
