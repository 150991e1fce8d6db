"""Waiting for the write lock instead of failing: the back-off policy and what it measured.

A writer that finds the store locked does not give up after SQLite's busy timeout:
it tries again after a jittered, growing pause until its deadline has passed:
`WRITE_DEADLINE_S` for runtime writes, the store's busy timeout for an operator's
(store/uow.py `write_deadline`). 30 s is long enough to outlast anything agentdesk itself holds
the lock for (a
runtime transaction lasts milliseconds, a span batch is bounded to a few, an OTLP
import commits trace by trace) and an operator's write in another window, yet
short enough that a store held by a hung foreign process is reported while the
operator is still looking.

Retrying is safe because only taking the lock is retried: `BEGIN IMMEDIATE`
either gets the lock (nothing has been read or written yet) or fails having done
nothing. A failure *after* the body ran is never retried blindly: the unit of work
first checks whether its commit landed (store/uow.py), so an ambiguous commit is
neither lost nor applied twice.

Jitter matters: without it, writers that collided once wake together and collide
again; full jitter (a uniform pause up to the current cap) spreads them out.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError

WRITE_DEADLINE_S = 30.0
"""How long a writer waits for the lock before saying the store stayed locked."""
FIRST_PAUSE_S = 0.001
MAX_PAUSE_S = 0.010
"""The cap keeps a waiting writer polling often enough to slip in between other writers' commits."""
PRIORITY_MAX_PAUSE_S = 0.002
"""An operator's write polls faster still: runtimes step aside for it (see sqlite.WriteIntent)."""


def is_lock_error(exc: BaseException) -> bool:
    """SQLite's busy/locked (and PostgreSQL's lock-not-available / lock_timeout) errors: worth waiting out."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    text = str(orig).lower()
    return "database is locked" in text or "database table is locked" in text or "busy" in text \
        or "lock not available" in text or "due to lock timeout" in text


@dataclass
class Backoff:
    """Full-jitter exponential back-off bounded by a deadline on the monotonic clock."""

    deadline_s: float = WRITE_DEADLINE_S
    first_s: float = FIRST_PAUSE_S
    max_s: float = MAX_PAUSE_S
    rng: random.Random = field(default_factory=random.Random)
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0

    @property
    def waited_s(self) -> float:
        return time.monotonic() - self.started

    def remaining_s(self) -> float:
        return max(0.0, self.deadline_s - self.waited_s)

    def pause(self) -> bool:
        """Sleep before the next attempt; False (without sleeping) once the deadline has passed."""
        remaining = self.remaining_s()
        if remaining <= 0:
            return False
        cap = min(self.max_s, self.first_s * (2 ** min(self.attempts, 16)))
        self.attempts += 1
        time.sleep(min(remaining, self.rng.uniform(0, cap)))
        return True


LockWaitObserver = Callable[[float, bool], None]
"""Called with (seconds waited for the write lock, whether the writer had priority)."""
_observers: list[LockWaitObserver] = []
_observers_lock = threading.Lock()


def observe_lock_waits(observer: LockWaitObserver) -> Callable[[], None]:
    """Register a callback for every write-lock wait (the load bench uses it); returns the unregister."""
    with _observers_lock:
        _observers.append(observer)

    def unregister() -> None:
        with _observers_lock:
            if observer in _observers:
                _observers.remove(observer)

    return unregister


def report_lock_wait(seconds: float, priority: bool) -> None:
    if not _observers:
        return
    with _observers_lock:
        current = list(_observers)
    for observer in current:
        observer(seconds, priority)
