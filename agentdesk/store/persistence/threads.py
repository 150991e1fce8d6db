"""A daemon thread that can be asked to stop: what every follower and schedule in the store runs on.

The change-log watchers (polling a SQLite file, listening on PostgreSQL) and the
housekeeping schedules each run one loop on their own thread for as long as a
store is open. They all need the same few things: start once, sleep in a way a
stop request interrupts at once, stop and join with a bound, and say whether the
thread is alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class StoppableThread:
    """Owns one daemon thread and the event that asks it to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self, target: Callable[[], object]) -> None:
        """Run `target` on a new daemon thread (no-op while one runs)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=target, name=self.name, daemon=True)
        self._thread.start()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when a stop was asked for (the loop should end)."""
        return self._stop.wait(seconds)

    def stop(self, join_s: float = 5.0) -> None:
        """Ask the thread to stop and wait for it up to `join_s` (a thread wedged in I/O is left behind)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=join_s)
            self._thread = None
