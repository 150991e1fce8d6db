"""Opening, creating and upgrading stores, and refusing files that are not ours to change."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence.database import alembic_config, head_revision, open_store
from agentdesk.store.persistence.schema import Base
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.search import fts


def tables_of(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def version_of(path: Path) -> str | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return None if row is None else row[0]
    finally:
        conn.close()


def sqlite_file(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_a_fresh_file_gets_the_schema_at_head(store_path: Path) -> None:
    store = open_store(str(store_path))
    store.close()
    assert version_of(store_path) == head_revision()
    assert tables_of(store_path) - fts.TABLES == set(Base.metadata.tables) | {"alembic_version"}
    assert store.schema_version == head_revision()


def test_models_and_migrations_never_drift(store_path: Path) -> None:
    store = open_store(str(store_path))
    try:
        with store.engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={
                "compare_type": True, "compare_server_default": True,
                "include_name": lambda name, kind, _: not ((kind == "table" and name in fts.TABLES)
                                                       or (kind == "index" and name in fts.INDEXES))})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        store.close()


def test_a_store_at_base_is_upgraded(store_path: Path) -> None:
    store = open_store(str(store_path))
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    store.close()
    assert tables_of(store_path) == {"alembic_version"} and version_of(store_path) is None
    reopened = open_store(str(store_path))
    try:
        assert reopened.schema_version == head_revision()
        AgentRuntime(reopened).create_project("works")
    finally:
        reopened.close()


def test_an_empty_sqlite_file_becomes_a_store(tmp_path: Path) -> None:
    path = sqlite_file(tmp_path / "empty.sqlite", "CREATE TABLE x (a)", "DROP TABLE x")
    assert path.stat().st_size > 0
    open_store(str(path)).close()
    assert version_of(path) == head_revision()


def test_a_newer_store_is_refused_and_left_byte_identical(store_path: Path) -> None:
    store = open_store(str(store_path))
    AgentRuntime(store).create_project("from the future")
    store.close()
    # rollback-journal mode, so that even the engine's switch to WAL would show in the bytes
    sqlite_file(store_path, "PRAGMA journal_mode=DELETE",
                "UPDATE alembic_version SET version_num = '9999_future'")
    before = store_path.read_bytes()
    for read_only in (False, True):
        with pytest.raises(StoreUnavailable, match="newer agentdesk"):
            open_store(str(store_path), read_only=read_only)
        assert store_path.read_bytes() == before


@pytest.mark.parametrize("statements", [
    ("CREATE TABLE invoices (id INTEGER)",),
    # another Alembic-managed application whose revision ids happen to look like ours
    ("CREATE TABLE alembic_version (version_num VARCHAR(32))", "INSERT INTO alembic_version VALUES ('0001')",
     "CREATE TABLE projects (id TEXT)", "CREATE TABLE runs (id TEXT)"),
    # a runtime's database that shares some table names with ours
    ("CREATE TABLE projects (id TEXT)", "CREATE TABLE spans (id TEXT)"),
])
def test_another_schema_is_refused_untouched(tmp_path: Path, statements: tuple[str, ...]) -> None:
    path = sqlite_file(tmp_path / "theirs.sqlite", *statements)
    before = path.read_bytes()
    with pytest.raises(StoreUnavailable, match="another schema"):
        open_store(str(path))
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some text, long enough to have a header" * 4)
    with pytest.raises(StoreUnavailable, match="not a SQLite database"):
        open_store(str(path))
    assert path.read_text().startswith("just some text")


def test_read_only_never_creates(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreUnavailable, match="no store"):
        open_store(str(missing), read_only=True)
    with pytest.raises(StoreUnavailable, match="no store"):
        open_store(str(missing), create=False)
    assert not missing.exists()


def test_a_store_at_base_opened_read_only_is_not_upgraded(store_path: Path) -> None:
    store = open_store(str(store_path))
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    store.close()
    with pytest.raises(StoreUnavailable, match="no agentdesk schema"):
        open_store(str(store_path), read_only=True)
    assert version_of(store_path) is None


def test_the_head_read_from_the_files_as_text_is_alembics_head() -> None:
    """Opening a store at head no longer imports alembic (start-up time): its shortcut must agree with it."""
    from alembic.script import ScriptDirectory

    from agentdesk.store.persistence import database

    scripts = ScriptDirectory.from_config(alembic_config())
    assert database._revision_parents() is not None  # the shortcut applies to today's files
    assert head_revision() == scripts.get_current_head()
    assert database.known_revisions() == {s.revision for s in scripts.walk_revisions()}
