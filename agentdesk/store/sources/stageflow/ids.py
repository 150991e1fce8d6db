"""stageflow's tree ids: agentdesk's fixed levels over stageflow's keys (see `common.py` for the map)."""

from __future__ import annotations

from agentdesk.store.sources.parsing import joined_id


def task_id(project_key: str, agent_id: str) -> str:
    """A task is an agent definition: `project_key/agent_id`."""
    return joined_id(project_key, agent_id)


def agent_node_id(session_id: str, agent_id: str) -> str:
    """The pass-through agent of a session: `session_id/agent_id`."""
    return joined_id(session_id, agent_id)


def parents_of(project_key: str | None, agent_id: str | None, session_id: str | None,
               turn_id: str | None = None) -> dict[str, str]:
    """The `Change.parents` of anything below a session, as the views expect them."""
    parents: dict[str, str] = {}
    if project_key is not None:
        parents["project"] = project_key
        if agent_id is not None:
            parents["task"] = task_id(project_key, agent_id)
    if session_id is not None:
        parents["session"] = session_id
        if agent_id is not None:
            parents["agent"] = agent_node_id(session_id, agent_id)
    if turn_id:
        parents["run"] = turn_id
    return parents
