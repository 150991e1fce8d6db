"""Tree reads of the maka source: projects, the synthetic task, sessions, agents, runs, node, locate.

Counts and statuses are computed per level from one status scan and one pending scan,
never one query per row. maka keeps no revision counters on these rows, so every
`revision` is 0; its runs carry no title, so a run is titled by its turn's first user
message.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.queries import roll_up
from agentdesk.store.readmodel import Location, Page
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.maka import codec
from agentdesk.store.sources.maka.status import (
    agent_statuses,
    pending_by_run,
    require_agent,
    require_run,
    session_budget,
)
from agentdesk.store.sources.maka.topology import AgentNode, RunNode, SessionNode, Topology

TASK_TITLE = "sessions (maka has no task level)"


def projects(conn: Connection, topo: Topology) -> list[rm.Project]:
    status, pending = agent_statuses(conn, topo, topo.agents.values())
    sessions = list(topo.sessions.values())
    out = []
    for p in topo.projects.values():
        agents = [a.id for a in topo.agents.values() if a.project_id == p.id]
        created = min((s.created_ms or 0 for s in sessions if s.project_id == p.id),
                      default=p.last_used_ms)
        out.append(rm.Project(p.id, p.name, roll_up(status[a] for a in agents), parse.ms_time(created), 0,
                              sum(pending[a] for a in agents), 1))
    return out


def tasks(conn: Connection, topo: Topology, project_id: str) -> list[rm.Task]:
    project = next((p for p in projects(conn, topo) if p.id == project_id), None)
    if project is None:
        return []
    return [rm.Task(codec.task_of(project.id), project.id, TASK_TITLE, project.status, project.created_at,
                    0, project.pending_approvals)]


def sessions(conn: Connection, topo: Topology, task_id: str) -> list[rm.Session]:
    project_id = task_id.removeprefix("task:")
    tops = topo.top_sessions(project_id) if task_id.startswith("task:") else []
    _, pending = agent_statuses(conn, topo, topo.agents.values())
    return [_session(topo, s, pending) for s in tops]


def _session(topo: Topology, s: SessionNode, pending: dict[str, int]) -> rm.Session:
    status = codec.SESSION_STATUS.get(s.native_status, "idle")
    ended = parse.from_ms(s.status_ms) if status in ("done", "cancelled") else None
    count = sum(pending[a.id] for a in topo.agents_of(s.id))
    return rm.Session(s.id, s.project_id, codec.task_of(s.project_id), s.name, status,
                      parse.ms_time(s.created_ms), ended, 0, count)


def agents(conn: Connection, topo: Topology, session_id: str) -> list[rm.Agent]:
    """The session's root agent, then sub-agents (child sessions and header agents), parents first."""
    agents = topo.agents_of(session_id)
    status, pending = agent_statuses(conn, topo, agents)
    budgets = {sid: session_budget(conn, sid) for sid in {a.session_id for a in agents}}
    return [_agent(topo, a, status[a.id], pending[a.id], budgets) for a in agents]


def _agent(topo: Topology, a: AgentNode, status: str, pending: int, budgets: dict[str, int]) -> rm.Agent:
    return rm.Agent(a.id, a.project_id, codec.task_of(a.project_id), a.top, a.parent_agent_id, a.name,
                    a.model, status, 0, budgets.get(a.session_id, 0), parse.ms_time(a.created_ms), 0, pending,
                    len(topo.runs_by_agent.get(a.id, [])))


def runs(conn: Connection, topo: Topology, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
    """Newest first, like the native store."""
    keys = sorted(topo.runs_by_agent.get(agent_id, []),
                  key=lambda k: (-(topo.runs[k].created_ms or 0), k))
    page = [topo.runs[k] for k in keys[offset:offset + limit]]
    runs = _runs(conn, topo, page)
    return Page(tuple(runs), offset, len(keys))


def _runs(conn: Connection, topo: Topology, nodes: list[RunNode]) -> list[rm.Run]:
    pending = pending_by_run(conn)
    out: list[rm.Run] = []
    for sid in dict.fromkeys(n.session_id for n in nodes):
        wanted = {n.run_id for n in nodes if n.session_id == sid}
        headers = {r: parse.json_object(j) for r, j in conn.execute(text(
            "SELECT run_id, record_json FROM core_agent_runs WHERE session_id = :sid"), {"sid": sid})
            if r in wanted}
        titles = _titles(conn, sid, wanted)
        usage = _usage(conn, sid)
        out.extend(_run(topo, n, headers.get(n.run_id, {}), titles.get(n.run_id), usage, pending)
                   for n in nodes if n.session_id == sid)
    order = {n.key: i for i, n in enumerate(nodes)}
    return sorted(out, key=lambda r: order[r.id])


def _run(topo: Topology, n: RunNode, header: dict[str, Any], title: str | None,
         usage: dict[str, rm.Usage], pending: dict[str, int]) -> rm.Run:
    agent = topo.agents[n.agent_id]
    native = str(header.get("status", ""))
    ended = header.get("completedAt")
    if ended is None and native in codec.TERMINAL_RUN:
        ended = header.get("updatedAt")
    error = header.get("failureMessage") or header.get("failureClass") or (
        f"aborted by {header['abortSource']}" if header.get("abortSource") else None)
    title = title or f"turn {header.get('turnId') or n.run_id}"
    return rm.Run(n.key, agent.project_id, codec.task_of(agent.project_id), agent.top, agent.id, title,
                  codec.RUN_STATUS.get(native, "pending"),
                  parse.ms_time(header.get("createdAt", n.created_ms)), parse.from_ms(ended), error,
                  usage.get(n.run_id, rm.Usage()), 0, pending.get(n.key, 0))


def _titles(conn: Connection, session_id: str, run_ids: set[str]) -> dict[str, str]:
    """Each run's first user message (maka runs have no title of their own)."""
    out: dict[str, str] = {}
    for rid, body in conn.execute(text(
            "SELECT run_id, json_extract(payload_json, '$.content.text') FROM runtime_events "
            "WHERE session_id = :sid AND event_kind = 'text' "
            "AND json_extract(payload_json, '$.role') = 'user' ORDER BY event_seq"), {"sid": session_id}):
        if rid in run_ids and rid not in out and parse.first_line(body):
            out[rid] = parse.first_line(body)
    return out


def _usage(conn: Connection, session_id: str) -> dict[str, rm.Usage]:
    """Tokens and cost per run from `usage_model_call_attempts`, maka's metering authority."""
    rows = conn.execute(text(
        "SELECT json_extract(record_json, '$.runId') AS rid, "
        "total(json_extract(record_json, '$.inputTokens')), "
        "total(json_extract(record_json, '$.outputTokens')), "
        "total(json_extract(record_json, '$.costUsd')) FROM usage_model_call_attempts "
        "WHERE json_extract(record_json, '$.sessionId') = :sid GROUP BY rid"), {"sid": session_id})
    return {rid: rm.Usage(int(i), int(o), float(c)) for rid, i, o, c in rows}


def run(conn: Connection, topo: Topology, run_id: str) -> rm.Run:
    """One run, fresh from the database."""
    return _runs(conn, topo, [require_run(topo, run_id)])[0]


def agent(conn: Connection, topo: Topology, agent_id: str) -> rm.Agent:
    """One agent, fresh from the database."""
    node = require_agent(topo, agent_id)
    found = next((x for x in agents(conn, topo, node.top) if x.id == agent_id), None)
    if found is None:
        raise NotFound(f"There is no agent with id {agent_id}.")
    return found


def locate(conn: Connection, topo: Topology, entity: str, entity_id: str) -> Location:
    span = None
    if entity == "span":
        _, sid, rid, _ = codec.split_span(entity_id)
        span, entity, entity_id = entity_id, "run", codec.run_key(sid, rid)
    elif entity == "approval":
        row = conn.execute(text("SELECT session_id, run_id FROM core_interaction_requests "
                                "WHERE request_id = :id"), {"id": entity_id}).first()
        if row is None:
            raise NotFound(f"There is no approval with id {entity_id}.")
        span, entity = codec.span_id("perm", row[0], row[1], entity_id), "run"
        entity_id = codec.run_key(row[0], row[1])
    return _location(topo, entity, entity_id, span)


def _location(topo: Topology, entity: str, entity_id: str, span: str | None) -> Location:
    if entity == "project" and entity_id in topo.projects:
        return Location(entity_id)
    if entity == "task" and entity_id.removeprefix("task:") in topo.projects:
        return Location(entity_id.removeprefix("task:"), entity_id)
    if entity == "session" and entity_id in topo.sessions:
        s = topo.sessions[entity_id]
        if s.top == s.id:
            return Location(s.project_id, codec.task_of(s.project_id), s.id)
    if entity in ("agent", "run"):
        run = topo.runs.get(entity_id) if entity == "run" else None
        agent = topo.agents.get(run.agent_id if run else entity_id)
        if agent is not None and (entity == "agent" or run is not None):
            return Location(agent.project_id, codec.task_of(agent.project_id), agent.top,
                            topo.chain(agent.id), run.key if run else None, span)
    raise NotFound(f"There is no {entity} with id {entity_id}.")


def counts(conn: Connection, topo: Topology) -> dict[str, int]:
    events = conn.execute(text("SELECT count(*) FROM runtime_events")).scalar_one()
    pending = sum(pending_by_run(conn).values())
    tops = sum(s.top == s.id for s in topo.sessions.values())
    return {"projects": len(topo.projects), "sessions": tops,
            "agents": len(topo.agents), "runs": len(topo.runs), "runtime_events": int(events),
            "pending_approvals": pending}


def showcase_run(conn: Connection) -> str | None:
    """The run with the most runtime events: the richest timeline to show first."""
    row = conn.execute(text("SELECT session_id, run_id FROM runtime_events "
                            "GROUP BY session_id, run_id ORDER BY count(*) DESC LIMIT 1")).first()
    return codec.run_key(row[0], row[1]) if row else None
