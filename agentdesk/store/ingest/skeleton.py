"""A stored trace's skeleton: what placing its spans on agents needs, read without their payloads.

Why: the receiver sees a trace in pieces, children first (a span is exported when it ends, before its
parent). Which agent a span belongs to, whether an agent span is a sub-agent, and which agent owns the
run all depend on spans that may come later. `import` sees the whole trace and decides once. So that
both end with the same rows, a write to a trace already stored reads the stored spans' skeleton (real
parent, start, agent identity, model, the agent recorded on a model span) into its `TraceIndex`, decides
over the whole trace as `import` does, and corrects what the stored spans were given (`writer._retype`).
Only small JSON fields are extracted in SQL; the messages stay in the database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, cast, func, select
from sqlalchemy.dialects.postgresql import JSONB

from agentdesk.store.ingest import names as n
from agentdesk.store.ingest.prepare import AGENT_KEY
from agentdesk.store.ingest.semconv import agent_identity, conversation_of, is_agent_span
from agentdesk.store.ingest.spans import OtelSpan, split_span_row_id
from agentdesk.store.persistence import schema as sc

ORPHAN_PREFIX = "(orphan) "
"""Put before an orphan's name while it waits (the writer's marker; removed when the parent arrives)."""
_KEYS = (n.OPERATION, n.OI_SPAN_KIND, n.AGENT_NAME, n.OI_AGENT_NAME, n.AGENT_ID, n.RESPONSE_MODEL,
         n.REQUEST_MODEL, n.OI_MODEL_NAME, n.CONVERSATION_ID, n.OI_SESSION_ID, AGENT_KEY)


@dataclass(frozen=True, slots=True)
class StoredSpan:
    span_id: str
    """The OTel span id (16 hex digits)."""
    parent_id: str | None
    """The real parent: for an orphan, the one it waits for (its row sits under the root meanwhile)."""
    kind: str
    name: str
    start_ns: int
    agent_key: str | None
    agent_name: str | None
    model: str
    agent: str | None
    """A model span's recorded agent (`agentdesk.agent`), or None."""
    conversation: str | None
    """`gen_ai.conversation.id` / `session.id`: the session (it may be on the root span only, which comes last)."""


def json_field(conn: Connection, column: Any, key: str) -> Any:
    """One top-level field of a JSON text column, as SQL (SQLite's json_extract over `agentdesk_text`, which reads a
    compressed payload (persistence/payloads.py), PostgreSQL's jsonb)."""
    if conn.dialect.name == "postgresql":
        return func.jsonb_extract_path_text(cast(column, JSONB), key)
    return func.json_extract(func.agentdesk_text(column), f'$."{key}"')  # large payloads are stored compressed


def load(conn: Connection, run_id: str) -> list[StoredSpan]:
    """The skeleton of every stored span of `run_id`, in one statement."""
    S, Orph = sc.SpanRow, sc.OtelOrphanRow
    fields = [json_field(conn, S.attributes, k) for k in _KEYS]
    rows = conn.execute(select(S.id, S.parent_span_id, Orph.parent_id, S.kind, S.name, S.started_at, *fields)
                        .outerjoin(Orph, Orph.span_id == S.id).where(S.run_id == run_id)).all()
    out = []
    for row in rows:
        ids = split_span_row_id(row[0])
        if ids is None:
            continue
        parent_row = row[2] if row[2] is not None else row[1]
        parent = split_span_row_id(parent_row) if parent_row else None
        out.append(_stored(ids, parent[1] if parent else None, row[3], row[4], int(row[5]),
                           dict(zip(_KEYS, row[6:], strict=True))))
    return out


def of_row(trace_id: str, span_id: str, parent_id: str | None, kind: str, name: str, start_ns: int,
           attributes: str, *, postgres: bool) -> StoredSpan:
    """What `load` would read back of a span this write stores (its attributes as written, as text): the
    skeleton a writer keeps (`skeleton_cache`) then equals the stored one without reading it again."""
    attrs = json.loads(attributes or "{}")
    values = {k: _as_sql(attrs.get(k), postgres) for k in _KEYS}
    return _stored((trace_id, span_id), parent_id, kind, name, start_ns, values)


def _as_sql(value: Any, postgres: bool) -> Any:
    """A JSON value as `json_field` extracts it: SQLite's json_extract (true is 1, objects minified text),
    PostgreSQL's jsonb_extract_path_text (everything as text)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("true" if value else "false") if postgres else int(value)
    if isinstance(value, int | float):
        return str(value) if postgres else value
    return json.dumps(value) if postgres else json.dumps(value, separators=(",", ":"))


def _stored(ids: tuple[str, str], parent_id: str | None, kind: str, name: str, start_ns: int,
            values: dict[str, Any]) -> StoredSpan:
    attrs = {k: v for k, v in values.items() if v is not None and k != AGENT_KEY}
    name = name[len(ORPHAN_PREFIX):] if name.startswith(ORPHAN_PREFIX) else name
    key = agent_name = None
    if is_agent_span(attrs):
        key, agent_name = agent_identity(OtelSpan(ids[0], ids[1], None, name, 0, 0, 0, attrs))
    model = str(attrs.get(n.RESPONSE_MODEL) or attrs.get(n.REQUEST_MODEL) or attrs.get(n.OI_MODEL_NAME) or "")
    agent = values[AGENT_KEY]
    return StoredSpan(ids[1], parent_id, kind, name, start_ns, key, agent_name, model,
                      None if agent is None else str(agent), conversation_of(attrs))


def agent_names(conn: Connection, runs: Any) -> set[str]:
    """The agent names the agent spans of `runs` (a select of run ids) bear."""
    S = sc.SpanRow
    keys = (n.AGENT_NAME, n.OI_AGENT_NAME)
    out = set()
    for name, *values in conn.execute(select(S.name, *(json_field(conn, S.attributes, k) for k in keys))
                                      .where(S.run_id.in_(runs), S.kind.in_(("agent", "sub_agent")))):
        attrs = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
        plain = name[len(ORPHAN_PREFIX):] if name.startswith(ORPHAN_PREFIX) else name
        out.add(agent_identity(OtelSpan("", "", None, plain, 0, 0, 0, attrs))[1])
    return out
