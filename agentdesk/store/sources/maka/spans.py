"""Span reads of the maka source: the waterfall table, one span with its texts, sent context.

The projection itself lives in `spanrows`; this module converts it and fetches the
large texts (tool arguments and results, prompts, streamed text) only for the one span
an operator opens.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.maka import codec, spanrows
from agentdesk.store.sources.maka.spanrows import SpanRow
from agentdesk.store.sources.maka.topology import Topology
from agentdesk.store.sources.parsing import json_text


def span_table(conn: Connection, topo: Topology, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
    sid, rid = codec.split_run(run_id)
    rows = spanrows.project(conn, topo, sid, rid)
    if span_ids is not None:  # the projection derives spans from several ledgers: built whole, then narrowed
        wanted = set(span_ids)
        rows = [r for r in rows if r.id in wanted]
    return SpanTable([r.id for r in rows], [r.parent for r in rows], [r.kind for r in rows],
                     [r.name for r in rows], [r.status for r in rows], [r.start_ms / 1000 for r in rows],
                     [codec.secs(r.end_ms) for r in rows], [r.input_tokens for r in rows],
                     [r.output_tokens for r in rows], [r.cost for r in rows])


def span(conn: Connection, topo: Topology, span_id: str) -> rm.Span:
    kind, sid, rid, native = codec.split_span(span_id)
    rows = spanrows.project(conn, topo, sid, rid)
    row = next((r for r in rows if r.id == span_id), None)
    if row is None:
        raise NotFound(f"There is no span with id {span_id}.")
    texts = _TEXTS.get(kind, _no_texts)(conn, sid, rid, native)
    usage = rm.Usage(row.input_tokens, row.output_tokens, row.cost)
    return rm.Span(row.id, codec.run_key(sid, rid), row.parent, row.kind, row.name, row.status,
                   parse.ms_time(row.start_ms), parse.from_ms(row.end_ms), usage, row.attributes, texts[0],
                   texts[1], row.error)


def sent_context(conn: Connection, span_id: str) -> list[rm.SentItem]:
    """Always empty: maka does not record which events a model call was sent (the id is still checked)."""
    codec.split_span(span_id)
    return []


def span_rows(conn: Connection, topo: Topology, run_id: str) -> list[SpanRow]:
    sid, rid = codec.split_run(run_id)
    return spanrows.project(conn, topo, sid, rid)

Texts = tuple[str | None, str | None]


def _no_texts(conn: Connection, sid: str, rid: str, native: str) -> Texts:
    return None, None


def _turn_texts(conn: Connection, sid: str, rid: str, native: str) -> Texts:
    """The user's message in, the model's last text out."""
    rows = conn.execute(text(
        "SELECT json_extract(payload_json, '$.role'), json_extract(payload_json, '$.content.text') "
        "FROM runtime_events WHERE session_id = :sid AND run_id = :rid AND event_kind = 'text' "
        "ORDER BY event_seq"),
        {"sid": sid, "rid": rid}).all()
    user = next((t for role, t in rows if role == "user"), None)
    model = next((t for role, t in reversed(rows) if role == "model"), None)
    return user, model


def _tool_texts(conn: Connection, sid: str, rid: str, call_id: str) -> Texts:
    """The call's arguments and the tool's result, exactly as stored (large results included)."""
    args = conn.execute(text(
        "SELECT json_extract(payload_json, '$.content.args') FROM runtime_events WHERE session_id = :sid "
        "AND run_id = :rid AND event_kind = 'function_call' "
        "AND json_extract(payload_json, '$.content.id') = :c"),
        {"sid": sid, "rid": rid, "c": call_id}).scalar()
    payload = conn.execute(text(
        "SELECT payload_json FROM runtime_events WHERE session_id = :sid AND run_id = :rid "
        "AND event_kind = 'function_response' AND coalesce(json_extract(payload_json, '$.refs.toolCallId'), "
        "json_extract(payload_json, '$.content.id')) = :c"), {"sid": sid, "rid": rid, "c": call_id}).scalar()
    result = parse.json_object(payload).get("content", {}).get("result") if payload else None
    return json_text(args), parse.as_text(result)


def _gate_texts(conn: Connection, sid: str, rid: str, request_id: str) -> Texts:
    row = conn.execute(text(
        "SELECT q.record_json, o.record_json FROM core_interaction_requests q "
        "LEFT JOIN core_interaction_outcomes o ON o.request_id = q.request_id WHERE q.request_id = :id"),
        {"id": request_id}).first()
    if row is None:
        fact = conn.execute(text(
            "SELECT json_extract(payload_json, '$.actions.permissionRequest') FROM runtime_events "
            "WHERE session_id = :sid AND run_id = :rid AND event_kind = 'runtime_fact' "
            "AND json_extract(payload_json, '$.actions.permissionRequest.requestId') = :id"),
            {"sid": sid, "rid": rid, "id": request_id}).scalar()
        return json_text(fact), None
    return (parse.as_text(parse.json_object(row[0]).get("request")),
            parse.as_text(parse.json_object(row[1]).get("outcome")) if row[1] else None)


def _compaction_texts(conn: Connection, sid: str, rid: str, sequence: str) -> Texts:
    seq = int(sequence) if sequence.isdigit() else -1
    record = conn.execute(text(
        "SELECT record_json FROM core_agent_run_events WHERE session_id = :sid AND run_id = :rid "
        "AND sequence = :seq"), {"sid": sid, "rid": rid, "seq": seq}).scalar()
    return json_text(record), None


def _stream_texts(conn: Connection, sid: str, rid: str, stream_key: str) -> Texts:
    """`text_content` then every segment in `segment_seq` order, as maka merges a partial."""
    head = conn.execute(text("SELECT text_content FROM runtime_partial_snapshots WHERE stream_key = :k"),
                        {"k": stream_key}).scalar()
    parts = conn.execute(text("SELECT text_content FROM runtime_partial_segments WHERE stream_key = :k "
                              "ORDER BY segment_seq"), {"k": stream_key}).scalars().all()
    return None, (head or "") + "".join(parts) if head is not None or parts else None


_TEXTS = {"turn": _turn_texts, "tool": _tool_texts, "perm": _gate_texts, "compact": _compaction_texts,
          "stream": _stream_texts}
