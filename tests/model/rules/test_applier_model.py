"""The window as a rule applier (model/rules/applier.py): on PostgreSQL, an operator's window rules on agent
logins' requests as the bus brings them, off the GUI thread; an agent's or a SQLite window does not try."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentdesk.model.rules.applier import RuleApplier, decided_line
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.applier import Applied
from agentdesk.store.rules.commands import add_rule
from tests.conftest import PgCluster
from tests.postgres.conftest import make_login, pg_url  # noqa: F401 - the fixtures
from tests.store.rules.team import Team, team_fixture  # noqa: F401 - the fixture


def window_services(store: Store) -> Services:
    source = NativeSource(store)
    source.watch()  # hears the agent's requests, written by another connection (LISTEN)
    return Services.create(source, actor="tester", coalesce_ms=10)


def stop_watching(services: Services) -> None:
    source = services.source
    assert isinstance(source, NativeSource) and source.watcher is not None
    source.watcher.stop()


@pytest.fixture
def operator_services(team: Team, qtbot: Any) -> Iterator[Services]:
    services = window_services(team.operator)
    yield services
    services.close()
    stop_watching(services)  # the store itself is the team's to close


def test_an_operators_window_decides_a_new_agent_request_by_rule(team: Team, operator_services: Services,
                                                                  qtbot: Any) -> None:
    applier = RuleApplier(operator_services)
    assert applier.active
    qtbot.waitUntil(lambda: applier.passes >= 1)  # the pass at open: nothing waiting yet
    rule = add_rule(team.owner, "allow", "read_file", {"kind": "fields", "fields": {"path": {"under": "/src"}}},
                    "admin")
    with qtbot.waitSignal(applier.decided, timeout=20_000) as decided:
        approval = team.request("read_file", {"path": "/src/a.py"})  # heard on the bus: a pass
    assert [(a.approval_id, a.outcome, a.rule_id) for a in decided.args[0]] == [(approval, "approved", rule.id)]
    assert team.row(approval).decided_by == f"rules (applied by {team.operator_name})"
    applier.stop()


def test_an_agents_window_and_a_sqlite_window_apply_nothing(team: Team, tmp_path: Path, qtbot: Any) -> None:
    agent = window_services(team.agent)
    sqlite = NativeSource.open(str(tmp_path / "s.db"), create=True)
    local = Services.create(sqlite)
    try:
        assert not RuleApplier(agent).active and not RuleApplier(local).active
    finally:
        agent.close()
        stop_watching(agent)
        local.close()
        sqlite.close()


def test_the_status_line_counts_what_rules_decided() -> None:
    found = [Applied("a", "t", "approved", "r"), Applied("b", "t", "denied", "r"), Applied("c", "t", "approved")]
    assert decided_line(found) == "Standing rules decided agent requests here: 2 approved, 1 denied."


def test_a_window_whose_login_lost_its_level_says_so_once_and_stops_applying(
        team: Team, operator_services: Services, pg_cluster: PgCluster, qtbot: Any) -> None:
    applier = RuleApplier(operator_services)
    qtbot.waitUntil(lambda: applier.passes >= 1)
    with pg_cluster.admin() as conn, conn.transaction():  # type: ignore[attr-defined]
        # one transaction: a pass between the two would find the login in no group at all
        conn.execute(f"REVOKE agentdesk_operator FROM {team.operator_name}")
        conn.execute(f"GRANT agentdesk_viewer TO {team.operator_name}")
    errors: list[str] = []
    operator_services.runner.error.connect(errors.append)
    team.request("read_file", {"path": "/src/a.py"})  # heard: a pass, refused by the server
    qtbot.waitUntil(lambda: not applier.active, timeout=20_000)
    assert len(errors) == 1 and errors[0].startswith("Standing rules are no longer applied from this window: ")
    assert f"{team.operator_name} is a viewer" in errors[0]
