"""Red team on asks (PostgreSQL, migration 0015): each level, with a raw SQL client, tries to ask and answer.

- Nobody below the owner writes `asks` directly (INSERT, UPDATE, DELETE): the functions are the only way
  (the table-by-table attempts of test_pg_levels.py cover every column too).
- An agent asks only in a run its own login wrote; a second agent cannot ask in it, nor cancel its ask.
- No agent answers a question, not even its own; a viewer neither asks nor answers; an operator answers once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from agentdesk.store.asks import commands as asks
from agentdesk.store.asks.reads import read_ask
from agentdesk.store.errors import PermissionRefused
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster
from tests.security.logins import login_at_level

LEVELS = ("agent", "other agent", "viewer", "operator", "admin")


@dataclass
class Bench:
    owner: Store
    stores: dict[str, Store]
    conns: dict[str, psycopg.Connection[Any]]
    run: str
    ask: str
    """Asked by the `agent` login in its own run."""


def _login(cluster: PgCluster, url: str, level: str) -> tuple[str, str]:
    return login_at_level(cluster, url, level, "ra")


@pytest.fixture(scope="module")
def bench(pg_cluster: PgCluster) -> Iterator[Bench]:
    url = pg_cluster.fresh_database()
    owner = open_store(url)
    logins = {level: _login(pg_cluster, url, level) for level in LEVELS}
    stores = {level: open_store(logins[level][1]) for level in LEVELS}
    conns = {level: psycopg.connect(libpq_url(logins[level][1])) for level in LEVELS}
    try:
        rt = AgentRuntime(stores["agent"])
        agent_id = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("red"), "t"), "s"), "a", "m")
        run = rt.start_run(agent_id, "r")
        ask = asks.create(stores["agent"], run, "Which branch?", ["main", "dev"])
        yield Bench(owner, stores, conns, run, ask)
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


def tried(conn: psycopg.Connection[Any], sql: str) -> str:
    """'refused: …' when the server refused for want of privilege, else the first column of the answer."""
    try:
        row = conn.execute(sql).fetchone()
        return str(row[0]) if row else "no row"
    except psycopg.errors.InsufficientPrivilege as exc:
        return f"refused: {str(exc).splitlines()[0]}"
    finally:
        conn.rollback()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sql", [
    "INSERT INTO asks (id, project_id, task_id, session_id, agent_id, run_id, question, status, created_at, revision)"
    " SELECT 'ask_forged', project_id, task_id, session_id, agent_id, id, 'q', 'answered', 0, 1 FROM runs",
    "UPDATE asks SET status = 'answered', answer = 'forged', answered_by = 'alice'",
    "DELETE FROM asks",
], ids=["insert", "update", "delete"])
def test_nobody_writes_the_table_directly(bench: Bench, level: str, sql: str) -> None:
    assert tried(bench.conns[level], sql).startswith("refused")


@pytest.mark.parametrize("level", ["agent", "other agent", "viewer"])
def test_no_agent_and_no_viewer_answers(bench: Bench, level: str) -> None:
    answered = tried(bench.conns[level], f"SELECT * FROM agentdesk_answer('{bench.ask}', 'yes', 'me', NULL, NULL)")
    assert answered.startswith("refused")
    with pytest.raises(PermissionRefused):
        asks.answer(bench.stores[level], bench.ask, "yes", "me")
    assert read_ask(bench.owner, bench.ask).status == "pending"


def test_an_agent_asks_only_in_its_own_runs(bench: Bench) -> None:
    call = f"SELECT outcome FROM agentdesk_ask('ask_{{}}', '{bench.run}', NULL, 'q?', NULL, NULL, 'a', NULL)"
    assert tried(bench.conns["agent"], call.format("own")) == "ok"
    refusal = tried(bench.conns["other agent"], call.format("other"))
    assert refusal.startswith("refused") and "did not write run" in refusal
    assert tried(bench.conns["viewer"], call.format("viewer")).startswith("refused")
    with pytest.raises(PermissionRefused, match="did not write run"):
        asks.create(bench.stores["other agent"], bench.run, "q?")


def test_only_the_asker_or_an_operator_cancels(bench: Bench) -> None:
    call = f"SELECT outcome FROM agentdesk_close_ask('{bench.ask}', 'cancelled', 'x', NULL, NULL)"
    refusal = tried(bench.conns["other agent"], call)
    assert refusal.startswith("refused") and "did not ask" in refusal
    assert tried(bench.conns["viewer"], call).startswith("refused")
    assert tried(bench.conns["agent"], call) == "ok"  # rolled back


def test_an_operator_answers_exactly_once_and_is_the_signed_login(bench: Bench) -> None:
    ask = asks.create(bench.stores["agent"], bench.run, "Deploy?")
    first = tried(bench.conns["operator"], f"SELECT outcome FROM agentdesk_answer('{ask}', 'yes', 'op', NULL, NULL)")
    assert first == "ok"  # rolled back: now for real, through the store
    done = asks.answer(bench.stores["operator"], ask, "yes", "alice")
    assert done.answered_login is not None and done.answered_login.startswith("ra_operator_")
    again = tried(bench.conns["admin"], f"SELECT outcome FROM agentdesk_answer('{ask}', 'no', 'eve', NULL, NULL)")
    assert again == "lost"
    with pytest.raises(asks.AlreadyAnswered, match="already answered by alice"):
        asks.answer(bench.stores["admin"], ask, "no", "eve")
