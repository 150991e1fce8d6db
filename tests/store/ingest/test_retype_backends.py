"""Children first on SQLite and PostgreSQL: the write that brings the enclosing agent span corrects the rest.

The correction reads the stored spans' skeleton with SQL JSON functions (SQLite `json_extract`, PostgreSQL
`jsonb`), so it is tested on both backends: a sub-agent written before its parent agent becomes `sub_agent`,
its model call and context move to the sub-agent's real id, the provisional agents go.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from agentdesk.store.ingest.ingest import ingest_json
from agentdesk.store.ingest.prepare import AGENT_KEY
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store

TRACE = "c4" * 16


def span(n: int, parent: int | None, name: str, values: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {"traceId": TRACE, "spanId": f"{n:016x}", "name": name, "kind": 1,
                           "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 1000),
                           "endTimeUnixNano": str(1_700_000_100_000_000_000 - n * 1000),
                           "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
                                           {"stringValue": v}} for k, v in values.items()]}
    if parent is not None:
        raw["parentSpanId"] = f"{parent:016x}"
    return raw


def document(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "b"}}]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


ROOT = span(1, None, "invoke_agent boss", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "boss"})
SUB = span(2, 1, "invoke_agent worker", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "worker"})
CALL = span(3, 2, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                           "gen_ai.usage.input_tokens": 9, "gen_ai.usage.output_tokens": 2,
                           "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                               {"type": "text", "content": "hi"}]}])})


def test_a_parent_agent_arriving_last_makes_its_children_a_sub_agent(store: Store) -> None:
    ingest_json(store, document(CALL))
    ingest_json(store, document(SUB))
    report = ingest_json(store, document(ROOT))
    assert report.retyped >= 1
    with store.reading() as s:
        agents = {a.id: a for a in s.scalars(select(sc.AgentRow))}
        named = {a.name: a for a in agents.values()}
        assert set(named) == {"boss", "worker"}
        assert named["worker"].parent_agent_id == named["boss"].id and named["worker"].model == "gpt-4o-mini"
        kinds = {r.name: r.kind for r in s.scalars(select(sc.SpanRow))}
        assert kinds == {"invoke_agent boss": "agent", "invoke_agent worker": "sub_agent", "chat": "model"}
        call = s.scalars(select(sc.SpanRow).where(sc.SpanRow.kind == "model")).one()
        assert json.loads(call.attributes)[AGENT_KEY] == named["worker"].id
        items = [(i.agent_id, i.content) for i in s.scalars(select(sc.ContextItemRow))]
        assert items == [(named["worker"].id, "hi")]
        assert s.scalars(select(sc.RunRow.agent_id)).one() == named["boss"].id
