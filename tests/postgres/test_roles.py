"""Roles hold in the database: a viewer's hand-written SQL cannot write, operators only append to the audit."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from agentdesk.cli.main import main
from agentdesk.store.errors import PermissionRefused
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.source import Capability

MakeLogin = Callable[[str | None], tuple[str, str]]
TABLES = ("projects", "tasks", "sessions", "agents", "runs", "spans", "tool_calls", "approvals", "approval_rules",
          "context_groups", "context_items", "context_item_revisions", "compactions", "audit_log", "change_log",
          "agentdesk_meta", "alembic_version")


def refused(url: str, sql: str) -> bool:
    """Runs `sql` as that login; True when the server refused it for want of privilege."""
    with psycopg.connect(libpq_url(url)) as conn:
        try:
            conn.execute(sql)
        except psycopg.errors.InsufficientPrivilege:
            return True
        conn.rollback()
        return False


@pytest.fixture
def seeded(pg_rt: AgentRuntime) -> str:
    pid = pg_rt.create_project("p")
    aid = pg_rt.create_agent(pg_rt.create_session(pg_rt.create_task(pid, "t"), "s"), "a", "m")
    return pg_rt.request_approval(pg_rt.start_run(aid, "r"), "shell", {"cmd": "ls"})


def test_a_viewer_cannot_write_any_table_by_hand(pg_store: Store, seeded: str, make_login: MakeLogin) -> None:
    _, url = make_login("viewer")
    for table in TABLES:
        assert not refused(url, f"SELECT count(*) FROM {table}"), f"a viewer must read {table}"
        assert refused(url, f"UPDATE {table} SET {first_column(pg_store, table)} = {first_column(pg_store, table)}")
        assert refused(url, f"DELETE FROM {table}")
        assert refused(url, f"INSERT INTO {table} DEFAULT VALUES")
    assert refused(url, "TRUNCATE approvals")
    assert refused(url, f"UPDATE approvals SET status = 'approved' WHERE id = '{seeded}'")


def first_column(store: Store, table: str) -> str:
    with store.engine.connect() as conn:
        from sqlalchemy import inspect
        return str(inspect(conn).get_columns(table)[0]["name"])


def test_a_viewer_cannot_decide_through_agentdesk_either(pg_store: Store, seeded: str,
                                                         make_login: MakeLogin) -> None:
    name, url = make_login("viewer")
    viewer = NativeSource.open(url)
    try:
        assert Capability.APPROVE not in viewer.capabilities
        assert f"login {name} is a member of agentdesk_viewer" in viewer.why_not(Capability.APPROVE)
        with pytest.raises(PermissionRefused, match=f"^{name} is a viewer; deciding needs operator.$"):
            viewer.decide(seeded, approve=True, actor="mallory")
    finally:
        viewer.close()
    assert NativeSource(pg_store).approval(seeded).status == "pending"


def test_operators_append_to_the_audit_but_never_rewrite_it(pg_store: Store, seeded: str,
                                                            make_login: MakeLogin) -> None:
    name, url = make_login("operator")
    operator = NativeSource.open(url)
    try:
        assert Capability.APPROVE in operator.capabilities
        operator.decide(seeded, approve=True, actor="claims-to-be-bob")
    finally:
        operator.close()
    assert refused(url, "UPDATE audit_log SET actor = 'someone else'")
    assert refused(url, "DELETE FROM audit_log")
    assert refused(url, "DELETE FROM change_log")
    assert refused(url, "INSERT INTO audit_log (at, actor, action, entity, entity_id, payload, prev_hash, hash, "
                        "db_login) SELECT at, actor, action, entity, entity_id, payload, prev_hash, hash, 'forged' "
                        "FROM audit_log ORDER BY seq DESC LIMIT 1")  # records come only from agentdesk_audit_append
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT actor, db_login FROM audit_log WHERE action LIKE 'approval.%' "
                           "ORDER BY seq DESC LIMIT 1").fetchone()
    assert row == ("claims-to-be-bob", name)  # the server sets db_login from session_user


def test_admin_role_grant_and_list(pg_url: str, pg_store: Store, make_login: MakeLogin,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    name, url = make_login(None)
    assert main(["--store", pg_url, "admin", "role", "grant", name, "operator"]) == 0
    assert main(["--store", pg_url, "admin", "role", "list", "--json"]) == 0
    assert f'{{"login": "{name}", "level": "operator"}}' in capsys.readouterr().out
    assert main(["--store", pg_url, "admin", "role", "grant", name, "viewer"]) == 0  # exactly one level
    store = open_store(url)
    try:
        assert store.login is not None and store.login.level == "viewer"
    finally:
        store.close()
    capsys.readouterr()
    assert main(["--store", url, "admin", "role", "grant", name, "admin"]) == 2  # a viewer may not grant
    err = capsys.readouterr().err
    assert f"{name} may not grant levels: granting levels needs a login with CREATEROLE, such as" in err
    assert "Traceback" not in err


def test_roles_are_refused_on_sqlite(store_path: object, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store_path), "admin", "role", "list"]) == 2
    assert "only on a PostgreSQL store" in capsys.readouterr().err


def test_only_admins_prune(pg_store: Store, seeded: str, make_login: MakeLogin,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from sqlalchemy import text

    from agentdesk.store.changes.maintenance import PruneSchedule
    with pg_store.engine.begin() as conn:  # old enough to prune, so the DELETE really runs
        conn.execute(text("UPDATE change_log SET at = 0"))
    _, operator_url = make_login("operator")
    assert main(["--store", operator_url, "admin", "prune", "--keep-days", "1"]) == 5
    assert "may not do that" in capsys.readouterr().err
    operator = open_store(operator_url)
    _, admin_url = make_login("admin")
    admin = open_store(admin_url)
    try:
        assert not PruneSchedule.allowed(operator) and PruneSchedule.allowed(admin)
    finally:
        operator.close()
        admin.close()
    assert main(["--store", admin_url, "admin", "prune", "--keep-days", "1"]) == 0
