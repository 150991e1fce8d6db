"""Everything SQLite-specific lives here, so the rest of the store stays portable.

- connection pragmas (WAL, busy timeout, foreign keys, query_only for read-only);
- `BEGIN IMMEDIATE` for write transactions: a deferred transaction that reads and
  then writes fails at once with "database is locked" after another writer
  committed, whatever the busy timeout, so writers take the lock up front;
- `PRAGMA data_version`, the cheap "did anyone else commit?" probe watchers poll;
- who gets the write lock next (`WriterGate`): SQLite has no queue, a waiting
  connection just polls, so without help an operator's decision could poll for
  seconds while runtime threads hand the lock to each other. Runtime writers queue
  (threads on an in-process lock, processes on a file lock: only one of them polls
  SQLite), and step aside while an operator's write is waiting, which it announces with a
  shared `flock` on a small file beside the store (`<store>-wintent`); runtime
  processes take turns on another (`<store>-wqueue`). A lock held by a process is
  released by the kernel when it dies, so a `kill -9` never leaves a stale turn.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no intent announcement, threads still queue
    fcntl = None  # type: ignore[assignment]

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import NullPool, Pool, QueuePool

from agentdesk.store.persistence import payloads

SQLITE_MAGIC = b"SQLite format 3\x00"
IMMEDIATE = "agentdesk_immediate"
BUSY_SLICE_MS = "agentdesk_busy_ms"
"""Execution option: the busy timeout for this one `BEGIN IMMEDIATE` (the caller retries after it)."""
RUNTIME_YIELD_MAX_S = 1.0
"""A runtime write steps aside for a waiting operator write at most this long, then goes ahead anyway
(the announcing process may be stuck; the lock itself still keeps the writes apart)."""


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite")


def path_of(url: str) -> Path | None:
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix:
        return None
    return Path(url[len(prefix):].split("?", 1)[0])


PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and any missing parents, each one agentdesk makes owner-only (0700).

    Folders that already exist keep their mode: we never loosen (or tighten) what someone else made.
    """
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue  # another process made it meanwhile: its mode is its own
        with suppress(OSError):
            os.chmod(made, PRIVATE_DIR)  # mkdir's mode is filtered by the umask; this is the mode we mean


def create_private_file(path: Path) -> None:
    """Make the empty store file owner-only (0600) before SQLite opens it.

    SQLite creates a database's `-wal` and `-shm` files with the mode of the database file,
    so a 0600 store keeps its WAL and index private too; any process that can write the
    file could otherwise decide its own approvals with `sqlite3`. An existing empty file is
    only ever tightened to 0600, never loosened.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE)
    except FileExistsError:
        with suppress(OSError):
            mode = path.stat().st_mode & 0o777
            if mode & ~PRIVATE_FILE:
                os.chmod(path, mode & PRIVATE_FILE)
        return
    os.close(fd)


def looks_like_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


WAL_VERSION_OFFSET = 18
"""Bytes 18 and 19 of a SQLite header: file format write/read version, 2 for WAL (1 for a rollback journal)."""


def is_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode (read from the header: opening it could change the folder)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(WAL_VERSION_OFFSET + 2)
    except OSError:
        return False
    return len(header) == WAL_VERSION_OFFSET + 2 and header[WAL_VERSION_OFFSET] == 2


def wal_without_index(path: Path) -> bool:
    """A WAL file with no `-shm` beside it: a `mode=ro` reader would have to create `-wal`/`-shm`."""
    return is_wal(path) and not path.with_name(path.name + "-shm").exists()


def only_immutable(path: Path) -> bool:
    """Read-only access is possible only with `immutable=1`: WAL, no `-shm`, and a folder we cannot write
    (there `mode=ro` fails with "unable to open database file")."""
    return wal_without_index(path) and not os.access(path.parent, os.W_OK)


def lenient_text(raw: bytes) -> str:
    """TEXT that is not valid UTF-8 (another program wrote bytes) reads with U+FFFD replacement marks."""
    return raw.decode("utf-8", errors="replace")


def create_sqlite_engine(path: Path, *, read_only: bool, busy_timeout_s: float,
                         manage_journal: bool = True, immutable: bool = False) -> Engine:
    """An engine on one SQLite file; read-only opens use the `mode=ro` URI plus query_only.

    `manage_journal=False` is for other runtimes' databases: their journal mode is theirs
    (it persists in the file), so we never change it. `immutable=True` (read-only only) opens with
    `immutable=1`: SQLite then creates no `-wal`/`-shm` beside the file, but sees no later commits.
    """
    timeout_ms = int(busy_timeout_s * 1000)
    immutable = immutable or (read_only and only_immutable(path))

    def connect() -> sqlite3.Connection:
        uri = (f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")) if read_only else f"file:{path}"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False,
                               isolation_level=None)
        conn.text_factory = lenient_text  # one invalid UTF-8 value must not fail the whole query
        payloads.register(conn)  # agentdesk_text(spans.attributes): compressed payloads read as text in SQL
        conn.execute(f"PRAGMA busy_timeout={timeout_ms}")
        conn.execute("PRAGMA foreign_keys=ON")
        if read_only:
            conn.execute("PRAGMA query_only=ON")
        elif manage_journal:
            # WAL lets the GUI read while a runtime writes; it persists, so later opens are cheap.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    # The URL names the file so SQLAlchemy treats it as one (a bare "sqlite://" means :memory: and gets a
    # SingletonThreadPool: every session of a thread would share one connection, so a read nested in another
    # read or in a write fails with "cannot start a transaction within a transaction").
    pool: type[Pool] = NullPool if read_only else QueuePool
    engine = create_engine(f"sqlite:///{path}", creator=connect, poolclass=pool)
    _busy_timeouts[engine] = busy_timeout_s

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        options = conn.get_execution_options()
        if not options.get(IMMEDIATE, False):
            conn.exec_driver_sql("BEGIN")
            return
        slice_ms = options.get(BUSY_SLICE_MS)
        if slice_ms is None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return
        # One short busy wait inside SQLite, then back to the caller's jittered retry; the connection
        # gets its normal timeout back either way (it returns to the pool for readers too).
        conn.exec_driver_sql(f"PRAGMA busy_timeout={int(slice_ms)}")
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            conn.exec_driver_sql(f"PRAGMA busy_timeout={timeout_ms}")

    return engine


_busy_timeouts: WeakKeyDictionary[Engine, float] = WeakKeyDictionary()


def busy_timeout_of(engine: Engine) -> float | None:
    """The busy timeout the store was opened with (`--busy-timeout`), None for a server database."""
    return _busy_timeouts.get(engine)


def writer_engine(engine: Engine) -> Engine:
    return engine.execution_options(**{IMMEDIATE: True})


def open_probe(path: Path, busy_timeout_s: float, *, immutable: bool = False) -> sqlite3.Connection:
    """A dedicated autocommit connection for `data_version` polling (never pooled, never shared)."""
    immutable = immutable or only_immutable(path)
    uri = f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


def data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def alembic_version(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT version_num FROM alembic_version LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def table_names(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
    return [r[0] for r in rows]


class WriterGate:
    """Who may try for the write lock of one store file, within this process and across processes.

    Runtime writes (spans, context, runtime approvals) take `runtime_turn()`: threads of a process
    queue on an in-process lock, processes on an exclusive `flock` of `<store>-wqueue`, so at any
    moment one runtime writer at most polls SQLite, and the rest sleep instead of spending the CPU
    the lock holder needs. The one that polls steps aside while an operator write announces itself
    (`operator()`: a shared `flock` of `<store>-wintent`, held only while that write waits for the
    lock, never while it works). The kernel drops a dead process's `flock`s, so a `kill -9` leaves
    no stale turn or announcement. Without `fcntl` (Windows) only threads queue.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.RLock()
        self._mutex = threading.Lock()
        self._depth = 0
        self._announcers = 0
        self._fds: dict[str, int | None] = {}

    def _fd(self, role: str) -> int | None:
        """One descriptor per role and process, opened once (flock belongs to the open file)."""
        if role not in self._fds:
            self._fds[role] = None
            if fcntl is not None:
                # A read-only folder leaves None: the store cannot be written either, and says so itself.
                with suppress(OSError):
                    self._fds[role] = os.open(self.path.with_name(f"{self.path.name}-{role}"),
                                              os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        return self._fds[role]

    @contextmanager
    def runtime_turn(self, backoff: Any) -> Iterator[None]:
        """Wait (until `backoff`'s deadline) for this process's and then the store's runtime turn."""
        if not self._threads.acquire(timeout=backoff.remaining_s()):
            raise TimeoutError
        try:
            with self._mutex:
                self._depth += 1
                outermost = self._depth == 1
                fd = self._fd("wqueue") if outermost else None
            if fd is not None:
                self._take(fd, backoff)
            try:
                yield
            finally:
                with self._mutex:
                    self._depth -= 1
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            self._threads.release()
            raise
        self._threads.release()

    @staticmethod
    def _take(fd: int, backoff: Any) -> None:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if not backoff.pause():
                    raise TimeoutError from None

    @contextmanager
    def operator(self) -> Iterator[None]:
        """Announce a waiting operator write for the duration of the block (the lock acquisition)."""
        with self._mutex:
            fd = self._fd("wintent")
            if self._announcers == 0 and fd is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)
            self._announcers += 1
        try:
            yield
        finally:
            with self._mutex:
                self._announcers -= 1
                if self._announcers == 0 and fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def operator_waiting(self) -> bool:
        """True while some process (this one included) announces an operator write."""
        with self._mutex:
            fd = self._probe()
            if fd is None:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False

    def _probe(self) -> int | None:
        """A second descriptor on the intent file: flock conflicts between descriptors, even in one process."""
        if "probe" not in self._fds:
            self._fds["probe"] = None
            if self._fd("wintent") is not None:
                with suppress(OSError):
                    self._fds["probe"] = os.open(self.path.with_name(f"{self.path.name}-wintent"),
                                                 os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        return self._fds["probe"]

    def step_aside(self, max_s: float = RUNTIME_YIELD_MAX_S) -> None:
        """Wait (briefly, polling every millisecond) while an operator write is waiting for the lock."""
        give_up = time.monotonic() + max_s
        while self.operator_waiting() and time.monotonic() < give_up:
            time.sleep(0.001)

    def __del__(self) -> None:
        with suppress(Exception):  # also at interpreter exit, when os may already be gone
            for fd in self._fds.values():
                if fd is not None:
                    os.close(fd)


MAX_GATES = 32
"""Gates kept for reuse; an older one closes its files once no unit of work holds it. Two gates on one
file in one process are still correct (flock separates descriptors), so evicting one is always safe."""
_gates: OrderedDict[str, WriterGate] = OrderedDict()
_gates_lock = threading.Lock()


def writer_gate(path: Path) -> WriterGate:
    """The gate of this process for a store file (every Store on the same file shares it)."""
    key = str(path.resolve())
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = WriterGate(Path(key))
            while len(_gates) > MAX_GATES:
                _gates.popitem(last=False)
        else:
            _gates.move_to_end(key)
        return gate
