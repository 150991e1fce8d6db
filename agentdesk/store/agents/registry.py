"""Registering an agent: its project and task found by name, a session, and the agent itself.

Projects and tasks are found by name (so every process of one service lands in one project); a
session is new per registration unless an existing one is named by id (a resumed conversation).
Shared by the local client (`AgentDesk.register`) and the agent API (`POST /agent/v1/register`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import select

from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.persistence import schema as sc
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.validation import check_name

DEFAULT_TASK = "default"


@dataclass(frozen=True, slots=True)
class Registered:
    agent_id: str
    session_id: str
    project_id: str
    name: str


def shared_project_id(name: str) -> str:
    """The id store/ingest/writer.py gives the project of a `service.name` (tests pin the two together)."""
    return "otp_" + hashlib.sha256(name.encode()).hexdigest()[:16]


def register(rt: AgentRuntime, *, project: str, agent: str, model: str = "unknown", session: str | None = None,
             task: str = DEFAULT_TASK, session_id: str | None = None, context_budget: int = 128_000) -> Registered:
    """The agent, in project > task > session (`session` titles a new one; `session_id` joins one)."""
    if session_id is None:
        found_task = task_id(rt, project_id(rt, project), task)
        session_id = rt.create_session(found_task, check_name("session title", session or agent))
    project_of_session = session_project(rt, session_id)
    agent_id = rt.create_agent(session_id, check_name("agent name", agent), check_name("model", model), None,
                               context_budget)
    return Registered(agent_id, session_id, project_of_session, agent)


def project_id(rt: AgentRuntime, name: str) -> str:
    """The project of that name, created the first time under the id the OTel ingest derives from it.

    So an agent's approvals and its OpenTelemetry spans (project = `service.name`) share one
    project whichever arrives first, and two processes creating it at the same instant collide
    on the id instead of making two.
    """
    name = check_name("project name", name)
    found = _find_project(rt, name)
    if found:
        return found
    try:
        return rt.create_project(name, shared_project_id(name))
    except InvalidInput:  # another process created it between our look and our write
        found = _find_project(rt, name)
        if found is None:
            raise
        return found


def _find_project(rt: AgentRuntime, name: str) -> str | None:
    with rt.store.reading() as s:
        shared = s.get(sc.ProjectRow, shared_project_id(name))
        if shared is not None:
            return shared.id
        found: str | None = s.execute(select(sc.ProjectRow.id).where(sc.ProjectRow.name == name)
                                      .order_by(sc.ProjectRow.created_at).limit(1)).scalar()
        return found


def task_id(rt: AgentRuntime, project: str, title: str) -> str:
    title = check_name("task title", title)
    with rt.store.reading() as s:
        found = s.execute(select(sc.TaskRow.id).where(sc.TaskRow.project_id == project, sc.TaskRow.title == title)
                          .order_by(sc.TaskRow.created_at).limit(1)).scalar()
    return found or rt.create_task(project, title)


def session_project(rt: AgentRuntime, session_id: str) -> str:
    with rt.store.reading() as s:
        row = s.get(sc.SessionRow, session_id)
        if row is None:
            raise NotFound(f"There is no session with id {session_id}.")
        return row.project_id
