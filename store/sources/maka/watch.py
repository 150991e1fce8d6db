"""Turning the maka runtime's commits into agentdesk `Change` events.

maka's ledgers are append-only, so most tables are followed by a rowid high-water mark:
`runtime_events`, `usage_model_call_attempts`, `core_agent_run_events`, and the
interaction request and outcome tables. Row counts ride along: a count that falls
below what was seen means rows were deleted (a session purge) and the views reload
(one RESET). Rows maka updates in place are compared by signature: run headers
(status and `updatedAt`, only for runs not yet finished), session rows
(`committed_at`), projects, and streaming partial snapshots (`updated_at` and segments).
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.bus import RESET, Change
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.base import MakaBase
from agentdesk.store.sources.maka.topology import Topology

APPEND_ONLY = ("runtime_events", "usage_model_call_attempts", "core_agent_run_events",
               "core_interaction_requests", "core_interaction_outcomes")
NEW_ROWS = {
    "runtime_events":
        "SELECT rowid, event_id, session_id, run_id, event_kind, "
        "coalesce(json_extract(payload_json, '$.refs.toolCallId'), "
        "json_extract(payload_json, '$.content.id')) AS call, "
        "coalesce(json_extract(payload_json, '$.actions.permissionRequest.requestId'), "
        "json_extract(payload_json, '$.actions.permissionDecision.requestId')) AS req FROM runtime_events",
    "usage_model_call_attempts":
        "SELECT rowid, attempt_id, json_extract(record_json, '$.sessionId') AS session_id, "
        "json_extract(record_json, '$.runId') AS run_id FROM usage_model_call_attempts",
    "core_agent_run_events":
        "SELECT rowid, session_id, run_id, sequence, event_type FROM core_agent_run_events",
    "core_interaction_requests":
        "SELECT rowid, request_id, session_id, run_id FROM core_interaction_requests",
    "core_interaction_outcomes":
        "SELECT o.rowid, o.request_id, q.session_id, q.run_id FROM core_interaction_outcomes o "
        "JOIN core_interaction_requests q ON q.request_id = o.request_id",
}
REWRITTEN = {
    "project": "SELECT project_id, name, last_used_at, archived_at FROM projects",
    "session": "SELECT session_id, committed_at, status, name FROM session_metadata",
    "stream": "SELECT p.stream_key, p.session_id, p.run_id, p.updated_at, "
              "(SELECT count(*) FROM runtime_partial_segments s WHERE s.stream_key = p.stream_key) "
              "FROM runtime_partial_snapshots p",
}
"""Rows maka updates in place, compared by a signature of their changing columns."""
BATCH = 5000


class WatchMixin(MakaBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watch_lock = threading.Lock()
        self._marks: dict[str, tuple[int, int]] = {}
        self._open_runs: dict[int, tuple[Any, ...]] = {}
        self._runs_hw = 0
        self._known: dict[str, dict[str, Any]] = {}

    def prime_high_water(self) -> None:
        with self._watch_lock, self.reading() as conn:
            self._scan(conn, emit=False)

    def poll_changes(self) -> list[Change]:
        with self._watch_lock, self.reading() as conn:
            return self._scan(conn, emit=True)

    def _scan(self, conn: Connection, emit: bool) -> list[Change]:
        """Everything since the last scan, parents first (projects, sessions, runs, then their rows)."""
        topo = self.topology(conn)
        out = self._rewritten(conn, topo, emit, ("project", "session"))
        out.extend(self._watch_runs(conn, topo, emit))
        for table in APPEND_ONLY:
            out.extend(self._appended(conn, topo, table, emit))
        out.extend(self._rewritten(conn, topo, emit, ("stream",)))
        return out

    def _appended(self, conn: Connection, topo: Topology, table: str, emit: bool) -> list[Change]:
        hw, count = self._marks.get(table, (0, 0))
        top, now = conn.execute(text(f"SELECT ifnull(max(rowid), 0), count(*) FROM {table}")).one()
        self._marks[table] = (top, now)
        if not emit:
            return []
        out = [Change("*", RESET, "*")] if now < count or top < hw else []
        alias = "o." if table == "core_interaction_outcomes" else ""
        while hw < top:  # in batches, so a burst of commits never loads at once
            rows = conn.execute(text(f"{NEW_ROWS[table]} WHERE {alias}rowid > :hw AND {alias}rowid <= :top "
                                     f"ORDER BY {alias}rowid LIMIT {BATCH}"), {"hw": hw, "top": top}).all()
            if not rows:
                break
            out.extend(c for row in rows for c in _row_changes(topo, table, row._mapping))
            hw = rows[-1][0] if len(rows) == BATCH else top
        return out

    def _rewritten(self, conn: Connection, topo: Topology, emit: bool,
                   names: tuple[str, ...]) -> list[Change]:
        out: list[Change] = []
        for name in names:
            now_rows = {r[0]: tuple(r) for r in conn.execute(text(REWRITTEN[name]))}
            if emit:
                out.extend(_diff(topo, name, self._known.get(name, {}), now_rows))
            self._known[name] = now_rows
        return out

    def _watch_runs(self, conn: Connection, topo: Topology, emit: bool) -> list[Change]:
        """New run headers by rowid; header updates by signature, for unfinished runs only."""
        sql = ("SELECT rowid, session_id, run_id, json_extract(record_json, '$.status'), "
               "json_extract(record_json, '$.updatedAt') FROM core_agent_runs WHERE rowid > :hw")
        rows = list(conn.execute(text(sql), {"hw": self._runs_hw}))
        if self._open_runs:
            marks = ", ".join(str(int(r)) for r in self._open_runs)
            rows += conn.execute(text(sql.replace("rowid > :hw", f"rowid IN ({marks})")))
        out: list[Change] = []
        for rowid, sid, rid, status, updated in rows:
            is_new = rowid > self._runs_hw
            if not is_new and self._open_runs.get(rowid) == (status, updated):
                continue
            parents, key = topo.run_parents(sid, rid), codec.run_key(sid, rid)
            if emit:
                if is_new and _first_run_of_header_agent(topo, sid, key):
                    agent = topo.agents[topo.runs[key].agent_id]
                    out.append(Change("agent", "insert", agent.id, topo.agent_parents(agent)))
                out.append(Change("run", "insert" if is_new else "update", key, parents))
                out.append(Change("span", "update", codec.span_id("turn", sid, rid), {**parents, "run": key}))
            if status in codec.TERMINAL_RUN:
                self._open_runs.pop(rowid, None)
            else:
                self._open_runs[rowid] = (status, updated)
        self._runs_hw = max([self._runs_hw, *(r[0] for r in rows)])
        return out


def _first_run_of_header_agent(topo: Topology, sid: str, key: str) -> bool:
    """A run that brings a new in-session sub-agent (run header `parentRunId`) into the tree."""
    node = topo.runs.get(key)
    if node is None or node.agent_id == codec.root_agent(sid) or node.agent_id not in topo.agents:
        return False
    return topo.runs_by_agent.get(node.agent_id, [])[:1] == [key]


def _row_changes(topo: Topology, table: str, row: Any) -> list[Change]:
    sid, rid = row["session_id"], row["run_id"]
    if sid is None or rid is None:
        return []
    parents = topo.run_parents(sid, rid)
    run = codec.run_key(sid, rid)
    at_run = {**parents, "run": run}
    out = [Change("run", "update", run, parents)]
    if table == "runtime_events":
        kind = row["event_kind"]
        out.append(Change("span", "update", codec.span_id("turn", sid, rid), at_run))
        if kind in ("function_call", "function_response", "tool_dispatch") and row["call"]:
            op = "insert" if kind == "function_call" else "update"
            out.append(Change("span", op, codec.span_id("tool", sid, rid, row["call"]), at_run))
        elif kind == "error":
            out.append(Change("span", "insert", codec.span_id("error", sid, rid, row["event_id"]), at_run))
        elif row["req"]:
            out.append(Change("span", "update", codec.span_id("perm", sid, rid, row["req"]), at_run))
        if kind in codec.CONTENT_KINDS and parents:
            agent = {"agent": parents["agent"], "session": parents["session"]}
            out.append(Change("context_item", "insert", row["event_id"], {**agent, "group": run}))
            out.append(Change("context", "update", parents["agent"], agent))
    elif table == "usage_model_call_attempts":
        out.append(Change("span", "insert", codec.span_id("model", sid, rid, row["attempt_id"]), at_run))
    elif table == "core_agent_run_events" and row["event_type"] in codec.COMPACTION_EVENTS:
        out.append(Change("span", "insert", codec.span_id("compact", sid, rid, row["sequence"]), at_run))
        if parents:
            out.append(Change("context", "update", parents["agent"], {"agent": parents["agent"],
                                                                      "session": parents["session"]}))
    elif table in ("core_interaction_requests", "core_interaction_outcomes"):
        op = "insert" if table == "core_interaction_requests" else "update"
        out.append(Change("approval", op, row["request_id"], at_run))
        out.append(Change("span", op, codec.span_id("perm", sid, rid, row["request_id"]), at_run))
    return out


def _diff(topo: Topology, name: str, before: dict[str, tuple[Any, ...]],
          now: dict[str, tuple[Any, ...]]) -> list[Change]:
    out: list[Change] = []
    if any(key not in now for key in before) and name != "stream":
        return [Change("*", RESET, "*")]
    for key, row in now.items():
        if before.get(key) == row:
            continue
        op = "insert" if key not in before else "update"
        if name == "project":
            out.append(Change("project", op, key))
        elif name == "session":
            s = topo.sessions.get(key)
            if s is None:
                continue
            parents = {"project": s.project_id, "task": codec.task_of(s.project_id)}
            if s.top == s.id:
                out.append(Change("session", op, key, parents))
            agent = topo.agents.get(codec.root_agent(key))
            if agent is not None:
                out.append(Change("agent", op, agent.id, topo.agent_parents(agent)))
        else:
            out.extend(_stream_change(topo, op, row))
    if name == "stream":
        gone = [row for key, row in before.items() if key not in now]
        out.extend(c for row in gone for c in _stream_change(topo, "delete", row))
    return out


def _stream_change(topo: Topology, op: str, row: tuple[Any, ...]) -> list[Change]:
    key, sid, rid = row[0], row[1], row[2]
    at_run = {**topo.run_parents(sid, rid), "run": codec.run_key(sid, rid)}
    return [Change("span", op, codec.span_id("stream", sid, rid, key), at_run)]
