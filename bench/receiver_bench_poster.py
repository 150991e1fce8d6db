"""One raw OTLP/HTTP client for bench/receiver_bench.py: SDK-shaped bodies posted at a controlled rate.

    python receiver_bench_poster.py SPANS RATE SERVICE ENDPOINT

The same agent trace as receiver_bench_sender.py (the real SDK makes the spans and its
OTLP encoder the protobuf bodies, 512 spans a request as BatchSpanProcessor sends them),
built before `START`, then posted one request at a time (as the SDK's export thread
does) at RATE spans/s in all (0: as fast as answers come). A 429/503 is retried after
its Retry-After, as exporters do. So the process spends its CPU on HTTP only, and the
bench measures the receiver, not how fast a shared machine can make spans.
`DONE <spans acknowledged> <seconds> <ok|failed> <spans not acknowledged>`.
"""

from __future__ import annotations

import http.client
import sys
import time
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from receiver_bench_sender import Emitter

BATCH = 512


class Quiet(Emitter):
    """Counts spans without probes or pacing: the pacing is in the posting."""

    def ended(self, span: Span) -> None:
        self.count += 1


def bodies(total: int, service: str) -> list[tuple[bytes, int]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    Quiet(provider.get_tracer("bench.receiver"), total, 0).agent("operator", total)
    spans = list(memory.get_finished_spans())
    return [(encode_spans(spans[n:n + BATCH]).SerializeToString(), len(spans[n:n + BATCH]))
            for n in range(0, len(spans), BATCH)]


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> bool:
    """Send until acknowledged; False when refused for good (a 4xx other than 429) or after 60 s of trying."""
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        conn.request("POST", path, body, {"Content-Type": "application/x-protobuf"})
        response = conn.getresponse()
        response.read()
        if response.status == 200:
            return True
        if response.status not in (429, 502, 503, 504):
            return False
        time.sleep(float(response.getheader("Retry-After") or 1))
    return False


def main() -> int:
    total, rate, service, endpoint = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
    requests = bodies(total, service)
    url = urlsplit(endpoint)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 4318, timeout=30)
    print("START", flush=True)
    started = time.monotonic()
    acked = failed = sent = 0
    for body, spans in requests:
        if rate > 0 and (ahead := started + sent / rate - time.monotonic()) > 0:
            time.sleep(ahead)
        sent += spans
        if post(conn, "/v1/traces", body):
            acked += spans
        else:
            failed += spans
    conn.close()
    print(f"DONE {acked} {time.monotonic() - started:.3f} {'ok' if not failed else 'failed'} {failed}", flush=True)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
