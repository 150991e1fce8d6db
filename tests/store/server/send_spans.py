"""Run as a subprocess by the tests: a real OpenTelemetry SDK + OTLP/HTTP exporter sending one agent trace.

    python send_spans.py ENDPOINT COUNT SERVICE [gzip]

Prints the trace id on stdout once every span was exported (the exporter got 200s).
"""

from __future__ import annotations

import sys

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def main() -> int:
    endpoint, count, service = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    compression = Compression.Gzip if sys.argv[4:] == ["gzip"] else Compression.NoCompression
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, compression=compression),
                                                   max_queue_size=count + 10))
    tracer = provider.get_tracer("tests.send_spans")
    with tracer.start_as_current_span("invoke_agent worker", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "worker"}) as root:
        trace_id = format(root.get_span_context().trace_id, "032x")
        for n in range(count - 1):
            with tracer.start_as_current_span("chat m1", attributes={"gen_ai.operation.name": "chat",
                                                                     "gen_ai.request.model": "m1", "n": n}):
                pass
    ok = provider.force_flush(30_000)
    provider.shutdown()
    print(trace_id if ok else "flush-failed", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
