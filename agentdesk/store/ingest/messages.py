"""Model-call messages from every shape instrumentations write, as `{role, parts[]}` dicts.

Shapes read, newest first: GenAI `gen_ai.input.messages` / `gen_ai.output.messages` /
`gen_ai.system_instructions` (structured or JSON strings), the same inside the
`gen_ai.client.inference.operation.details` event, the older indexed
`gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes, the per-message events
(`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
`gen_ai.tool.message`, `gen_ai.choice`), and OpenInference's flattened
`llm.input_messages.N.message.*`. Parts of unknown types are kept as they came.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from agentdesk.store.ingest import names as n

Message = dict[str, Any]
PLAIN = json.JSONEncoder(ensure_ascii=False)
"""Reused encoders: `json.dumps` with options builds a new encoder per call (a tenth of the import)."""
SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
MESSAGE_EVENTS = n.MESSAGE_EVENTS
_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """`prefix.N.rest` keys grouped by N (sorted), with `rest` as the inner key."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            match = _INDEXED.match(key[len(prefix):])
            if match:
                out.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return dict(sorted(out.items()))


def _normalise(raw: Any, default_role: str = "user") -> Message | None:
    """One message in any of the JSON shapes (GenAI parts, or OpenAI-style content/tool_calls)."""
    if isinstance(raw, str):
        return {"role": default_role, "parts": [{"type": "text", "content": raw}]}
    if not isinstance(raw, dict):
        return None
    role = str(raw.get("role") or default_role)
    if isinstance(raw.get("parts"), list):
        parts = [p if isinstance(p, dict) else {"type": "text", "content": str(p)} for p in raw["parts"]]
        msg: Message = {"role": role, "parts": parts}
    else:
        parts = []
        content = raw.get("content")
        if isinstance(content, str) and content:
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            for c in content:
                if isinstance(c, dict) and c.get("type") == "text" and "text" in c:
                    parts.append({"type": "text", "content": str(c["text"])})
                else:
                    parts.append(c if isinstance(c, dict) else {"type": "text", "content": str(c)})
        elif content is not None and content != "":
            parts.append({"type": "text", "content": PLAIN.encode(content)})
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict):
                fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
                parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"),
                              "arguments": _maybe_json(fn.get("arguments"))})
        if role == "tool" and raw.get("id") is not None and parts and parts[0].get("type") == "text":
            parts = [{"type": "tool_call_response", "id": raw.get("id"), "response": parts[0]["content"]}]
        msg = {"role": role, "parts": parts}
    if raw.get("finish_reason"):
        msg["finish_reason"] = raw["finish_reason"]
    return msg


def _message_list(value: Any, default_role: str = "user") -> list[Message]:
    value = _maybe_json(value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        value = [value] if value not in (None, "") else []
    return [m for m in (_normalise(item, default_role) for item in value) if m is not None]


def _system_instructions(value: Any) -> list[Message]:
    value = _maybe_json(value)
    if isinstance(value, str):
        return [{"role": "system", "parts": [{"type": "text", "content": value}]}]
    if isinstance(value, list) and value:
        parts = [p if isinstance(p, dict) else {"type": "text", "content": str(p)} for p in value]
        return [{"role": "system", "parts": parts}]
    return []


def _flat_message(fields: dict[str, Any], prefix: str = "") -> Message:
    """One older/flattened message: `role`, `content`, `tool_calls.K.*` (with an optional prefix)."""
    role = str(fields.get(prefix + "role") or "user")
    parts: list[dict[str, Any]] = []
    content = fields.get(prefix + "content")
    if content not in (None, ""):
        parts.append({"type": "text", "content": content if isinstance(content, str) else
                      PLAIN.encode(content)})
    for c in _indexed(fields, prefix + "contents.").values():
        kind = c.get("message_content.type", "text")
        if kind == "text":
            parts.append({"type": "text", "content": str(c.get("message_content.text", ""))})
        else:
            parts.append({"type": str(kind), **{k.split(".", 1)[-1]: val for k, val in c.items()}})
    for call in _indexed(fields, prefix + "tool_calls.").values():
        parts.append({"type": "tool_call",
                      "id": call.get("tool_call.id", call.get("id")),
                      "name": call.get("tool_call.function.name", call.get("name")),
                      "arguments": _maybe_json(call.get("tool_call.function.arguments",
                                                        call.get("arguments")))})
    call_id = fields.get(prefix + "tool_call_id")
    if role == "tool" and call_id is not None and parts and parts[0]["type"] == "text":
        parts[0] = {"type": "tool_call_response", "id": call_id, "response": parts[0]["content"]}
    msg: Message = {"role": role, "parts": parts}
    if fields.get("finish_reason"):
        msg["finish_reason"] = fields["finish_reason"]
    return msg


def input_messages(attrs: Mapping[str, Any], events: list[dict[str, Any]]) -> list[Message]:
    """What the model was sent, in order (system instructions first when given apart)."""
    details: dict[str, Any] = next((e["attributes"] for e in events
                                    if e["name"] == n.INFERENCE_DETAILS_EVENT), {})
    for source in (attrs, details):
        if n.INPUT_MESSAGES in source:
            return (_system_instructions(source.get(n.SYSTEM_INSTRUCTIONS))
                    + _message_list(source[n.INPUT_MESSAGES]))
    if any(k.startswith(n.PROMPT_PREFIX) for k in attrs):
        return [_flat_message(f) for f in _indexed(attrs, n.PROMPT_PREFIX).values()]
    if any(k.startswith(n.OI_INPUT_MESSAGES_PREFIX) for k in attrs):
        return [_flat_message(f, "message.") for f in _indexed(attrs, n.OI_INPUT_MESSAGES_PREFIX).values()]
    from_events = []
    for e in events:
        role = MESSAGE_EVENTS.get(e["name"])
        if role is not None:
            a = dict(e["attributes"])
            a.setdefault("role", role)
            msg = _normalise({**a, "content": _maybe_json(a.get("content"))}, role)
            if msg is not None:
                from_events.append(msg)
    return from_events


def output_messages(attrs: Mapping[str, Any], events: list[dict[str, Any]]) -> list[Message]:
    details: dict[str, Any] = next((e["attributes"] for e in events
                                    if e["name"] == n.INFERENCE_DETAILS_EVENT), {})
    for source in (attrs, details):
        if n.OUTPUT_MESSAGES in source:
            return _message_list(source[n.OUTPUT_MESSAGES], "assistant")
    if any(k.startswith(n.COMPLETION_PREFIX) for k in attrs):
        return [_flat_message({"role": "assistant", **f})
                for f in _indexed(attrs, n.COMPLETION_PREFIX).values()]
    if any(k.startswith(n.OI_OUTPUT_MESSAGES_PREFIX) for k in attrs):
        return [_flat_message({"message.role": "assistant", **f}, "message.")
                for f in _indexed(attrs, n.OI_OUTPUT_MESSAGES_PREFIX).values()]
    out = []
    for e in events:
        if e["name"] == n.CHOICE_EVENT:
            a = e["attributes"]
            raw = _maybe_json(a.get("message"))
            msg = _normalise(raw if isinstance(raw, dict) else {"content": a.get("content", raw)}, "assistant")
            if msg is not None:
                if a.get("finish_reason"):
                    msg["finish_reason"] = a["finish_reason"]
                out.append(msg)
    return out


def render_part(part: dict[str, Any]) -> str:
    """One part as plain text; unknown types shown generically (type and their fields)."""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("content", ""))
    if kind == "reasoning":
        return f"[reasoning] {part.get('content', '')}"
    if kind == "tool_call":
        args = part.get("arguments")
        text = args if isinstance(args, str) else PLAIN.encode(args)
        return f"{part.get('name')}({text})"
    if kind == "tool_call_response":
        result = part.get("response", part.get("result"))
        return result if isinstance(result, str) else PLAIN.encode(result)
    fields = {k: val for k, val in part.items() if k != "type"}
    return f"[{kind}] {SORTED.encode(fields)}"


def render(msg: Message) -> str:
    return "\n".join(render_part(p) for p in msg.get("parts") or [])


def item_kind(msg: Message) -> str:
    """The context-item kind: a message, an assistant's tool calls, or a tool's result."""
    if msg.get("role") == "tool":
        return "result"
    kind = "message"
    for p in msg.get("parts") or ():
        t = p.get("type")
        if t == "tool_call_response":
            return "result"
        if t == "tool_call":
            kind = "tool_calls"
    return kind


def render_all(messages: list[Message]) -> str:
    return joined(messages, [render(m) for m in messages])


def joined(messages: list[Message], rendered: list[str]) -> str:
    """A call's messages as one plain text (the span's input/output text), role before each."""
    return "\n\n".join(f"{m.get('role')}: {text}" for m, text in zip(messages, rendered, strict=True))
