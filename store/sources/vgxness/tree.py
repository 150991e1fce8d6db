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
from agentdesk.store.source import Location, Page
from agentdesk.store.sources.vgxness.common import (
    RUN_STATUS,
    SESSION_SUFFIX,
    TASK_SUFFIX,
    VgxnessBase,
    agent_projects,
    json_any,
    parse_time,
    project_of,
    session_id,
    task_id,
    time_of,
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


class TreeMixin(VgxnessBase):
    def _world(self, conn: Connection) -> _World:
        homes = agent_projects(conn)
        registry = {r["id"]: dict(r) for r in conn.execute(text(
            "SELECT id, project, scope, mode, name, parent_agent_id, created_at FROM agents")).mappings()}
        summaries = {r["agent_id"]: dict(r) for r in conn.execute(text(AGENT_RUNS_SQL)).mappings()}
        by_agent: Counter[str] = Counter()
        by_run: Counter[str] = Counter()
        for row in conn.execute(text("SELECT ap.run_id, r.selected_agent_id FROM run_approvals ap"
                                     " JOIN runs r ON r.id = ap.run_id WHERE ap.status = 'pending'")):
            by_agent[row.selected_agent_id] += 1
            by_run[row.run_id] += 1
        return _World(homes, registry, summaries, by_agent, by_run)

    def projects(self) -> list[rm.Project]:
        with self.reading() as conn:
            rows = conn.execute(text(PROJECTS_SQL)).all()
            world = self._world(conn)
        result = []
        for r in rows:
            agents = world.agents_in(r.project)
            pending = sum(world.pending_by_agent[a] for a in agents)
            result.append(rm.Project(r.project, r.project, roll_up(world.status(a) for a in agents),
                                     time_of(r.created_at), 0, pending, 1))
        return result

    def tasks(self, project_id: str) -> list[rm.Task]:
        """The pass-through task: vgxness has no task level."""
        project = next((p for p in self.projects() if p.id == project_id), None)
        if project is None:
            return []
        return [rm.Task(task_id(project_id), project_id, "All runs (vgxness has no task level)",
                        project.status, project.created_at, 0, project.pending_approvals)]

    def sessions(self, task_id: str) -> list[rm.Session]:
        """The pass-through session: vgxness links runs to no session."""
        project_id = project_of(task_id, TASK_SUFFIX)
        project = next((p for p in self.projects() if p.id == project_id), None)
        if project is None or project_id is None:
            return []
        return [rm.Session(session_id(project_id), project_id, task_id, "All agents and runs (vgxness runs "
                           "belong to no session)", project.status, project.created_at, None, 0,
                           project.pending_approvals)]

    def agents(self, session_id: str) -> list[rm.Agent]:
        """Registry agents of the project (and agents runs name but the registry lacks), parents first."""
        project = project_of(session_id, SESSION_SUFFIX)
        if project is None:
            return []
        with self.reading() as conn:
            world = self._world(conn)
        agents = [self._agent(world, a, project) for a in world.agents_in(project)]
        agents.sort(key=lambda a: (a.created_at, a.id))
        ordered: list[rm.Agent] = []
        placed: set[str] = set()

        def place(parent: str | None) -> None:
            for agent in agents:
                if agent.parent_agent_id == parent and agent.id not in placed:
                    placed.add(agent.id)
                    ordered.append(agent)
                    place(agent.id)

        place(None)
        ordered += [a for a in agents if a.id not in placed]  # a parent missing from this project
        return ordered

    @staticmethod
    def _agent(world: _World, agent_id: str, project: str) -> rm.Agent:
        reg = world.registry.get(agent_id)
        summary = world.summaries.get(agent_id) or {}
        name = reg["name"] if reg else f"{agent_id} (not in the agent registry)"
        created = reg["created_at"] if reg else summary.get("first_at")
        return rm.Agent(agent_id, project, task_id(project), session_id(project),
                        reg["parent_agent_id"] if reg else None, name, str(summary.get("model") or ""),
                        world.status(agent_id), 0, 0, time_of(created), 0, world.pending_by_agent[agent_id],
                        int(summary.get("runs") or 0))

    def runs(self, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
        """The agent's runs, newest first."""
        with self.reading() as conn:
            world = self._world(conn)
            if agent_id not in world.homes:
                self._missing("agent", agent_id)
            total = conn.execute(text("SELECT COUNT(*) FROM runs WHERE selected_agent_id = :a"),
                                 {"a": agent_id}).scalar_one()
            rows = conn.execute(text("SELECT * FROM runs WHERE selected_agent_id = :a"
                                     " ORDER BY created_at DESC, id DESC LIMIT :limit OFFSET :offset"),
                                {"a": agent_id, "limit": limit, "offset": offset}).mappings().all()
        return Page(tuple(self._run(dict(r), world) for r in rows), offset, int(total))

    @staticmethod
    def _run(r: dict[str, Any], world: _World) -> rm.Run:
        """`blocked` and `partial` outcomes have no tree status of their own: the title names them."""
        project = world.homes.get(r["selected_agent_id"], r["project"])
        title = f"{r['user_intent']} · {r['workflow']}/{r['phase']}"
        if r["outcome"] in ("partial", "blocked"):
            title += f" · {r['outcome']}"
        error = r["outcome_reason"] if r["status"] in ("failed", "blocked", "cancelled") else None
        return rm.Run(r["id"], project, task_id(project), session_id(project), r["selected_agent_id"], title,
                      RUN_STATUS.get(r["status"], r["status"]), time_of(r["created_at"]),
                      parse_time(r["completed_at"]), error, rm.Usage(), 0, world.pending_by_run[r["id"]])

    def run_attributes(self, run_id: str) -> dict[str, Any]:
        """What a run has beyond rm.Run (no tokens or cost: vgxness records none)."""
        r = self._run_row(run_id)
        checkpoint = self.rows("SELECT label, state_json FROM run_checkpoints WHERE id = :c",
                               c=r["latest_checkpoint_id"]) if r["latest_checkpoint_id"] else []
        return {"native_status": r["status"], "outcome": r["outcome"], "outcome_reason": r["outcome_reason"],
                "user_intent": r["user_intent"], "workflow": r["workflow"], "phase": r["phase"],
                "provider_adapter": r["provider_adapter"], "model": r["model"], "project": r["project"],
                "updated_at": parse_time(r["updated_at"]),
                "latest_checkpoint": {"id": r["latest_checkpoint_id"], "label": checkpoint[0]["label"],
                                      "state": json_any(checkpoint[0]["state_json"])} if checkpoint else None}

    def node(self, entity: str, entity_id: str) -> object:
        found: list[Any] = []
        if entity == "project":
            found = [p for p in self.projects() if p.id == entity_id]
        elif entity == "task":
            found = self.tasks(project_of(entity_id, TASK_SUFFIX) or "\0")
        elif entity == "session":
            found = self.sessions(task_id(project_of(entity_id, SESSION_SUFFIX) or "\0"))
        elif entity == "agent":
            found = [a for a in self.agents(session_id(self._home(entity_id))) if a.id == entity_id]
        elif entity == "run":
            row = self._run_row(entity_id)
            with self.reading() as conn:
                found = [self._run(row, self._world(conn))]
        return found[0] if found else self._missing(entity, entity_id)

    def locate(self, entity: str, entity_id: str) -> Location:
        span_id = None
        if entity == "span":
            rows = self.rows("SELECT run_id FROM run_events WHERE id = :s UNION ALL"
                             " SELECT run_id FROM run_checkpoints WHERE id = :s", s=entity_id)
            if not rows:
                self._missing(entity, entity_id)
            span_id, entity, entity_id = entity_id, "run", rows[0]["run_id"]
        if entity == "approval":
            approval = self.approval(entity_id)
            span_id, entity, entity_id = approval.span_id, "run", approval.run_id
        if entity in ("project", "task", "session"):
            node = self.node(entity, entity_id)
            project = getattr(node, "project_id", entity_id)
            return Location(project, task_id(project) if entity != "project" else None,
                            session_id(project) if entity == "session" else None)
        if entity == "agent":
            home = self._home(entity_id)
            return Location(home, task_id(home), session_id(home), self._chain(entity_id))
        if entity == "run":
            row = self._run_row(entity_id)
            home = self._home(row["selected_agent_id"])
            return Location(home, task_id(home), session_id(home), self._chain(row["selected_agent_id"]),
                            entity_id, span_id)
        self._missing(entity, entity_id)

    def _chain(self, agent_id: str) -> tuple[str, ...]:
        chain: list[str] = []
        current: str | None = agent_id
        while current is not None and current not in chain:
            chain.append(current)
            rows = self.rows("SELECT parent_agent_id FROM agents WHERE id = :a", a=current)
            current = rows[0]["parent_agent_id"] if rows else None
        return tuple(reversed(chain))

    def counts(self) -> dict[str, int]:
        with self.reading() as conn:
            def one(sql: str) -> int:
                return int(conn.execute(text(sql)).scalar_one())
            return {"projects": one(f"SELECT COUNT(*) FROM ({PROJECTS_SQL})"),
                    "agents": one("SELECT COUNT(*) FROM agents"), "runs": one("SELECT COUNT(*) FROM runs"),
                    "run events": one("SELECT COUNT(*) FROM run_events"),
                    "checkpoints": one("SELECT COUNT(*) FROM run_checkpoints"),
                    "approvals": one("SELECT COUNT(*) FROM run_approvals"),
                    "pending approvals": one("SELECT COUNT(*) FROM run_approvals WHERE status = 'pending'"),
                    "observations": one("SELECT COUNT(*) FROM observations"),
                    "sessions (memory log, not in the tree)": one("SELECT COUNT(*) FROM sessions")}

    def showcase_run(self) -> str | None:
        """The run with the most events among the newest 200."""
        rows = self.rows("SELECT run_id, COUNT(*) AS n FROM run_events WHERE run_id IN"
                         " (SELECT id FROM runs ORDER BY created_at DESC LIMIT 200)"
                         " GROUP BY run_id ORDER BY n DESC, run_id LIMIT 1")
        return str(rows[0]["run_id"]) if rows else None
