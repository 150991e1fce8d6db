"""Databases at any revision, on both backends, for the migration history tests.

A database at revision R is made once per chain: one database is migrated revision by revision and copied
after each step (a file copy on SQLite, CREATE DATABASE … TEMPLATE on PostgreSQL), which is far faster than
migrating 0001 → R again for every R.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine

from agentdesk.store.persistence.database import alembic_config
from agentdesk.store.persistence.postgres.engine import libpq_url, normalise
from tests.conftest import PgCluster
from tests.migrations.snapshot import Snapshot, postgres_snapshot, sqlite_snapshot

FIRST_PUBLIC = "0001"
"""The first revision a released agentdesk made (every later one is upgraded from)."""


def revisions() -> list[str]:
    """Every revision from the first public one to head, oldest first."""
    scripts = ScriptDirectory.from_config(alembic_config())
    chain = [s.revision for s in scripts.walk_revisions()][::-1]
    return chain[chain.index(FIRST_PUBLIC):]


def upgrade(engine: Engine, revision: str, script_location: Path | None = None) -> None:
    with engine.begin() as conn:
        config = alembic_config(conn)
        if script_location is not None:
            config.set_main_option("script_location", str(script_location))
        command.upgrade(config, revision)


def little_data(engine: Engine) -> None:
    """Rows every revision's schema holds (0001's projects and tasks): an upgrade must keep them."""
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO projects (id, name, created_at, revision) "
                             "VALUES ('p-old', 'made before the upgrade', 1.5, 1)")
        conn.exec_driver_sql("INSERT INTO tasks (id, project_id, title, created_at, revision) "
                             "VALUES ('t-old', 'p-old', 'an old task', 2.5, 1)")


def kept_data(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(
            "SELECT p.id, p.name, t.id, t.title FROM projects p JOIN tasks t ON t.project_id = p.id "
            "WHERE p.id = 'p-old'").all()]


class SqliteBuilder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def engine(self, path: Path) -> Engine:
        return create_engine(f"sqlite:///{path}")

    def at_each(self, targets: list[str]) -> dict[str, Path]:
        """A file at each revision in `targets` (oldest first)."""
        made: dict[str, Path] = {}
        chain = self.folder / "chain.sqlite"
        engine = self.engine(chain)
        try:
            for revision in targets:
                upgrade(engine, revision)
                engine.dispose()
                made[revision] = self.folder / f"at-{revision}.sqlite"
                shutil.copy(chain, made[revision])
        finally:
            engine.dispose()
        return made

    def snapshot(self, path: Path) -> Snapshot:
        conn = sqlite3.connect(path)
        try:
            return sqlite_snapshot(conn)
        finally:
            conn.close()


class PostgresBuilder:
    def __init__(self, cluster: PgCluster) -> None:
        self.cluster = cluster
        self.made: list[str] = []

    def new_database(self, template: str | None = None) -> str:
        name = f"h_{uuid.uuid4().hex[:12]}"
        with self.cluster.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        self.made.append(name)
        return self.cluster.database_url(name)

    def engine(self, url: str) -> Engine:
        return create_engine(normalise(url))

    def at_each(self, targets: list[str], script_location: Path | None = None) -> dict[str, str]:
        made: dict[str, str] = {}
        chain = self.new_database()
        engine = self.engine(chain)
        try:
            for revision in targets:
                upgrade(engine, revision, script_location)
                engine.dispose()  # a template must have no connection while it is copied
                made[revision] = self.new_database(template=name_of(chain))
        finally:
            engine.dispose()
        return made

    def snapshot(self, url: str) -> Snapshot:
        import psycopg

        with psycopg.connect(libpq_url(url)) as conn:
            return postgres_snapshot(conn)

    def drop_all(self) -> None:
        for name in self.made:
            self.cluster.drop(self.cluster.database_url(name))


def name_of(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[1]


@contextmanager
def postgres_builder(cluster: PgCluster) -> Iterator[PostgresBuilder]:
    builder = PostgresBuilder(cluster)
    try:
        yield builder
    finally:
        builder.drop_all()
