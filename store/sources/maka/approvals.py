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
from agentdesk.store.bus import Change
from agentdesk.store.errors import AlreadyDecided, NotFound
from agentdesk.store.sources.foreign import Unsupported
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.base import MakaBase
from agentdesk.store.sources.maka.topology import Topology

SELECT = (
    "SELECT * FROM (SELECT q.request_id, q.session_id, q.run_id, q.request_kind, q.created_at, "
    "q.record_json AS request_json, o.record_json AS outcome_json, " + codec.STATUS_CASE + " AS status "
    "FROM core_interaction_requests q LEFT JOIN core_interaction_outcomes o ON o.request_id = q.request_id) ")


class ApprovalQueries(MakaBase):
    def approvals(self, status: str | None = "pending", limit: int = 1000) -> list[rm.Approval]:
        """Pending oldest first (maka's own `listPending` order); any other filter newest first."""
        where = "" if status in (None, "all") else "WHERE status = :status "
        order = "created_at, request_id" if status == "pending" else "created_at DESC, request_id"
        with self.reading() as conn:
            rows = [dict(r._mapping) for r in conn.execute(
                text(SELECT + where + f"ORDER BY {order} LIMIT :limit"), {"status": status, "limit": limit})]
            return self._approvals(conn, rows)

    def approval(self, approval_id: str) -> rm.Approval:
        with self.reading() as conn:
            return self._one(conn, approval_id)

    def _one(self, conn: Connection, approval_id: str) -> rm.Approval:
        row = conn.execute(text(SELECT + "WHERE request_id = :id"), {"id": approval_id}).first()
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        return self._approvals(conn, [dict(row._mapping)])[0]

    def _approvals(self, conn: Connection, rows: list[dict[str, Any]]) -> list[rm.Approval]:
        topo = self.topology(conn)
        args = self._call_args(conn, {r["session_id"] for r in rows if r["request_kind"] == "permission"})
        return [_approval(topo, r, args) for r in rows]

    @staticmethod
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

    # -- the write ---------------------------------------------------------------------------
    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval:
        """Settle a pending permission request as maka's host would: first writer wins.

        `actor` and `reason` cannot be stored: maka's canonical outcome records only
        `reviewer: 'user'` (a rationale is allowed for auto-review outcomes only).
        """
        capability, _, _ = self.check_decision(approve, actor or "user", reason or "-", edited_arguments)
        with self.writing(capability) as conn:
            self.guard_shown(approval_id, expected_arguments_hash)
            row = conn.execute(text("SELECT request_kind, record_json FROM core_interaction_requests "
                                    "WHERE request_id = :id"), {"id": approval_id}).first()
            if row is None:
                raise NotFound(f"There is no approval with id {approval_id}.")
            self._refuse_if_settled(conn, approval_id)
            if row[0] != "permission":
                raise Unsupported(f"{approval_id} is a maka {row[0]} request; agentdesk answers only "
                                  "permission requests (allow or deny). Answer it in maka.")
            encoded = _outcome_record(codec.loads(row[1]), approval_id, approve)
            conn.execute(text("INSERT OR IGNORE INTO core_interaction_outcomes(request_id, record_json) "
                              "VALUES (:id, :record)"), {"id": approval_id, "record": encoded})
            stored = conn.execute(text("SELECT record_json FROM core_interaction_outcomes "
                                       "WHERE request_id = :id"), {"id": approval_id}).scalar()
            if stored != encoded:  # another writer's outcome is the one that counts
                self._refuse_if_settled(conn, approval_id)
            decided = self._one(conn, approval_id)
            parents = self.topology(conn).run_parents(decided.session_id, decided.run_id.split("/", 1)[1])
        at_run = {**parents, "run": decided.run_id}
        self.bus.publish([Change("approval", "update", approval_id, at_run),
                          Change("span", "update", decided.span_id or "", at_run)])
        return decided

    def _refuse_if_settled(self, conn: Connection, approval_id: str) -> None:
        row = conn.execute(text(SELECT + "WHERE request_id = :id"), {"id": approval_id}).first()
        if row is not None and row.outcome_json is not None:
            outcome = codec.loads(row.outcome_json).get("outcome", {})
            at = codec.dt(outcome.get("committedAt"))
            when = at.isoformat() if at else None
            raise AlreadyDecided(approval_id, row.status, _decided_by(outcome), when)


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
    record = codec.loads(r["request_json"])
    request: dict[str, Any] = record["request"] if isinstance(record.get("request"), dict) else {}
    outcome = codec.loads(r["outcome_json"]).get("outcome", {}) if r["outcome_json"] else {}
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
        codec.dt0(r["created_at"]), None, codec.dt(outcome.get("committedAt")), _decided_by(outcome),
        _reason(outcome), None, None,
        agent.name if agent else "", topo.projects[project].name if project in topo.projects else "")
