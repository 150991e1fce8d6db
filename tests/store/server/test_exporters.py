"""Real OpenTelemetry exporters against the receiver: across processes, and under overload."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from tests.store.server.conftest import Gate, Start

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def receiver_process(store_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`agentdesk receive` in its own process, on a free port it reports."""
    proc = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store_path), "receive",
                             "--port", "0", "--every", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env(), cwd=ROOT)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/v1/traces", first)
    assert found, first + (proc.stderr.read() if proc.stderr else "")
    yield proc, f"http://127.0.0.1:{found.group(1)}/v1/traces"
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def send(url: str, count: int, service: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(HERE / "send_spans.py"), url, str(count), service, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=ROOT)


def test_exporter_processes_protobuf_and_gzip_then_ctrl_c(store_path: Path,
                                                          receiver_process: tuple[subprocess.Popen[str], str]) -> None:
    proc, url = receiver_process
    senders = [send(url, 1500, "plain-agent"), send(url, 700, "gzip-agent", "gzip")]
    traces = []
    for sender in senders:
        out, err = sender.communicate(timeout=120)
        assert sender.returncode == 0, err
        traces.append(out.strip())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Stopped." in out and "2,200 spans" in out and "0 refused" in out
    assert "Traceback" not in err
    store = open_store(str(store_path), read_only=True)
    try:
        source = NativeSource(store)
        assert [len(source.span_table(run_row_id(t))) for t in traces] == [1500, 700]
        assert sorted(p.name for p in source.projects()) == ["gzip-agent", "plain-agent"]
    finally:
        store.close()


def recorded_spans(count: int, service: str) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(count - 1):
            with tracer.start_as_current_span("chat m1"):
                pass
    return list(memory.get_finished_spans())


def test_overload_is_refused_with_retry_after_and_the_exporter_retries_without_loss(
        store: Store, start_receiver: Start) -> None:
    gate = Gate()
    receiver, url = start_receiver(ingest=gate.ingest, spool_max_bytes=1, retry_after_s=1)
    batches = [recorded_spans(50, f"agent-{n}") for n in range(3)]
    results: dict[int, SpanExportResult] = {}

    def export(n: int) -> threading.Thread:
        exporter: SpanExporter = OTLPSpanExporter(endpoint=url, timeout=30)
        thread = threading.Thread(target=lambda: results.__setitem__(n, exporter.export(batches[n])))
        thread.start()
        return thread

    threads = [export(0)]
    assert gate.entered.wait(10)  # batch 0 is durable and answered; the writer is held writing it
    threads += [export(1), export(2)]  # over the spool's bound: 429 + Retry-After, the exporters retry
    while receiver.stats.snapshot().refused_requests < 2:
        threading.Event().wait(0.01)
    gate.release.set()
    for thread in threads:
        thread.join(60)
    assert receiver.wait_stored(30)
    assert results == {0: SpanExportResult.SUCCESS, 1: SpanExportResult.SUCCESS, 2: SpanExportResult.SUCCESS}
    counters = receiver.stats.snapshot()
    assert counters.refused_requests >= 1 and counters.spans == 150 and counters.requests == 3
    source = NativeSource(store)
    for batch in batches:
        trace = format(batch[0].context.trace_id, "032x")
        assert len(source.span_table(run_row_id(trace))) == 50
