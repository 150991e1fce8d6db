"""maka's questions: `core_interaction_requests` of kind `question` (a `userQuestionRequest`), read-only.

The request's record carries `{kind: 'question', toolUseId, questions: [{question, options: [{label}]}]}`;
maka settles it with a `question_answer` outcome. The seed names that outcome but not its fields (how the
answers are keyed, which option labels or free text, in what order), so agentdesk cannot write one that maka
is sure to read: such a question is shown in the Questions tab with `read_only` saying so, to be answered
in maka. Permission requests stay in the approval queue, where agentdesk can settle them.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection

from agentdesk.store.asks.reads import Ask
from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.approvals import SELECT
from agentdesk.store.sources.maka.topology import Topology
from agentdesk.store.sources.sql import rows

KIND = "question"
READ_ONLY = ("maka settles a question with a question_answer outcome whose fields its seed does not document, "
             "so agentdesk will not write one maka might misread; answer it in maka.")


def _text(request: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    asked = request.get("questions")
    texts: list[str] = []
    options: tuple[str, ...] = ()
    if isinstance(asked, list):
        for n, item in enumerate(asked):
            if not isinstance(item, dict):
                continue
            texts.append(str(item.get("question") or item.get("header") or ""))
            listed = item.get("options")
            if n == 0 and isinstance(listed, list):
                options = tuple(str(o.get("label") if isinstance(o, dict) else o) for o in listed)
    if not texts:
        texts.append(str(request.get("question") or request.get("prompt") or "(a question with no text)"))
    return "\n".join(t for t in texts if t), options


def value(topo: Topology, r: dict[str, Any]) -> Ask:
    record = parse.json_object(r["request_json"])
    request: dict[str, Any] = record["request"] if isinstance(record.get("request"), dict) else {}
    question, options = _text(request)
    outcome = parse.json_object(r["outcome_json"]).get("outcome", {}) if r["outcome_json"] else {}
    sid, rid = r["session_id"], r["run_id"]
    agent = topo.agents.get(topo.agent_of_run(sid, rid))
    status = {"pending": "pending", "approved": "answered"}.get(r["status"], "expired")
    created = parse.from_ms(r["created_at"]) or parse.time_of(0)
    return Ask(
        id=r["request_id"], run_id=codec.run_key(sid, rid), agent_id=agent.id if agent else codec.root_agent(sid),
        question=question, options=options, status=status, created_at=created,
        answered_at=parse.from_ms(outcome.get("committedAt")) if outcome else None,
        answered_by="maka" if outcome else None,
        answer=json.dumps(outcome.get("answers"), ensure_ascii=False) if outcome.get("kind") == "question_answer"
        else None,
        reason=f"closed by maka: {outcome.get('reason')}" if outcome.get("kind") == "closure" else None,
        agent_name=agent.name if agent else "", session_id=sid, source="maka",
        read_only=READ_ONLY if status == "pending" else None)


def asks(conn: Connection, topo: Topology, pending_only: bool, limit: int) -> list[Ask]:
    where = "WHERE request_kind = :kind" + (" AND status = 'pending'" if pending_only else "")
    found = rows(conn, SELECT + where + " ORDER BY created_at DESC, request_id LIMIT :limit", kind=KIND, limit=limit)
    return [value(topo, r) for r in found]


def ask(conn: Connection, topo: Topology, ask_id: str) -> Ask:
    found = rows(conn, SELECT + "WHERE request_id = :id AND request_kind = :kind", id=ask_id, kind=KIND)
    if not found:
        raise NotFound(f"There is no question with id {ask_id}.")
    return value(topo, found[0])
