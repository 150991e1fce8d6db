"""Real OpenTelemetry SDK traces for the OTel tests: an agent with a sub-agent, model and tool calls.

Spans come from `opentelemetry-sdk` through an in-memory exporter and are encoded
with the OTLP exporter's own encoder, so the tests read what real agents send.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode


def agent_trace(service: str = "support-bot", conversation: str | None = "conv-1",
                calls: int = 2, fail_tool: bool = False) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.otel", "1.0")
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": "Fix the build"}]}]
    conv = {"gen_ai.conversation.id": conversation} if conversation else {}
    with tracer.start_as_current_span("invoke_agent planner", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner",
            "gen_ai.agent.id": "agent-planner", **conv}):
        for n in range(calls):
            with tracer.start_as_current_span("chat gpt-5", kind=SpanKind.CLIENT, attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-5", "gen_ai.usage.input_tokens": 100 + n,
                    "gen_ai.usage.output_tokens": 20 + n,
                    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be careful."}]),
                    "gen_ai.input.messages": json.dumps(history),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                        {"type": "tool_call", "id": f"call-{n}", "name": "run_tests",
                         "arguments": {"path": "tests/"}},
                        {"type": "hologram", "shape": "cube"}]}])}):
                pass
            call = {"type": "tool_call", "id": f"call-{n}", "name": "run_tests", "arguments": {"path": "tests/"}}
            history = [*history, {"role": "assistant", "parts": [call, {"type": "hologram", "shape": "cube"}]},
                       {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call-{n}",
                                                   "response": f"{n} failed"}]}]
            with tracer.start_as_current_span("execute_tool run_tests", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_tests",
                    "gen_ai.tool.call.id": f"call-{n}",
                    "gen_ai.tool.call.arguments": '{"path": "tests/"}',
                    "gen_ai.tool.call.result": f"{n} failed"}) as tool:
                if fail_tool:
                    tool.set_status(Status(StatusCode.ERROR, "tests crashed"))
        with tracer.start_as_current_span("invoke_agent reviewer", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reviewer"}):
            with tracer.start_as_current_span("chat claude", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude",
                    "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Review this diff",
                    "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "LGTM",
                    "gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": 1}):
                pass
            with tracer.start_as_current_span("GET /status", kind=SpanKind.CLIENT,
                                              attributes={"http.request.method": "GET"}) as http:
                http.add_event("retry", {"attempt": 2})
    provider.shutdown()
    return list(exporter.get_finished_spans())


def request_of(spans: Sequence[ReadableSpan]) -> Any:
    """An ExportTraceServiceRequest, exactly as the OTLP exporters send it."""
    return encode_spans(spans)


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Spec OTLP/JSON (hex ids, integer enums, int64 as strings) of the encoder's message."""
    from google.protobuf import json_format

    doc = json_format.MessageToDict(request_of(spans))
    _hex_ids(doc)
    return doc


def _hex_ids(value: Any) -> None:
    import base64

    if isinstance(value, dict):
        for key, item in list(value.items()):
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                value[key] = base64.b64decode(item).hex()
            elif key == "kind" and isinstance(item, str):
                value[key] = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
                              "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}[item]
            elif key == "code" and isinstance(item, str) and item.startswith("STATUS_CODE"):
                value[key] = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}[item]
            else:
                _hex_ids(item)
    elif isinstance(value, list):
        for item in value:
            _hex_ids(item)
