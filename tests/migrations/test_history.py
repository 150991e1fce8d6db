"""Migrations are history: a database made at any earlier revision, upgraded to head, is a database made at head.

For every revision from the first public one, on both backends: migrate a database to it, add a little
data, open it with agentdesk (which upgrades it to head, as `init` does) and compare its schema with a fresh
database at head: tables, columns, indexes, constraints, triggers, and on PostgreSQL also row-level security,
grants per role (tables, columns, functions) and every function's body. Equal, or the test names the
difference. A revision edited after it landed shows here as a difference between the two.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentdesk.store.persistence.database import head_revision, open_store
from tests.conftest import PgCluster
from tests.migrations.building import (
    PostgresBuilder,
    SqliteBuilder,
    kept_data,
    little_data,
    postgres_builder,
    revisions,
)
from tests.migrations.snapshot import differences

EARLIER = revisions()[:-1]


def test_the_chain_starts_at_the_first_public_revision_and_ends_at_head() -> None:
    chain = revisions()
    assert chain[0] == "0001" and chain[-1] == head_revision()


@pytest.mark.slow
def test_every_earlier_sqlite_file_upgrades_to_the_schema_of_a_fresh_one(tmp_path: Path) -> None:
    builder = SqliteBuilder(tmp_path)
    fresh_path = tmp_path / "fresh.sqlite"
    open_store(str(fresh_path)).close()
    fresh = builder.snapshot(fresh_path)
    found: dict[str, list[str]] = {}
    for revision, path in builder.at_each(EARLIER).items():
        engine = builder.engine(path)
        little_data(engine)
        engine.dispose()
        open_store(str(path)).close()
        engine = builder.engine(path)
        assert kept_data(engine) == [("p-old", "made before the upgrade", "t-old", "an old task")], revision
        engine.dispose()
        if diff := differences(builder.snapshot(path), fresh):
            found[revision] = diff
    assert not found, _named(found)


@pytest.mark.slow
def test_every_earlier_postgres_database_upgrades_to_the_schema_of_a_fresh_one(pg_cluster: PgCluster) -> None:
    with postgres_builder(pg_cluster) as builder:
        fresh = builder.snapshot(pg_cluster.fresh_database())
        found: dict[str, list[str]] = {}
        for revision, url in builder.at_each(EARLIER).items():
            _upgrade_with_data(builder, url)
            if diff := differences(builder.snapshot(url), fresh):
                found[revision] = diff
        assert not found, _named(found)


def _upgrade_with_data(builder: PostgresBuilder, url: str) -> None:
    engine = builder.engine(url)
    little_data(engine)
    engine.dispose()
    open_store(url).close()
    engine = builder.engine(url)
    try:
        assert kept_data(engine) == [("p-old", "made before the upgrade", "t-old", "an old task")]
    finally:
        engine.dispose()


def _named(found: dict[str, list[str]]) -> str:
    return "upgraded to head, these differ from a fresh database:\n" + "\n".join(
        f"from {revision}:\n  " + "\n  ".join(diff) for revision, diff in found.items())




def test_the_comparison_names_what_differs_on_sqlite(tmp_path: Path) -> None:
    """The history test passing means something only if the comparison sees a change of each kind."""
    builder = SqliteBuilder(tmp_path)
    path = tmp_path / "store.sqlite"
    open_store(str(path)).close()
    before = builder.snapshot(path)
    engine = builder.engine(path)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX ix_extra ON projects (name)")
        conn.exec_driver_sql("ALTER TABLE projects ADD COLUMN extra TEXT DEFAULT 'x'")
        conn.exec_driver_sql("CREATE TRIGGER t_extra AFTER INSERT ON projects BEGIN SELECT 1; END")
    engine.dispose()
    named = "\n".join(differences(builder.snapshot(path), before))
    assert "ix_extra" in named and "'extra'" in named and "t_extra" in named


def test_the_comparison_names_what_differs_on_postgres(pg_cluster: PgCluster) -> None:
    with postgres_builder(pg_cluster) as builder:
        url = builder.new_database(template=pg_cluster.template)
        before = builder.snapshot(url)
        engine = builder.engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE OR REPLACE FUNCTION public.agentdesk_now() RETURNS float8 LANGUAGE sql "
                                 "VOLATILE SET search_path = pg_catalog, pg_temp AS $$ SELECT 0::float8 $$")
            conn.exec_driver_sql("GRANT SELECT ON public.agentdesk_audit_key TO agentdesk_viewer")
            conn.exec_driver_sql("GRANT EXECUTE ON FUNCTION public.agentdesk_audit_write(text, text, text, text, "
                                 "text, text) TO agentdesk_agent")
        engine.dispose()
        named = "\n".join(differences(builder.snapshot(url), before, 50))
    assert "functions: only after the upgrade: ('agentdesk_now()'" in named
    assert "table grants: only after the upgrade: ('agentdesk_audit_key', 'agentdesk_viewer', 'SELECT'" in named
    assert "('agentdesk_audit_write(text,text,text,text,text,text)', 'agentdesk_agent', 'EXECUTE')" in named
