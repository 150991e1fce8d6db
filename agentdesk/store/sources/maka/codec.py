"""Small conversions shared by the maka source: ids, times, JSON and status vocabularies.

maka keys most rows by composite natural keys and stores every time as Unix
milliseconds; agentdesk ids are plain strings, so composite keys are joined with `/`
(maka ids match `[A-Za-z0-9_-]`, so `/` never occurs inside one). A kind prefix
(`agent:`, `task:`, `tool:` ...) keeps ids of different projections apart.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store.errors import NotFound

NO_PROJECT = "maka:no-project"
"""The synthetic project of sessions whose `payload_json.projectId` names no `projects` row."""
NO_PROJECT_NAME = "(sessions without a project)"

RUN_STATUS = {"created": "pending", "running": "running", "waiting_for_user": "waiting",
              "completed": "done", "failed": "failed", "cancelled": "cancelled"}
"""`AgentRunHeader.status` → tree status (reference §4.2)."""
TERMINAL_RUN = frozenset({"completed", "failed", "cancelled"})
SESSION_STATUS = {"active": "idle", "running": "running", "waiting_for_user": "waiting", "blocked": "waiting",
                  "review": "waiting", "done": "done", "archived": "done", "aborted": "cancelled"}
"""`session_metadata.status` (`SESSION_STATUSES`) → tree status."""
TURN_SPAN_STATUS = {"done": "ok", "failed": "error", "cancelled": "cancelled"}
ATTEMPT_STATUS = {"completed": "ok", "failed": "error", "interrupted": "error", "aborted": "cancelled"}
COMPACTION_EVENTS = ("history_compact_checkpoint_recorded", "semantic_compact_block_recorded",
                     "active_full_compact_block_recorded")
STATUS_CASE = (
    "CASE WHEN o.request_id IS NULL THEN 'pending' "
    "WHEN NOT json_valid(o.record_json) THEN 'unreadable' "
    "WHEN json_extract(o.record_json, '$.outcome.kind') = 'permission_answer' THEN "
    "CASE json_extract(o.record_json, '$.outcome.decision') WHEN 'allow' THEN 'approved' ELSE 'denied' END "
    "WHEN json_extract(o.record_json, '$.outcome.kind') = 'sandbox_boundary_decision' THEN "
    "CASE json_extract(o.record_json, '$.outcome.status') WHEN 'approved' THEN 'approved' ELSE 'denied' END "
    "WHEN json_extract(o.record_json, '$.outcome.kind') = 'question_answer' THEN 'approved' "
    "ELSE 'expired' END")
"""An interaction's approval status in SQL (requests `q`, outcomes `o`), reference §4.2: no outcome is
pending; allow / sandbox approved / an answered question are approved; deny and sandbox denied or
conflict are denied; an outcome that is not JSON is unreadable (shown, never decided); every `closure`
(timed out, turn stopped or ended, host restarted) is expired,
its reason kept in `Approval.reason`."""
CONTENT_KINDS = ("text", "thinking", "function_call", "function_response", "error")


def secs(ms: Any) -> float | None:
    return None if isinstance(ms, bool) or not isinstance(ms, int | float) else ms / 1000


def run_key(session_id: str, run_id: str) -> str:
    return f"{session_id}/{run_id}"


def split_run(key: str) -> tuple[str, str]:
    session_id, sep, run_id = key.partition("/")
    if not sep or not session_id or not run_id:
        raise NotFound(f"There is no run with id {key}.")
    return session_id, run_id


def span_id(kind: str, session_id: str, run_id: str, native: str | int = "") -> str:
    return f"{kind}:{session_id}/{run_id}" + (f"/{native}" if native != "" else "")


def split_span(value: str) -> tuple[str, str, str, str]:
    """`kind:session/run[/native]` → its four parts (NotFound for anything else)."""
    kind, sep, rest = value.partition(":")
    parts = rest.split("/", 2)
    if not sep or len(parts) < 2 or not all(parts[:2]):
        raise NotFound(f"There is no span with id {value}.")
    return kind, parts[0], parts[1], parts[2] if len(parts) == 3 else ""


def root_agent(session_id: str) -> str:
    return f"agent:{session_id}"


def task_of(project_id: str) -> str:
    return f"task:{project_id}"
