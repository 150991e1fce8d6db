"""A team on a fresh PostgreSQL database for the rule applier's tests: the owner (who writes rules), an agent
login with a run (its requests are never ruled on by its own process) and an operator login (the applier)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.postgres.conftest import make_login, pg_url  # noqa: F401 - the fixtures

Login = Callable[[str | None], tuple[str, str]]


class Team:
    """The owner (who writes rules), an agent login with a run, and an operator login."""

    def __init__(self, owner: Store, agent: Store, operator: Store, operator_name: str) -> None:
        self.owner, self.agent, self.operator, self.operator_name = owner, agent, operator, operator_name
        self.rt = AgentRuntime(agent)
        pid = self.rt.create_project("team")
        agent_id = self.rt.create_agent(self.rt.create_session(self.rt.create_task(pid, "t"), "s"), "a", "m")
        self.run = self.rt.start_run(agent_id, "r")

    def request(self, tool: str, arguments: dict[str, Any]) -> str:
        return self.rt.request_approval(self.run, tool, arguments, timeout_s=None)

    def row(self, approval_id: str) -> sc.ApprovalRow:
        with self.owner.reading() as s:
            row = s.get(sc.ApprovalRow, approval_id)
            assert row is not None
            s.expunge(row)
            return row


@pytest.fixture(name="team")
def team_fixture(pg_url: str, make_login: Login) -> Iterator[Team]:  # noqa: F811 - the fixtures
    owner = open_store(pg_url)
    _, agent_url = make_login("agent")
    operator_name, operator_url = make_login("operator")
    agent, operator = open_store(agent_url), open_store(operator_url)
    try:
        yield Team(owner, agent, operator, operator_name)
    finally:
        for store in (agent, operator, owner):
            store.close()


