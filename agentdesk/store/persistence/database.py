"""Opening a store: find it, check what it is, migrate it, and hand out transactions.

Opening never damages a file it does not understand: every check that can refuse
runs before anything is written, and a refusal is a `StoreUnavailable` with one
sentence an operator can act on.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
from sqlalchemy import Engine, func, inspect, select
from sqlalchemy import text as sql_text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from agentdesk.store.errors import NoStore, ReadOnlyStore, StoreUnavailable
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.bus import ChangeBus
from agentdesk.store.persistence.postgres import engine as pg
from agentdesk.store.persistence.postgres import roles
from agentdesk.store.persistence.schema import (
    AgentRow,
    ApprovalRow,
    AuditRow,
    ImportStagingRow,
    ProjectRow,
    RunRow,
    SessionRow,
    SpanRow,
    TaskRow,
)
from agentdesk.store.persistence.schema_check import check_schema
from agentdesk.store.readmodel import StoreInfo

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent.parent / "migrations"
SIGNATURE_TABLES = frozenset({"agentdesk_meta", "audit_log", "change_log", "alembic_version"})
"""Tables only an agentdesk store has together: a file holding them all (and a schema version) is ours."""
ALEMBIC_TABLE = "alembic_version"
NEUTRAL_TABLES = frozenset({ALEMBIC_TABLE, "sqlite_sequence", "sqlite_stat1", "sqlite_stat4"})
DEFAULT_BUSY_TIMEOUT_S = 5.0


def default_store_location() -> str:
    """$AGENTDESK_STORE, else a file in the user's data directory."""
    env = os.environ.get("AGENTDESK_STORE")
    if env:
        return env
    return str(Path(platformdirs.user_data_dir("agentdesk", appauthor=False)) / "agentdesk.sqlite")


def to_url(location: str) -> str:
    if pg.is_postgres_url(location):
        return pg.normalise(location)
    if "://" in location:
        return location
    return f"sqlite:///{Path(location).expanduser().resolve()}"


def alembic_config(connection: object | None = None) -> Config:
    """Alembic's Config for our migrations (alembic is imported here, only when a migration runs)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


_REVISION = re.compile(r"^revision\s*=\s*['\"]([\w.-]+)['\"]\s*$", re.M)
_DOWN = re.compile(r"^down_revision\s*=\s*(?:None|['\"]([\w.-]+)['\"])\s*$", re.M)


@functools.cache
def _revision_parents() -> dict[str, str | None] | None:
    """revision -> down_revision, read from the migration files as text.

    Why not alembic: importing it (and mako, which it imports) is 0.3-1 s of every start,
    while a store already at head needs only the head's name. Files in any other form
    than one `revision = '…'` and one `down_revision = '…'|None` line give None, and
    alembic's ScriptDirectory decides, as it always does when a migration runs.
    """
    parents: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(source), _DOWN.findall(source)
        if not revision and not down:
            continue  # not a revision (the package's __init__.py): alembic skips it too
        if len(revision) != 1 or len(down) != 1:
            return None
        parents[revision[0]] = down[0] or None
    return parents or None


def head_revision() -> str:
    parents = _revision_parents()
    if parents is not None:
        heads = set(parents) - {p for p in parents.values() if p}
        if len(heads) == 1 and all(p is None or p in parents for p in parents.values()):
            return heads.pop()
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return str(head)


def known_revisions() -> set[str]:
    parents = _revision_parents()
    if parents is not None:
        return set(parents)
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def _current_revision(conn: Any) -> str | None:
    """The store's stamp, as alembic's MigrationContext reads it, without importing alembic."""
    if not inspect(conn).has_table(ALEMBIC_TABLE):
        return None
    stamps = conn.execute(sql_text(f"SELECT version_num FROM {ALEMBIC_TABLE}")).scalars().all()
    if len(stamps) > 1:  # several heads: alembic's own error message
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn).get_current_revision()  # type: ignore[no-any-return]
    return str(stamps[0]) if stamps else None


class Store:
    """One opened store: its engines, its bus and its identity as a writer.

    `origin` tags every change this process writes so its own watcher can skip
    them (they were already published in-process after commit).
    """

    def __init__(self, url: str, engine: Engine, *, read_only: bool, schema_version: str | None,
                 busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.url = url
        self.engine = engine
        self.write_engine = (sqlite.writer_engine(engine) if sqlite.is_sqlite_url(url)
                             else pg.writer_engine(engine, busy_timeout_s))
        self.read_only = read_only
        self.schema_version = schema_version
        self.bus = ChangeBus()
        self.origin = uuid.uuid4().hex
        self.login: roles.Login | None = None
        """On PostgreSQL, the database login and its agentdesk level (read once at open); None on SQLite."""

    @property
    def path(self) -> Path | None:
        return sqlite.path_of(self.url)

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A short read transaction; lock and I/O failures become `StoreUnavailable`."""
        try:
            with Session(self.engine) as session, session.begin():
                yield session
        except OperationalError as exc:
            raise StoreUnavailable(describe_operational_error(exc, self.url)) from exc

    def writing_session(self) -> Session:
        if self.read_only:
            raise ReadOnlyStore(f"The store {self.display_name} is open read-only.")
        return Session(self.write_engine)

    @property
    def display_name(self) -> str:
        return str(self.path) if self.path else pg.display(self.url)

    @property
    def is_postgres(self) -> bool:
        return pg.is_postgres_url(self.url)

    def info(self) -> StoreInfo:
        counts: dict[str, int] = {}
        with self.reading() as session:
            for label, row in (("projects", ProjectRow), ("tasks", TaskRow), ("sessions", SessionRow),
                               ("agents", AgentRow), ("runs", RunRow), ("spans", SpanRow),
                               ("approvals", ApprovalRow), ("audit records", AuditRow)):
                query = select(func.count()).select_from(row)
                if row in (ProjectRow, TaskRow, SessionRow, AgentRow, RunRow):  # not a half-imported trace
                    query = query.where(row.id.not_in(select(ImportStagingRow.entity_id)))
                elif row is SpanRow:
                    query = query.where(SpanRow.run_id.not_in(select(ImportStagingRow.entity_id)))
                counts[label] = session.execute(query).scalar_one()
            counts["pending approvals"] = session.execute(
                select(func.count()).select_from(ApprovalRow).where(ApprovalRow.status == "pending")
            ).scalar_one()
        return StoreInfo("agentdesk", self.display_name, self.schema_version, self.read_only, counts)

    def close(self) -> None:
        self.engine.dispose()


def describe_operational_error(exc: DBAPIError, url: str) -> str:
    text = str(exc.orig) if exc.orig is not None else str(exc)
    if pg.is_postgres_url(url):
        return pg.describe_error(text, url)
    name = sqlite.path_of(url) or url
    if "locked" in text or "busy" in text:
        return f"The store {name} is locked by another writer and stayed locked past the busy timeout."
    if "readonly" in text or "read-only" in text:
        return f"The store {name} cannot be written (the file or its folder is read-only)."
    if "not a database" in text or "malformed" in text:
        return f"The store {name} is not a readable SQLite database ({text})."
    return f"The store {name} could not be used: {text}."


def open_store(location: str | None = None, *, create: bool = True, read_only: bool = False,
               busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> Store:
    """Open (and if asked, create or upgrade) an agentdesk store."""
    url = to_url(location or default_store_location())
    if not sqlite.is_sqlite_url(url):
        return _open_server_store(url, create=create, read_only=read_only, busy_timeout_s=busy_timeout_s)
    path = sqlite.path_of(url)
    if path is None:
        raise StoreUnavailable(f"{url} is not a store location agentdesk can open.")
    fresh = not path.exists() or path.stat().st_size == 0
    if fresh:
        if not create or read_only:
            raise NoStore(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        _check_existing_file(path, busy_timeout_s)
    engine = sqlite.create_sqlite_engine(path, read_only=read_only, busy_timeout_s=busy_timeout_s)
    try:
        version = check_schema(engine, url, _migrate(engine, url, upgrade=not read_only), head_revision())
    except OperationalError as exc:
        engine.dispose()
        raise StoreUnavailable(describe_operational_error(exc, url)) from exc
    except StoreUnavailable:
        engine.dispose()
        raise
    return Store(url, engine, read_only=read_only, schema_version=version)


def _open_server_store(url: str, *, create: bool, read_only: bool, busy_timeout_s: float) -> Store:
    if not pg.is_postgres_url(url):
        raise StoreUnavailable(f"{pg.display(url)} is not a store location agentdesk can open "
                               "(a SQLite file path or a postgresql:// URL).")
    engine = pg.create_postgres_engine(url, read_only=read_only)
    try:
        version = _migrate(engine, url, upgrade=create and not read_only)
        with engine.connect() as conn:
            login = roles.current_login(conn)
    except DBAPIError as exc:
        engine.dispose()
        raise StoreUnavailable(describe_operational_error(exc, url)) from exc
    except StoreUnavailable:
        engine.dispose()
        raise
    store = Store(url, engine, read_only=read_only, schema_version=version, busy_timeout_s=busy_timeout_s)
    store.login = login
    return store


def _check_existing_file(path: Path, busy_timeout_s: float) -> None:
    """Refuse, before anything is written, a file that is not an agentdesk store we can use.

    Everything here runs on a read-only probe: even switching the journal mode to
    WAL (which the writable engine does on connect) would change a refused file.
    """
    try:
        if not sqlite.looks_like_sqlite(path):
            raise StoreUnavailable(f"{path} is not a SQLite database, so it cannot be an agentdesk store.")
        conn = sqlite.open_probe(path, busy_timeout_s)
        try:
            tables = set(sqlite.table_names(conn))
            version = sqlite.alembic_version(conn) if ALEMBIC_TABLE in tables else None
        finally:
            conn.close()
    except PermissionError as exc:
        raise StoreUnavailable(f"{path} cannot be read: permission denied.") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{path} is not a readable SQLite database ({exc}).") from exc
    meaningful = tables - NEUTRAL_TABLES
    if meaningful and (version is None or not tables >= SIGNATURE_TABLES):
        shown = ", ".join(sorted(meaningful)[:6]) + (", ..." if len(meaningful) > 6 else "")
        raise StoreUnavailable(
            f"{path} is a SQLite database of another schema (tables: {shown}), not an agentdesk store.")
    _refuse_unknown_revision(version, str(path))


def _refuse_unknown_revision(version: str | None, name: str) -> None:
    if version is not None and version not in known_revisions():
        raise StoreUnavailable(
            f"The store {name} was written by a newer agentdesk (schema {version}); this version "
            f"understands up to {head_revision()}. Nothing was changed.")


def _migrate(engine: Engine, url: str, *, upgrade: bool) -> str | None:
    head = head_revision()
    with engine.connect() as conn:
        current = _current_revision(conn)
    name = str(sqlite.path_of(url) or pg.display(url))
    _refuse_unknown_revision(current, name)
    if current == head:
        return current
    if not upgrade:
        if current is None:
            raise StoreUnavailable(f"{name} has no agentdesk schema yet.")
        return current
    with engine.begin() as conn:
        if pg.is_postgres_url(url):
            # Several processes may open a fresh server store at once: one migrates, the others wait and see.
            conn.execute(sql_text("SELECT pg_advisory_xact_lock(:key)"), {"key": pg.MIGRATION_LOCK})
            current = _current_revision(conn)
            _refuse_unknown_revision(current, name)
            if current == head:
                return head
        from alembic import command

        command.upgrade(alembic_config(conn), "head")
    return head


def own_store(source: object) -> Store | None:
    """The agentdesk store behind a source, or None for another runtime's database.

    Why here and not an isinstance check on the native source: the search and the timeline read take a faster
    path on our own schema, and they sit below the native source in the store's layers (pyproject's contracts).
    """
    store = getattr(source, "store", None)
    return store if isinstance(store, Store) else None
