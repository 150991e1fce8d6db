"""Small, realistic bodies of the agents issue 22 names, built the way each one writes them.

- **Phoenix export**: proto field names (`resource_spans`, `string_value`, `int_value`), OpenInference
  attributes, the project in the resource's `openinference.project.name`.
- **OpenInference agent** (`openinference-instrumentation-*`): camelCase OTLP/JSON, `openinference.span.kind`
  AGENT / LLM / TOOL, flattened `llm.input_messages.N.message.*`, `llm.token_count.*`, `llm.cost.total`.
- **GenAI `span_only`** (`opentelemetry-instrumentation-openai-v2`, current conventions): `gen_ai.input.messages`,
  `gen_ai.output.messages`, `gen_ai.system_instructions` on the `chat` span.
- **GenAI `event_only`** (the same instrumentation): `chat` spans without content; one log record per message
  (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.choice`) tied to its span, sent to `/v1/logs`.

Each is an agent with a sub-agent (an agent span inside an agent span), model calls with tokens, tool calls;
`Source` says what must come through intact. agentdesk's own export is made in the test from a native run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

BASE = 1_700_000_000_000_000_000
SECOND = 1_000_000_000


@dataclass
class Source:
    name: str
    spans: list[dict[str, Any]]
    """The spans as OTLP/JSON span objects (in the source's own field shape)."""
    wrap: Any
    """Spans -> a whole traces document in the source's shape."""
    records: list[dict[str, Any]] = field(default_factory=list)
    agents: set[tuple[str, str | None]] = field(default_factory=set)
    """(agent name, parent agent name) expected in the store."""
    tokens: tuple[int, int] = (0, 0)
    """The run's (input, output) tokens."""
    messages: int = 0
    """Context items expected (distinct messages the model calls carried)."""


def _value(v: Any, snake: bool) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"bool_value" if snake else "boolValue": v}
    if isinstance(v, int):
        return {"int_value" if snake else "intValue": str(v)}
    if isinstance(v, float):
        return {"double_value" if snake else "doubleValue": v}
    return {"string_value" if snake else "stringValue": v}


def _attrs(values: dict[str, Any], snake: bool = False) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v, snake)} for k, v in values.items()]


SNAKE = {"traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id",
         "startTimeUnixNano": "start_time_unix_nano", "endTimeUnixNano": "end_time_unix_nano"}


def _span(trace: str, n: int, parent: int | None, name: str, start: int, end: int, values: dict[str, Any],
          *, snake: bool = False, kind: int = 1) -> dict[str, Any]:
    names = SNAKE if snake else {}

    def key(k: str) -> str:
        return names.get(k, k)

    raw: dict[str, Any] = {key("traceId"): trace, key("spanId"): f"{n:016x}", "name": name, "kind": kind,
                           key("startTimeUnixNano"): str(BASE + start * SECOND // 10),
                           key("endTimeUnixNano"): str(BASE + end * SECOND // 10),
                           "attributes": _attrs(values, snake)}
    if parent is not None:
        raw[key("parentSpanId")] = f"{parent:016x}"
    return raw


def _document(spans: list[dict[str, Any]], resource: dict[str, Any], scope: str,
              snake: bool = False) -> dict[str, Any]:
    if snake:
        return {"resource_spans": [{"resource": {"attributes": _attrs(resource, True)},
                                    "scope_spans": [{"scope": {"name": scope}, "spans": spans}]}]}
    return {"resourceSpans": [{"resource": {"attributes": _attrs(resource)},
                               "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}]}


def _oi_messages(direction: str, messages: list[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, (role, text) in enumerate(messages):
        out[f"llm.{direction}_messages.{k}.message.role"] = role
        out[f"llm.{direction}_messages.{k}.message.content"] = text
    return out


def openinference(trace: str, *, snake: bool) -> list[dict[str, Any]]:
    """An OpenInference agent: planner (AGENT) > LLM, TOOL, researcher (AGENT) > LLM."""
    first = [("system", "You plan."), ("user", "Book a flight to Oslo")]
    second = [*first, ("assistant", "Searching flights"), ("tool", "3 flights found")]
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai"}
    return [
        _span(trace, 1, None, "planner", 0, 100, {"openinference.span.kind": "AGENT", "agent.name": "planner",
                                                  "input.value": "Book a flight to Oslo", "session.id": "s-42"},
              snake=snake),
        _span(trace, 2, 1, "ChatCompletion", 1, 20, {**llm, **_oi_messages("input", first),
                                                     **_oi_messages("output", [("assistant", "Searching flights")]),
                                                     "llm.token_count.prompt": 40, "llm.token_count.completion": 8,
                                                     "llm.cost.total": 0.0004}, snake=snake, kind=3),
        _span(trace, 3, 1, "search_flights", 21, 40, {"openinference.span.kind": "TOOL", "tool.name": "search_flights",
                                                      "tool.parameters": '{"to": "OSL"}',
                                                      "output.value": "3 flights found"}, snake=snake),
        _span(trace, 4, 1, "researcher", 41, 90, {"openinference.span.kind": "AGENT", "agent.name": "researcher"},
              snake=snake),
        _span(trace, 5, 4, "ChatCompletion", 42, 80, {**llm, **_oi_messages("input", second),
                                                      **_oi_messages("output", [("assistant", "Take SK4455")]),
                                                      "llm.token_count.prompt": 70, "llm.token_count.completion": 5},
              snake=snake, kind=3),
    ]


def phoenix() -> Source:
    trace = "5f" * 16
    spans = openinference(trace, snake=True)
    return Source("phoenix export", spans,
                  lambda s: _document(s, {"openinference.project.name": "travel", "service.name": "travel-svc"},
                                      "openinference.instrumentation.openai", snake=True),
                  agents={("planner", None), ("researcher", "planner")}, tokens=(110, 13), messages=8)


def openinference_agent() -> Source:
    trace = "0a" * 16
    spans = openinference(trace, snake=False)
    return Source("openinference agent", spans,
                  lambda s: _document(s, {"service.name": "travel-agent"}, "openinference.instrumentation.openai"),
                  agents={("planner", None), ("researcher", "planner")}, tokens=(110, 13), messages=8)


def _genai_agent(trace: str, model_attributes: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """invoke_agent coder > chat, execute_tool, invoke_agent reviewer > chat."""
    def chat(n: int, tokens: tuple[int, int]) -> dict[str, Any]:
        return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1],
                "gen_ai.conversation.id": "conv-7", **model_attributes.get(n, {})}
    return [
        _span(trace, 1, None, "invoke_agent coder", 0, 100, {"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "coder", "gen_ai.agent.id": "ag-1",
                                                             "gen_ai.conversation.id": "conv-7"}),
        _span(trace, 2, 1, "chat gpt-4o-mini", 1, 20, chat(2, (120, 30)), kind=3),
        _span(trace, 3, 1, "execute_tool run_tests", 21, 40, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_tests",
            "gen_ai.tool.call.arguments": '{"path": "tests/"}', "gen_ai.tool.call.result": "2 failed",
            "gen_ai.conversation.id": "conv-7"}),
        _span(trace, 4, 1, "invoke_agent reviewer", 41, 90, {"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "reviewer",
                                                             "gen_ai.conversation.id": "conv-7"}),
        _span(trace, 5, 4, "chat gpt-4o-mini", 42, 80, chat(5, (200, 12)), kind=3),
    ]


FIRST_CALL = [("system", "You fix builds."), ("user", "Fix the build")]
SECOND_CALL = [("system", "You review."), ("user", "Review the fix")]
ANSWERS = {2: "Running the tests", 5: "Looks good"}


def genai_span_only() -> Source:
    def messages(inputs: list[tuple[str, str]], answer: str) -> dict[str, Any]:
        system = [m for r, m in inputs if r == "system"]
        return {"gen_ai.system_instructions": json.dumps([{"type": "text", "content": t} for t in system]),
                "gen_ai.input.messages": json.dumps([{"role": r, "parts": [{"type": "text", "content": m}]}
                                                     for r, m in inputs if r != "system"]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                    {"type": "text", "content": answer}], "finish_reason": "stop"}])}
    spans = _genai_agent("5a" * 16, {2: messages(FIRST_CALL, ANSWERS[2]), 5: messages(SECOND_CALL, ANSWERS[5])})
    return Source("genai span_only", spans,
                  lambda s: _document(s, {"service.name": "coder-svc"}, "opentelemetry.instrumentation.openai_v2"),
                  agents={("coder", None), ("reviewer", "coder")}, tokens=(320, 42), messages=6)


def genai_event_only() -> Source:
    trace = "e0" * 16
    spans = _genai_agent(trace, {})
    records = []
    for span, inputs in ((2, FIRST_CALL), (5, SECOND_CALL)):
        for k, (role, text) in enumerate(inputs):
            records.append(_record(trace, span, k, f"gen_ai.{role}.message", {"content": _value(text, False)}))
        choice = {"index": _value(0, False), "finish_reason": _value("stop", False), "message": {"kvlistValue": {
            "values": [{"key": "role", "value": _value("assistant", False)},
                       {"key": "content", "value": _value(ANSWERS[span], False)}]}}}
        records.append(_record(trace, span, len(inputs), "gen_ai.choice", choice))
    return Source("genai event_only", spans,
                  lambda s: _document(s, {"service.name": "coder-svc"}, "opentelemetry.instrumentation.openai_v2"),
                  records, agents={("coder", None), ("reviewer", "coder")}, tokens=(320, 42), messages=6)


def _record(trace: str, span: int, k: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"timeUnixNano": str(BASE + span * SECOND // 10 + k), "traceId": trace, "spanId": f"{span:016x}",
            "eventName": name, "severityNumber": 9, "attributes": _attrs({"gen_ai.system": "openai"}),
            "body": {"kvlistValue": {"values": [{"key": key, "value": v} for key, v in body.items()]}}}


def logs_document(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceLogs": [{"resource": {"attributes": _attrs({"service.name": "coder-svc"})},
                              "scopeLogs": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2"},
                                             "logRecords": records}]}]}


def spans_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The span objects of a traces document (either field shape)."""
    out = []
    for rs in document.get("resourceSpans") or document.get("resource_spans") or []:
        for ss in rs.get("scopeSpans") or rs.get("scope_spans") or []:
            out.extend(ss["spans"])
    return out
