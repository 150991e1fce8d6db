"""GenAI and OpenInference semantic conventions onto agentdesk's canonical span model.

One function, `classify`, reads a decoded span and says what it is to agentdesk:
its kind (model, tool, agent, guardrail, gate, internal), usage, texts, the
messages of a model call, and the hierarchy hints (project, conversation, agent).
The table in docs/otel.md is this module written out; keep them in step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdesk.store.ingest import messages as msgs
from agentdesk.store.ingest import names as n
from agentdesk.store.ingest.messages import PLAIN
from agentdesk.store.ingest.prices import estimate_cost
from agentdesk.store.ingest.spans import OtelSpan

MODEL_OPERATIONS = n.MODEL_OPERATIONS
AGENT_OPERATIONS = n.AGENT_OPERATIONS
MODEL_OI_KINDS = frozenset({"LLM", "EMBEDDING"})
APPROVAL_PREFIX = "agentdesk.approval."


@dataclass(slots=True)
class Classified:
    kind: str
    status: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_estimated: bool = False
    """`cost_usd` came from the price table (store/ingest/prices.py), not from the agent."""
    input_text: str | None = None
    output_text: str | None = None
    error: str | None = None
    model: str = ""
    agent_key: str | None = None
    """For agent spans: gen_ai.agent.id, else its name: what makes two invocations one agent."""
    agent_name: str | None = None
    conversation: str | None = None
    project: str | None = None
    input_messages: list[msgs.Message] = field(default_factory=list)
    output_messages: list[msgs.Message] = field(default_factory=list)
    input_rendered: list[str] = field(default_factory=list)
    output_rendered: list[str] = field(default_factory=list)


def _int(value: Any) -> int:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else 0
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else 0.0
    except (TypeError, ValueError):
        return 0.0


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else PLAIN.encode(value)


def is_agent_span(attrs: dict[str, Any]) -> bool:
    return (attrs.get(n.OPERATION) in AGENT_OPERATIONS
            or str(attrs.get(n.OI_SPAN_KIND, "")).upper() == "AGENT")


def agent_identity(span: OtelSpan) -> tuple[str, str]:
    """(key, display name) of an agent span."""
    a = span.attributes
    name = a.get(n.AGENT_NAME) or a.get(n.OI_AGENT_NAME)
    if not name:
        name = span.name[len("invoke_agent "):] if span.name.startswith("invoke_agent ") else span.name
    key = a.get(n.AGENT_ID) or name
    return str(key), str(name or "agent")


def conversation_of(attrs: dict[str, Any]) -> str | None:
    value = attrs.get(n.CONVERSATION_ID) or attrs.get(n.OI_SESSION_ID)
    return str(value) if value not in (None, "") else None


def project_of(span: OtelSpan) -> str | None:
    value = (span.resource.get(n.OI_PROJECT) or span.attributes.get(n.OI_PROJECT)
             or span.resource.get(n.SERVICE_NAME))
    return str(value) if value not in (None, "") else None


def classify(span: OtelSpan, *, nested_agent: bool = False) -> Classified:
    a = span.attributes
    op = a.get(n.OPERATION)
    oi = str(a.get(n.OI_SPAN_KIND, "")).upper()
    if op in MODEL_OPERATIONS or oi in MODEL_OI_KINDS or (
            op is None and not oi and (n.REQUEST_MODEL in a or n.OI_REQUEST_TYPE in a)):
        kind = "model"
    elif op == n.TOOL_OPERATION or oi == "TOOL":
        kind = "tool"
    elif is_agent_span(a):
        kind = "sub_agent" if nested_agent else "agent"
    elif oi == "GUARDRAIL":
        kind = "guardrail"
    elif any(k.startswith(APPROVAL_PREFIX) for k in a):
        kind = "gate"
    else:
        kind = str(a.get("agentdesk.span.kind") or "internal")
    status = "running" if not span.end_ns else ("error" if span.status_code == 2 else "ok")
    if span.end_ns and a.get("agentdesk.span.status") in ("cancelled",):
        status = "cancelled"
    c = Classified(kind=kind, status=status)
    c.conversation = conversation_of(a)
    c.project = project_of(span)
    c.model = str(a.get(n.RESPONSE_MODEL) or a.get(n.REQUEST_MODEL) or a.get(n.OI_MODEL_NAME) or "")
    c.input_tokens = _int(a.get(n.INPUT_TOKENS, a.get(n.PROMPT_TOKENS, a.get(n.OI_PROMPT_TOKENS))))
    c.output_tokens = _int(a.get(n.OUTPUT_TOKENS, a.get(n.COMPLETION_TOKENS, a.get(n.OI_COMPLETION_TOKENS))))
    c.cost_usd = _float(a.get(n.OI_COST_TOTAL, a.get("agentdesk.cost_usd")))
    if kind == "model" and not c.cost_usd and (c.input_tokens or c.output_tokens):
        _estimate_cost(c, a)
    if status == "error":
        c.error = span.status_message or _text(a.get(n.ERROR_TYPE)) or _exception(span) or "error"
    if kind in ("agent", "sub_agent"):
        c.agent_key, c.agent_name = agent_identity(span)
    if kind == "model":
        c.input_messages = msgs.input_messages(a, span.events)
        c.output_messages = msgs.output_messages(a, span.events)
        c.input_rendered = [msgs.render(m) for m in c.input_messages]
        c.output_rendered = [msgs.render(m) for m in c.output_messages]
        c.input_text = msgs.joined(c.input_messages, c.input_rendered) or _text(a.get(n.OI_INPUT_VALUE))
        c.output_text = msgs.joined(c.output_messages, c.output_rendered) or _text(a.get(n.OI_OUTPUT_VALUE))
    elif kind == "tool":
        c.input_text = _text(a.get(n.TOOL_CALL_ARGUMENTS, a.get(n.OI_TOOL_PARAMETERS, a.get(n.OI_INPUT_VALUE))))
        c.output_text = _text(a.get(n.TOOL_CALL_RESULT, a.get(n.OI_OUTPUT_VALUE)))
    else:
        c.input_text = _text(a.get(n.OI_INPUT_VALUE))
        c.output_text = _text(a.get(n.OI_OUTPUT_VALUE))
    if "agentdesk.input_text" in a:
        c.input_text = _text(a["agentdesk.input_text"])
    if "agentdesk.output_text" in a:
        c.output_text = _text(a["agentdesk.output_text"])
    return c


def _estimate_cost(c: Classified, a: dict[str, Any]) -> None:
    """Tokens but no reported cost: the price table's figure, marked as an estimate."""
    provider = _text(a.get(n.PROVIDER_NAME) or a.get(n.SYSTEM) or a.get(n.OI_PROVIDER) or a.get(n.OI_SYSTEM))
    output = max(c.output_tokens, _int(a.get(n.REASONING_TOKENS, a.get(n.OI_REASONING_TOKENS))))
    cost = estimate_cost(c.model, provider, c.input_tokens, output,
                         _int(a.get(n.CACHE_READ_TOKENS, a.get(n.OI_CACHE_READ_TOKENS))),
                         _int(a.get(n.CACHE_WRITE_TOKENS, a.get(n.OI_CACHE_WRITE_TOKENS))))
    if cost is not None:
        c.cost_usd, c.cost_estimated = cost, True


def _exception(span: OtelSpan) -> str | None:
    for e in span.events:
        if e["name"] == "exception":
            ea = e["attributes"]
            parts = [str(ea[k]) for k in (n.EXCEPTION_TYPE, n.EXCEPTION_MESSAGE) if ea.get(k)]
            if parts:
                return ": ".join(parts)
    return None
