"""maka's approval queue: interaction requests, and settling a permission by inserting its outcome.

A request is pending while `core_interaction_outcomes` has no row for it. maka settles
one with `INSERT OR IGNORE` and re-reads the row, so the first writer wins; agentdesk
does the same inside one `BEGIN IMMEDIATE` transaction, writing the canonical
`permission_answer` outcome maka's own host writes for an operator's answer
(`reviewer: 'user'`, `rememberForTurn: false`). maka has no deadlines, so nothing
expires on agentdesk's clock; a `closure` the runtime wrote (timed out, turn ended,
host restarted) shows as expired with its reason.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import AlreadyDecided, NotFound, Unsupported
from agentdesk.store.persistence.bus import Change
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources import unreadable
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.topology import Topology
from agentdesk.store.sources.parsing import from_ms, json_object
from agentdesk.store.sources.sql import Row, one, rows

SELECT = (
    "SELECT * FROM (SELECT q.request_id, q.session_id, q.run_id, q.request_kind, q.created_at, "
    "q.record_json AS request_json, o.record_json AS outcome_json, " + codec.STATUS_CASE + " AS status "
    "FROM core_interaction_requests q LEFT JOIN core_interaction_outcomes o ON o.request_id = q.request_id) ")


def approvals(conn: Connection, topo: Topology, status: str | None = "pending",
              limit: int = 1000) -> list[rm.Approval]:
    """Pending oldest first (maka's own `listPending` order); any other filter newest first."""
    # questions are the Questions tab's (maka/asks.py); permissions and sandbox boundaries are approvals
    where = "WHERE request_kind <> 'question' " + ("" if status in (None, "all") else "AND status = :status ")
    order = "created_at, request_id" if status == "pending" else "created_at DESC, request_id"
    return _approvals(conn, topo, rows(conn, SELECT + where + f"ORDER BY {order} LIMIT :limit",
                                       status=status, limit=limit))


def approval(conn: Connection, topo: Topology, approval_id: str) -> rm.Approval:
    row = one(conn, SELECT + "WHERE request_id = :id", id=approval_id)
    if row is None:
        raise NotFound(f"There is no approval with id {approval_id}.")
    return _approvals(conn, topo, [row])[0]


def _approvals(conn: Connection, topo: Topology, found: list[Row]) -> list[rm.Approval]:
    args = _call_args(conn, {r["session_id"] for r in found if r["request_kind"] == "permission"})
    return unreadable.each(found, lambda r: _approval(topo, r, args), _unreadable)


def _unreadable(r: Row, why: str) -> rm.Approval:
    sid, rid = r.get("session_id"), r.get("run_id")
    run = codec.run_key(sid, rid) if isinstance(sid, str) and isinstance(rid, str) else None
    return unreadable.approval(r, why, id_column="request_id", created_column="created_at", session_id=sid,
                               run_id=run)


def _call_args(conn: Connection, session_ids: set[str]) -> dict[tuple[str, str, str], str]:
    """The stored arguments of each function_call, by (session, run, provider tool-call id)."""
    out: dict[tuple[str, str, str], str] = {}
    for sid in session_ids:
        for rid, call_id, args in conn.execute(text(
                "SELECT run_id, json_extract(payload_json, '$.content.id'), "
                "json_extract(payload_json, '$.content.args') FROM runtime_events "
                "WHERE session_id = :sid AND event_kind = 'function_call'"), {"sid": sid}):
            out[(sid, rid, str(call_id))] = args if isinstance(args, str) else json.dumps(args)
    return out


# -- the write -------------------------------------------------------------------------------
def decide(conn: Connection, topo: Topology, approval_id: str, approve: bool) -> tuple[rm.Approval, list[Change]]:
    """Settle a pending permission request as maka's host would: first writer wins.

    Runs inside the caller's write transaction; returns the decided approval and the
    changes to publish once it committed.
    """
    row = one(conn, "SELECT request_kind, record_json FROM core_interaction_requests WHERE request_id = :id",
              id=approval_id)
    if row is None:
        raise NotFound(f"There is no approval with id {approval_id}.")
    _refuse_if_settled(conn, approval_id)
    if row["request_kind"] != "permission":
        if row["request_kind"] == "question":
            raise Unsupported(f"{approval_id} is a maka question, not a permission: it is in the Questions tab, "
                              "read-only, because maka's question_answer format is not documented; answer it in "
                              "maka.")
        raise Unsupported(f"{approval_id} is a maka {row['request_kind']} request; agentdesk settles permission "
                          "requests (allow or deny) and shows questions read-only. Answer it in maka.")
    encoded = _outcome_record(json_object(row["record_json"]), approval_id, approve)
    conn.execute(text("INSERT OR IGNORE INTO core_interaction_outcomes(request_id, record_json) "
                      "VALUES (:id, :record)"), {"id": approval_id, "record": encoded})
    stored = conn.execute(text("SELECT record_json FROM core_interaction_outcomes WHERE request_id = :id"),
                          {"id": approval_id}).scalar()
    if stored != encoded:  # another writer's outcome is the one that counts
        _refuse_if_settled(conn, approval_id)
    decided = approval(conn, topo, approval_id)
    at_run = {**topo.run_parents(decided.session_id, decided.run_id.split("/", 1)[1]), "run": decided.run_id}
    return decided, [Change("approval", "update", approval_id, at_run),
                     Change("span", "update", decided.span_id or "", at_run)]


def _refuse_if_settled(conn: Connection, approval_id: str) -> None:
    row = one(conn, SELECT + "WHERE request_id = :id", id=approval_id)
    if row is not None and row["outcome_json"] is not None:
        outcome = json_object(row["outcome_json"]).get("outcome", {})
        at = from_ms(outcome.get("committedAt"))
        raise AlreadyDecided(approval_id, row["status"], _decided_by(outcome), at.isoformat() if at else None)


def _outcome_record(request: dict[str, Any], request_id: str, approve: bool) -> str:
    """`StoredInteractionOutcome` for an operator's answer, fields in maka's own order."""
    outcome = {"kind": "permission_answer", "reviewer": "user", "committedAt": int(time.time() * 1000),
               "decision": "allow" if approve else "deny", "rememberForTurn": False}
    identity = {k: request.get(k) for k in ("sessionId", "turnId", "runId")}
    return json.dumps({**identity, "requestId": request_id, "outcome": outcome}, separators=(",", ":"),
                      ensure_ascii=False)


def _decided_by(outcome: dict[str, Any]) -> str | None:
    if not outcome:
        return None
    return "maka runtime" if outcome.get("kind") == "closure" else str(outcome.get("reviewer") or "user")


def _reason(outcome: dict[str, Any]) -> str | None:
    kind = outcome.get("kind")
    if kind == "closure":
        return f"closed by maka without an answer: {outcome.get('reason')}"
    if kind == "sandbox_boundary_decision" and outcome.get("status") == "conflict":
        return "sandbox boundary conflict"
    if kind == "question_answer":
        return "answered: " + json.dumps(outcome.get("answers"), ensure_ascii=False)
    parts = [outcome.get("rationale"), f"risk {outcome['riskLevel']}" if outcome.get("riskLevel") else None]
    return "; ".join(p for p in parts if p) or None


def _approval(topo: Topology, r: dict[str, Any], call_args: dict[tuple[str, str, str], str]) -> rm.Approval:
    record = parse.json_object(r["request_json"])
    request: dict[str, Any] = record["request"] if isinstance(record.get("request"), dict) else {}
    if r["status"] == unreadable.UNREADABLE:
        raise unreadable.Unreadable(f"its outcome record is not JSON: {unreadable.shown_value(r['outcome_json'], 200)}")
    outcome = parse.json_object(r["outcome_json"]).get("outcome", {}) if r["outcome_json"] else {}
    sid, rid, kind = r["session_id"], r["run_id"], r["request_kind"]
    tool_use = request.get("toolUseId")
    prompt: dict[str, Any] = request["prompt"] if isinstance(request.get("prompt"), dict) else {}
    if kind == "permission":
        tool = str(prompt.get("toolName") or "?")
        arguments = (call_args.get((sid, rid, str(tool_use)))
                     or json.dumps(prompt.get("review"), ensure_ascii=False))
    else:
        tool = kind
        arguments = json.dumps({k: v for k, v in request.items() if k != "kind"}, ensure_ascii=False)
    agent = topo.agents.get(topo.agent_of_run(sid, rid))
    project = agent.project_id if agent else codec.NO_PROJECT
    return rm.Approval(
        r["request_id"], tool_use, project, codec.task_of(project), agent.top if agent else sid,
        agent.id if agent else codec.root_agent(sid), codec.run_key(sid, rid),
        codec.span_id("perm", sid, rid, r["request_id"]), tool, arguments,
        hashlib.sha256((r["request_json"] or "").encode()).hexdigest(), r["status"],
        unreadable.required_ms(r["created_at"], "created_at"), None, parse.from_ms(outcome.get("committedAt")),
        _decided_by(outcome),
        _reason(outcome), None, None,
        agent.name if agent else "", topo.projects[project].name if project in topo.projects else "")
