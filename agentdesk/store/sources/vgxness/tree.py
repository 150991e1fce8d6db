"""The project tree of a vgxness database: project > (pass-through task and session) > agent > run.

Per query, runs are summarised per agent in one GROUP BY and placed with `agent_projects`, so every
level's status and pending count come from the same two passes, never one query per row.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store import readmodel as rm
from agentdesk.store.queries import roll_up
from agentdesk.store.readmodel import Location, Page
from agentdesk.store.sources.parsing import json_value, parse_time, strip_suffix, time_of
from agentdesk.store.sources.sql import Row, one, parent_chain, rows
from agentdesk.store.sources.vgxness.approvals import approval
from agentdesk.store.sources.vgxness.common import (
    RUN_STATUS,
    SESSION_SUFFIX,
    TASK_SUFFIX,
    agent_projects,
    home,
    missing,
    run_row,
    session_id,
    task_id,
)

PROJECTS_SQL = """SELECT project, MIN(at) AS created_at FROM (
  SELECT project, created_at AS at FROM runs UNION ALL SELECT project, created_at FROM agents
  UNION ALL SELECT project, started_at FROM sessions) GROUP BY project ORDER BY MIN(at), project"""

AGENT_RUNS_SQL = """SELECT selected_agent_id AS agent_id, COUNT(*) AS runs, MIN(created_at) AS first_at,
  SUM(status = 'needs-human') AS waiting, SUM(status = 'running') AS running,
  SUM(status IN ('created', 'planned')) AS pending, MAX(created_at) AS latest_at,
  (SELECT r2.status FROM runs r2 WHERE r2.selected_agent_id = runs.selected_agent_id
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1) AS latest_status,
  (SELECT r2.model FROM runs r2 WHERE r2.selected_agent_id = runs.selected_agent_id
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1) AS model
  FROM runs GROUP BY selected_agent_id"""


@dataclass(frozen=True, slots=True)
class _World:
    """One consistent picture of agents, their homes, run summaries and pending approvals."""

    homes: dict[str, str]
    registry: dict[str, dict[str, Any]]
    summaries: dict[str, dict[str, Any]]
    pending_by_agent: Counter[str]
    pending_by_run: Counter[str]

    def status(self, agent_id: str) -> str:
        """An agent's state from its runs: waiting/running/pending if any run is; else its latest run's."""
        s = self.summaries.get(agent_id)
        if not s:
            return "idle"
        for column, status in (("waiting", "waiting"), ("running", "running"), ("pending", "pending")):
            if s[column]:
                return status
        return RUN_STATUS.get(s["latest_status"], s["latest_status"])

    def agents_in(self, project: str) -> list[str]:
        return [a for a, home in self.homes.items() if home == project]


def _world(conn: Connection) -> _World:
    homes = agent_projects(conn)
    registry = {r["id"]: r for r in rows(conn, "SELECT id, project, scope, mode, name, parent_agent_id, created_at "
                                               "FROM agents")}
    summaries = {r["agent_id"]: r for r in rows(conn, AGENT_RUNS_SQL)}
    by_agent: Counter[str] = Counter()
    by_run: Counter[str] = Counter()
    for row in rows(conn, "SELECT ap.run_id, r.selected_agent_id FROM run_approvals ap"
                          " JOIN runs r ON r.id = ap.run_id WHERE ap.status = 'pending'"):
        by_agent[row["selected_agent_id"]] += 1
        by_run[row["run_id"]] += 1
    return _World(homes, registry, summaries, by_agent, by_run)


def projects(conn: Connection) -> list[rm.Project]:
    world = _world(conn)
    result = []
    for r in rows(conn, PROJECTS_SQL):
        agents_in = world.agents_in(r["project"])
        pending = sum(world.pending_by_agent[a] for a in agents_in)
        result.append(rm.Project(r["project"], r["project"], roll_up(world.status(a) for a in agents_in),
                                 time_of(r["created_at"]), 0, pending, 1))
    return result


def _project(conn: Connection, project_id: str | None) -> rm.Project | None:
    return next((p for p in projects(conn) if p.id == project_id), None)


def tasks(conn: Connection, project_id: str) -> list[rm.Task]:
    """The pass-through task: vgxness has no task level."""
    project = _project(conn, project_id)
    if project is None:
        return []
    return [rm.Task(task_id(project_id), project_id, "All runs (vgxness has no task level)",
                    project.status, project.created_at, 0, project.pending_approvals)]


def sessions(conn: Connection, task: str) -> list[rm.Session]:
    """The pass-through session: vgxness links runs to no session."""
    project_id = strip_suffix(task, TASK_SUFFIX)
    project = _project(conn, project_id)
    if project is None or project_id is None:
        return []
    return [rm.Session(session_id(project_id), project_id, task, "All agents and runs (vgxness runs "
                       "belong to no session)", project.status, project.created_at, None, 0,
                       project.pending_approvals)]


def agents(conn: Connection, session: str) -> list[rm.Agent]:
    """Registry agents of the project (and agents runs name but the registry lacks), parents first."""
    project = strip_suffix(session, SESSION_SUFFIX)
    if project is None:
        return []
    world = _world(conn)
    found = sorted((_agent(world, a, project) for a in world.agents_in(project)), key=lambda a: (a.created_at, a.id))
    ordered: list[rm.Agent] = []
    placed: set[str] = set()

    def place(parent: str | None) -> None:
        for node in found:
            if node.parent_agent_id == parent and node.id not in placed:
                placed.add(node.id)
                ordered.append(node)
                place(node.id)

    place(None)
    ordered += [a for a in found if a.id not in placed]  # a parent missing from this project
    return ordered


def agent(conn: Connection, agent_id: str) -> rm.Agent:
    return _agent(_world(conn), agent_id, home(conn, agent_id))


def _agent(world: _World, agent_id: str, project: str) -> rm.Agent:
    reg = world.registry.get(agent_id)
    summary = world.summaries.get(agent_id) or {}
    name = reg["name"] if reg else f"{agent_id} (not in the agent registry)"
    created = reg["created_at"] if reg else summary.get("first_at")
    return rm.Agent(agent_id, project, task_id(project), session_id(project),
                    reg["parent_agent_id"] if reg else None, name, str(summary.get("model") or ""),
                    world.status(agent_id), 0, 0, time_of(created), 0, world.pending_by_agent[agent_id],
                    int(summary.get("runs") or 0))


def runs(conn: Connection, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
    """The agent's runs, newest first."""
    world = _world(conn)
    if agent_id not in world.homes:
        missing("agent", agent_id)
    total = conn.execute(text("SELECT COUNT(*) FROM runs WHERE selected_agent_id = :a"), {"a": agent_id}).scalar_one()
    found = rows(conn, "SELECT * FROM runs WHERE selected_agent_id = :a ORDER BY created_at DESC, id DESC"
                       " LIMIT :limit OFFSET :offset", a=agent_id, limit=limit, offset=offset)
    return Page(tuple(_run(r, world) for r in found), offset, int(total))


def run(conn: Connection, run_id: str) -> rm.Run:
    return _run(run_row(conn, run_id), _world(conn))


def _run(r: Row, world: _World) -> rm.Run:
    """`blocked` and `partial` outcomes have no tree status of their own: the title names them."""
    project: str = world.homes.get(r["selected_agent_id"]) or r["project"]
    title = f"{r['user_intent']} · {r['workflow']}/{r['phase']}"
    if r["outcome"] in ("partial", "blocked"):
        title += f" · {r['outcome']}"
    error = r["outcome_reason"] if r["status"] in ("failed", "blocked", "cancelled") else None
    return rm.Run(r["id"], project, task_id(project), session_id(project), r["selected_agent_id"], title,
                  RUN_STATUS.get(r["status"]) or r["status"], time_of(r["created_at"]),
                  parse_time(r["completed_at"]), error, rm.Usage(), 0, world.pending_by_run[r["id"]])


def run_attributes(conn: Connection, run_id: str) -> dict[str, Any]:
    """What a run has beyond rm.Run (no tokens or cost: vgxness records none)."""
    r = run_row(conn, run_id)
    checkpoint = one(conn, "SELECT label, state_json FROM run_checkpoints WHERE id = :c",
                     c=r["latest_checkpoint_id"]) if r["latest_checkpoint_id"] else None
    return {"native_status": r["status"], "outcome": r["outcome"], "outcome_reason": r["outcome_reason"],
            "user_intent": r["user_intent"], "workflow": r["workflow"], "phase": r["phase"],
            "provider_adapter": r["provider_adapter"], "model": r["model"], "project": r["project"],
            "updated_at": parse_time(r["updated_at"]),
            "latest_checkpoint": {"id": r["latest_checkpoint_id"], "label": checkpoint["label"],
                                  "state": json_value(checkpoint["state_json"])} if checkpoint else None}


def locate(conn: Connection, entity: str, entity_id: str) -> Location:
    span_id = None
    if entity == "span":
        found = one(conn, "SELECT run_id FROM run_events WHERE id = :s UNION ALL"
                          " SELECT run_id FROM run_checkpoints WHERE id = :s", s=entity_id)
        if found is None:
            missing(entity, entity_id)
        span_id, entity, entity_id = entity_id, "run", found["run_id"]
    if entity == "approval":
        gate = approval(conn, entity_id)
        span_id, entity, entity_id = gate.span_id, "run", gate.run_id
    if entity in ("project", "task", "session"):
        suffix = {"project": "", "task": TASK_SUFFIX, "session": SESSION_SUFFIX}[entity]
        project = strip_suffix(entity_id, suffix) if suffix else entity_id
        if project is None or _project(conn, project) is None:
            missing(entity, entity_id)
        return Location(project, task_id(project) if entity != "project" else None,
                        session_id(project) if entity == "session" else None)
    if entity == "agent":
        where = home(conn, entity_id)
        return Location(where, task_id(where), session_id(where), _chain(conn, entity_id))
    if entity == "run":
        row = run_row(conn, entity_id)
        where = home(conn, row["selected_agent_id"])
        return Location(where, task_id(where), session_id(where), _chain(conn, row["selected_agent_id"]),
                        entity_id, span_id)
    missing(entity, entity_id)


def _chain(conn: Connection, agent_id: str) -> tuple[str, ...]:
    return parent_chain(conn, agent_id, "SELECT parent_agent_id AS parent FROM agents WHERE id = :id")


COUNTS = {"projects": f"SELECT COUNT(*) AS n FROM ({PROJECTS_SQL})",
          "agents": "SELECT COUNT(*) AS n FROM agents", "runs": "SELECT COUNT(*) AS n FROM runs",
          "run events": "SELECT COUNT(*) AS n FROM run_events",
          "checkpoints": "SELECT COUNT(*) AS n FROM run_checkpoints",
          "approvals": "SELECT COUNT(*) AS n FROM run_approvals",
          "pending approvals": "SELECT COUNT(*) AS n FROM run_approvals WHERE status = 'pending'",
          "observations": "SELECT COUNT(*) AS n FROM observations",
          "sessions (memory log, not in the tree)": "SELECT COUNT(*) AS n FROM sessions"}


def counts(conn: Connection) -> dict[str, int]:
    return {name: int(rows(conn, sql)[0]["n"]) for name, sql in COUNTS.items()}


def showcase_run(conn: Connection) -> str | None:
    """The run with the most events among the newest 200."""
    found = one(conn, "SELECT run_id, COUNT(*) AS n FROM run_events WHERE run_id IN"
                      " (SELECT id FROM runs ORDER BY created_at DESC LIMIT 200)"
                      " GROUP BY run_id ORDER BY n DESC, run_id LIMIT 1")
    return None if found is None else str(found["run_id"])
