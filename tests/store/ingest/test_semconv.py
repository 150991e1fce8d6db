"""GenAI (current and older shapes) and OpenInference spans onto agentdesk's kinds, usage and messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentdesk.store.ingest import ingest_json
from agentdesk.store.ingest.semconv import classify
from agentdesk.store.ingest.spans import OtelSpan
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store

TRACE = "5b8efff798038103d269b633813fc60c"
T0 = 1_764_600_000_000_000_000


def span(attrs: dict[str, Any], name: str = "s", events: list[dict[str, Any]] | None = None,
         status: int = 0) -> OtelSpan:
    return OtelSpan(TRACE, "eee19b7ec3c1b174", None, name, 1, T0, T0 + 1000, attrs, events or [],
                    status_code=status)


def test_openinference_llm_with_flattened_messages_and_tool_calls() -> None:
    c = classify(span({
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "llm.token_count.prompt": 30,
        "llm.token_count.completion": 4, "llm.cost.total": 0.002,
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "Weather in Paris?",
        "llm.input_messages.1.message.contents.1.message_content.type": "image",
        "llm.input_messages.1.message.contents.1.message_content.image.image.url": "https://x/y.png",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}'}))
    assert (c.kind, c.model, c.input_tokens, c.output_tokens, c.cost_usd) == ("model", "gpt-4o", 30, 4, 0.002)
    assert [m["role"] for m in c.input_messages] == ["system", "user"]
    assert c.input_rendered[1].startswith("Weather in Paris?\n[image] ")  # an unknown part, kept
    assert c.output_rendered == ['weather({"city": "Paris"})']


@pytest.mark.parametrize(("attrs", "kind"), [
    ({"openinference.span.kind": "TOOL", "tool.name": "weather"}, "tool"),
    ({"openinference.span.kind": "AGENT"}, "agent"),
    ({"openinference.span.kind": "CHAIN"}, "internal"),
    ({"openinference.span.kind": "GUARDRAIL"}, "guardrail"),
    ({"openinference.span.kind": "RETRIEVER"}, "internal"),
    ({"gen_ai.operation.name": "embeddings"}, "model"),
    ({"gen_ai.operation.name": "create_agent"}, "internal"),
    ({"gen_ai.operation.name": "invoke_workflow"}, "internal"),
    ({"http.request.method": "GET"}, "internal"),
    ({"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4"}, "model"),  # older: no operation name
])
def test_kinds(attrs: dict[str, Any], kind: str) -> None:
    assert classify(span(attrs)).kind == kind


def test_older_per_message_events_and_choice() -> None:
    events = [{"time_ns": T0, "name": "gen_ai.system.message", "attributes": {"content": "You help."}},
              {"time_ns": T0, "name": "gen_ai.user.message", "attributes": {"content": "Hi"}},
              {"time_ns": T0, "name": "gen_ai.tool.message", "attributes": {"content": "42", "id": "t1"}},
              {"time_ns": T0, "name": "gen_ai.choice", "attributes": {
                  "index": 0, "finish_reason": "stop",
                  "message": json.dumps({"role": "assistant", "content": "Hello!"})}}]
    c = classify(span({"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}, events=events))
    assert [(m["role"], r) for m, r in zip(c.input_messages, c.input_rendered, strict=True)] == [
        ("system", "You help."), ("user", "Hi"), ("tool", "42")]
    assert c.output_rendered == ["Hello!"] and c.output_messages[0]["finish_reason"] == "stop"


def test_structured_messages_and_the_details_event() -> None:
    details = {"time_ns": T0, "name": "gen_ai.client.inference.operation.details", "attributes": {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "from the event"}]}]}}
    c = classify(span({"gen_ai.operation.name": "chat"}, events=[details]))
    assert c.input_rendered == ["from the event"]


def test_errors_take_status_then_error_type_then_exception() -> None:
    assert classify(span({"error.type": "timeout"}, status=2)).error == "timeout"
    exc = [{"time_ns": T0, "name": "exception", "attributes": {"exception.type": "ValueError",
                                                               "exception.message": "bad"}}]
    assert classify(span({}, events=exc, status=2)).error == "ValueError: bad"
    assert classify(span({}, status=2)).status == "error"


def test_project_and_session_come_from_openinference(store: Store) -> None:
    doc = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "openinference.project.name", "value": {"stringValue": "phoenix-p"}},
                                    {"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"scope": {"name": "openinference"}, "spans": [{
            "traceId": TRACE, "spanId": "eee19b7ec3c1b174", "name": "agent", "kind": "SPAN_KIND_INTERNAL",
            "startTimeUnixNano": str(T0), "endTimeUnixNano": T0 + 5,
            "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "AGENT"}},
                           {"key": "session.id", "value": {"stringValue": "sess-9"}},
                           {"key": "user.id", "value": {"stringValue": "u1"}}],
            "status": {"code": "STATUS_CODE_OK"}}]}]}]}
    ingest_json(store, doc)
    source = NativeSource(store)
    (project,) = source.projects()
    assert project.name == "phoenix-p"
    (session,) = source.sessions(source.tasks(project.id)[0].id)
    assert session.title == "sess-9"
    (agent,) = source.agents(session.id)
    assert agent.name == "agent"


def test_the_names_come_from_the_convention_packages_and_are_the_documented_ones() -> None:
    """A release of either package that renames an attribute agentdesk reads fails here, not silently."""
    from openinference.semconv.trace import SpanAttributes

    from agentdesk.store.ingest import names as n
    assert (n.OPERATION, n.INPUT_MESSAGES, n.OUTPUT_MESSAGES, n.SYSTEM_INSTRUCTIONS) == (
        "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
    assert (n.INPUT_TOKENS, n.OUTPUT_TOKENS, n.PROMPT_TOKENS, n.COMPLETION_TOKENS) == (
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens")
    assert {"chat", "text_completion", "generate_content", "embeddings"} == n.MODEL_OPERATIONS
    assert (n.PROMPT_PREFIX, n.COMPLETION_PREFIX) == ("gen_ai.prompt.", "gen_ai.completion.")
    assert n.OI_SPAN_KIND == SpanAttributes.OPENINFERENCE_SPAN_KIND == "openinference.span.kind"
    assert (n.OI_INPUT_MESSAGES_PREFIX, n.OI_COST_TOTAL, n.OI_PROJECT) == (
        "llm.input_messages.", "llm.cost.total", "openinference.project.name")
