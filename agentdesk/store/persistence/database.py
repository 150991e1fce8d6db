"""Opening a store: find it, check what it is, migrate it, and hand out transactions.

Opening never damages a file it does not understand: every check that can refuse
runs before anything is written, and a refusal is a `StoreUnavailable` with one
sentence an operator can act on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, inspect, select
from sqlalchemy import text as sql_text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from agentdesk.store.errors import NoStore, ReadOnlyStore, SchemaBehind, ServerUnreachable, StoreUnavailable
from agentdesk.store.paths import default_store_location
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.bus import ChangeBus
from agentdesk.store.persistence.outage import Outage, is_connection_lost, server_name
from agentdesk.store.persistence.postgres import engine as pg
from agentdesk.store.persistence.postgres import roles, upgrading
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
from agentdesk.store.validation import require_regular_file

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent.parent / "migrations"
SIGNATURE_TABLES = frozenset({"agentdesk_meta", "audit_log", "change_log", "alembic_version"})
"""Tables only an agentdesk store has together: a file holding them all (and a schema version) is ours."""
ALEMBIC_TABLE = "alembic_version"
NEUTRAL_TABLES = frozenset({ALEMBIC_TABLE, "sqlite_sequence", "sqlite_stat1", "sqlite_stat4"})
DEFAULT_BUSY_TIMEOUT_S = 5.0
make_private_dirs = sqlite.make_private_dirs
"""Folders agentdesk makes for a store are owner-only (0700); the CLI's `init --parents` uses it too."""


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
        self.outage = Outage(server_name(url) if pg.is_postgres_url(url) else str(self.path or url))
        """Whether this process finds the server gone, and since when (shared by every thread using the store)."""

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
            raise self.unavailable(exc) from exc
        self.outage.back()

    def unavailable(self, exc: DBAPIError) -> StoreUnavailable:
        """The error a failed statement becomes: `ServerUnreachable` (safe to retry) when the server went away."""
        message = describe_operational_error(exc, self.url)
        if self.is_postgres and is_connection_lost(exc):
            return ServerUnreachable(message)
        return StoreUnavailable(message)

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
            audit = inspect(session.connection()).has_table(AuditRow.__tablename__)  # gone: `verify` says so
            for label, row in (("projects", ProjectRow), ("tasks", TaskRow), ("sessions", SessionRow),
                               ("agents", AgentRow), ("runs", RunRow), ("spans", SpanRow),
                               ("approvals", ApprovalRow), ("audit records", AuditRow)):
                if row is AuditRow and not audit:
                    continue
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


INSUFFICIENT_PRIVILEGE = "42501"


def is_refusal(exc: DBAPIError) -> bool:
    """The server refused this login the statement (PostgreSQL's insufficient_privilege): a refusal, as
    `PermissionRefused` is, not an unavailable store. Which statement meets a level just taken away first (a
    function that names the level, or a plain read of a table) is a race; the exit code must not be."""
    return getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE


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
               busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, older_schema: bool = False) -> Store:
    """Open (and if asked, create or upgrade) an agentdesk store.

    A writable open upgrades a store behind head; one that may not (read-only, or a PostgreSQL login that does
    not own the store) is refused with `SchemaBehind`, unless `older_schema`: the caller reads what an older
    schema holds (`verify`, which knows each revision's audit columns)."""
    url = to_url(location or default_store_location())
    if not sqlite.is_sqlite_url(url):
        return _open_server_store(url, create=create, read_only=read_only, busy_timeout_s=busy_timeout_s,
                                  older_schema=older_schema)
    path = sqlite.path_of(url)
    if path is None:
        raise StoreUnavailable(f"{url} is not a store location agentdesk can open.")
    require_regular_file(path, "The store", StoreUnavailable)
    fresh = not path.exists() or path.stat().st_size == 0
    if fresh:
        if not create or read_only:
            raise NoStore(path)
        sqlite.make_private_dirs(path.parent)
        _build_beside(path, busy_timeout_s)
    elif not _check_existing_file(path, busy_timeout_s) and create and not read_only:
        _build_beside(path, busy_timeout_s)  # an empty database: a store whose creation was killed, finished now
    engine = sqlite.create_sqlite_engine(path, read_only=read_only, busy_timeout_s=busy_timeout_s)
    try:
        version = check_schema(engine, url, _migrate(engine, url, upgrade=not read_only, older_schema=older_schema),
                               head_revision(), audit_optional=read_only)
    except OperationalError as exc:
        engine.dispose()
        raise StoreUnavailable(describe_operational_error(exc, url)) from exc
    except StoreUnavailable:
        engine.dispose()
        raise
    return Store(url, engine, read_only=read_only, schema_version=version)


def _open_server_store(url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                       older_schema: bool) -> Store:
    if not pg.is_postgres_url(url):
        raise StoreUnavailable(f"{pg.display(url)} is not a store location agentdesk can open "
                               "(a SQLite file path or a postgresql:// URL).")
    engine = pg.create_postgres_engine(url, read_only=read_only)
    try:
        version = _migrate(engine, url, upgrade=not read_only, create=create, older_schema=older_schema)
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


def _check_existing_file(path: Path, busy_timeout_s: float) -> bool:
    """Refuse, before anything is written, a file that is not an agentdesk store we can use; False when it
    is a SQLite database with no tables at all (nothing to lose: a creation that was killed half-way).

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
    # a store that lost only its audit table is still ours: `check_schema` says so, as tampering (exit 6)
    if meaningful and (version is None or not tables >= SIGNATURE_TABLES - {"audit_log"}):
        shown = ", ".join(sorted(meaningful)[:6]) + (", ..." if len(meaningful) > 6 else "")
        raise StoreUnavailable(
            f"{path} is a SQLite database of another schema (tables: {shown}), not an agentdesk store.")
    _refuse_unknown_revision(version, str(path))
    return bool(tables - NEUTRAL_TABLES) or version is not None


BUILD_MARK = ".init-"
"""A store being created is built as `.NAME.init-PID-RANDOM` beside NAME, then renamed into place."""


def _build_beside(path: Path, busy_timeout_s: float) -> None:
    """Create a whole store at `path` atomically: build it under a temporary name in the same folder (schema,
    migrations, everything in the main file), then put it in place with one rename. A kill at any moment
    leaves either no store at `path` or a whole one; the temporary files of a killed build are removed by the
    next one. When another process put a store there meanwhile, that one is kept and this build discarded."""
    _remove_abandoned_builds(path)
    temp = path.with_name(f".{path.name}{BUILD_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        sqlite.create_private_file(temp)  # 0600 before SQLite sees it: its -wal and -shm inherit the mode
        engine = sqlite.create_sqlite_engine(temp, read_only=False, busy_timeout_s=busy_timeout_s)
        try:
            _migrate(engine, f"sqlite:///{temp}", upgrade=True)
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        except OperationalError as exc:
            raise StoreUnavailable(describe_operational_error(exc, f"sqlite:///{path}")) from exc
        finally:
            engine.dispose()
        with open(temp, "rb+") as handle:  # the main file holds everything now (the WAL was checkpointed)
            os.fsync(handle.fileno())
        _publish(temp, path)
    finally:
        for leftover in (temp, *_companions(temp)):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _companions(path: Path) -> tuple[Path, ...]:
    return tuple(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))


def _publish(temp: Path, path: Path) -> None:
    """Rename the finished build onto `path` if that is still absent or empty (under a lock on the folder,
    so two creators cannot both replace it); a stale WAL beside an empty file belongs to no store and goes."""
    try:
        folder_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # a folder cannot be opened on this system (Windows): the rename is still atomic
        folder_fd = -1
    try:
        with _folder_lock(folder_fd):
            try:
                current = path.stat().st_size
            except FileNotFoundError:
                current = 0
            if current == 0 or not _has_tables(path):
                for stale in _companions(path):
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
                os.replace(temp, path)
            with contextlib.suppress(OSError):
                os.fsync(folder_fd)
    finally:
        if folder_fd >= 0:
            os.close(folder_fd)


def _has_tables(path: Path) -> bool:
    """Whether an existing file holds any table (a file that is not SQLite counts as holding something)."""
    try:
        if not sqlite.looks_like_sqlite(path):
            return True
        conn = sqlite.open_probe(path, 1.0)
        try:
            return bool(set(sqlite.table_names(conn)) - NEUTRAL_TABLES)
        finally:
            conn.close()
    except (OSError, sqlite3.DatabaseError):
        return True


@contextmanager
def _folder_lock(fd: int) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the rename is still atomic
        fd = -1
    if fd < 0:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _remove_abandoned_builds(path: Path) -> None:
    """The temporary files of builds whose process is gone (killed during `init`)."""
    prefix = f".{path.name}{BUILD_MARK}"
    try:
        names = [p for p in path.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return
    for leftover in names:
        pid = leftover.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            leftover.unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _refuse_unknown_revision(version: str | None, name: str) -> None:
    if version is not None and version not in known_revisions():
        raise StoreUnavailable(
            f"The store {name} was written by a newer agentdesk (schema {version}); this version "
            f"understands up to {head_revision()}. Nothing was changed.")


def _migrate(engine: Engine, url: str, *, upgrade: bool, create: bool = True, older_schema: bool = False) -> str | None:
    """The store's revision after bringing it to head when `upgrade` allows (and, with no schema yet, `create`).

    A store behind head that this open may not upgrade (read-only, or on PostgreSQL a login that does not own
    it) is refused with the sentence saying who upgrades it, unless the caller reads older schemas on purpose
    (`older_schema`: `verify`); otherwise the first query of a newer table or column fails in its own words.
    """
    head = head_revision()
    with engine.connect() as conn:
        try:
            current = _current_revision(conn)
        except DBAPIError as exc:
            if not (pg.is_postgres_url(url) and "permission denied" in str(exc.orig)):
                raise
            conn.rollback()
            raise upgrading.unreadable_version(conn, head, url) from exc
    name = str(sqlite.path_of(url) or pg.display(url))
    _refuse_unknown_revision(current, name)
    if current == head:
        return current
    if current is None and not (upgrade and create):
        raise StoreUnavailable(f"{name} has no agentdesk schema yet.")
    if not upgrade:
        if older_schema:
            return current
        assert current is not None
        raise SchemaBehind(current, head, who_upgrades(engine, url))
    with engine.begin() as conn:
        if pg.is_postgres_url(url):
            # Several processes may open a fresh server store at once: one migrates, the others wait and see.
            conn.execute(sql_text("SELECT pg_advisory_xact_lock(:key)"), {"key": pg.MIGRATION_LOCK})
            current = _current_revision(conn)
            _refuse_unknown_revision(current, name)
            if current == head:
                return head
            upgrading.require_may_migrate(conn, current, head, url)
        from alembic import command

        command.upgrade(alembic_config(conn), "head")
    return head


def who_upgrades(engine: Engine, url: str) -> str:
    """The end of SchemaBehind's sentence: the command that upgrades this store, and who may run it."""
    if pg.is_postgres_url(url):
        with engine.connect() as conn:
            return upgrading.owner_runs_init(url, upgrading.store_owner(conn))
    return f"run {upgrading.init_command(str(sqlite.path_of(url) or url))} to upgrade it"


def own_store(source: object) -> Store | None:
    """The agentdesk store behind a source, or None for another runtime's database (or a wrapper around one).

    Why here and not an isinstance check on the native source: the search and the timeline read take a faster
    path on our own schema, and they sit below the native source in the store's layers (pyproject's contracts).
    The class must say so (`OWNS_STORE`): an attribute on the type, so a proxy that forwards attribute lookups
    to a native source is treated like any other source, as an isinstance check would.
    """
    if not getattr(type(source), "OWNS_STORE", False):
        return None
    store = getattr(source, "store", None)
    return store if isinstance(store, Store) else None
