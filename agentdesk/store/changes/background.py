"""A store's housekeeping on a daemon thread: the lifecycle every schedule shares.

Pruning the change log and draining the search index both run beside a window
for as long as its store is open, each on its own thread that must start only
when allowed, wake on its own timetable, and stop promptly when the store closes.
Subclasses say what one step does and how long to wait before the next.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Self

from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.threads import StoppableThread


class BackgroundJob(ABC):
    """Calls `tick()` on a daemon thread, waiting the seconds it returns in between, until stopped.

    `tick()` returns None to end the job for good (it can never succeed, e.g. for want of a
    privilege). The first tick waits `first_after_s`, so a window opening reads its data
    before housekeeping competes with other writers for the lock.
    """

    thread_name: ClassVar[str] = "agentdesk-background"

    def __init__(self, store: Store, *, first_after_s: float) -> None:
        self.store = store
        self.first_after_s = first_after_s
        self._thread = StoppableThread(self.thread_name)

    @staticmethod
    def allowed(store: Store) -> bool:
        """Whether this job can ever do its work on `store`; an unallowed job never starts a thread."""
        return not store.read_only

    @abstractmethod
    def tick(self) -> float | None:
        """One step; the seconds to wait before the next, or None to stop."""

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> Self:
        if self.allowed(self.store):
            self._thread.start(self._run)
        return self

    def stop(self) -> None:
        self._thread.stop()

    def _run(self) -> None:
        wait: float | None = self.first_after_s
        while wait is not None and not self._thread.wait(wait):
            wait = self.tick()
