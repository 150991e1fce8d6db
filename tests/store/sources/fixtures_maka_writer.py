"""A small stand-in for maka's storage writers, issuing the seed's own SQL.

The fixture builder and the live tests' writer subprocess both write through this, so
what agentdesk reads was written the way maka writes it:
- runtime events: the append of `SqliteRuntimeStore.insertRuntimeEvent` [seed] (event_seq
  per invocation, session ordinal, `event_kind` derived as `runtimeEventKind` does,
  payload as sorted-key canonical JSON);
- tool boundaries: T1 `commitToolPrepared` and T2 `commitToolOutcomeSync` [seed];
- interactions: `establishRequest` and `commitOutcome` (INSERT OR IGNORE) [repo];
- run headers and run events: INSERT [repo]; the header UPDATE is [inferred].
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def canonical(value: Any) -> str:
    """maka's `stableJsonStringify`: sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def event_kind(event: dict[str, Any]) -> str:
    """`runtimeEventKind` of the seed, branch for branch."""
    content, actions = event.get("content") or {}, event.get("actions") or {}
    if content.get("kind"):
        return str(content["kind"])
    if event.get("status"):
        return str(event["status"])
    if actions.get("workspaceFact"):
        return "workspace_fact"
    if actions.get("toolDispatch"):
        return "tool_dispatch"
    return "invocation_end" if actions.get("endInvocation") else "runtime_fact"


class MakaWriter:
    """Writes one maka operational database with maka's statements."""

    def __init__(self, conn: sqlite3.Connection, tag: str = "") -> None:
        self.conn = conn
        self.tag = tag
        """Goes into every generated id, so a second writer never reuses the first one's ids."""
        self._serial = 0

    @contextmanager
    def tx(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def new_id(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}_{self.tag}{self._serial:05d}"

    # -- tree ------------------------------------------------------------------------------
    def project(self, project_id: str, name: str, at: int) -> None:
        self.conn.execute("INSERT INTO projects(project_id, identity, name, last_used_at, archived_at) "
                          "VALUES (?, ?, ?, ?, NULL)", (project_id, f"git:{project_id}", name, at))

    def session(self, session_id: str, name: str, at: int, *, project_id: str | None, status: str = "active",
                model: str = "claude-sonnet-4", parent: tuple[str, str, str] | None = None) -> None:
        payload: dict[str, Any] = {"id": session_id, "name": name, "createdAt": at, "status": status,
                                   "backend": "maka", "model": model, "permissionMode": "ask"}
        if project_id is not None:
            payload["projectId"] = project_id
        sub = parent or (None, None, None)
        self.conn.execute(
            "INSERT INTO session_metadata(session_id, payload_json, created_at, last_used_at, "
            "last_message_at, name, is_flagged, is_archived, status, status_updated_at, parent_session_id, "
            "revision_root_session_id, revision_index, has_unread, backend, llm_connection_slug, model, "
            "metadata_version, committed_at, subagent_parent_session_id, subagent_parent_run_id, "
            "subagent_tool_call_id) VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?, ?, NULL, NULL, NULL, 0, 'maka', "
            "'anthropic', ?, 2, ?, ?, ?, ?)",
            (session_id, canonical(payload), at, at, at, name, status, at, model, at, *sub))

    def set_session_status(self, session_id: str, status: str, at: int) -> None:
        self.conn.execute("UPDATE session_metadata SET status = ?, status_updated_at = ?, committed_at = ? "
                          "WHERE session_id = ?", (status, at, at, session_id))

    def run(self, session_id: str, run_id: str, at: int, *, status: str = "running",
            **header: Any) -> dict[str, Any]:
        record = {"runId": run_id, "invocationId": f"inv_{run_id}", "sessionId": session_id,
                  "turnId": f"turn_{run_id}", "status": status, "backendKind": "maka",
                  "llmConnectionSlug": "anthropic", "modelId": "claude-sonnet-4", "cwd": "/work/acme",
                  "permissionMode": "ask", "createdAt": at, "updatedAt": at, **header}
        self.conn.execute("INSERT INTO core_agent_runs(session_id, run_id, created_at, record_json) "
                          "VALUES (?, ?, ?, ?)", (session_id, run_id, at, canonical(record)))
        return record

    def set_run_status(self, session_id: str, run_id: str, status: str, at: int, **extra: Any) -> None:
        row = self.conn.execute("SELECT record_json FROM core_agent_runs WHERE session_id = ? AND run_id = ?",
                                (session_id, run_id)).fetchone()
        record = json.loads(row[0]) | {"status": status, "updatedAt": at, **extra}
        if status in ("completed", "failed", "cancelled"):
            record["completedAt"] = at
        self.conn.execute("UPDATE core_agent_runs SET record_json = ? WHERE session_id = ? AND run_id = ?",
                          (canonical(record), session_id, run_id))

    def run_event(self, session_id: str, run_id: str, event_type: str, at: int,
                  data: dict[str, Any] | None = None) -> None:
        seq = self.conn.execute("SELECT COALESCE(MAX(sequence) + 1, 0) FROM core_agent_run_events "
                                "WHERE session_id = ? AND run_id = ?", (session_id, run_id)).fetchone()[0]
        event_id = self.new_id("rev")
        record = {"type": event_type, "id": event_id, "runId": run_id, "sessionId": session_id,
                  "turnId": f"turn_{run_id}", "ts": at, "data": data or {}}
        self.conn.execute("INSERT INTO core_agent_run_events(session_id, run_id, sequence, event_id, "
                          "event_type, event_ts, record_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (session_id, run_id, seq, event_id, event_type, at, canonical(record)))

    # -- runtime events ----------------------------------------------------------------------
    def event(self, session_id: str, run_id: str, at: int, role: str, author: str,
              **fields: Any) -> dict[str, Any]:
        """A `RuntimeEvent` envelope (not yet stored)."""
        return {"id": fields.pop("event_id", None) or self.new_id("evt"), "sessionId": session_id,
                "invocationId": f"inv_{run_id}", "runId": run_id, "turnId": f"turn_{run_id}", "ts": at,
                "partial": False, "role": role, "author": author,
                **{k: v for k, v in fields.items() if v is not None}}

    def append(self, event: dict[str, Any], committed_at: int | None = None) -> str:
        """The seed's `insertRuntimeEvent` append: seq per invocation, then the session ordinal."""
        seq = self.conn.execute("SELECT COALESCE(MAX(event_seq), 0) + 1 AS next_seq FROM runtime_events "
                                "WHERE invocation_id = ?", (event["invocationId"],)).fetchone()[0]
        self.conn.execute(
            "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id, event_seq, "
            "event_kind, payload_json, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (event["id"], event["sessionId"], event["invocationId"], event["runId"], event["turnId"], seq,
             event_kind(event), canonical(event), event["ts"] if committed_at is None else committed_at))
        ordinal = self.conn.execute("SELECT COALESCE(MAX(ordinal), 0) + 1 AS next_ordinal "
                                    "FROM runtime_session_event_ordinals WHERE session_id = ?",
                                    (event["sessionId"],)).fetchone()[0]
        self.conn.execute("INSERT INTO runtime_session_event_ordinals(session_id, ordinal, event_id) "
                          "VALUES (?, ?, ?)", (event["sessionId"], ordinal, event["id"]))
        return str(event["id"])

    def tool_prepared(self, session_id: str, run_id: str, at: int, call_id: str, name: str,
                      args: dict[str, Any], recovery: str = "replay_safe") -> str:
        """T1: the function_call and tool_dispatch events, the journal row and the operation row."""
        call = self.event(session_id, run_id, at, "model", "agent",
                          content={"kind": "function_call", "id": call_id, "name": name, "args": args})
        self.append(call)
        operation_id = f"op_{call_id}"
        args_hash = "sha256:" + hashlib.sha256(canonical(args).encode()).hexdigest()
        dispatch = self.event(session_id, run_id, at + 5, "system", "host", modelVisibility="hidden",
                              actions={"toolDispatch": {
                                  "protocol": "t1_after_preflight_v1", "operationId": operation_id,
                                  "providerToolCallId": call_id, "toolName": name,
                                  "canonicalArgsHash": args_hash, "recoveryMode": recovery}},
                              refs={"operationId": operation_id, "toolCallId": call_id})
        self.append(dispatch, at + 5)
        inv, turn = f"inv_{run_id}", f"turn_{run_id}"
        self.conn.execute(
            "INSERT INTO tool_journal_events (journal_event_id, operation_id, invocation_id, run_id, "
            "turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode, committed_at) "
            "VALUES (?, ?, ?, ?, ?, 'prepared', ?, ?, ?, ?)",
            (f"{operation_id}_prepared", operation_id, inv, run_id, turn, dispatch["id"], args_hash, recovery,
             at + 5))
        self.conn.execute(
            "INSERT INTO tool_operations (operation_id, invocation_id, run_id, turn_id, "
            "provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode, current_state, "
            "call_event_id, dispatch_event_id, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'prepared', ?, ?, 1)",
            (operation_id, inv, run_id, turn, call_id, name, args_hash, recovery, call["id"], dispatch["id"]))
        return operation_id

    def tool_outcome(self, session_id: str, run_id: str, at: int, call_id: str, name: str, result: Any,
                     is_error: bool = False) -> str:
        """T2: the function_response event, the `_outcome` journal row, the compare-and-set UPDATE."""
        operation_id = f"op_{call_id}"
        content: dict[str, Any] = {"kind": "function_response", "id": call_id, "name": name, "result": result}
        if is_error:
            content["isError"] = True
        response = self.event(session_id, run_id, at, "tool", "tool", content=content,
                              refs={"operationId": operation_id, "toolCallId": call_id})
        self.append(response, at)
        self.conn.execute(
            "INSERT INTO tool_journal_events (journal_event_id, operation_id, invocation_id, run_id, "
            "turn_id, state, runtime_event_id, committed_at) "
            "VALUES (?, ?, ?, ?, ?, 'outcome_committed', ?, ?)",
            (f"{operation_id}_outcome", operation_id, f"inv_{run_id}", run_id, f"turn_{run_id}",
             response["id"], at))
        changed = self.conn.execute(
            "UPDATE tool_operations SET current_state = 'outcome_committed', result_event_id = ?, "
            "version = version + 1 WHERE operation_id = ? AND current_state = 'prepared' "
            "AND result_event_id IS NULL", (response["id"], operation_id)).rowcount
        if changed != 1:
            raise RuntimeError(f"compare-and-set failed for {operation_id}")
        return str(response["id"])

    def partial(self, session_id: str, run_id: str, stream_key: str, text: str, at: int) -> None:
        """Streaming text: the snapshot row once, then one segment per chunk [seed `upsertRuntimePartial`]."""
        exists = self.conn.execute("SELECT 1 FROM runtime_partial_snapshots WHERE stream_key = ?",
                                   (stream_key,)).fetchone()
        if exists is None:
            anchor = self.conn.execute("SELECT event_id FROM runtime_events WHERE session_id = ? "
                                       "AND run_id = ? ORDER BY event_seq DESC LIMIT 1",
                                       (session_id, run_id)).fetchone()
            snapshot = self.event(session_id, run_id, at, "model", "agent",
                                  content={"kind": "text", "text": ""})
            snapshot["partial"] = True
            self.conn.execute(
                "INSERT INTO runtime_partial_snapshots (stream_key, session_id, invocation_id, run_id, "
                "turn_id, after_event_id, payload_json, text_content, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, '', ?)",
                (stream_key, session_id, f"inv_{run_id}", run_id, f"turn_{run_id}",
                 anchor[0] if anchor else None, json.dumps(snapshot), at))
        else:
            self.conn.execute("UPDATE runtime_partial_snapshots SET updated_at = ? WHERE stream_key = ?",
                              (at, stream_key))
        self.conn.execute("INSERT INTO runtime_partial_segments(stream_key, segment_seq, text_content, "
                          "updated_at) SELECT ?, coalesce(max(segment_seq), 0) + 1, ?, ? "
                          "FROM runtime_partial_segments WHERE stream_key = ?",
                          (stream_key, text, at, stream_key))

    # -- usage and interactions --------------------------------------------------------------
    def attempt(self, session_id: str, run_id: str, started: int, latency: int, *, logical: str,
                attempt: int = 0, status: str = "completed", tokens: tuple[int, int] = (1200, 180),
                cost: float | None = 0.0042, call_kind: str = "main", step: int = 0) -> str:
        attempt_id = self.new_id("att")
        record: dict[str, Any] = {
            "logicalCallId": logical, "attemptId": attempt_id, "traceId": f"trace_{run_id}",
            "sessionId": session_id, "runId": run_id, "turnId": f"turn_{run_id}", "step": step,
            "attempt": attempt, "callKind": call_kind, "providerId": "anthropic",
            "modelId": "claude-sonnet-4",
            "startedAt": started, "completedAt": started + latency, "latencyMs": latency, "status": status,
            "usageBasis": "reported", "inputTokens": tokens[0], "outputTokens": tokens[1],
            "costBasis": "priced" if cost is not None else "unpriced"}
        if cost is not None:
            record["costUsd"] = cost
        self.conn.execute("INSERT INTO usage_model_call_attempts(attempt_id, completed_at, record_json) "
                          "VALUES (?, ?, ?)", (attempt_id, started + latency, canonical(record)))
        return attempt_id

    def request(self, session_id: str, run_id: str, request_id: str, at: int,
                request: dict[str, Any]) -> None:
        record = {"sessionId": session_id, "turnId": f"turn_{run_id}", "runId": run_id,
                  "requestId": request_id, "createdAt": at, "request": request}
        self.conn.execute("INSERT INTO core_interaction_requests(request_id, session_id, turn_id, run_id, "
                          "request_kind, created_at, record_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (request_id, session_id, f"turn_{run_id}", run_id, request["kind"], at,
                           json.dumps(record, ensure_ascii=False)))

    def outcome(self, session_id: str, run_id: str, request_id: str, outcome: dict[str, Any]) -> None:
        record = {"sessionId": session_id, "turnId": f"turn_{run_id}", "runId": run_id,
                  "requestId": request_id, "outcome": outcome}
        self.conn.execute("INSERT OR IGNORE INTO core_interaction_outcomes(request_id, record_json) "
                          "VALUES (?, ?)", (request_id, json.dumps(record, ensure_ascii=False)))


def permission_request(tool_use_id: str, tool: str, command: str, reason: str = "shell_dangerous",
                       ) -> dict[str, Any]:
    """An `InteractionPermissionRequest` as maka's interaction store keeps it [repo]."""
    return {"kind": "permission", "toolUseId": tool_use_id,
            "prompt": {"kind": "tool_permission", "toolName": tool, "category": "shell_unsafe",
                       "reason": reason,
                       "review": {"kind": "command", "command": command, "cwd": "/work/acme"},
                       "rememberForTurnAllowed": True}}
