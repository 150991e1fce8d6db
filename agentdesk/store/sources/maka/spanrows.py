"""The span projection of one maka run, built the way maka's own `SessionTrace` is.

maka stores no spans: runtime events are points. Like `SessionTrace` ("a projection,
not a record"), this joins the causal ledger (`runtime_events`, `tool_operations`,
interactions, run events) with metering (`usage_model_call_attempts`):
- the run's turn is the root span (kind agent; a run has exactly one turn);
- one model span per `ModelCallAttempt` (retries are sibling spans carrying
  `logical_call_id` and `attempt`), from `startedAt` to `completedAt`;
- one tool span per `function_call`, from dispatch (or the call) to its
  `function_response`; a tool call that spawned a sub-agent session is kind sub_agent;
- one gate span per permission/question/sandbox request, from request to outcome;
- error events and compaction checkpoints as zero-length internal spans;
- streaming partial snapshots as running model spans.
Only small columns are read here (no tool arguments or results), so a run with a
multi-megabyte tool result projects as fast as any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.topology import Topology


@dataclass(slots=True)
class SpanRow:
    id: str
    parent: str | None
    kind: str
    name: str
    status: str
    start_ms: int
    end_ms: int | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _q(conn: Connection, sql: str, sid: str, rid: str) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(text(sql), {"sid": sid, "rid": rid})]


def _attrs(**values: Any) -> dict[str, Any]:
    """Span attributes without the absent ones."""
    return {k: v for k, v in values.items() if v is not None}


def project(conn: Connection, topo: Topology, sid: str, rid: str) -> list[SpanRow]:
    """Every span of run `sid/rid`, the turn first, then by start time."""
    header_json = conn.execute(text("SELECT record_json FROM core_agent_runs WHERE session_id = :sid "
                                    "AND run_id = :rid"), {"sid": sid, "rid": rid}).scalar()
    if header_json is None:
        raise NotFound(f"There is no run with id {codec.run_key(sid, rid)}.")
    header = parse.json_object(header_json)
    root = codec.span_id("turn", sid, rid)
    live = header.get("status") not in codec.TERMINAL_RUN
    rows = (_attempts(conn, sid, rid, root) + _tools(conn, topo, sid, rid, root, live)
            + _gates(conn, sid, rid, root) + _points(conn, sid, rid, root) + _streams(conn, sid, rid, root))
    rows.sort(key=lambda r: (r.start_ms, r.id))
    return [_turn(conn, header, sid, rid, root, rows), *rows]


def _turn(conn: Connection, header: dict[str, Any], sid: str, rid: str, root: str,
          children: list[SpanRow]) -> SpanRow:
    first, last = conn.execute(text("SELECT min(committed_at), max(committed_at) FROM runtime_events "
                                    "WHERE session_id = :sid AND run_id = :rid"),
                               {"sid": sid, "rid": rid}).one()
    native = str(header.get("status", ""))
    status = codec.RUN_STATUS.get(native, "pending")
    start = header["createdAt"] if isinstance(header.get("createdAt"), int) else first
    end = None
    if native in codec.TERMINAL_RUN:
        end = header.get("completedAt") or header.get("updatedAt") or last
    models = [r for r in children if r.kind == "model"]
    attrs = _attrs(native_status=native, turn_id=header.get("turnId"),
                   invocation_id=header.get("invocationId"), model=header.get("modelId"),
                   backend=header.get("backendKind"), permission_mode=header.get("permissionMode"),
                   agent_name=header.get("agentName"))
    return SpanRow(root, None, "agent", f"turn {header.get('turnId') or rid}",
                   codec.TURN_SPAN_STATUS.get(status, "running"), start or 0, end,
                   sum(r.input_tokens for r in models), sum(r.output_tokens for r in models),
                   sum(r.cost for r in models), attrs,
                   header.get("failureMessage") or header.get("failureClass"))


def _attempts(conn: Connection, sid: str, rid: str, root: str) -> list[SpanRow]:
    out = []
    for row in _q(conn, "SELECT attempt_id, completed_at, record_json FROM usage_model_call_attempts "
                  "WHERE json_extract(record_json, '$.sessionId') = :sid "
                  "AND json_extract(record_json, '$.runId') = :rid", sid, rid):
        rec = parse.json_object(row["record_json"])
        attempt = rec.get("attempt", 0)
        retry = f" (retry {attempt})" if isinstance(attempt, int) and attempt > 0 else ""
        name = f"{rec.get('callKind', 'model')} · {rec.get('modelId', '?')}{retry}"
        attrs = _attrs(native_status=rec.get("status"), logical_call_id=rec.get("logicalCallId"),
                       attempt=attempt, step=rec.get("step"), provider=rec.get("providerId"),
                       latency_ms=rec.get("latencyMs"), cost_basis=rec.get("costBasis"),
                       usage_basis=rec.get("usageBasis"), error_class=rec.get("errorClass"),
                       time_to_first_token_ms=rec.get("timeToFirstTokenMs"),
                       cache_read_input_tokens=rec.get("cacheReadInputTokens"),
                       reasoning_tokens=rec.get("reasoningTokens"))
        start = rec["startedAt"] if isinstance(rec.get("startedAt"), int) else row["completed_at"]
        status = codec.ATTEMPT_STATUS.get(str(rec.get("status")), "error")
        out.append(SpanRow(codec.span_id("model", sid, rid, row["attempt_id"]), root, "model", name, status,
                           start, row["completed_at"], int(rec.get("inputTokens") or 0),
                           int(rec.get("outputTokens") or 0), float(rec.get("costUsd") or 0.0), attrs,
                           rec.get("errorClass") if rec.get("status") != "completed" else None))
    return out


CALLS_SQL = (
    "SELECT c.event_id, c.committed_at, json_extract(c.payload_json, '$.content.id') AS call_id, "
    "json_extract(c.payload_json, '$.content.name') AS name, t.operation_id, t.current_state, "
    "t.recovery_mode, t.version, t.result_event_id, d.committed_at AS dispatch_ms "
    "FROM runtime_events c LEFT JOIN tool_operations t ON t.call_event_id = c.event_id "
    "LEFT JOIN runtime_events d ON d.event_id = t.dispatch_event_id "
    "WHERE c.session_id = :sid AND c.run_id = :rid AND c.event_kind = 'function_call'")
ANSWERS_SQL = (
    "SELECT event_id, committed_at, json_extract(payload_json, '$.content.isError') AS is_error, "
    "coalesce(json_extract(payload_json, '$.refs.toolCallId'), json_extract(payload_json, '$.content.id')) "
    "AS call_id FROM runtime_events "
    "WHERE session_id = :sid AND run_id = :rid AND event_kind = 'function_response'")


def _tools(conn: Connection, topo: Topology, sid: str, rid: str, root: str, live: bool) -> list[SpanRow]:
    answers = {r["call_id"]: r for r in _q(conn, ANSWERS_SQL, sid, rid)}
    children = {s.tool_call: s.id for s in topo.sessions.values()
                if s.parent_session == sid and s.parent_run == rid and s.tool_call}
    out = []
    for c in _q(conn, CALLS_SQL, sid, rid):
        answer = answers.get(c["call_id"])
        native = c["current_state"] or ("answered" if answer else "not_dispatched")
        if answer is not None:
            status, error = ("error", "the tool reported an error") if answer["is_error"] else ("ok", None)
        elif c["current_state"] == "recovery_parked":
            status, error = "error", "recovery parked: the outcome is unknown"
        elif live:
            status, error = "running", None
        else:
            status, error = "error", "no result was recorded before the run ended"
        attrs = _attrs(native_status=native, tool_call_id=c["call_id"], operation_id=c["operation_id"],
                       recovery_mode=c["recovery_mode"], version=c["version"], call_event_id=c["event_id"],
                       result_event_id=answer["event_id"] if answer else None,
                       child_session_id=children.get(c["call_id"]))
        kind = "sub_agent" if c["call_id"] in children else "tool"
        out.append(SpanRow(codec.span_id("tool", sid, rid, c["call_id"]), root, kind, str(c["name"]), status,
                           c["dispatch_ms"] or c["committed_at"], answer["committed_at"] if answer else None,
                           attributes=attrs, error=error))
    return out


GATE_STATUS = {"pending": "running", "approved": "ok", "denied": "error", "expired": "cancelled", "unreadable": "error"}
REQUESTS_SQL = (
    "SELECT q.request_id, q.request_kind, q.created_at, "
    "json_extract(q.record_json, '$.request.prompt.toolName') AS tool, "
    "json_extract(q.record_json, '$.request.toolUseId') AS tool_use, "
    "json_extract(o.record_json, '$.outcome.committedAt') AS decided, "
    "json_extract(o.record_json, '$.outcome.kind') AS outcome_kind, "
    "coalesce(json_extract(o.record_json, '$.outcome.decision'), "
    "json_extract(o.record_json, '$.outcome.reason')) AS detail, "
    f"{codec.STATUS_CASE} AS status FROM core_interaction_requests q "
    "LEFT JOIN core_interaction_outcomes o ON o.request_id = q.request_id "
    "WHERE q.session_id = :sid AND q.run_id = :rid")
FACTS_SQL = (
    "SELECT committed_at, "
    "json_extract(payload_json, '$.actions.permissionRequest.requestId') AS req, "
    "json_extract(payload_json, '$.actions.permissionRequest.toolName') AS tool, "
    "json_extract(payload_json, '$.actions.permissionDecision.requestId') AS dreq, "
    "json_extract(payload_json, '$.actions.permissionDecision.decision') AS decision "
    "FROM runtime_events WHERE session_id = :sid AND run_id = :rid AND event_kind = 'runtime_fact'")


def _gates(conn: Connection, sid: str, rid: str, root: str) -> list[SpanRow]:
    """Permission, question and sandbox requests: the interaction store first, audit facts for the rest."""
    out, seen = [], set()
    for r in _q(conn, REQUESTS_SQL, sid, rid):
        seen.add(r["request_id"])
        kind = str(r["request_kind"])
        name = f"permission: {r['tool'] or '?'}" if kind == "permission" else kind.replace("_", " ")
        native = f"{r['outcome_kind']}:{r['detail']}" if r["outcome_kind"] else "pending"
        attrs = _attrs(native_status=native, request_id=r["request_id"], request_kind=kind,
                       tool_call_id=r["tool_use"])
        end = r["decided"] if r["outcome_kind"] else None
        out.append(SpanRow(codec.span_id("perm", sid, rid, r["request_id"]), root, "gate", name,
                           GATE_STATUS[r["status"]], r["created_at"], end, attributes=attrs))
    facts = _q(conn, FACTS_SQL, sid, rid)
    decisions = {f["dreq"]: f for f in facts if f["dreq"]}
    for f in (f for f in facts if f["req"] and f["req"] not in seen):
        d = decisions.get(f["req"])
        status = "running" if d is None else ("ok" if d["decision"] == "allow" else "error")
        attrs = {"native_status": d["decision"] if d else "requested", "request_id": f["req"],
                 "source": "runtime_events"}
        out.append(SpanRow(codec.span_id("perm", sid, rid, f["req"]), root, "gate",
                           f"permission: {f['tool']}", status, f["committed_at"],
                           d["committed_at"] if d else None, attributes=attrs))
    return out


ERRORS_SQL = (
    "SELECT event_id, committed_at, json_extract(payload_json, '$.content.code') AS code, "
    "json_extract(payload_json, '$.content.message') AS message FROM runtime_events "
    "WHERE session_id = :sid AND run_id = :rid AND event_kind = 'error'")
MARKS_SQL = (
    "SELECT sequence, event_type, event_ts, json_extract(record_json, '$.data.checkpointId') AS ck "
    "FROM core_agent_run_events WHERE session_id = :sid AND run_id = :rid AND event_type IN ("
    + ", ".join(f"'{t}'" for t in codec.COMPACTION_EVENTS) + ")")


def _points(conn: Connection, sid: str, rid: str, root: str) -> list[SpanRow]:
    out = []
    for r in _q(conn, ERRORS_SQL, sid, rid):
        out.append(SpanRow(codec.span_id("error", sid, rid, r["event_id"]), root, "internal",
                           f"error: {r['code'] or 'error'}", "error", r["committed_at"], r["committed_at"],
                           attributes={"native_status": "error", "event_id": r["event_id"]},
                           error=r["message"]))
    for r in _q(conn, MARKS_SQL, sid, rid):
        attrs = _attrs(native_status=r["event_type"], checkpoint_id=r["ck"])
        out.append(SpanRow(codec.span_id("compact", sid, rid, r["sequence"]), root, "internal", "compaction",
                           "ok", r["event_ts"], r["event_ts"], attributes=attrs))
    return out


STREAMS_SQL = (
    "SELECT p.stream_key, p.updated_at, e.committed_at AS after_ms, "
    "json_extract(p.payload_json, '$.content.kind') AS kind FROM runtime_partial_snapshots p "
    "LEFT JOIN runtime_events e ON e.event_id = p.after_event_id "
    "WHERE p.session_id = :sid AND p.run_id = :rid")


def _streams(conn: Connection, sid: str, rid: str, root: str) -> list[SpanRow]:
    out = []
    for r in _q(conn, STREAMS_SQL, sid, rid):
        kind = r["kind"] or "output"
        attrs = {"native_status": "partial", "updated_at_ms": r["updated_at"]}
        out.append(SpanRow(codec.span_id("stream", sid, rid, r["stream_key"]), root,
                           "model" if kind in ("text", "thinking") else "tool", f"streaming {kind}",
                           "running", r["after_ms"] or r["updated_at"], None, attributes=attrs))
    return out
