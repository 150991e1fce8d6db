"""A store stamped with a revision that was re-chained after it landed ran without the revision put before it.

`0003` first followed `0001` (then `0002`), `0009_presence` followed `0007_audit_hmac` (then
`0008_pg_functions`): a store that reached 0003 or 0009 in between never ran 0002 or 0008, though its stamp
says it did. Today's agentdesk runs the skipped revision first (migrations/repairs.py), then upgrades it to
a database equal to a fresh one; without that it was refused as damaged (no `otel_orphans`) or stopped at 0012.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.persistence.database import open_store
from tests.conftest import PgCluster
from tests.migrations.building import (
    PostgresBuilder,
    SqliteBuilder,
    kept_data,
    little_data,
    postgres_builder,
    upgrade,
)
from tests.migrations.snapshot import differences
from tests.migrations.test_edited_0008 import migrations_with

KEPT = [("p-old", "made before the upgrade", "t-old", "an old task")]


@pytest.fixture
def builder(pg_cluster: PgCluster) -> Iterator[PostgresBuilder]:
    with postgres_builder(pg_cluster) as made:
        yield made


def test_a_sqlite_store_stamped_0003_before_0002_was_put_before_it(tmp_path: Path) -> None:
    builder = SqliteBuilder(tmp_path)
    fresh = tmp_path / "fresh.sqlite"
    open_store(str(fresh)).close()
    path = tmp_path / "old.sqlite"
    engine = builder.engine(path)
    try:
        upgrade(engine, "0001")
        little_data(engine)
        upgrade(engine, "0003", migrations_with(tmp_path, "bfc31e1", revision="0003_approval_trust",
                                                without="0002_otel"))
    finally:
        engine.dispose()
    open_store(str(path)).close()
    assert differences(builder.snapshot(path), builder.snapshot(fresh)) == []
    engine = builder.engine(path)
    try:
        assert kept_data(engine) == KEPT
    finally:
        engine.dispose()


@pytest.mark.parametrize(("commit", "revision", "without", "stamp"), [
    ("bfc31e1", "0003_approval_trust", "0002_otel", "0003"),
    ("bef3c9a", "0009_presence", "0008_pg_functions", "0009_presence"),
])
def test_a_postgres_store_stamped_before_a_rechain_upgrades_to_a_fresh_ones_schema(
        builder: PostgresBuilder, pg_cluster: PgCluster, tmp_path: Path, commit: str, revision: str, without: str,
        stamp: str) -> None:
    fresh = builder.snapshot(pg_cluster.fresh_database())
    url = builder.new_database()
    engine = builder.engine(url)
    try:
        upgrade(engine, "0001")
        little_data(engine)
        upgrade(engine, stamp, migrations_with(tmp_path, commit, revision=revision, without=without))
    finally:
        engine.dispose()
    open_store(url).close()
    assert differences(builder.snapshot(url), fresh) == []
    engine = builder.engine(url)
    try:
        assert kept_data(engine) == KEPT
    finally:
        engine.dispose()
