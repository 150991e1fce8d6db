"""The shape of a maka database as agentdesk's tree: projects > task > sessions > agents > runs.

maka keeps identity in loose links rather than parent tables: a session names its
project only inside `payload_json.projectId`; a sub-agent either lives in a child
session (`subagent_parent_session_id` / `_run_id` / `_tool_call_id`) or is a run whose
header carries `parentRunId` + `agentId`. This module resolves those links once into
plain values. Decisions (documented in docs/sources.md (maka)):
- one synthetic task per project (maka has no task level);
- only top-level sessions are tree sessions; a sub-agent session becomes a sub-agent
  (its root agent) under the agent whose run spawned it, so nesting is by agents;
- every session has a root agent `agent:<session>`; header sub-agents are
  `agent:<session>/<agentId>` under the agent of their `parentRunId`.
The structure changes only when sessions, runs or projects are added, so it is cached
against a cheap signature of those tables.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.sources.maka import codec


@dataclass(frozen=True, slots=True)
class ProjectNode:
    id: str
    name: str
    last_used_ms: int | None


@dataclass(frozen=True, slots=True)
class SessionNode:
    id: str
    name: str
    native_status: str
    project_id: str
    top: str
    created_ms: int | None
    status_ms: int | None
    model: str
    parent_session: str | None = None
    parent_run: str | None = None
    tool_call: str | None = None


@dataclass(frozen=True, slots=True)
class AgentNode:
    id: str
    session_id: str
    """The maka session whose runs this agent owns."""
    top: str
    parent_agent_id: str | None
    name: str
    model: str
    created_ms: int | None
    project_id: str


@dataclass(frozen=True, slots=True)
class RunNode:
    key: str
    session_id: str
    run_id: str
    agent_id: str
    created_ms: int | None


@dataclass(slots=True)
class Topology:
    projects: dict[str, ProjectNode] = field(default_factory=dict)
    sessions: dict[str, SessionNode] = field(default_factory=dict)
    agents: dict[str, AgentNode] = field(default_factory=dict)
    """Parents before their sub-agents."""
    runs: dict[str, RunNode] = field(default_factory=dict)
    runs_by_agent: dict[str, list[str]] = field(default_factory=dict)

    def top_sessions(self, project_id: str) -> list[SessionNode]:
        return [s for s in self.sessions.values() if s.top == s.id and s.project_id == project_id]

    def agents_of(self, top_session: str) -> list[AgentNode]:
        return [a for a in self.agents.values() if a.top == top_session]

    def agent_of_run(self, session_id: str, run_id: str) -> str:
        node = self.runs.get(codec.run_key(session_id, run_id))
        return node.agent_id if node is not None else codec.root_agent(session_id)

    def chain(self, agent_id: str) -> tuple[str, ...]:
        out: list[str] = []
        current: str | None = agent_id
        while current is not None and current not in out and current in self.agents:
            out.append(current)
            current = self.agents[current].parent_agent_id
        return tuple(reversed(out))

    def agent_parents(self, agent: AgentNode) -> dict[str, str]:
        parents = {"project": agent.project_id, "task": codec.task_of(agent.project_id), "session": agent.top}
        if agent.parent_agent_id:
            parents["parent_agent"] = agent.parent_agent_id
        return parents

    def run_parents(self, session_id: str, run_id: str) -> dict[str, str]:
        """The parents of a run (project, task, session, agent) for `Change` events."""
        agent = self.agents.get(self.agent_of_run(session_id, run_id))
        if agent is None:
            return {}
        return {"project": agent.project_id, "task": codec.task_of(agent.project_id), "session": agent.top,
                "agent": agent.id}


SIGNATURE_SQL = text(
    "SELECT (SELECT count(*) || ':' || ifnull(max(rowid), 0) || ':' || total(committed_at) "
    "        FROM session_metadata) AS s, "
    "       (SELECT count(*) || ':' || ifnull(max(rowid), 0) FROM core_agent_runs) AS r, "
    "       (SELECT count(*) || ':' || ifnull(max(rowid), 0) || ':' || total(last_used_at) || ':' || "
    "               total(length(name)) FROM projects) AS p")
"""Changes whenever a session, run or project is added, removed or re-committed."""


def signature(conn: Connection) -> tuple[Any, ...]:
    return tuple(conn.execute(SIGNATURE_SQL).one())


def load(conn: Connection) -> Topology:
    topo = Topology()
    for pid, name, used in conn.execute(text(
            "SELECT project_id, name, last_used_at FROM projects ORDER BY rowid")):
        topo.projects[pid] = ProjectNode(pid, name, used)
    sessions = [dict(r._mapping) for r in conn.execute(text(
        "SELECT session_id, name, status, created_at, status_updated_at, model, "
        "json_extract(payload_json, '$.projectId') AS project_id, subagent_parent_session_id AS parent, "
        "subagent_parent_run_id AS parent_run, subagent_tool_call_id AS tool_call "
        "FROM session_metadata ORDER BY created_at, session_id"))]
    runs = [dict(r._mapping) for r in conn.execute(text(
        "SELECT session_id, run_id, created_at, json_extract(record_json, '$.parentRunId') AS parent_run, "
        "json_extract(record_json, '$.agentId') AS agent_key, "
        "json_extract(record_json, '$.agentName') AS agent_name, "
        "json_extract(record_json, '$.modelId') AS model FROM core_agent_runs ORDER BY created_at, run_id"))]
    _sessions(topo, sessions, runs)
    _agents(topo, runs)
    return topo


def _sessions(topo: Topology, rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    by_id = {r["session_id"]: r for r in rows}
    for run in runs:  # runs of a session without metadata still belong somewhere: show, never drop
        if run["session_id"] not in by_id:
            sid = run["session_id"]
            by_id[sid] = {"session_id": sid, "name": f"(no metadata) {sid}", "status": "unknown",
                          "created_at": run["created_at"], "model": "", "status_updated_at": None,
                          "project_id": None, "parent": None}
            rows.append(by_id[sid])

    def top_of(sid: str) -> str:
        seen: list[str] = []
        while by_id.get(sid, {}).get("parent") in by_id and sid not in seen:
            seen.append(sid)
            sid = by_id[sid]["parent"]
        return sid

    for row in rows:
        top = top_of(row["session_id"])
        project = by_id[top].get("project_id")
        if project not in topo.projects:
            project = codec.NO_PROJECT
            topo.projects.setdefault(project, ProjectNode(project, codec.NO_PROJECT_NAME, None))
        parent = row.get("parent") if row.get("parent") in by_id else None
        topo.sessions[row["session_id"]] = SessionNode(
            row["session_id"], row["name"], row["status"], project, top, row["created_at"],
            row.get("status_updated_at"), row.get("model") or "", parent,
            row.get("parent_run") if parent else None, row.get("tool_call") if parent else None)


def _agents(topo: Topology, runs: list[dict[str, Any]]) -> None:
    owner: dict[str, str] = {}  # run key -> agent id
    header_agents: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = codec.run_key(run["session_id"], run["run_id"])
        if run["parent_run"]:
            agent_key = run["agent_key"] or f"run-{run['parent_run']}"
            aid = f"{codec.root_agent(run['session_id'])}/{agent_key}"
            header_agents.setdefault(aid, run)
        else:
            aid = codec.root_agent(run["session_id"])
        owner[key] = aid
        topo.runs[key] = RunNode(key, run["session_id"], run["run_id"], aid, run["created_at"])
        topo.runs_by_agent.setdefault(aid, []).append(key)
    first_name = {owner[k]: r["agent_name"] for r in runs
                  if r["agent_name"] and (k := codec.run_key(r["session_id"], r["run_id"])) in owner}
    nodes: dict[str, AgentNode] = {}
    for s in topo.sessions.values():
        aid = codec.root_agent(s.id)
        parent = None
        if s.parent_session is not None:
            parent = owner.get(codec.run_key(s.parent_session, s.parent_run or ""),
                               codec.root_agent(s.parent_session))
        name = "main" if s.parent_session is None else first_name.get(aid) or s.name
        nodes[aid] = AgentNode(aid, s.id, s.top, parent, name, s.model, s.created_ms, s.project_id)
    for aid, run in header_agents.items():
        s = topo.sessions[run["session_id"]]
        parent = owner.get(codec.run_key(run["session_id"], run["parent_run"]), codec.root_agent(s.id))
        nodes[aid] = AgentNode(aid, s.id, s.top, parent if parent != aid else codec.root_agent(s.id),
                               run["agent_name"] or run["agent_key"] or aid.rsplit("/", 1)[-1],
                               run["model"] or s.model, run["created_at"], s.project_id)
    children: dict[str | None, list[str]] = {}
    for aid, node in nodes.items():
        parent = node.parent_agent_id if node.parent_agent_id in nodes else None
        children.setdefault(parent, []).append(aid)
    stack = list(reversed(children.get(None, [])))
    while stack:  # depth-first, so every agent follows its parent
        aid = stack.pop()
        if aid in topo.agents:
            continue
        topo.agents[aid] = nodes[aid]
        stack.extend(reversed(children.get(aid, [])))
    for aid, node in nodes.items():  # a corrupt parent cycle: still shown, as a top-level agent
        if aid not in topo.agents:
            topo.agents[aid] = AgentNode(aid, node.session_id, node.top, None, node.name, node.model,
                                         node.created_ms, node.project_id)


class TopologyCache:
    """The tree structure of one database, reloaded only when sessions, runs or projects changed.

    Keyed on `signature`, so a tree refresh costs one cheap signature query plus the status scan.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[tuple[Any, ...], Topology] | None = None

    def __call__(self, conn: Connection) -> Topology:
        sig = signature(conn)
        with self._lock:
            if self._cached is not None and self._cached[0] == sig:
                return self._cached[1]
        topo = load(conn)
        with self._lock:
            self._cached = (sig, topo)
        return topo
