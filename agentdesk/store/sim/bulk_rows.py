"""Row builders for the bulk populator: hierarchy, runs, context and approvals as plain dicts.

Everything here is pure (no database): it only draws from the content
generator, so the populator can time generation and insertion separately and
tests can check the rows' consistency without a store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentdesk.store.sim.content import ContentGenerator
from agentdesk.store.sim.spans import IdMaker, Row
from agentdesk.store.validation import estimate_tokens, payload_hash

HISTORY_S = 60 * 86_400.0
"""Historic runs spread over the last sixty days."""


@dataclass
class BulkAgent:
    row: Row
    runs: list[Row] = field(default_factory=list)
    items: list[Row] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.row["id"])


def hierarchy(content: ContentGenerator, new_id: IdMaker, projects: int, now: float) -> dict[str, list[Row]]:
    """Projects > tasks > sessions > agents (some with a sub-agent), created before the history window."""
    r = content.rng
    out: dict[str, list[Row]] = {"projects": [], "tasks": [], "sessions": [], "agents": []}
    t0 = now - HISTORY_S - 3600
    for _ in range(projects):
        pid = new_id("prj")
        out["projects"].append({"id": pid, "name": content.project_name(), "created_at": t0, "revision": 1})
        for _ in range(r.randint(2, 3)):
            tid = new_id("tsk")
            title = content.task_title()
            out["tasks"].append({"id": tid, "project_id": pid, "title": title, "created_at": t0 + 1,
                                 "revision": 1})
            sid = new_id("ses")
            out["sessions"].append({"id": sid, "project_id": pid, "task_id": tid, "title": title,
                                    "status": "done",
                                    "created_at": t0 + 2, "ended_at": None, "revision": 1})
            parent = _agent_row(content, new_id, pid, tid, sid, None, t0 + 3)
            out["agents"].append(parent)
            if r.random() < 0.5:
                out["agents"].append(_agent_row(content, new_id, pid, tid, sid, parent["id"], t0 + 4))
    return out


def _agent_row(content: ContentGenerator, new_id: IdMaker, pid: str, tid: str, sid: str,
               parent: str | None, at: float) -> Row:
    profile = content.agent()
    return {"id": new_id("agt"), "project_id": pid, "task_id": tid, "session_id": sid,
            "parent_agent_id": parent,
            "name": profile.name, "model": profile.model, "status": "idle", "context_revision": 0,
            "context_budget": 128_000, "created_at": at, "revision": 1}


def historic_runs(content: ContentGenerator, new_id: IdMaker, agent: BulkAgent, count: int, titles: list[str],
                  start: float, end: float) -> None:
    """`count` finished runs, evenly spaced (with jitter) between start and end, oldest first."""
    r, a = content.rng, agent.row
    spacing = (end - start) / max(1, count)
    for n in range(count):
        began = start + n * spacing + r.uniform(0, spacing * 0.3)
        roll = r.random()
        status, error = ("failed", content.run_failure()) if roll < 0.06 else (
            ("cancelled", None) if roll < 0.08 else ("done", None))
        tokens_in, tokens_out = r.randint(2_000, 120_000), r.randint(200, 12_000)
        agent.runs.append({
            "id": new_id("run"), "project_id": a["project_id"], "task_id": a["task_id"],
            "session_id": a["session_id"], "agent_id": a["id"], "title": r.choice(titles), "status": status,
            "started_at": began, "ended_at": began + r.uniform(5, min(600,
                                                                      spacing * 0.6 + 5)), "error": error,
            "input_tokens": tokens_in, "output_tokens": tokens_out,
            "cost_usd": round((tokens_in * 3 + tokens_out * 15) / 1e6, 6), "revision": 2})


def apply_spans(run: Row, spans: list[Row], *, running: bool) -> None:
    """Make a run's totals and times agree with its spans."""
    run["input_tokens"] = sum(s["input_tokens"] for s in spans)
    run["output_tokens"] = sum(s["output_tokens"] for s in spans)
    run["cost_usd"] = round(sum(s["cost_usd"] for s in spans), 6)
    run["started_at"] = spans[0]["started_at"]
    if running:
        run.update(status="running", ended_at=None, error=None)
    else:
        run["ended_at"] = spans[0]["ended_at"]


def context(content: ContentGenerator, new_id: IdMaker, agent: BulkAgent, turns: int,
            start: float) -> dict[str, list[Row]]:
    """A system prompt, then user/assistant turns and tool-call groups (calls + results together)."""
    r = content.rng
    out: dict[str, list[Row]] = {"context_groups": [], "context_items": [], "context_item_revisions": []}
    t = start
    for ordinal in range(1, turns + 2):
        kind = "system" if ordinal == 1 else r.choice(("turn", "tool", "tool"))
        gid = new_id("grp")
        if kind == "system":
            entries = [("message", "system", f"You are {agent.row['name']}, a careful assistant.", True)]
        elif kind == "turn":
            entries = [("message", "user", content.user_prompt(content.task_title()), False),
                       ("message", "assistant", content.assistant_reply(), False)]
        else:
            calls = [content.tool_call(allow_delegate=False) for _ in range(r.randint(1, 2))]
            entries = [("tool_calls", "assistant", json.dumps([{"tool": c.tool, "arguments": c.arguments}
                                                               for c in calls], ensure_ascii=False), False)]
            entries += [("result", "tool", content.tool_output(c)[:3000], False) for c in calls]
        out["context_groups"].append({"id": gid, "agent_id": agent.id, "ordinal": ordinal, "kind": kind,
                                      "revision": 1 + len(entries), "created_at": t})
        for kind_, role, text, locked in entries:
            _item(out, new_id, agent, gid, kind_, role, text, locked, t)
        t += r.uniform(5, 120)
    agent.row["context_revision"] = len(agent.items)
    return out


def _item(out: dict[str, list[Row]], new_id: IdMaker, agent: BulkAgent, gid: str, kind: str, role: str,
          text: str, locked: bool, t: float) -> None:
    iid, tokens = new_id("itm"), estimate_tokens(text)
    row = {"id": iid, "agent_id": agent.id, "group_id": gid, "position": len(agent.items) + 1, "kind": kind,
           "role": role, "content": text, "visible": True, "locked": locked, "revision": 1,
           "token_estimate": tokens, "compaction_id": None, "summary_of": None, "removed": False,
           "created_at": t}
    agent.items.append(row)
    out["context_items"].append(row)
    out["context_item_revisions"].append({"item_id": iid, "revision": 1, "content": text,
                                          "token_estimate": tokens, "created_at": t})


def snapshot(span: Row, agent: BulkAgent, upto: int) -> list[Row]:
    """What a model call sent: the agent's first `upto` items, at revision 1."""
    span["context_revision"] = upto
    return [{"span_id": span["id"], "position": n, "item_id": item["id"], "item_revision": 1}
            for n, item in enumerate(agent.items[:upto])]


def approval(content: ContentGenerator, new_id: IdMaker, run: Row, span_id: str | None, created: float,
             *, status: str, context_revision: int) -> tuple[Row, Row]:
    """A tool call and its approval; decided ones carry who, when and why."""
    r = content.rng
    call = content.tool_call(allow_delegate=False)
    while not call.risky:
        call = content.tool_call(allow_delegate=False)
    args = call.arguments_json
    cid, aid = new_id("tcl"), new_id("apr")
    expires = created + (7200.0 if status == "pending" else 300.0)
    decided_at = None if status == "pending" else (expires if status == "expired" else created + r.uniform(5,
                                                                                                           250))
    decided_by = content.operator() if status in ("approved", "denied") else None
    edited = edited_hash = None
    if status == "approved" and r.random() < 0.25:
        edited = json.dumps({**call.arguments, "dry_run": True}, sort_keys=True, separators=(",", ":"),
                            ensure_ascii=False)
        edited_hash = payload_hash(call.tool, edited)
    tool_call = {"id": cid, "run_id": run["id"], "span_id": span_id, "tool_name": call.tool,
                 "arguments": args,
                 "status": status, "created_at": created}
    row: dict[str, Any] = {
        "id": aid, "tool_call_id": cid, "project_id": run["project_id"], "task_id": run["task_id"],
        "session_id": run["session_id"], "agent_id": run["agent_id"], "run_id": run["id"], "span_id": span_id,
        "tool_name": call.tool, "arguments": args, "payload_hash": payload_hash(call.tool, args),
        "status": status, "created_at": created, "expires_at": expires, "decided_at": decided_at,
        "decided_by": decided_by, "reason": content.denial_reason() if status == "denied" else None,
        "edited_arguments": edited, "edited_hash": edited_hash, "context_revision": context_revision,
        "revision": 1 if status == "pending" else 2}
    return tool_call, row
