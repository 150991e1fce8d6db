"""A store behind head says who upgrades it; logins that may not migrate or grant say what they lack.

Real logins on the shared server (tests/postgres/conftest.py's `make_login`), the CLI in-process: each
refusal is one sentence on stderr with its exit code, never the server's "permission denied for schema
public" or "relation import_staging does not exist", and nothing is changed.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from agentdesk.cli.main import main
from agentdesk.store.errors import SchemaBehind
from agentdesk.store.persistence.database import head_revision, open_store
from agentdesk.store.persistence.postgres import upgrading
from agentdesk.store.persistence.postgres.engine import display, libpq_url
from tests.conftest import PgCluster
from tests.migrations.building import SqliteBuilder, name_of, upgrade
from tests.postgres.conftest import login_url

MakeLogin = Callable[[str | None], tuple[str, str]]
OLD = "0009_presence"
EXIT_UNAVAILABLE, EXIT_REFUSED = 5, 2


def stamp(url: str) -> str:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        assert row is not None
        return str(row[0])


@pytest.fixture
def old_store(pg_url: str) -> str:
    """make_login's database, taken back to OLD by its owner (the session's superuser), as a team's store is
    when agentdesk was upgraded on the people's machines before the owner ran `init`."""
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public; GRANT ALL ON SCHEMA public TO PUBLIC; "
                     "ALTER SCHEMA public OWNER TO pg_database_owner")
    from sqlalchemy import create_engine

    from agentdesk.store.persistence.postgres.engine import normalise
    engine = create_engine(normalise(pg_url))
    try:
        upgrade(engine, OLD)
    finally:
        engine.dispose()
    return pg_url


def as_owner(url: str, owner: str = "postgres") -> str:
    """The store's URL as the sentence shows it: the owner's login, no password (the caller's never appears)."""
    scheme, rest = url.split("://", 1)
    return display(f"{scheme}://{owner}@{rest.split('@', 1)[-1]}")


@pytest.mark.parametrize("level", ["operator", "viewer", "agent", "admin"])
def test_a_login_that_does_not_own_a_store_behind_head_is_told_who_upgrades_it(
        old_store: str, make_login: MakeLogin, level: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, url = make_login(level)
    capsys.readouterr()
    for argv in (["approvals"], ["info"], ["approve", "a-1", "--actor", "carol"], ["init"]):
        code = main(["--store", url, *argv])
        err = capsys.readouterr().err
        assert code == EXIT_UNAVAILABLE, (argv, err)
        at = OLD if level != "agent" else "a revision before 0012_least_privilege"  # (agents read nothing before)
        assert err.strip().removeprefix("agentdesk: ").startswith(
            f"This store's schema is at {at}, agentdesk needs {head_revision()}: the database owner"), (argv, err)
        assert f"the database owner (postgres) runs `agentdesk --store '{as_owner(url)}' init`" in err, err
        assert "permission denied" not in err and "does not exist" not in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    assert stamp(old_store) == OLD


def test_a_login_in_no_group_is_told_how_it_gets_a_level(pg_url: str, make_login: MakeLogin,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    name, url = make_login(None)
    capsys.readouterr()
    assert main(["--store", url, "approvals"]) == EXIT_REFUSED
    assert capsys.readouterr().err.strip().removeprefix("agentdesk: ") == (
        f"{name} holds no agentdesk level on this store: a login with CREATEROLE runs `agentdesk --store URL "
        f"admin role grant {name} viewer` (or agent, operator, admin).")


def test_a_read_only_open_of_a_store_behind_head_names_the_owner_and_the_command(old_store: str) -> None:
    with pytest.raises(SchemaBehind) as refused:
        open_store(old_store, read_only=True)
    assert str(refused.value) == (f"This store's schema is at {OLD}, agentdesk needs {head_revision()}: the "
                                  f"database owner (postgres) runs `agentdesk --store '{as_owner(old_store)}' init`.")
    assert refused.value.exit_code == EXIT_UNAVAILABLE and stamp(old_store) == OLD


def test_the_owner_upgrades_then_every_level_opens(old_store: str, make_login: MakeLogin,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", old_store, "init"]) == 0
    assert f"(schema {head_revision()})" in capsys.readouterr().out
    for level in ("operator", "viewer", "agent"):
        _, url = make_login(level)
        assert main(["--store", url, "approvals"]) == 0, capsys.readouterr().err


def test_verify_reads_a_store_behind_head_as_it_is(old_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", old_store, "verify"]) == 0, capsys.readouterr().err
    assert stamp(old_store) == OLD


@pytest.fixture
def sqlite_at_old(tmp_path: Path) -> Path:
    return SqliteBuilder(tmp_path).at_each([OLD])[OLD]


def test_a_read_only_sqlite_open_of_a_file_behind_head_says_how_to_upgrade(
        sqlite_at_old: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sqlite_at_old.read_bytes()
    for argv in (["approvals"], ["info"], ["search", "read_file"]):
        assert main(["--store", str(sqlite_at_old), *argv]) == EXIT_UNAVAILABLE
        err = capsys.readouterr().err.strip().removeprefix("agentdesk: ")
        assert err == (f"This store's schema is at {OLD}, agentdesk needs {head_revision()}: run "
                       f"`agentdesk --store {sqlite_at_old} init` to upgrade it."), err
    assert sqlite_at_old.read_bytes() == before
    assert main(["--store", str(sqlite_at_old), "init"]) == 0
    conn = sqlite3.connect(sqlite_at_old)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (head_revision(),)
    finally:
        conn.close()


# -- who may create a store ----------------------------------------------------------------------------------
@dataclass
class Server:
    """An empty database owned by the superuser and plain logins, made for one test and removed after it: the
    database first (it holds whatever the logins own), then the logins."""

    cluster: PgCluster
    url: str = ""
    logins: list[str] = field(default_factory=list)

    def login(self, *, createrole: bool = False) -> str:
        """A login in no group, password 'secret'."""
        name = f"i_{uuid.uuid4().hex[:10]}"
        with self.cluster.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret'" + (" CREATEROLE" if createrole else ""))
        self.logins.append(name)
        return name

    def own(self, login: str) -> None:
        with self.cluster.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f'ALTER DATABASE "{name_of(self.url)}" OWNER TO {login}')


@pytest.fixture
def server(pg_cluster: PgCluster) -> Iterator[Server]:
    made = Server(pg_cluster)
    name = f"e_{uuid.uuid4().hex[:12]}"
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        conn.execute(f'CREATE DATABASE "{name}"')
    made.url = pg_cluster.database_url(name)
    yield made
    pg_cluster.drop(made.url)
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        for login in made.logins:
            conn.execute(f"DROP ROLE IF EXISTS {login}")


def test_init_by_a_login_that_neither_owns_the_database_nor_is_a_superuser_names_the_owner(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    url, login = server.url, server.login(createrole=True)
    as_login = login_url(url, login, "secret")
    assert main(["--store", as_login, "init"]) == EXIT_REFUSED
    err = capsys.readouterr().err.strip().removeprefix("agentdesk: ")
    assert err.startswith(f"{login} may not create the agentdesk schema in database {name_of(url)}: init needs a "
                          "superuser or the database's owner (postgres), so postgres runs `agentdesk --store"), err
    assert f"so postgres runs `agentdesk --store '{as_owner(url)}' init`" in err
    assert f"ALTER DATABASE {name_of(url)} OWNER TO {login}." in err and "permission denied" not in err
    with psycopg.connect(libpq_url(url)) as conn:
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone() == (None,)


def test_init_by_the_owner_without_createrole_names_createrole_when_a_group_is_missing(
        server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The shared server already has agentdesk's groups (other tests made them; roles are per server), so a
    group that no server has stands in for a new server's missing ones."""
    url, login = server.url, server.login()
    server.own(login)
    monkeypatch.setattr(upgrading, "GROUPS", (*upgrading.GROUPS, "agentdesk_not_on_this_server"))
    assert main(["--store", login_url(url, login, "secret"), "init"]) == EXIT_REFUSED
    assert capsys.readouterr().err.strip().removeprefix("agentdesk: ") == (
        f"{login} lacks CREATEROLE, which creating agentdesk's group role agentdesk_not_on_this_server needs: a "
        f"superuser runs ALTER ROLE {login} CREATEROLE (or creates them), or init runs as a superuser.")


def test_the_databases_owner_initialises_a_store_once_the_groups_exist(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    url, login = server.url, server.login()
    server.own(login)
    assert main(["--store", login_url(url, login, "secret"), "init"]) == 0, capsys.readouterr().err
    assert stamp(url) == head_revision()


# -- who may grant levels ------------------------------------------------------------------------------------
def test_an_admin_without_createrole_is_told_who_may_grant(pg_url: str, make_login: MakeLogin,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    admin, admin_url = make_login("admin")
    someone, _ = make_login(None)
    capsys.readouterr()
    assert main(["--store", admin_url, "admin", "role", "grant", someone, "operator"]) == EXIT_REFUSED
    err = capsys.readouterr().err.strip().removeprefix("agentdesk: ")
    assert err.startswith(f"{admin} may not grant levels: granting levels needs a login with CREATEROLE, such as "
                          "the store's owner postgres (a superuser)"), err
    assert err.endswith(f"or have a superuser run ALTER ROLE {admin} CREATEROLE."), err
    assert "Traceback" not in err and "permission denied" not in err
    assert main(["--store", pg_url, "admin", "role", "grant", someone, "operator"]) == 0


def test_a_store_a_plain_owner_made_is_upgraded_by_that_owner_and_named_to_the_others(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole path without a superuser: the database's owner made the store at OLD; an operator is told to ask
    that owner, by name; the owner's `init` upgrades it; the operator's next command works."""
    from sqlalchemy import create_engine

    from agentdesk.store.persistence.postgres.engine import normalise
    url, owner = server.url, server.login()
    server.own(owner)
    owner_url = login_url(url, owner, "secret")
    engine = create_engine(normalise(owner_url))
    try:
        upgrade(engine, OLD)
    finally:
        engine.dispose()
    operator = server.login()
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:  # the superuser: grants are per server
        conn.execute(f"GRANT agentdesk_operator TO {operator}")
    operator_url = login_url(url, operator, "secret")
    capsys.readouterr()
    told = f"the database owner ({owner}) runs `agentdesk --store '{as_owner(url, owner)}' init`."
    assert main(["--store", operator_url, "approvals"]) == EXIT_UNAVAILABLE  # read-only
    assert told in capsys.readouterr().err
    assert main(["--store", operator_url, "approve", "a-1", "--actor", "carol"]) == EXIT_UNAVAILABLE
    assert told in capsys.readouterr().err
    assert main(["--store", owner_url, "init"]) == 0, capsys.readouterr().err
    assert stamp(url) == head_revision()
    assert main(["--store", operator_url, "approvals"]) == 0, capsys.readouterr().err


def test_an_admin_given_createrole_grants(pg_cluster: PgCluster, pg_url: str, make_login: MakeLogin,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """What the refusal tells the admin to get is enough (PostgreSQL 15; 16 and later also want ADMIN OPTION)."""
    admin, admin_url = make_login("admin")
    someone, _ = make_login(None)
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        if int(conn.execute("SHOW server_version_num").fetchone()[0]) >= 160000:
            pytest.skip("PostgreSQL 16+: CREATEROLE alone no longer grants other roles' membership")
        conn.execute(f"ALTER ROLE {admin} CREATEROLE")
    assert main(["--store", admin_url, "admin", "role", "grant", someone, "viewer"]) == 0, capsys.readouterr().err
    assert main(["--store", admin_url, "admin", "role", "list", "--json"]) == 0
    assert f'{{"login": "{someone}", "level": "viewer"}}' in capsys.readouterr().out
