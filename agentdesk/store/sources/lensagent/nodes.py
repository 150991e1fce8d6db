"""Single lensagent nodes (a run, an agent, where anything sits) and the whole-store figures."""

from __future__ import annotations

from typing import NoReturn

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.readmodel import Location
from agentdesk.store.sources.lensagent import approvals, spans, tree
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.sql import one

PLACES = {
    "project": "SELECT id AS project, NULL AS task, NULL AS session, NULL AS agent FROM projects p",
    "task": "SELECT project_id AS project, id AS task, NULL AS session, NULL AS agent FROM tasks p",
    "session": "SELECT t.project_id AS project, p.task_id AS task, p.id AS session, NULL AS agent "
               "FROM sessions p JOIN tasks t ON t.id = p.task_id",
    "agent": "SELECT t.project_id AS project, p.task_id AS task, p.session_id AS session, p.id AS agent "
             "FROM agents p JOIN tasks t ON t.id = p.task_id",
    "run": "SELECT t.project_id AS project, a.task_id AS task, a.session_id AS session, a.id AS agent "
           "FROM runs p JOIN agents a ON a.id = p.agent_id JOIN tasks t ON t.id = a.task_id",
}
COUNTED = ("projects", "tasks", "sessions", "agents", "runs", "steps", "model_attempts", "calls", "context_items")


def missing(entity: str, entity_id: str) -> NoReturn:
    raise NotFound(f"There is no {entity} with id {entity_id}.")


def run(conn: Connection, run_id: str) -> rm.Run:
    return tree.run_values(conn, [tree.run_row(conn, run_id)])[0]


def agent(conn: Connection, agent_id: str) -> rm.Agent:
    found = one(conn, "SELECT session_id AS parent FROM agents WHERE id = :i", i=agent_id)
    if found is None:
        missing("agent", agent_id)
    return next(a for a in tree.agents(conn, found["parent"]) if a.id == agent_id)


def locate(conn: Connection, entity: str, entity_id: str) -> Location:
    """An approval is its call's gate span; a span sits in the run its step (or time window) belongs to."""
    span_id = None
    if entity == "approval":
        entity, entity_id = "span", f"call:{entity_id}"
    if entity == "span":
        span_id, entity, entity_id = entity_id, "run", spans.span_run(conn, entity_id)
    sql = PLACES.get(entity)
    found = one(conn, f"{sql} WHERE p.id = :i", i=entity_id) if sql else None
    if found is None:
        missing(entity, entity_id)
    chain = tree.agent_chain(conn, found["agent"]) if found["agent"] else ()
    return Location(found["project"], found["task"], found["session"], chain,
                    entity_id if entity == "run" else None, span_id)


def counts(conn: Connection, layout: Layout) -> dict[str, int]:
    counted = {t: int((one(conn, f"SELECT count(*) AS n FROM {t}") or {"n": 0})["n"]) for t in COUNTED}
    counted["pending_approvals"] = len(approvals.approvals(conn, layout, "pending", 1_000_000))
    return counted


def showcase_run(conn: Connection) -> str | None:
    """The run with the most calls among the newest 200 (for screenshots and first start)."""
    found = one(conn, "SELECT r.id FROM (SELECT id FROM runs ORDER BY created_at DESC LIMIT 200) r "
                      "LEFT JOIN steps s ON s.run_id = r.id LEFT JOIN calls c ON c.step_id = s.id "
                      "GROUP BY r.id ORDER BY count(c.id) DESC, r.id LIMIT 1")
    return None if found is None else str(found["id"])
