"""Deterministic content for demos and benchmarks, and the bulk populator.

`ContentGenerator` (names, tool calls, outputs, durations, usage) is shared with
the live simulator. `populate_bulk` fills a store with benchmark-sized data in a
few big transactions of SQLAlchemy Core executemany inserts: the unit of work,
audit per row and change log would cost minutes at this size and no watcher
needs to hear about a store being seeded. The rows still obey the schema and
the runtime's invariants (parents exist, run totals match their spans, agent
context revisions count their items), so every view and query sees real data.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert
from sqlalchemy.orm import Session

from agentdesk.store.audit import AuditAppender
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.sim import bulk_rows as br
from agentdesk.store.sim.content import AgentProfile, ContentGenerator, ToolCall, Usage
from agentdesk.store.sim.spans import IdMaker, Row, SpanTreeBuilder, mark_running_tail, shift_times, tree_end
from agentdesk.store.text.times import ns_of_seconds

__all__ = ["AgentProfile", "BulkResult", "ContentGenerator", "ToolCall", "Usage", "populate_bulk"]

TABLES: dict[str, type[sc.Base]] = {
    "projects": sc.ProjectRow, "tasks": sc.TaskRow, "sessions": sc.SessionRow, "agents": sc.AgentRow,
    "runs": sc.RunRow, "spans": sc.SpanRow, "tool_calls": sc.ToolCallRow, "approvals": sc.ApprovalRow,
    "context_groups": sc.ContextGroupRow, "context_items": sc.ContextItemRow,
    "context_item_revisions": sc.ContextItemRevisionRow, "span_context_items": sc.SpanContextRow,
}
CHUNK = 20_000


@dataclass(frozen=True, slots=True)
class BulkResult:
    """The ids a benchmark or test wants to aim at, and what was written."""

    big_run_id: str
    busy_agent_id: str
    """The agent with by far the most runs (it also owns the big run)."""
    busiest_project_id: str
    project_ids: tuple[str, ...]
    pending_approval_ids: tuple[str, ...]
    running_span_ids: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0


def populate_bulk(store: Store, *, seed: int = 0, projects: int = 5, runs: int = 100_000,
                  big_run_spans: int = 100_000, busy_share: float = 0.6, detailed_runs: int = 300,
                  pending_approvals: int = 12, decided_approvals: int = 60, context_turns: int = 40,
                  now: float | None = None) -> BulkResult:
    """Seed `store` with benchmark data; ids come from `seed`, so use a fresh store (or another seed).

    Every agent gets at least one run and the big run at least two spans, so tiny
    sizes are raised to that; `now` pins every timestamp (two calls with the same
    seed and `now` write identical databases).
    """
    began = time.perf_counter()
    plan = _Plan(seed, time.time() if now is None else now)
    plan.build(projects, runs, big_run_spans, busy_share, detailed_runs, pending_approvals, decided_approvals,
               context_turns)
    with store.write_engine.begin() as conn:
        _insert(conn, plan.tables, ("projects", "tasks", "sessions", "agents", "runs"))
    with store.write_engine.begin() as conn:
        spans = plan.tables.get("spans", [])
        for start in range(0, len(spans), CHUNK):  # converted a chunk at a time: a million spans, not two
            conn.execute(insert(sc.SpanRow), [_span_in_ns(row) for row in spans[start:start + CHUNK]])
    with store.write_engine.begin() as conn:
        _insert(conn, plan.tables, ("tool_calls", "approvals", "context_groups", "context_items",
                                    "context_item_revisions", "span_context_items"))
        audit = _audit(conn, plan.audit_events)
    audit.anchor()  # after the commit: the chain head goes to the store's anchor file
    return plan.result(time.perf_counter() - began)


def _span_in_ns(row: Row) -> Row:
    """A planned span (times in seconds, as the plan computes them) as its row: times in integer
    nanoseconds (migration 0023)."""
    end = row["ended_at"]
    return row | {"started_at": ns_of_seconds(row["started_at"]),
                  "ended_at": None if end is None else ns_of_seconds(end)}


def _insert(conn: Connection, tables: dict[str, list[Row]], names: Iterable[str]) -> None:
    for name in names:
        rows = tables.get(name, [])
        for start in range(0, len(rows), CHUNK):
            conn.execute(insert(TABLES[name]), rows[start:start + CHUNK])


def _audit(conn: Connection, events: list[tuple[float, str, str, str, str, dict[str, Any]]]) -> AuditAppender:
    """A short, valid audit chain (hierarchy creation and decisions), so `verify` has something to walk."""
    with Session(bind=conn) as session:
        appender = AuditAppender(session)
        for at, actor, action, entity, entity_id, payload in sorted(events, key=lambda e: e[0]):
            appender.append(actor, action, entity, entity_id, payload, at=at)
        session.flush()
    return appender


class _Plan:
    """All rows of one bulk store, built in memory before anything is written."""

    def __init__(self, seed: int, now: float) -> None:
        self.content = ContentGenerator(random.Random(f"agentdesk-bulk:{seed}"))
        self.rng = self.content.rng
        self.new_id = IdMaker(random.Random(f"agentdesk-bulk-ids:{seed}"))
        self.now = now
        self.tables: dict[str, list[Row]] = {name: [] for name in TABLES}
        self.audit_events: list[tuple[float, str, str, str, str, dict[str, Any]]] = []
        self.agents: list[br.BulkAgent] = []
        self.big_run: Row = {}
        self.running_spans: list[str] = []
        self.pending: list[str] = []
        self.with_spans: set[str] = set()

    def build(self, projects: int, runs: int, big_run_spans: int, busy_share: float, detailed_runs: int,
              pending: int, decided: int, turns: int) -> None:
        for name, rows in br.hierarchy(self.content, self.new_id, max(1, projects), self.now).items():
            self.tables[name] = rows
        self.agents = [br.BulkAgent(row) for row in self.tables["agents"]]
        for agent in self.agents:
            ctx = br.context(self.content, self.new_id, agent, turns if agent is self.busy else
                             self.rng.randint(4, 12), self.now - 3 * 86_400)
            for name, rows in ctx.items():
                self.tables[name].extend(rows)
        total = max(len(self.agents) + 1, runs)
        big = self._big_run(max(2, big_run_spans))
        self._runs(total, busy_share, history_end=big["started_at"] - 60)
        self.busy.runs.append(big)
        self._live(pending)
        self._detailed(detailed_runs)
        self._decided(decided)
        self._statuses()
        for agent in self.agents:
            self.tables["runs"].extend(agent.runs)
        self._hierarchy_audit()

    @property
    def busy(self) -> br.BulkAgent:
        return self.agents[0]

    def _runs(self, total: int, busy_share: float, history_end: float) -> None:
        """Historic runs: `busy_share` of them for the busy agent, at least one for every other agent."""
        titles = [self.content.task_title() for _ in range(200)]
        others = self.agents[1:]
        busy_count = min(max(1, int(total * busy_share)), total - len(others))
        shares = [1] * len(others)
        for n in self.rng.choices(range(len(others)), k=total - busy_count - len(others)) if others else []:
            shares[n] += 1
        start = self.now - br.HISTORY_S
        br.historic_runs(self.content, self.new_id, self.busy, busy_count - 1, titles, start,
                         max(start + 1, history_end))
        for agent, count in zip(others, shares, strict=True):
            br.historic_runs(self.content, self.new_id, agent, count, titles, start, self.now - 600)

    def _tree(self, agent: br.BulkAgent, run: Row, count: int, start: float) -> list[Row]:
        builder = SpanTreeBuilder(self.content, self.new_id, model=agent.row["model"],
                                  agent_name=agent.row["name"])
        return builder.build(run["id"], start, count)

    def _big_run(self, spans: int) -> Row:
        """The busy agent's latest run: `spans` nested spans, still running now."""
        agent, a = self.busy, self.busy.row
        run: Row = {"id": self.new_id("run"), "project_id": a["project_id"], "task_id": a["task_id"],
                    "session_id": a["session_id"], "agent_id": a["id"], "error": None, "revision": 2,
                    "title": "Long-running migration of the billing service"}
        rows = self._tree(agent, run, spans, 0.0)
        shift_times(rows, self.now - tree_end(rows) - 5.0)
        self.running_spans = mark_running_tail(rows)
        br.apply_spans(run, rows, running=True)
        model_spans = [row for row in rows if row["kind"] == "model" and row["ended_at"] is not None][-40:]
        for n, span in enumerate(model_spans):
            upto = max(1, len(agent.items) * (n + 1) // len(model_spans))
            self.tables["span_context_items"].extend(br.snapshot(span, agent, upto))
        self.big_run = run
        self.with_spans.add(run["id"])
        self.tables["spans"].extend(rows)
        return run

    def _detailed(self, count: int) -> None:
        """Give the latest historic runs of every agent a small span tree of their own."""
        per_agent = max(1, count // max(1, len(self.agents)))
        for agent in self.agents:
            for run in [r for r in agent.runs if r["id"] not in self.with_spans][-per_agent:]:
                rows = self._tree(agent, run, self.rng.randint(4, 60), run["started_at"])
                if run["status"] == "failed":
                    rows[0].update(status="error", error=run["error"])
                br.apply_spans(run, rows, running=False)
                self.tables["spans"].extend(rows)

    def _live(self, pending: int) -> None:
        """Some agents are working right now; some wait on an operator's approval."""
        others = self.agents[1:] or self.agents
        waiting = others[:max(1, min(pending, len(others) // 2))] if pending else []
        running = [a for a in others if a not in waiting][:2]
        for agent in running:
            self._live_run(agent, gate=False)
        gates = {agent.id: self._live_run(agent, gate=True) for agent in waiting}
        for n in range(pending):
            agent = waiting[n % len(waiting)]
            run, gate = gates[agent.id]
            tool = self._approval(run, gate["id"], self.now - self.rng.uniform(5, 900), "pending", agent)
            if n < len(waiting):
                gate.update(name=f"approval: {tool}", attributes=f'{{"tool": "{tool}"}}')

    def _live_run(self, agent: br.BulkAgent, *, gate: bool) -> tuple[Row, Row]:
        """Turn the agent's latest historic run into one in progress (a gate span open if it waits)."""
        run = agent.runs[-1]
        rows = self._tree(agent, run, self.rng.randint(5, 30), 0.0)
        shift_times(rows, self.now - tree_end(rows) - 1.0)
        gate_row: Row = {}
        if gate:
            model = dict(rows[1], id=self.new_id("spn"), parent_span_id=rows[0]["id"],
                         started_at=self.now - 0.5)
            gate_row = dict(model, id=self.new_id("spn"), parent_span_id=model["id"], kind="gate",
                            name="approval", attributes="{}", started_at=self.now - 0.4, input_text=None)
            rows += [model, gate_row]
        self.running_spans += mark_running_tail(rows)
        br.apply_spans(run, rows, running=True)
        run["status"] = "waiting" if gate else "running"
        self.with_spans.add(run["id"])
        self.tables["spans"].extend(rows)
        return run, gate_row

    def _decided(self, count: int) -> None:
        for _ in range(count):
            agent = self.rng.choice(self.agents)
            run = self.rng.choice(agent.runs[:-1] or agent.runs)
            status = self.rng.choice(("approved", "approved", "approved", "denied", "expired"))
            self._approval(run, None, run["started_at"] + 1.0, status, agent)

    def _approval(self, run: Row, span_id: str | None, created: float, status: str,
                  agent: br.BulkAgent) -> str:
        call, row = br.approval(self.content, self.new_id, run, span_id, created, status=status,
                                context_revision=agent.row["context_revision"])
        self.tables["tool_calls"].append(call)
        self.tables["approvals"].append(row)
        self.audit_events.append((created, "runtime", "approval.request", "approval", row["id"],
                                  {"tool": row["tool_name"], "arguments": row["arguments"],
                                   "payload_hash": row["payload_hash"], "expires_at": row["expires_at"]}))
        if status == "pending":
            self.pending.append(row["id"])
        else:
            self.audit_events.append((row["decided_at"], row["decided_by"] or "agentdesk",
                                      f"approval.{status}",
                                      "approval", row["id"], {"reason": row["reason"],
                                                              "tool": row["tool_name"],
                                                              "edited_arguments": row["edited_arguments"],
                                                              "edited_hash": row["edited_hash"]}))
        return str(row["tool_name"])

    def _statuses(self) -> None:
        """Agents show their latest run's state; sessions roll their agents up."""
        by_session: dict[str, set[str]] = {}
        for agent in self.agents:
            last = agent.runs[-1]["status"] if agent.runs else "idle"
            agent.row["status"] = {"cancelled": "done"}.get(last, last)
            agent.row["revision"] = 1 + len(agent.runs)
            by_session.setdefault(agent.row["session_id"], set()).add(agent.row["status"])
        for ses in self.tables["sessions"]:
            states = by_session.get(ses["id"], {"idle"})
            ses["status"] = next((s for s in ("waiting", "running", "failed") if s in states), "done")
            ses["ended_at"] = None if ses["status"] in ("waiting", "running") else self.now - 60

    def _hierarchy_audit(self) -> None:
        for entity in ("project", "task", "session", "agent"):
            for row in self.tables[entity + "s"]:
                payload = {"name": row.get("name") or row.get("title")}
                self.audit_events.append((row["created_at"], "runtime", f"{entity}.create", entity,
                                          row["id"], payload))

    def result(self, elapsed: float) -> BulkResult:
        by_project: dict[str, int] = {}
        for agent in self.agents:
            by_project[agent.row["project_id"]] = by_project.get(agent.row["project_id"], 0) + len(agent.runs)
        counts = {name: len(rows) for name, rows in self.tables.items()}
        counts["audit_log"] = len(self.audit_events)
        return BulkResult(self.big_run["id"], self.busy.id, max(by_project, key=lambda k: by_project[k]),
                          tuple(r["id"] for r in self.tables["projects"]), tuple(self.pending),
                          tuple(self.running_spans), counts, elapsed)
