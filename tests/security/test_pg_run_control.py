"""Red team on PostgreSQL, run control (migration 0017): an agent cannot lift its own pause or undo a stop.

One database; logins for an agent (which wrote the run), a second agent, a viewer and an operator. With a raw
SQL client (psycopg), each tries to write `run_controls` directly and to call the control functions; every
write is refused by the server or leaves the run paused by the operator, and the operator's functions do what
agentdesk does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import reach_checkpoint, read_control
from agentdesk.store.errors import PermissionRefused
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.readmodel import ControlState
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster
from tests.security.logins import login_at_level

LEVELS = ("agent", "other agent", "viewer", "operator")


@dataclass
class Bench:
    owner: Store
    stores: dict[str, Store]
    conns: dict[str, psycopg.Connection[Any]]
    run: str


def _login(cluster: PgCluster, url: str, level: str) -> tuple[str, str]:
    return login_at_level(cluster, url, level, "rc")


@pytest.fixture(scope="module")
def bench(pg_cluster: PgCluster) -> Iterator[Bench]:
    url = pg_cluster.fresh_database()
    owner = open_store(url)
    logins = {level: _login(pg_cluster, url, level) for level in LEVELS}
    stores = {level: open_store(logins[level][1]) for level in LEVELS}
    conns = {level: psycopg.connect(libpq_url(logins[level][1])) for level in LEVELS}
    try:
        rt = AgentRuntime(stores["agent"])
        agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "a", "m")
        run = rt.start_run(agent, "r")
        control.pause(stores["operator"], run, "alice", "hold on")
        yield Bench(owner, stores, conns, run)
    finally:
        for conn in conns.values():
            conn.close()
        for store in stores.values():
            store.close()
        owner.close()
        pg_cluster.drop(url)
        with pg_cluster.admin() as admin:  # type: ignore[attr-defined]
            for name, _ in logins.values():
                admin.execute(f"DROP ROLE IF EXISTS {name}")


def attempt(conn: psycopg.Connection[Any], sql: str) -> str:
    """'refused' (a privilege error), or what the statement answered, in a transaction rolled back."""
    try:
        conn.execute("SET LOCAL lock_timeout = '300ms'")
        try:
            cursor = conn.execute(sql)
            found = cursor.fetchall() if cursor.description else None
        except psycopg.errors.InsufficientPrivilege:
            return "refused"
        return f"through: {found}"
    finally:
        conn.rollback()


def writes(run: str) -> dict[str, str]:
    return {
        "update the state": f"UPDATE run_controls SET state = 'running' WHERE run_id = '{run}'",
        "clear the hold": f"UPDATE run_controls SET held_at = NULL, set_by = 'agent' WHERE run_id = '{run}'",
        "delete the hold": f"DELETE FROM run_controls WHERE run_id = '{run}'",
        "insert a hold": f"INSERT INTO run_controls (run_id, state, set_by, set_at, revision) "
                         f"VALUES ('{run}', 'running', 'x', 0, 9)",
        "truncate": "TRUNCATE run_controls",
        "lock": "LOCK TABLE run_controls IN SHARE MODE NOWAIT",
        "resume through the function": f"SELECT * FROM agentdesk_run_control('{run}', 'resume', 'x', NULL, NULL)",
        "stop through the function": f"SELECT * FROM agentdesk_run_control('{run}', 'stop', 'x', NULL, NULL)",
    }


@pytest.mark.parametrize("level", ["agent", "other agent", "viewer"])
@pytest.mark.parametrize("case", list(writes("r")))
def test_below_operator_nothing_moves_a_run_control(bench: Bench, level: str, case: str) -> None:
    assert attempt(bench.conns[level], writes(bench.run)[case]) == "refused"
    assert read_control(bench.owner, bench.run).state is ControlState.PAUSED


@pytest.mark.parametrize("case", ["update the state", "delete the hold", "insert a hold", "truncate", "lock"])
def test_an_operator_writes_run_controls_only_through_the_functions(bench: Bench, case: str) -> None:
    assert attempt(bench.conns["operator"], writes(bench.run)[case]) == "refused"


def test_the_agents_checkpoint_reports_it_blocked_but_never_lifts_the_pause(bench: Bench) -> None:
    answer = attempt(bench.conns["agent"], f"SELECT outcome, state FROM agentdesk_run_checkpoint('{bench.run}', "
                                           "'agent', NULL)")
    assert answer.startswith("through") and "paused" in answer
    held = reach_checkpoint(bench.stores["agent"], bench.run, "agent")
    assert held.state is ControlState.PAUSED and held.held
    assert read_control(bench.owner, bench.run).state is ControlState.PAUSED


def test_the_agent_reads_its_control_state_with_a_granted_select(bench: Bench) -> None:
    assert "paused" in attempt(bench.conns["agent"], f"SELECT state FROM run_controls WHERE run_id = '{bench.run}'")


@pytest.mark.parametrize("level", ["other agent", "viewer"])
def test_another_login_cannot_take_the_agents_checkpoint(bench: Bench, level: str) -> None:
    sql = f"SELECT * FROM agentdesk_run_checkpoint('{bench.run}', 'x', NULL)"
    assert attempt(bench.conns[level], sql) == "refused"


def test_the_library_refuses_an_agent_in_one_sentence(bench: Bench) -> None:
    with pytest.raises(PermissionRefused, match="resuming a run needs operator"):
        control.resume(bench.stores["agent"], bench.run, "agent")
    with pytest.raises(PermissionRefused, match="stopping a run needs operator"):
        control.stop(bench.stores["viewer"], bench.run, "viewer")
    assert read_control(bench.owner, bench.run).state is ControlState.PAUSED


def test_a_stopped_run_stays_cancelled_whatever_its_agent_writes(bench: Bench, pg_cluster: PgCluster) -> None:
    rt = AgentRuntime(bench.stores["agent"])
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("q"), "t"), "s"), "a",
                                       "m"), "r")
    control.stop(bench.stores["operator"], run, "alice")
    assert reach_checkpoint(bench.stores["agent"], run, "agent").state is ControlState.STOPPED
    assert attempt(bench.conns["agent"], f"UPDATE runs SET status = 'running' WHERE id = '{run}'") == "refused"
