"""The applier's verdict is the runtime's: the same hostile and benign shell commands, requested once by the
store's owner (rules applied inside `request_approval`) and once by an agent login (ruled on by an operator's
applier), end the same way: approved, denied or left for a person. A sample of tests/rules' corpus keeps it fast.
"""

from __future__ import annotations

import json
from typing import Any

from agentdesk.store.errors import InvalidInput
from agentdesk.store.rules.applier import apply_pending
from agentdesk.store.runtime import AgentRuntime
from tests.postgres.conftest import make_login, pg_url  # noqa: F401 - the fixtures
from tests.store.rules.hostile_commands import BENIGN, DENIED_ENCODED, MAYBE_DENIED, hostile
from tests.store.rules.team import Team, team_fixture  # noqa: F401 - the fixture
from tests.store.rules.test_fail_closed import SHELL, save_rules

CORPUS = [*hostile()[::16], *DENIED_ENCODED[::3], *MAYBE_DENIED[:2], *BENIGN[::6]]


def test_the_applier_decides_every_command_as_request_approval_does(team: Team) -> None:
    save_rules(team.owner, deny=True)
    owner = AgentRuntime(team.owner)
    pid = owner.create_project("inline")
    run = owner.start_run(owner.create_agent(owner.create_session(owner.create_task(pid, "t"), "s"), "a", "m"), "r")
    inline: dict[str, str] = {}
    by_agent: dict[str, str] = {}
    for command in CORPUS:
        key = json.dumps(command)
        try:
            inline[key] = team.row(owner.request_approval(run, SHELL, {"command": command}, timeout_s=None)).status
            by_agent[key] = team.request(SHELL, {"command": command})
        except InvalidInput:
            continue  # refused before any rule looks: on both paths alike
    assert {team.row(a).status for a in by_agent.values()} == {"pending"}
    apply_pending(team.operator)
    applied = {key: team.row(approval).status for key, approval in by_agent.items()}
    differ: dict[str, Any] = {k: (inline[k], applied[k]) for k in inline if inline[k] != applied[k]}
    assert differ == {}
    assert {"approved", "denied", "pending"} <= set(applied.values())  # the sample exercises all three
