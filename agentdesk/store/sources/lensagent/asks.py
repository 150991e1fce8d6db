"""lensagent questions: a `calls` row held in `WAITING` with `wait_reason='user_input'` (reference §4.2).

lensagent asks its user through a call: `waitCall(projectId, callId, prompt)` moves a running call to
`WAITING`/`user_input` and keeps the prompt in `continuation_json` [inferred]; the call goes on when it is
completed (`completeCall(…, outcome, content)`: `TERMINAL` plus a `results` row whose `content_json` is what
the model gets back). The question's id is the call's id; its text is the prompt (`question`, `prompt`,
`text` or `message` of a JSON object, or a JSON string), else the call's input; `options` / `choices` of the
prompt are offered as options. lensagent has no deadline for a wait (`expires_at` None) and records no
answerer, so an answered question reads "answered" with no name unless agentdesk answered it (its result
says so).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from agentdesk.store.asks.reads import Ask
from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.sql import rows

PENDING_WHERE = "c.state = 'WAITING' AND c.wait_reason = 'user_input'"
ANSWERED_BY = "agentdesk_answered_by"
"""Beside `answer` in the result content of a question agentdesk answered (`writes.answer`): who answered."""


def select(layout: Layout, pending_only: bool) -> str:
    continuation = layout.col("calls", "continuation_json", "c")
    asked = PENDING_WHERE
    if not pending_only and layout.has("calls", "continuation_json"):
        asked = f"({PENDING_WHERE}) OR c.continuation_json IS NOT NULL"  # answered ones kept their prompt
    return f"""
SELECT c.id, c.project_id, c.agent_id, c.step_id, c.input_json, {continuation}, c.state, c.wait_reason, c.outcome,
       c.revision, c.created_at, c.updated_at, a.name AS agent_name, a.session_id, s.run_id,
       p.name AS project_name, r.content_json AS answer_json, r.created_at AS answered_at, r.error_code
FROM calls c
JOIN projects p ON p.id = c.project_id
LEFT JOIN agents a ON a.id = c.agent_id
LEFT JOIN steps s ON s.id = c.step_id
LEFT JOIN results r ON r.call_id = c.id
WHERE {asked}"""


def prompt_of(c: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    prompt = parse.json_value(c.get("continuation_json"))
    options: tuple[str, ...] = ()
    text: str | None = None
    if isinstance(prompt, dict):
        for key in ("question", "prompt", "text", "message"):
            if isinstance(prompt.get(key), str):
                text = prompt[key]
                break
        listed = prompt.get("options", prompt.get("choices"))
        if isinstance(listed, list):
            options = tuple(str(o) for o in listed if isinstance(o, str | int | float))
    elif isinstance(prompt, str):
        text = prompt
    if text is None:
        text = str(c.get("continuation_json") or c.get("input_json") or "")
    return text, options


def value(c: dict[str, Any]) -> Ask:
    question, options = prompt_of(c)
    pending = c["state"] == "WAITING" and c["wait_reason"] == "user_input"
    answer = None if pending else parse.json_value(c.get("answer_json"))
    status = "pending" if pending else ("answered" if c["outcome"] == "success" else "cancelled")
    answered_by = None
    if isinstance(answer, dict) and ANSWERED_BY in answer:
        answered_by = str(answer[ANSWERED_BY])
        answer = answer.get("answer")
    return Ask(
        id=c["id"], run_id=c.get("run_id") or "", agent_id=c.get("agent_id") or "", question=question,
        options=options, status=status, created_at=parse.time_of(c["created_at"]),
        answered_at=None if pending else parse.parse_time(c.get("answered_at") or c["updated_at"]),
        answered_by=answered_by, answer=None if answer is None else str(answer), revision=int(c["revision"]),
        agent_name=c.get("agent_name") or "", project_name=c.get("project_name") or "",
        session_id=c.get("session_id") or "", source="lensagent")


def asks(conn: Connection, layout: Layout, pending_only: bool, limit: int) -> list[Ask]:
    found = rows(conn, select(layout, pending_only) + " ORDER BY c.created_at DESC, c.id LIMIT :n", n=limit)
    return [value(c) for c in found]


def ask(conn: Connection, layout: Layout, ask_id: str) -> Ask:
    found = rows(conn, f"SELECT * FROM ({select(layout, False)}) WHERE id = :i", i=ask_id)
    if not found:
        raise NotFound(f"There is no question with id {ask_id} (no call of that id waited for user input).")
    return value(found[0])
