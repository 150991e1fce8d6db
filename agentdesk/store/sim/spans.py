"""Span-tree shapes for bulk data: what a long agent run looks like, as plain row dicts.

The shape follows how agent runs nest in practice: an agent span holds model
calls; a model call holds the guardrail checks, approval gates and tool calls it
caused; a tool call may delegate to a sub-agent whose span holds its own model
calls, and so on. Rows come out depth-first (parents before children, siblings
in time order) with consistent times: every child lies inside its parent.
"""

from __future__ import annotations

import json
import random
from typing import Any

from agentdesk.store.sim.content import ContentGenerator, ToolCall

MAX_SUB_AGENT_DEPTH = 3
ERROR_RATES = {"tool": 0.02, "model": 0.003, "guardrail": 0.01, "gate": 0.0, "sub_agent": 0.01, "agent": 0.0}
"""Per-kind error odds; with the usual kind mix about 1% of all spans fail."""

Row = dict[str, Any]


class IdMaker:
    """Ids shaped like `store.ids.new_id` but drawn from a seeded Random, so bulk data is reproducible."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def __call__(self, prefix: str) -> str:
        return f"{prefix}_{self.rng.getrandbits(64):016x}"


class SpanTreeBuilder:
    """Builds one run's span rows; `count` caps the number of spans exactly."""

    def __init__(self, content: ContentGenerator, new_id: IdMaker, *, model: str, agent_name: str) -> None:
        self.content = content
        self.rng = content.rng
        self.new_id = new_id
        self.model = model
        self.agent_name = agent_name
        self.rows: list[Row] = []
        self._run_id = ""
        self._count = 0

    def build(self, run_id: str, start_at: float, count: int) -> list[Row]:
        self.rows, self._run_id, self._count = [], run_id, max(1, count)
        root = self._open(None, "agent", self.agent_name, start_at, {"model": self.model})
        t = start_at + 0.005
        context_tokens = 800
        while self._room():
            t, context_tokens = self._step(root["id"], t, 0, context_tokens)
        self._close(root, t + 0.005)
        return self.rows

    def _room(self) -> bool:
        return len(self.rows) < self._count

    def _open(self, parent: str | None, kind: str, name: str, t: float, attributes: dict[str, Any]) -> Row:
        row: Row = {"id": self.new_id("spn"), "run_id": self._run_id, "parent_span_id": parent, "kind": kind,
                    "name": name, "status": "ok", "started_at": t, "ended_at": None, "input_tokens": 0,
                    "output_tokens": 0, "cost_usd": 0.0, "attributes": json.dumps(attributes),
                    "input_text": None, "output_text": None, "error": None, "context_revision": None}
        self.rows.append(row)
        return row

    def _close(self, row: Row, t: float, *, output: str | None = None, error: str | None = None,
               may_fail: bool = True) -> float:
        if error is None and may_fail and self.rng.random() < ERROR_RATES[row["kind"]]:
            error = self._error_for(row)
        row["ended_at"] = t
        row["output_text"] = None if error else output
        if error:
            row["status"], row["error"] = "error", error
        return t

    def _error_for(self, row: Row) -> str:
        if row["kind"] == "model":
            return self.content.model_error()
        if row["kind"] == "guardrail":
            return f"blocked by {row['name']}: the request looks like a prompt injection"
        return "sub-agent exceeded its step budget" if row["kind"] == "sub_agent" else "tool failed"

    def _step(self, parent: str, t: float, depth: int, context_tokens: int) -> tuple[float, int]:
        """One model call and everything it caused; returns the time after it and the new context size."""
        model = self._open(parent, "model", f"{self.model} chat", t, {"model": self.model})
        usage = self.content.model_usage(self.model, context_tokens)
        model.update(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                     cost_usd=usage.cost_usd)
        t += self.content.model_duration()
        if self._room() and self.rng.random() < 0.25:
            t = self._guardrail(model["id"], t)
        for _ in range(self.rng.choice((0, 1, 1, 1, 2, 3))):
            if not self._room():
                break
            t = self._tool(model["id"], t, depth)
        self._close(model, t + 0.002, output=f"{usage.output_tokens} tokens")
        return t + 0.01, context_tokens + usage.output_tokens + 300

    def _guardrail(self, parent: str, t: float) -> float:
        row = self._open(parent, "guardrail", self.content.guardrail(), t, {})
        return self._close(row, t + self.rng.uniform(0.01, 0.08), output="pass")

    def _tool(self, parent: str, t: float, depth: int) -> float:
        call = self.content.tool_call(allow_delegate=depth < MAX_SUB_AGENT_DEPTH)
        if call.risky and self._room() and self.rng.random() < 0.3:
            gate = self._open(parent, "gate", f"approval: {call.tool}", t, {"tool": call.tool})
            t = self._close(gate, t + self.rng.uniform(2.0, 90.0), output="approved")
        if not self._room():
            return t
        if call.tool == "delegate":
            return self._sub_agent(parent, t, depth, call)
        row = self._open(parent, "tool", call.tool, t, {"tool": call.tool})
        row["input_text"] = call.arguments_json
        failed = self.rng.random() < ERROR_RATES["tool"]
        end = t + self.content.tool_duration(call.tool)
        if failed:
            return self._close(row, end, error=self.content.tool_error(call)) + 0.002
        return self._close(row, end, output=self.content.tool_output(call)[:4000], may_fail=False) + 0.002

    def _sub_agent(self, parent: str, t: float, depth: int, call: ToolCall) -> float:
        role = call.arguments["role"]
        row = self._open(parent, "sub_agent", f"delegate → {role}", t, {"role": role})
        row["input_text"] = call.arguments["task"]
        t += 0.01
        context_tokens = 500
        for _ in range(self.rng.randint(1, 4)):
            if not self._room():
                break
            t, context_tokens = self._step(row["id"], t, depth + 1, context_tokens)
        return self._close(row, t + 0.005, output=self.content.assistant_reply()) + 0.002


def mark_running_tail(rows: list[Row]) -> list[str]:
    """Reopen the rightmost chain (root, its last child, ...): the spans a live run is inside right now."""
    if not rows:
        return []
    last_child: dict[str, str] = {}
    by_id = {row["id"]: row for row in rows}
    for row in rows:
        if row["parent_span_id"] is not None:
            last_child[row["parent_span_id"]] = row["id"]
    chain = [rows[0]["id"]]
    while chain[-1] in last_child:
        chain.append(last_child[chain[-1]])
    for span_id in chain:
        by_id[span_id].update(status="running", ended_at=None, output_text=None, error=None,
                              input_tokens=0, output_tokens=0, cost_usd=0.0)
    return chain


def shift_times(rows: list[Row], delta: float) -> None:
    for row in rows:
        row["started_at"] += delta
        if row["ended_at"] is not None:
            row["ended_at"] += delta


def tree_end(rows: list[Row]) -> float:
    return max((r["ended_at"] or r["started_at"]) for r in rows)
