"""maka's context, read-only: the agent's conversation events with their model-visibility flag.

maka has no editable context store. What reaches the model is the immutable runtime
event stream; `RuntimeEvent.modelVisibility` ('hidden', absent = visible) says which
events the model sees. agentdesk shows one group per run (turn), the conversation
events (text, thinking, tool calls, tool results, errors) in the session's stored order
(`runtime_session_event_ordinals`), and compaction checkpoints as summary items where
they happened. maka records neither what a checkpoint covered nor a context revision,
so there are no `Compaction` entries and the context revision is the session's last
ordinal (it only ever grows).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.status import require_agent, session_budget
from agentdesk.store.sources.maka.topology import Topology

ITEM_KIND = {"text": "message", "thinking": "message", "error": "message", "function_call": "tool_calls",
             "function_response": "result"}
EVENTS_SQL = text(
    "SELECT o.ordinal, e.event_id, e.run_id, e.event_kind, e.committed_at, "
    "json_extract(e.payload_json, '$.role') AS role, "
    "json_extract(e.payload_json, '$.modelVisibility') AS vis, "
    "json_extract(e.payload_json, '$.content.text') AS body, "
    "json_extract(e.payload_json, '$.content.name') AS name, "
    "json_extract(e.payload_json, '$.content.args') AS args, "
    "json_extract(e.payload_json, '$.content.result') AS result, "
    "json_extract(e.payload_json, '$.content.message') AS message "
    "FROM runtime_session_event_ordinals o JOIN runtime_events e ON e.event_id = o.event_id "
    "WHERE o.session_id = :sid AND e.event_kind IN ("
    + ", ".join(f"'{k}'" for k in codec.CONTENT_KINDS) + ") ORDER BY o.ordinal")


def context(conn: Connection, topo: Topology, agent_id: str) -> rm.AgentContext:
    agent = require_agent(topo, agent_id)
    keys = topo.runs_by_agent.get(agent_id, [])
    runs = {topo.runs[k].run_id: topo.runs[k] for k in keys}
    sid = agent.session_id
    events = [dict(r._mapping) for r in conn.execute(EVENTS_SQL, {"sid": sid})]
    marks = conn.execute(text(
        "SELECT run_id, sequence, event_ts, json_extract(record_json, '$.data.checkpointId') "
        "FROM core_agent_run_events WHERE session_id = :sid AND event_type IN (" +
        ", ".join(f"'{t}'" for t in codec.COMPACTION_EVENTS) + ")"), {"sid": sid}).all()
    revision = conn.execute(text("SELECT max(ordinal) FROM runtime_session_event_ordinals "
                                 "WHERE session_id = :sid"), {"sid": sid}).scalar() or 0
    budget = session_budget(conn, sid)
    groups = tuple(rm.ContextGroup(k, agent_id, n, "turn", 0, parse.ms_time(topo.runs[k].created_ms))
                   for n, k in enumerate(sorted(keys, key=lambda k: (topo.runs[k].created_ms or 0, k))))
    merged: list[tuple[int, int, Any]] = [(e["committed_at"], e["ordinal"], e) for e in events
                                          if e["run_id"] in runs]
    merged += [(ts, 1 << 62, (rid, seq, ts, ck)) for rid, seq, ts, ck in marks if rid in runs]
    merged.sort(key=lambda m: (m[0], m[1]))
    items = tuple(_item(agent_id, sid, pos, value) for pos, (_, _, value) in enumerate(merged))
    return rm.AgentContext(agent_id, int(revision), budget, groups, items)


def _item(agent_id: str, sid: str, position: int, value: Any) -> rm.ContextItem:
    if isinstance(value, tuple):  # a compaction checkpoint
        rid, seq, ts, checkpoint = value
        content = (f"History compacted here (checkpoint {checkpoint or 'unnamed'}). maka does not record "
                   "which events the checkpoint replaced.")
        return rm.ContextItem(codec.span_id("compact", sid, rid, seq), agent_id, codec.run_key(sid, rid),
                              position, "compaction", "system", content, True, False, 1, len(content) // 4,
                              None, created_at=parse.from_ms(ts))
    kind = value["event_kind"]
    if kind == "function_call":
        content = f"{value['name']}({value['args'] or ''})"
    elif kind == "function_response":
        content = parse.as_text(value["result"]) or ""
    elif kind == "error":
        content = f"error: {value['message'] or ''}"
    else:
        content = value["body"] or ""
    role = "thinking" if kind == "thinking" else value["role"]
    return rm.ContextItem(value["event_id"], agent_id, codec.run_key(sid, value["run_id"]), position,
                          ITEM_KIND[kind], role, content, value["vis"] != "hidden", False, 1,
                          max(1, len(content) // 4), None, created_at=parse.from_ms(value["committed_at"]))
