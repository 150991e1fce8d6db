"""The one polling loop that follows a SQLite file other processes commit to.

Both the native change-log watcher and the foreign table follower use it. A
dedicated read-only probe connection polls `PRAGMA data_version`, which moves
only when another connection committed; only then is `read` called. The thread
sleeps on an event between polls (no busy loop). A failing poll (a locked
moment, a replaced file) is logged once as a warning, the probe is reopened and
the interval backs off up to `MAX_BACKOFF_S`; the first good poll after that
logs one recovery line. So a broken database costs a line in the log, not a
traceback every interval.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.threads import StoppableThread

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 2.0


class PollLoop:
    """Calls `read()` from a daemon thread after every foreign commit to `path`.

    `moved` answers "is there news?" when there is no file to probe (a server
    database); `due` may ask for a read although nothing was committed (a deadline
    passed). `healthy` is False until started and whenever the last poll failed.
    """

    def __init__(self, path: Path | None, read: Callable[[], object], *, interval_s: float, name: str,
                 moved: Callable[[], bool] | None = None, due: Callable[[], bool] | None = None) -> None:
        self.path = path
        self.interval_s = interval_s
        self.name = name
        self.healthy = False
        self.failures = 0
        self.polls = 0  # polls that completed: what a test waits on to know the loop ran
        self._read = read
        self._moved = moved
        self._due = due
        self._thread = StoppableThread(name)
        self._probe: sqlite3.Connection | None = None
        self._last_version: int | None = None

    def start(self, prime: Callable[[], object] | None = None, *, read_first: bool = False) -> None:
        """Open the probe, then `prime` (read where the feed stands), then start polling.

        Probe first: a commit landing between the probe and the priming moves
        data_version, so the first poll reads it instead of losing it. With
        `read_first` the first poll reads at once (a replay from an older mark).
        """
        if self._thread.started:
            return
        self._open_probe()
        self._last_version = None if read_first else self._data_version()
        if prime is not None:
            prime()
        self.healthy = True
        self._thread.start(self._run)

    def stop(self) -> None:
        self._thread.stop()
        if self._probe is not None:
            self._probe.close()  # the thread has exited (or is wedged in I/O: closing is still safe)
            self._probe = None
        self.healthy = False

    @property
    def running(self) -> bool:
        return self._thread.running

    def next_wait(self) -> float:
        if not self.failures:
            return self.interval_s
        return min(MAX_BACKOFF_S, self.interval_s * 2 ** min(self.failures, 10))

    def _open_probe(self) -> None:
        """(Re)open the probe; a fresh probe's data_version says nothing yet, so the next poll reads."""
        if self.path is not None and self._probe is None:
            self._probe = sqlite.open_probe(self.path, 5.0)
            self._last_version = None

    def _data_version(self) -> int | None:
        return None if self._probe is None else sqlite.data_version(self._probe)

    def _run(self) -> None:
        while not self._thread.wait(self.next_wait()):
            try:
                self._open_probe()
                self.poll_if_moved()
            except Exception as exc:  # keep watching: a locked or busy moment must not end live updates
                self._failed(exc)
            else:
                if self.failures:
                    log.info("%s recovered after %d failed polls", self.name, self.failures)
                self.failures = 0
                self.healthy = True
                self.polls += 1

    def _failed(self, exc: Exception) -> None:
        self.healthy = False
        self.failures += 1
        if self.failures == 1:
            log.warning("%s: poll failed (%s: %s); retrying with back-off", self.name, type(exc).__name__, exc)
        if self._probe is not None:  # the file may have been replaced or the handle broken
            self._probe.close()
            self._probe = None

    def poll_if_moved(self) -> None:
        """Remember the new data_version only once its changes were read: a failed read is retried."""
        if self._probe is None:
            if self._moved is None or self._moved():
                self._read()
            return
        version = self._data_version()
        if version != self._last_version or (self._due is not None and self._due()):
            self._read()
            self._last_version = version


class Loop(Protocol):
    """What a watcher needs of its loop: `PollLoop` here, or `store.postgres.listener.NotifyLoop`."""

    healthy: bool

    @property
    def running(self) -> bool: ...

    def stop(self) -> None: ...


class LoopWatcher:
    """What every watcher driven by a loop shares: its health, whether it runs, stopping it."""

    _loop: Loop

    @property
    def healthy(self) -> bool:
        return self._loop.healthy

    @healthy.setter
    def healthy(self, value: bool) -> None:  # the `Watcher` protocol declares a plain attribute
        self._loop.healthy = value

    @property
    def running(self) -> bool:
        return self._loop.running

    def stop(self) -> None:
        self._loop.stop()
