"""Opening a PostgreSQL store: URL spelling, the driver check, the engine, and error sentences.

The driver (psycopg 3) is an optional extra: a PostgreSQL URL without it must
say what to install, in one sentence, instead of an ImportError traceback.
Connection failures (wrong password, unknown host, server down) are turned into
one sentence naming the server, never the password.
"""

from __future__ import annotations

import importlib.util
import weakref
from typing import Any
from urllib.parse import unquote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from agentdesk.store.errors import StoreUnavailable

SCHEMES = ("postgresql", "postgres")
DRIVER = "psycopg"
CONNECT_TIMEOUT_S = 5
INSTALL_HINT = "pip install 'agentdesk[postgres]'"


def is_postgres_url(url: str) -> bool:
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    return "://" in url and scheme in SCHEMES


def normalise(url: str) -> str:
    """`postgres://` and `postgresql://` (libpq spellings) become SQLAlchemy's psycopg 3 URL."""
    scheme, rest = url.split("://", 1)
    base = scheme.split("+", 1)[0]
    return f"postgresql+{DRIVER}://{rest}" if base in SCHEMES else url


def libpq_url(url: str) -> str:
    """The same server as a libpq conninfo URL (for psycopg connections outside SQLAlchemy)."""
    return make_url(normalise(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def display(url: str) -> str:
    """The URL as shown to people: the password replaced by ***."""
    try:
        shown = make_url(normalise(url)).set(drivername="postgresql").render_as_string(hide_password=True)
        return unquote(shown)
    except Exception:  # an unparseable URL is shown as given (it holds no parsed password)
        return url


def require_driver(url: str) -> None:
    if importlib.util.find_spec(DRIVER) is None:
        raise StoreUnavailable(
            f"The store {display(url)} is a PostgreSQL server, which needs the psycopg driver: "
            f"install it with {INSTALL_HINT}.")


def create_postgres_engine(url: str, *, read_only: bool) -> Engine:
    """A pooled engine; read-only opens make every transaction READ ONLY on the server itself."""
    require_driver(url)
    connect_args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "agentdesk"}
    if read_only:
        connect_args["options"] = "-c default_transaction_read_only=on"
    engine = create_engine(normalise(url), pool_pre_ping=True, connect_args=connect_args)
    _settings[engine] = {"TIME ZONE": "'UTC'"}

    @event.listens_for(engine, "checkout")
    def _settle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        wanted = "; ".join(f"SET {name} {'' if name == 'TIME ZONE' else '= '}{value}"
                           for name, value in _settings.get(engine, {}).items())
        if record.info.get(_SETTLED) == wanted:
            return
        dbapi_conn.autocommit = True  # the session's settings, outside a transaction: no BEGIN, no COMMIT
        try:
            dbapi_conn.execute(wanted)
        finally:
            dbapi_conn.autocommit = False
        record.info[_SETTLED] = wanted

    return engine


_settings: weakref.WeakKeyDictionary[Engine, dict[str, str]] = weakref.WeakKeyDictionary()
"""Each engine's session settings, applied to a connection when it is checked out with other ones than these
(a new one, or one opened before `honour_busy_timeout`): one simple-protocol query, one round trip. They were
set on connect, each with its own transaction (BEGIN, SET, COMMIT: six round trips for two settings), and the
pool was emptied at open to reach the connections opened before: the timeline's first read after opening a
store paid a new server process, those round trips and its cold catalog caches (1.65-1.77x SQLite's time,
issue 21), where the connection the open had used was there, warm."""
_SETTLED = "agentdesk_settings"


def describe_error(text: str, url: str) -> str:
    """One sentence for a server-side failure, from the driver's message."""
    name = display(url)
    first = text.strip().splitlines()[0] if text.strip() else text
    lowered = text.lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        return f"The PostgreSQL server for {name} refused the login: wrong user name or password."
    if "could not translate host name" in lowered or "name or service not known" in lowered:
        return f"The PostgreSQL server for {name} cannot be found: unknown host."
    if "connection refused" in lowered or "no such file or directory" in lowered \
            or "is the server running" in lowered or "timeout expired" in lowered:
        return f"The PostgreSQL server for {name} is not answering: is it running and reachable?"
    if "database" in lowered and "does not exist" in lowered:
        return f"The PostgreSQL server for {name} has no such database; create it first ({first})."
    if "permission denied" in lowered or "insufficient privilege" in lowered:
        return f"The login used for {name} may not do that ({first})."
    if "terminating connection" in lowered or "server closed the connection" in lowered \
            or "connection is closed" in lowered or "consuming input failed" in lowered:
        return f"The connection to {name} was lost; nothing of the interrupted write was kept ({first})."
    if "lock timeout" in lowered:
        return f"The store {name} is locked by another writer and stayed locked past the busy timeout."
    if "read-only transaction" in lowered:
        return f"The store {name} is open read-only."
    return f"The store {name} could not be used: {first}."

MIGRATION_LOCK = 0x61676D31
"""pg_advisory_xact_lock key ("agm1") serialising concurrent migrations of one server store."""

WRITER_LOCK = 0x61677731
"""The advisory key writers took before migration 0012 (kept for the red-team tests: holding it stalls nobody now)."""
RUNTIME_LOCK = 0x61677271
"""The advisory key runtime writers queued on before migration 0012 (likewise only for tests)."""
WRITER = "agentdesk_pg_writer"
RUNTIME_QUEUE = "agentdesk_pg_runtime_queue"
"""Execution option (store/uow.py sets it for runtime writes): queue among runtime writers first.

A runtime writer's turn (`agentdesk_writer_turn(true)`, migration 0012) locks the row of
`agentdesk_runtime_queue` before the writers' lock, so at most one runtime writer waits beside the operators:
a decision waits for the transaction in progress and at most one more, never for the whole queue."""
TURN_SQL = "SELECT public.agentdesk_writer_turn({runtime})"
"""The writers' queue is an EXCLUSIVE lock on a table no login may lock itself (no grant), taken only through
this SECURITY DEFINER function, which agents and operators may call and viewers may not: unlike the public
advisory locks it replaces, a viewer cannot take it and stall every writer. A table lock is granted in queue
order, as the advisory lock was."""


_busy_timeouts: weakref.WeakKeyDictionary[Engine, float] = weakref.WeakKeyDictionary()


def busy_timeout_of(engine: Engine) -> float | None:
    """The busy timeout a server store was opened with: how long a person's write waits for the writers' turn."""
    return _busy_timeouts.get(engine)


def honour_busy_timeout(engine: Engine, timeout_ms: int) -> None:
    """Every statement of this engine's connections waits at most the busy timeout for a lock, reads too.

    The writers' turn had it (`SET LOCAL` below), but a statement blocked elsewhere waited for ever: a
    decision behind a row another transaction holds, a read behind a table another login locked. A
    decision waited 33 s with `--busy-timeout 5` (issue 21). Now the server cancels the wait with
    "canceling statement due to lock timeout", the unit of work retries until its deadline (`uow.py`),
    and the failure is one sentence (`describe_error`). Not a `statement_timeout`: a long read (an
    export of a million spans) is not a wait. Applied when a connection is next checked out (`_settle`):
    the ones the migration and the login check used get it after them, not during (a migration may wait on
    another process's migration for longer than any busy timeout).
    """
    _settings.setdefault(engine, {})["lock_timeout"] = str(int(timeout_ms))


def writer_engine(engine: Engine, busy_timeout_s: float) -> Engine:
    """Write transactions take the writers' turn up front, as SQLite's BEGIN IMMEDIATE does.

    Why serialise writers on a server: the audit chain appends to the newest record and
    the change log is read past a high-water mark; with two writers interleaved, one
    chain would fork and a reader could pass a lower seq that commits later. Writes are
    operator-sized, so one at a time costs little; waiting past the busy timeout fails
    like a locked SQLite file does.
    """
    timeout_ms = int(busy_timeout_s * 1000)
    _busy_timeouts[engine] = busy_timeout_s
    honour_busy_timeout(engine, timeout_ms)

    @event.listens_for(engine, "begin")
    def _take_writer_turn(conn: Any) -> None:
        options = conn.get_execution_options()
        if options.get(WRITER, False):
            runtime = "true" if options.get(RUNTIME_QUEUE, False) else "false"
            # one simple-protocol query (no parameters), so one round trip: a write paid two here, and an
            # import of small traces pays this once per transaction (issue 21)
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {timeout_ms}; {TURN_SQL.format(runtime=runtime)}")

    return engine.execution_options(**{WRITER: True})
