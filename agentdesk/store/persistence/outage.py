"""Riding out a lost database server: what counts as "the server went away", and waiting for it to come back.

A PostgreSQL server restarts (an upgrade, a failover, `pg_ctl restart`) or stops for a while. An agent
must not crash for that, and an operator must be told once, not flooded: every thread of one process
that uses one store shares one `Outage`, which notes the first failure (one line, on the
`agentdesk.outage` logger, which Python prints on stderr when nothing else is configured:
"PostgreSQL at HOST unreachable since 12:03:04, retrying"), and one line when the server is back.

What may be retried is decided where the write is, not here: a call is retried only after it raised
`ServerUnreachable`, which the unit of work raises only when nothing of the call was applied (the
connection could not be had, the transaction broke before its commit, or the commit was looked up
afterwards and is not there: store/uow.py). A commit whose fate is unknown is `CommitUnknown`, never
retried blindly.

Back-off: 0.1 s doubling to 2 s (with a little jitter so many agents do not knock at once), so a
restart of a second or two costs an agent about that, and a long stop costs the server one attempt
per agent every 2 s.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import parse_qs

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from agentdesk.store.errors import ServerUnreachable

log = logging.getLogger("agentdesk.outage")

T = TypeVar("T")

FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 2.0
RIDE_OUT_S = 600.0
"""How long an agent's call waits for a lost server (the client library and the simulator): ten minutes
outlasts a restart, a failover and a long maintenance stop; a server gone longer is reported."""
FLAP_S = 10.0
"""A failure this soon after the server came back is the same outage (no second line): a restarting server
accepts some connections and refuses others for a moment."""
COMMIT_CHECK_S = 30.0
"""How long a unit of work whose commit broke waits for the server to say whether it landed, at least."""

LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down); class 08 is connection too."""
LOST_TEXT = ("terminating connection", "server closed the connection", "connection is closed",
             "consuming input failed", "connection refused", "no such file or directory", "is the server running",
             "the database system is", "connection failed", "could not connect", "connection to server",
             "ssl syscall", "broken pipe", "connection reset", "the connection is lost", "timeout expired")


def is_connection_lost(exc: BaseException) -> bool:
    """Whether a driver error says the server went away (rather than refusing the statement)."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    state = str(getattr(orig, "sqlstate", None) or "")
    if state in LOST_STATES or state.startswith("08"):
        return True
    if state:  # the server answered with a code: it is there
        return False
    text = str(orig).lower()
    return any(part in text for part in LOST_TEXT)


def server_name(url: str) -> str:
    """The server as people name it: host[:port], or the socket folder of a local server."""
    try:
        parsed = make_url(url)
    except Exception:  # an unparseable URL: say "the server" rather than fail while reporting a failure
        return "the server"
    host = parsed.host
    if not host:
        query = parse_qs(url.split("?", 1)[1]) if "?" in url else {}
        given = parsed.query.get("host") or query.get("host", [""])[0]
        host = given if isinstance(given, str) else (given[0] if given else "")
    host = host or "localhost"
    return f"{host}:{parsed.port}" if parsed.port else host


def clock_time(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def outage_line(server: str, since: float, kind: str = "PostgreSQL") -> str:
    """The one line a lost server is, everywhere: stderr, the status bar, `agentdesk watch`."""
    return f"{kind} at {server} unreachable since {clock_time(since)}, retrying"


def sleep(seconds: float) -> bool:
    """A plain pause that never gives up early (the default for `RideOut.pause`)."""
    time.sleep(seconds)
    return False


@dataclass(frozen=True)
class RideOut:
    """How an agent waits for a lost server: at most `deadline_s`, pausing with `pause(seconds)`, which may
    say True to give up at once (the simulator stopping)."""

    deadline_s: float = RIDE_OUT_S
    pause: Callable[[float], bool] = sleep


NO_RIDE_OUT = RideOut(0.0)
"""Report a lost server at once: people's commands and windows, which say so and let the person retry."""


class Pauses:
    """0.1 s doubling to 2 s, with ±20 % jitter."""

    def __init__(self, first_s: float = FIRST_PAUSE_S, max_s: float = MAX_PAUSE_S) -> None:
        self._next = first_s
        self._max = max_s

    def next(self) -> float:
        pause = self._next * random.uniform(0.8, 1.2)
        self._next = min(self._max, self._next * 2)
        return min(pause, self._max)


class Outage:
    """One store's server as this process last found it: reachable, or unreachable since when."""

    def __init__(self, server: str, *, kind: str = "PostgreSQL", notice: Callable[[str], object] | None = None) -> None:
        self.server = server
        self.kind = kind
        self.since: float | None = None
        """Wall-clock time of the first failure of the current outage; None while the server answers."""
        self.outages = 0
        self._notice = notice or log.warning
        self._lock = threading.Lock()
        self._noticed: float | None = None
        """`since` of the last outage announced, and when it ended: a failure soon after is the same outage."""
        self._back_at = 0.0
        self._back_said: float | None = None

    @property
    def line(self) -> str | None:
        since = self.since
        return None if since is None else outage_line(self.server, since, self.kind)

    def lost(self) -> None:
        """A call found the server gone. The second failure of an outage says so, once for every thread: a single
        one is often a session the server ended (a person's turn ends an agent's stuck write), over at the retry."""
        with self._lock:
            if self.since is None:
                now = time.time()
                if self._noticed is not None and now - self._back_at < FLAP_S:
                    self.since = self._noticed  # a server starting up answers one connection, refuses the next
                else:
                    self.since = now
                return
            if self._noticed == self.since:
                return
            self._noticed = self.since
            self.outages += 1
            line = outage_line(self.server, self.since, self.kind)
        self._notice(line)

    def back(self) -> None:
        """A call reached the server: an outage in progress is over (said once per outage announced)."""
        if self.since is None:
            return
        with self._lock:
            since, self.since = self.since, None
            self._back_at = time.time()
            say = since is not None and since == self._noticed and self._back_said != since
            self._back_said = since if say else self._back_said
        if say and since is not None:
            log.warning("%s at %s is back after %.1f s", self.kind, self.server, self._back_at - since)

    def ride_out(self, call: Callable[[], T], policy: RideOut) -> T:
        """`call()`, again after a pause whenever it raises `ServerUnreachable`, until the policy gives up."""
        give_up = time.monotonic() + policy.deadline_s
        pauses = Pauses()
        while True:
            try:
                result = call()
            except ServerUnreachable:
                if policy.deadline_s <= 0:
                    raise
                self.lost()
                pause = pauses.next()
                if time.monotonic() + pause > give_up or policy.pause(pause):
                    raise
                continue
            self.back()
            return result
