"""A SQLite store that ran 0006_search before its index changed ends, upgraded to head, equal to a fresh one.

0006 built the span index from store/search/fts.py, which changed after 0006 landed; the earlier one is kept
in tests/migrations/edited/ with what it ran from that module written in. 0021_pg_functions_refresh replaces
its index by today's (sql/0021/sqlite_search.sql); every span is marked for the indexer.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentdesk.store.persistence.database import open_store
from tests.migrations.building import SqliteBuilder, kept_data, little_data, upgrade
from tests.migrations.snapshot import differences
from tests.migrations.test_edited_0008 import HEAD_0014, migrations_with


def test_a_store_that_ran_the_first_search_index_upgrades_to_todays(tmp_path: Path) -> None:
    builder = SqliteBuilder(tmp_path)
    fresh_path = tmp_path / "fresh.sqlite"
    open_store(str(fresh_path)).close()
    path = tmp_path / "old.sqlite"
    engine = builder.engine(path)
    try:
        upgrade(engine, "0005_postgres")
        little_data(engine)
        upgrade(engine, HEAD_0014, migrations_with(tmp_path, "f981fa1", revision="0006_search"))
    finally:
        engine.dispose()
    named = "\n".join(differences(builder.snapshot(path), builder.snapshot(fresh_path), 100))
    assert "span_search_dirty" in named  # what the edit left behind, before 0021
    open_store(str(path)).close()
    assert differences(builder.snapshot(path), builder.snapshot(fresh_path)) == []
    engine = builder.engine(path)
    try:
        assert kept_data(engine) == [("p-old", "made before the upgrade", "t-old", "an old task")]
    finally:
        engine.dispose()
    conn = sqlite3.connect(path)
    try:  # the old triggers are gone: a new span is only marked dirty, as on a store made at head
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                           "AND name LIKE 'span_search_%'")} == {
            "span_search_insert", "span_search_update", "span_search_delete"}
        assert "INSERT OR IGNORE INTO span_search_dirty" in conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'span_search_insert'").fetchone()[0]
    finally:
        conn.close()
