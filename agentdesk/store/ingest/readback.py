""""What the model saw" for an imported model span, rebuilt from the span's own messages.

Why not rows: writing one `span_context_items` row per message per call was about
half of all the rows an import wrote (a call re-sends its whole history). The
span keeps its messages in its attributes anyway, so they are decoded again here,
on demand, with the same rendering and the same item ids as the agent's context
items (writer.item_id), for the one span the details pane is showing.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.ingest import messages as msgs
from agentdesk.store.ingest.semconv import classify
from agentdesk.store.ingest.spans import OtelSpan, split_span_row_id
from agentdesk.store.ingest.writer import AGENT_KEY, EXTRA_KEYS, item_id
from agentdesk.store.text.jsonsafe import NotJson, bounded, loads


def is_imported_span(span_id: str) -> bool:
    return split_span_row_id(span_id) is not None


def sent_items(span_id: str, attributes_json: str | None) -> list[rm.SentItem]:
    """The input messages of an imported model span as the items it sent, in order."""
    parts = split_span_row_id(span_id)
    if parts is None:
        return []
    try:
        attrs: dict[str, Any] = bounded(loads(attributes_json or "{}"))
    except NotJson:
        return []
    raw_events = attrs.get("otel.events")
    events: list[dict[str, Any]] = raw_events if isinstance(raw_events, list) else []
    agent = str(attrs.get(AGENT_KEY, ""))
    span = OtelSpan(parts[0], parts[1], None, "", 0, 1, 2,
                    {k: v for k, v in attrs.items() if k not in EXTRA_KEYS}, events)
    c = classify(span)
    repeats: dict[tuple[str, str], int] = {}
    out: list[rm.SentItem] = []
    for n, (m, content) in enumerate(zip(c.input_messages, c.input_rendered, strict=True)):
        role = str(m.get("role") or "user")
        k = repeats[(role, content)] = repeats.get((role, content), -1) + 1
        out.append(rm.SentItem(item_id(agent, role, content, k), 1, n, msgs.item_kind(m), role, content))
    return out
