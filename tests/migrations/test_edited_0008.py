"""A database that ran an earlier committed 0008_pg_functions ends, upgraded to head, equal to a fresh one.

Each earlier 0008 (tests/migrations/edited/) is put in place of today's in a copy of the migrations; a
database is migrated with that copy as a team's was (to 0008, and as far as that 0008 lets it go), then
opened by today's agentdesk, which upgrades it to head through 0021_pg_functions_refresh (and, for the
first 0008, migrations/repairs.py). Its schema, function bodies and grants must equal a fresh database's.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from agentdesk.store.persistence.database import MIGRATIONS, open_store
from tests.conftest import PgCluster
from tests.migrations.building import PostgresBuilder, kept_data, little_data, postgres_builder, upgrade
from tests.migrations.snapshot import differences

EDITED = Path(__file__).parent / "edited"
HEAD_0014 = "0014_anchor_location"


def migrations_with(tmp_path: Path, commit: str, *, repair: bool = True, revision: str = "0008_pg_functions",
                    without: str | None = None) -> Path:
    """A copy of the migrations up to 0014 with `revision` as of `commit`, `without` that revision's file (one
    the old chain did not have yet) and, unless `repair`, env.py as it was before migrations/repairs.py."""
    copy = tmp_path / f"migrations-{revision}-{commit}-{repair}"
    shutil.copytree(MIGRATIONS, copy, ignore=shutil.ignore_patterns("__pycache__", "sql"))
    if without is not None:
        (copy / "versions" / f"{without}.py").unlink()
    edited = next(EDITED.glob(f"{revision}.{commit}*.py.txt"))
    shutil.copy(edited, copy / "versions" / f"{revision}.py")
    for later in copy.glob("versions/00[2-9][0-9]_*.py"):  # as the team's agentdesk was: nothing after 0014
        if later.name > "0014":
            later.unlink()
    if not repair:
        env = copy / "env.py"
        env.write_text("".join(line for line in env.read_text().splitlines(keepends=True) if "repair" not in line))
    return copy


@pytest.fixture
def builder(pg_cluster: PgCluster) -> Iterator[PostgresBuilder]:
    with postgres_builder(pg_cluster) as made:
        yield made


@pytest.mark.parametrize(("commit", "ran_to"), [
    ("3892fd8", "0011_agent_tokens"),  # the first 0008: 0012 cannot run on it (below)
    ("c341d74", HEAD_0014),
    ("ac3927d", HEAD_0014),
])
def test_a_database_that_ran_an_earlier_0008_upgrades_to_heads_functions(
        builder: PostgresBuilder, pg_cluster: PgCluster, tmp_path: Path, commit: str, ran_to: str) -> None:
    fresh = builder.snapshot(pg_cluster.fresh_database())
    url = builder.new_database()
    engine = builder.engine(url)
    try:
        upgrade(engine, "0001")
        little_data(engine)
        upgrade(engine, ran_to, migrations_with(tmp_path, commit))
    finally:
        engine.dispose()
    if ran_to == HEAD_0014:  # what the edit left behind, before 0021: the test would pass without it otherwise
        assert any("agentdesk_audit_write" in d for d in differences(builder.snapshot(url), fresh, 1_000_000))
    open_store(url).close()
    assert differences(builder.snapshot(url), fresh) == []
    engine = builder.engine(url)
    try:
        assert kept_data(engine) == [("p-old", "made before the upgrade", "t-old", "an old task")]
    finally:
        engine.dispose()


def test_the_first_0008_stops_0012_without_the_repair(builder: PostgresBuilder, tmp_path: Path) -> None:
    """Why repairs.py exists: with only the migrations, a database that ran the first 0008 never gets past 0012."""
    import psycopg

    url = builder.new_database()
    engine = builder.engine(url)
    try:
        old = migrations_with(tmp_path, "3892fd8", repair=False)
        upgrade(engine, "0011_agent_tokens", old)
        with pytest.raises((DBAPIError, psycopg.errors.UndefinedFunction), match="agentdesk_withdraw"):
            upgrade(engine, "0012_least_privilege", old)
    finally:
        engine.dispose()
