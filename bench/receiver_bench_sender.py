"""One agent process for bench/receiver_bench.py: the real OpenTelemetry SDK and OTLP/HTTP exporter.

    python receiver_bench_sender.py SPANS RATE SERVICE

Emits one agent trace of SPANS spans (nested sub-agents, model calls carrying their
input messages and token usage, tool calls with arguments and results), at RATE
spans/s (0: as fast as it can). The exporter reads its endpoint and batching from
the OTEL_* environment. Every 25th span is a probe: after it ends, a line
`P <agentdesk span id> <end time ns>` goes to stdout so the bench can time when it
becomes visible. `DONE <spans> <seconds> <ok|flush-failed|export-failed> <spans the exporter gave up on>`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import Span

PROBE_EVERY = 25
MESSAGES = json.dumps([{"role": "system", "parts": [{"type": "text", "content": "You are a careful operator."}]},
                       {"role": "user", "parts": [{"type": "text", "content": "Check the disk usage on db-3 and "
                                                                               "free space if it is above 90%."}]}])


class CountingExporter(OTLPSpanExporter):
    """The stock exporter, counting the spans of batches it gave up on (after its own retries)."""

    failed_spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            CountingExporter.failed_spans += len(spans)
        return result


class Emitter:
    def __init__(self, tracer: object, total: int, rate: float) -> None:
        self.tracer = tracer
        self.total = total
        self.count = 0
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.started = time.monotonic()

    def ended(self, span: Span) -> None:
        self.count += 1
        if self.count % PROBE_EVERY == 0:
            ctx = span.get_span_context()
            end = getattr(span, "end_time", None) or time.time_ns()
            print(f"P o{ctx.trace_id:032x}{ctx.span_id:016x} {end}", flush=True)
        if self.interval:
            ahead = self.started + self.count * self.interval - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def leaf(self, name: str, attributes: dict[str, object]) -> None:
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:  # type: ignore[attr-defined]
            pass
        self.ended(span)

    def step(self, n: int) -> None:
        self.leaf("chat gpt-4.1", {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                   "gen_ai.request.model": "gpt-4.1", "gen_ai.input.messages": MESSAGES,
                                   "gen_ai.usage.input_tokens": 420 + n % 50, "gen_ai.usage.output_tokens": 37})
        self.leaf("execute_tool shell", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "shell",
                                         "gen_ai.tool.call.arguments": json.dumps({"cmd": f"df -h /data{n % 7}"}),
                                         "gen_ai.tool.call.result": "Filesystem Size Used Avail Use% 91%"})

    def agent(self, name: str, budget: int, depth: int = 0) -> None:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes) as span:  # type: ignore[attr-defined]
            n = 0
            while self.count < budget - 1:
                if depth < 2 and n % 20 == 19:
                    self.agent(f"{name}.sub{n}", min(budget - 1, self.count + 60), depth + 1)
                else:
                    self.step(n)
                n += 1
        self.ended(span)


def main() -> int:
    total, rate, service = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(CountingExporter()))  # all batching from OTEL_BSP_*
    emitter = Emitter(provider.get_tracer("bench.receiver"), total, rate)
    print("START", flush=True)
    emitter.agent("operator", total)
    ok = provider.force_flush(120_000)
    provider.shutdown()
    failed = CountingExporter.failed_spans
    state = "ok" if ok and not failed else "flush-failed" if not ok else "export-failed"
    print(f"DONE {emitter.count} {time.monotonic() - emitter.started:.3f} {state} {failed}", flush=True)
    return 0 if state == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
