"""Store fixtures: a fresh store per test, the runtime API, and a full-content dump.

Qt-free on purpose: the store's tests must run where no display or Qt exists
(the GUI's fixtures live in tests/gui/conftest.py).

The store, bus, command, CLI and race tests run on both backends through one
parametrised `backend` fixture (see `PG_MODULES`): `store_path` is a file on
SQLite and, on PostgreSQL, the URL of a fresh database cloned from a migrated
template on a throwaway server (tests/postgres/server.py). A test that is about
SQLite files only is marked `sqlite_only`. Without a server the PostgreSQL
cases skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import queue
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime

PG_MODULES = frozenset({"test_store_commands", "test_store_runtime", "test_bus", "test_cli", "test_http_gate",
                        "test_audit", "test_store_maintenance", "test_source_seam", "test_notes_store",
                        "test_notes_cli", "test_notes_search", "test_store_asks", "test_ask",
                        "test_run_control", "test_run_control_http", "test_timeline_backends", "test_retype_backends",
                        "test_search_backends", "test_busy_timeout", "test_views", "test_import_backends",
                        "test_skeleton_cache"})
"""test_bad_input is about SQLite files byte for byte; its PostgreSQL faults are tests/postgres/test_faults.py."""
"""Modules whose tests run on SQLite and on PostgreSQL (the GUI tests run once, on SQLite)."""
BACKENDS = ("sqlite", "postgresql")
TEMPLATE_LOCK = 0x61676474  # "agdt": the advisory lock under which a worker migrates its template database


CRASH_DIR_ENV = "AGENTDESK_TEST_CRASH_DIR"
"""Where each pytest-xdist worker writes faulthandler's report, so a crashed worker's stack reaches the log."""


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job (`cmd &`, nohup) with Ctrl-C ignored, and an ignored signal stays ignored
    # across exec: the CLI processes the tests start would ignore the SIGINT that stands for an operator's Ctrl-C
    # (every "exit 130" test timed out in a stress run started from a script). A handler, unlike SIG_IGN, is
    # reset to the default at exec, so the children start as a terminal would start them.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line("markers", "sqlite_only: about SQLite files; not run against PostgreSQL")
    config.addinivalue_line("markers", "postgres_only: about the server (its index, its locks); not run on SQLite")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault(CRASH_DIR_ENV, tempfile.mkdtemp(prefix="agentdesk-test-crashes-"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports and the collection made lives for the whole session: out of the cyclic collector's sight.

    A full collection walks every object the collector tracks, some 300,000 after collecting the suite, and
    `qt_objects_die_on_the_gui_thread` runs one after each Qt test (0.2 s of CPU each, 250 tests); frozen, it
    walks only what the test made. Frozen objects are still freed when their last reference goes."""
    gc.collect()
    gc.freeze()


def pytest_sessionstart(session: pytest.Session) -> None:
    """A worker's fatal-error report goes to a file of its own (xdist shows only "worker crashed")."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    folder = os.environ.get(CRASH_DIR_ENV)
    if worker and folder:
        report = open(Path(folder) / f"{worker}.log", "w")  # noqa: SIM115 - open for the process's life
        faulthandler.enable(file=report, all_threads=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _sqlite_template is not None:
        shutil.rmtree(_sqlite_template.parent, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print every crashed worker's stack (the Python frames of each thread at the fault)."""
    folder = os.environ.get(CRASH_DIR_ENV)
    if os.environ.get("PYTEST_XDIST_WORKER") or not folder:
        return
    for report in sorted(Path(folder).glob("*.log")):
        text = report.read_text(errors="replace").strip()
        if text:
            terminalreporter.section(f"fatal error in worker {report.stem}")
            terminalreporter.write_line(text)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("sqlite_only"):
        return
    if metafunc.definition.get_closest_marker("postgres_only"):
        metafunc.parametrize("backend", ("postgresql",), indirect=True)
    elif metafunc.module.__name__.rsplit(".", 1)[-1] in PG_MODULES:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


class PgLocation(str):
    """A PostgreSQL store's URL where tests expect a store path: `str(store_path)` is the URL."""


@dataclass
class PgCluster:
    """The session's PostgreSQL server and its migrated template database."""

    url: str
    root: Path | None = None
    bin_dir: Path | None = None
    template: str = ""
    made: list[str] = field(default_factory=list)
    undropped: list[str] = field(default_factory=list)
    _to_drop: queue.SimpleQueue[str | None] = field(default_factory=queue.SimpleQueue)
    _dropper: threading.Thread | None = None
    _ready: queue.Queue[str | BaseException] = field(default_factory=lambda: queue.Queue(maxsize=1))
    _maker: threading.Thread | None = None
    _stop_making: threading.Event = field(default_factory=threading.Event)

    def database_url(self, name: str) -> str:
        base, _, query = self.url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def admin(self) -> object:
        import psycopg

        from agentdesk.store.persistence.postgres.engine import libpq_url
        return psycopg.connect(libpq_url(self.url), autocommit=True)

    def prepare(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.template = f"agentdesk_template_{worker}_{os.getpid()}"
        with self.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.template}"')
            # One worker migrates at a time: the level roles are the cluster's, not the database's, and two
            # workers creating them at once on a fresh server collide ("agentdesk_viewer already exists").
            conn.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK,))
            try:
                open_store(self.database_url(self.template)).close()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK,))

    def fresh_database(self) -> str:
        """A clean, migrated database: CREATE DATABASE ... TEMPLATE is a file copy, far faster than migrating.

        The copy still takes about 0.3 s (a migrated database is many files), so a thread of this worker's
        makes the next one while the test that took the last runs (`_make_ahead`): the test starts at once."""
        if self._maker is None:
            self._maker = threading.Thread(target=self._make_ahead, name="make test databases", daemon=True)
            self._maker.start()
        made = self._ready.get(timeout=300)
        if isinstance(made, BaseException):
            raise made
        return self.database_url(made)

    def _create(self) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self.made.append(name)
        return name

    def _make_ahead(self) -> None:
        """Keep one database ready beyond the one being taken; stop (dropping what was made) at the end."""
        while not self._stop_making.is_set():
            try:
                made: str | BaseException = self._create()
            except Exception as exc:  # the waiting test raises it
                made = exc
            while not self._stop_making.is_set():
                try:
                    self._ready.put(made, timeout=0.2)
                    break
                except queue.Full:
                    continue
            else:
                if isinstance(made, str):
                    self.drop_later(self.database_url(made))

    def stop_making(self) -> None:
        """End `_make_ahead` and drop the databases it made that no test took."""
        if self._maker is None:
            return
        self._stop_making.set()
        self._maker.join()
        self._maker = None
        while not self._ready.empty():
            made = self._ready.get_nowait()
            if isinstance(made, str):
                self.drop_later(self.database_url(made))

    def drop(self, url: str) -> None:
        with self.admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP DATABASE IF EXISTS "{_database_name(url)}" WITH (FORCE)')

    def drop_later(self, url: str) -> None:
        """Drop a finished test's database on a thread of this worker's, while the next test runs.

        Dropping (a connection, ending the test's sessions, removing the files) costs a few tenths of a second
        the next test need not wait for; `finish_drops` waits for them all at the end of the session."""
        if self._dropper is None:
            self._dropper = threading.Thread(target=self._drop_queued, name="drop test databases", daemon=True)
            self._dropper.start()
        self._to_drop.put(_database_name(url))

    def _drop_queued(self) -> None:
        with self.admin() as conn:  # type: ignore[attr-defined]
            while (name := self._to_drop.get()) is not None:
                try:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except Exception as exc:  # reported at the end of the session (finish_drops)
                    self.undropped.append(f"{name}: {exc}")

    def finish_drops(self) -> None:
        if self._dropper is not None:
            self._to_drop.put(None)
            self._dropper.join()
            self._dropper = None


def _database_name(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[1]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """$AGENTDESK_TEST_PG (exported by .ci/run and ./dev test), else a server started for this session."""
    from tests.postgres import server

    url = os.environ.get(server.URL_ENV)
    bin_dir = server.find_bin_dir()
    reason = ""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install 'agentdesk[postgres]')"
    if not reason and not url and bin_dir is None:
        reason = f"no PostgreSQL server: set {server.URL_ENV} or install PostgreSQL (or set PG_BIN)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}")
        pytest.skip(reason)
    root = Path(os.environ[server.DIR_ENV]) if url and os.environ.get(server.DIR_ENV) else None
    owned = not url
    if not url:
        assert bin_dir is not None
        root, url = server.start(bin_dir)
    cluster = PgCluster(url, root, bin_dir)
    try:
        cluster.prepare()
        yield cluster
    finally:
        cluster.stop_making()
        cluster.finish_drops()
        if owned and root is not None and bin_dir is not None:
            server.stop(bin_dir, root)
        else:
            for name in (cluster.template,):
                cluster.drop(cluster.database_url(name))
    assert not cluster.undropped, f"test databases left behind: {cluster.undropped}"


@pytest.fixture(autouse=True)
def qt_objects_die_on_the_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a test that uses Qt, Python's cyclic collector runs only here, on the GUI thread, at teardown.

    A pyqtgraph view left over from one test was freed by the cyclic garbage collector in the middle of a
    later test, killing the worker with a segmentation fault (seen under pytest-xdist, twice). The collector
    runs in whichever thread happens to allocate: a store runner's or the change watcher's thread. Qt
    objects must be destroyed on the thread that owns them (pyqtgraph's `GarbageCollector` exists for this
    reason, and the app uses it: gui/window/app.py). So while a Qt test runs the automatic collector is
    off, and at its end every top-level window it left is closed and the collector runs once, here.
    Widgets are closed, not deleted: a store call still answering must find its widgets alive.
    """
    if "qapp" not in request.fixturenames:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        widgets = sys.modules.get("PySide6.QtWidgets")
        if widgets is not None and widgets.QApplication.instance() is not None:
            for widget in widgets.QApplication.topLevelWidgets():
                if widget.isVisible():
                    widget.close()
            widgets.QApplication.processEvents()
        gc.collect()
        gc.freeze()  # what outlived its test (modules imported on first use, caches) is not walked again
        if was_enabled:
            gc.enable()


@pytest.fixture(autouse=True)
def audit_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Audit keys and anchors (store/audit/keys.py) go to a folder of each test's own, never the user's."""
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_path(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Path:
    if backend == "sqlite":
        return tmp_path / "agentdesk.sqlite"
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    url = cluster.fresh_database()
    request.addfinalizer(lambda: cluster.drop_later(url))
    return PgLocation(url)  # type: ignore[return-value]


_sqlite_template: Path | None = None


def sqlite_template() -> Path:
    """A migrated, empty SQLite store, built once per process: SQLite's twin of `PgCluster`'s template database.

    Running every migration takes about half a second; copying the finished file takes milliseconds, and the
    store fixtures (`store`, the view tests' `world`, ...) and the hypothesis examples that need a fresh store
    start from it (`prebuilt`). Building a store from nothing is still tested where it is the point
    (tests/migrations, first run, `init`, kill -9 during init). Removed at the end of the session.
    """
    global _sqlite_template
    if _sqlite_template is None:
        folder = Path(tempfile.mkdtemp(prefix="agentdesk-sqlite-template-"))
        with pytest.MonkeyPatch.context() as patch:  # whatever creating a store writes to its config stays here
            patch.setenv("AGENTDESK_CONFIG_DIR", str(folder / "config"))
            open_store(str(folder / "template.sqlite")).close()
        _sqlite_template = folder / "template.sqlite"
    return _sqlite_template


def prebuilt(location: Path) -> Path:
    """`location` holding a fresh store, as `open_store` would build it: on SQLite a copy of the template
    (`sqlite_template`) when nothing is there yet; a PostgreSQL location is already a migrated clone."""
    if isinstance(location, PgLocation) or Path(location).exists():
        return location
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(sqlite_template(), path)  # with its mode: 0600, as open_store creates a store
    conn = sqlite3.connect(path)
    try:
        with conn:  # an identity of its own, as each store built from nothing has: its own audit key and anchor
            conn.execute("UPDATE agentdesk_meta SET value = ? WHERE key = 'store_id'", (uuid.uuid4().hex,))
    finally:
        conn.close()
    return location


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    opened = open_store(str(prebuilt(store_path)))
    yield opened
    opened.close()


@pytest.fixture
def source(store: Store) -> NativeSource:
    return NativeSource(store)


@pytest.fixture
def rt(store: Store) -> AgentRuntime:
    return AgentRuntime(store)


def dump(path: Path) -> list[str]:
    """Every row of every table, as SQL: two equal dumps mean two equal databases."""
    if isinstance(path, PgLocation):
        return _dump_postgres(str(path))
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


class RawConnection:
    """A bare DB-API connection to either backend, taking sqlite3's `?` placeholders (tests that tamper)."""

    def __init__(self, path: Path) -> None:
        self.postgres = isinstance(path, PgLocation)
        if self.postgres:
            import psycopg

            from agentdesk.store.persistence.postgres.engine import libpq_url
            self._conn: object = psycopg.connect(libpq_url(str(path)))
        else:
            self._conn = sqlite3.connect(path)

    def execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> object:
        if self.postgres:
            return self._conn.execute(sql.replace("?", "%s"), tuple(params))  # type: ignore[attr-defined]
        return self._conn.execute(sql, params)  # type: ignore[attr-defined]

    def commit(self) -> None:
        self._conn.commit()  # type: ignore[attr-defined]

    def close(self) -> None:
        self._conn.close()  # type: ignore[attr-defined]


def raw_connect(path: Path) -> RawConnection:
    return RawConnection(path)


def _dump_postgres(url: str) -> list[str]:
    """Every row of every table in a stable order (PostgreSQL has no iterdump)."""
    from sqlalchemy import create_engine, inspect, text

    from agentdesk.store.persistence.postgres.engine import normalise
    engine = create_engine(normalise(url))
    try:
        lines: list[str] = []
        with engine.connect() as conn:
            for table in sorted(inspect(conn).get_table_names()):
                rows = conn.execute(text(f'SELECT * FROM "{table}"')).all()
                lines += sorted(f"{table}: {tuple(row)!r}" for row in rows)
        return lines
    finally:
        engine.dispose()


@dataclass(frozen=True)
class World:
    project: str
    task: str
    session: str
    agent: str
    sub_agent: str
    run: str
    groups: tuple[str, ...]
    items: tuple[str, ...]
    approval: str


@pytest.fixture
def world(rt: AgentRuntime) -> World:
    """Project → task → session → agent (and a sub-agent) → run; three context groups; one approval."""
    pid = rt.create_project("Payments")
    tid = rt.create_task(pid, "Fix the flaky test")
    sid = rt.create_session(tid, "Session 1")
    aid = rt.create_agent(sid, "planner", "model-a")
    sub = rt.create_agent(sid, "coder", "model-b", parent_agent_id=aid)
    rid = rt.start_run(aid, "Investigate")
    groups, items = [], []
    for kind, contents in (("turn", ["system prompt", "user asks"]),
                           ("tool", ['{"tool": "read"}', "file contents " * 20]),
                           ("turn", ["assistant answers"])):
        gid = rt.new_turn_group(aid, kind)
        groups.append(gid)
        items += [rt.append_context(aid, gid, "message", "user", text) for text in contents]
    approval = rt.request_approval(rid, "shell", {"cmd": "ls"})
    return World(pid, tid, sid, aid, sub, rid, tuple(groups), tuple(items), approval)
