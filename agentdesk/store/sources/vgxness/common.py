"""The vgxness vocabularies, tree ids and the row lookups every vgxness read needs.

vgxness (0.1.0) keeps `project` as free text on runs, agents and sessions, an agent registry
(`agents`, sub-agents via `parent_agent_id`), runs with point-in-time `run_events` and
`run_checkpoints`, and `run_approvals`. Runs link to no session and no task, so the fixed tree
levels are filled like this:

- project = a distinct `project` text (runs, agents and sessions);
- task    = a pass-through node per project, id `<project>/task` ("vgxness has no task level");
- session = a pass-through node per project, id `<project>/session` (vgxness's `sessions` table is
            an IDE/memory log that no run references, so it is not a tree level);
- agent   = a registry agent (`agents.id`), or, for a `runs.selected_agent_id` the registry does not
            hold (there is no foreign key), a node named after that id, in the project of its first run;
- run     = `runs.id`; its timeline is `run_events` and `run_checkpoints`, all points in time.
"""

from __future__ import annotations

from typing import NoReturn

from sqlalchemy import Connection, text

from agentdesk.store.errors import NotFound
from agentdesk.store.sources.sql import Row, one

TASK_SUFFIX = "/task"
SESSION_SUFFIX = "/session"

NO_CONTEXT = ("vgxness keeps no agent context to edit (its observations are project memory, shown "
              "read-only on the events that touch them).")

RUN_STATUS = {"created": "pending", "planned": "pending", "running": "running", "needs-human": "waiting",
              "completed": "done", "failed": "failed", "blocked": "failed", "cancelled": "cancelled"}
"""runs.status → tree status (reference §4.2); `blocked` has no tree status and shows as failed, its
outcome named in the run title."""

ACTIVE_RUN_STATUSES = ("created", "planned", "running", "needs-human")

APPROVAL_STATUS_SQL = "CASE ap.status WHEN 'rejected' THEN 'denied' ELSE ap.status END"
"""run_approvals.status → canonical: `rejected` is denied; `cancelled` has no canonical twin and is
shown as it is stored. vgxness approvals have no deadline, so none is ever expired."""


def task_id(project: str) -> str:
    return project + TASK_SUFFIX


def session_id(project: str) -> str:
    return project + SESSION_SUFFIX


def agent_projects(conn: Connection) -> dict[str, str]:
    """Where each agent sits: its registry project, else the project of its first run."""
    homes = {r.selected_agent_id: r.project for r in conn.execute(text(
        "SELECT selected_agent_id, project, MIN(created_at) FROM runs GROUP BY selected_agent_id"))}
    homes.update({r.id: r.project for r in conn.execute(text("SELECT id, project FROM agents"))})
    return homes


def parents(project: str, agent_id: str | None = None, run_id: str | None = None) -> dict[str, str]:
    """`Change.parents` of a node below a project, as the views expect them."""
    found = {"project": project, "task": task_id(project), "session": session_id(project)}
    if agent_id is not None:
        found["agent"] = agent_id
    if run_id is not None:
        found["run"] = run_id
    return found


def missing(entity: str, entity_id: str) -> NoReturn:
    raise NotFound(f"There is no {entity} with id {entity_id} in this vgxness database.")


def run_row(conn: Connection, run_id: str) -> Row:
    found = one(conn, "SELECT * FROM runs WHERE id = :rid", rid=run_id)
    return found if found is not None else missing("run", run_id)


def home(conn: Connection, agent_id: str) -> str:
    """The project an agent sits in (NotFound for an agent neither the registry nor any run names)."""
    found = agent_projects(conn).get(agent_id)
    return found if found is not None else missing("agent", agent_id)
