"""PostgreSQL-only fixtures: a fresh database per test on the session's server, and logins with passwords."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    url = pg_cluster.fresh_database()
    yield url
    pg_cluster.drop(url)


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    store = open_store(pg_url)
    yield store
    store.close()


@pytest.fixture
def pg_rt(pg_store: Store) -> AgentRuntime:
    return AgentRuntime(pg_store)


def login_url(url: str, login: str, password: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{login}:{password}@{rest.split('@', 1)[1]}"


@pytest.fixture
def make_login(pg_cluster: PgCluster, pg_url: str) -> Iterator[Callable[[str | None], tuple[str, str]]]:
    """make_login(level) -> (login, url): a fresh login with a password, in `level`'s group (None: no group)."""
    made: list[str] = []

    def make(level: str | None) -> tuple[str, str]:
        name = f"u_{uuid.uuid4().hex[:10]}"
        with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret'")
            if level is not None:
                conn.execute(f"GRANT agentdesk_{level} TO {name}")
        made.append(name)
        return name, login_url(pg_url, name, "secret")

    yield make
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        for name in made:
            conn.execute(f"DROP OWNED BY {name}")
    pg_cluster.drop(pg_url)  # a database must go before the roles it still names in its grants
    with pg_cluster.admin() as conn:  # type: ignore[attr-defined]
        for name in made:
            conn.execute(f"DROP ROLE IF EXISTS {name}")
