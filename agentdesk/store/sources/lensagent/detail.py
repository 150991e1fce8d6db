"""One derived span in full (texts, attributes), and the context a model attempt was sent.

Attributes keep lensagent's own words: `native_state`, `outcome`, `wait_reason`, `policy`,
`effect`, result `capture`/`stored`, and the projection decisions recorded for an attempt
(stage, source and projected tokens, tokens saved), so nothing lensagent knows is lost in
the mapping to agentdesk's smaller vocabularies.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent import spans, tree
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.sql import one, rows


def span(conn: Connection, layout: Layout, span_id: str) -> rm.Span:
    kind, native = spans.split(span_id)
    run_id, light = spans.light(conn, layout, span_id)
    builder = {"run": _run, "step": _step, "attempt": _attempt, "call": _call, "gate": _gate}[kind]
    attributes, input_text, output_text, error, revision = builder(conn, layout, native)
    return rm.Span(
        span_id,
        run_id,
        light.parent,
        light.kind,
        light.name,
        light.status,
        parse.time_of_epoch(light.start),
        None if light.end is None else parse.time_of_epoch(light.end),
        light.usage,
        attributes,
        input_text,
        output_text,
        error,
        revision,
    )


Detail = tuple[dict[str, Any], str | None, str | None, str | None, int | None]


def _run(conn: Connection, layout: Layout, run_id: str) -> Detail:
    run = tree.run_row(conn, run_id)
    goal = tree.goal_ids(run["goal_message_ids_json"])
    texts = [
        m["content"]
        for m in rows(conn, "SELECT id, content FROM messages WHERE agent_id = :a", a=run["agent_id"])
        if m["id"] in goal
    ]
    attrs = {
        "native_state": run["state"],
        "outcome": run["outcome"],
        "agent_id": run["agent_id"],
        "goal_message_ids": goal,
        "initial_step_pending": bool(run["initial_step_pending"]),
    }
    return attrs, "\n\n".join(texts) or None, None, run["error_code"], None


def _step(conn: Connection, layout: Layout, step_id: str) -> Detail:
    step = _one(conn, "SELECT * FROM steps WHERE id = :i", step_id)
    attrs: dict[str, Any] = {
        "native_state": step["state"],
        "outcome": step["outcome"],
        "ordinal": step["ordinal"],
        "turn_group_id": step["turn_group_id"],
    }
    if layout.has("call_partitions"):
        attrs["partitions"] = [
            p["mode"]
            for p in rows(
                conn, "SELECT mode FROM call_partitions WHERE step_id = :i ORDER BY ordinal", i=step_id
            )
        ]
    ledger = (
        [
            r["content"]
            for r in rows(
                conn,
                "SELECT content FROM side_effect_ledgers WHERE step_id = :i ORDER BY created_at",
                i=step_id,
            )
        ]
        if layout.has("side_effect_ledgers")
        else []
    )
    return attrs, None, "\n".join(ledger) or None, step["error_code"], None


def _attempt(conn: Connection, layout: Layout, attempt_id: str) -> Detail:
    a = _one(
        conn,
        f"SELECT m.*, {layout.col('model_attempts', 'request_json', 'm')}, "
        f"{layout.col('model_attempts', 'observation_json', 'm')} FROM model_attempts m WHERE m.id = :i",
        attempt_id,
    )
    attrs: dict[str, Any] = {
        "native_state": a["state"],
        "outcome": a["outcome"],
        "attempt_kind": a["kind"],
        "model": a["model"],
        "sequence": a["sequence"],
        "profile": f"{a['profile_id']} v{a['profile_version']}",
        "request_digest": a["request_digest"],
        "usage": parse.json_value(a["usage_json"]),
        "projection": projection_for(conn, layout, attempt_id),
    }
    if layout.has("attempt_capabilities"):
        attrs["capabilities"] = [
            r["capability_id"]
            for r in rows(
                conn,
                "SELECT capability_id FROM attempt_capabilities WHERE attempt_id = :i ORDER BY ordinal",
                i=attempt_id,
            )
        ]
    request = parse.json_text(a["request_json"]) or parse.json_text(a["preparation_json"])
    return attrs, request, parse.json_text(a["observation_json"]), a["error_code"], a["context_revision"]


def projection_for(conn: Connection, layout: Layout, attempt_id: str) -> list[dict[str, Any]]:
    if not layout.has("projection_decisions"):
        return []
    return [
        {
            "stage": p["stage"],
            "source_tokens": p["source_tokens"],
            "projected_tokens": p["projected_tokens"],
            "saved_tokens": p["source_tokens"] - p["projected_tokens"],
            "details": parse.json_value(p["details_json"]),
        }
        for p in rows(
            conn, "SELECT * FROM projection_decisions WHERE attempt_id = :i ORDER BY created_at", i=attempt_id
        )
    ]


def _call(conn: Connection, layout: Layout, call_id: str) -> Detail:
    c = call_row(conn, layout, call_id)
    attrs: dict[str, Any] = {
        "tool": c["capability_id"],
        "native_state": c["state"],
        "wait_reason": c["wait_reason"],
        "outcome": c["outcome"],
        "outcome_unknown": bool(c["outcome_unknown"]),
        "effect": c["effect"],
        "policy": c["policy"],
        "source": c["source"],
        "provider_call_id": c["provider_call_id"],
        "auto_review_passed": None if c["auto_review_passed"] is None else bool(c["auto_review_passed"]),
        "auto_review": parse.json_value(c["auto_review_json"]),
        "continuation": parse.json_value(c["continuation_json"]),
    }
    error = None
    if c["result_id"] is not None:
        attrs["result"] = {
            "outcome": c["result_outcome"],
            "truncated": bool(c["truncated"]),
            "capture": c["capture"],
            "stored": c["stored"],
            "error_code": c["result_error_code"],
            "artifacts": artifacts(conn, layout, c["result_id"]),
        }
        error = c["error_message"] or c["result_error_code"]
    elif c["state"] == "TERMINAL" and c["outcome"] != "success":
        error = c["outcome"]
    return attrs, parse.json_text(c["input_json"]), parse.json_text(c["content_json"]), error, None


def _gate(conn: Connection, layout: Layout, call_id: str) -> Detail:
    c = call_row(conn, layout, call_id)
    attrs = {
        "tool": c["capability_id"],
        "policy": c["policy"],
        "effect": c["effect"],
        "approval_id": call_id,
        "auto_review": parse.json_value(c["auto_review_json"]),
        "expires_at": None,
    }
    return attrs, parse.json_text(c["input_json"]), None, None, None


def call_row(conn: Connection, layout: Layout, call_id: str) -> dict[str, Any]:
    return _one(
        conn,
        f"""
        SELECT c.*, {layout.col("calls", "auto_review_json", "c")},
               {layout.col("calls", "continuation_json", "c")},
               r.id AS result_id, r.outcome AS result_outcome, r.content_json, r.truncated,
               r.error_code AS result_error_code, r.error_message, {layout.col("results", "capture", "r")},
               {layout.col("results", "stored", "r")}
        FROM calls c LEFT JOIN results r ON r.call_id = c.id WHERE c.id = :i""",
        call_id,
    )


def artifacts(conn: Connection, layout: Layout, result_id: str) -> list[dict[str, Any]]:
    if not layout.has("result_artifacts"):
        return []
    return rows(
        conn,
        "SELECT a.id, a.name, a.media_type, a.relative_path, a.size_bytes FROM result_artifacts ra "
        "JOIN artifacts a ON a.id = ra.artifact_id WHERE ra.result_id = :i ORDER BY a.name",
        i=result_id,
    )


def _one(conn: Connection, sql: str, native_id: str) -> dict[str, Any]:
    found = one(conn, sql, i=native_id)
    if found is None:
        raise NotFound(f"There is no lensagent row with id {native_id}.")
    return found


def sent_context(conn: Connection, layout: Layout, span_id: str) -> list[rm.SentItem]:
    """What a model attempt was sent, only when that is known exactly; otherwise nothing.

    Known exactly when (a) the attempt's `request_json` (0.1.2) holds its messages, or (b) the
    agent's `context_revision` has not moved since the attempt: then the context items it saw
    are the visible, uncovered ones that existed when it started. lensagent keeps no item
    history, so after a context change an older attempt's input cannot be rebuilt.
    """
    kind, attempt_id = spans.split(span_id)
    if kind != "attempt":
        return []
    a = _one(
        conn,
        f"SELECT m.agent_id, m.context_revision, m.created_at, "
        f"{layout.col('model_attempts', 'request_json', 'm')} FROM model_attempts m WHERE m.id = :i",
        attempt_id,
    )
    from_request = _request_messages(attempt_id, a["context_revision"], a["request_json"])
    if from_request is not None:
        return from_request
    agent = one(conn, "SELECT context_revision FROM agents WHERE id = :a", a=a["agent_id"])
    if agent is None or agent["context_revision"] != a["context_revision"]:
        return []
    from agentdesk.store.sources.lensagent.context import covered_ids  # the context module owns what a compaction hides

    hidden = covered_ids(conn, layout, a["agent_id"])
    items = rows(
        conn,
        "SELECT id, revision, ordinal, kind, role, content, visible, created_at FROM context_items "
        "WHERE agent_id = :a ORDER BY ordinal",
        a=a["agent_id"],
    )
    started = parse.time_of(a["created_at"])
    return [
        rm.SentItem(i["id"], i["revision"], i["ordinal"], i["kind"], i["role"], i["content"])
        for i in items
        if i["visible"] and i["id"] not in hidden and parse.time_of(i["created_at"]) <= started
    ]


def _request_messages(attempt_id: str, revision: int, raw: str | None) -> list[rm.SentItem] | None:
    value = parse.json_value(raw)
    messages = value.get("messages") if isinstance(value, dict) else value
    if not isinstance(messages, list) or not messages:
        return None
    sent = []
    for n, m in enumerate(messages):
        if not isinstance(m, dict):
            return None
        content = m.get("content")
        text = content if isinstance(content, str) else tree.dumps(content)
        sent.append(rm.SentItem(f"{attempt_id}#{n}", revision, n, "message", m.get("role"), text))
    return sent
