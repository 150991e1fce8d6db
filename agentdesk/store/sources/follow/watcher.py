"""The foreign watcher: the shared polling loop driving a `TableFollower`, publishing on the source's bus."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from sqlalchemy import Connection

from agentdesk.store.changes.polling import LoopWatcher, PollLoop
from agentdesk.store.changes.watcher import DEFAULT_POLL_INTERVAL_S
from agentdesk.store.persistence.bus import ChangeBus
from agentdesk.store.sources.follow.follower import TableFollower


class FollowWatcher(LoopWatcher):
    """Primes the follower, then publishes each poll's batch; started on construction."""

    def __init__(self, path: Path | None, follower: TableFollower,
                 reading: Callable[[], AbstractContextManager[Connection]], bus: ChangeBus, *,
                 poll_interval_s: float | None = None) -> None:
        self.follower = follower
        self.bus = bus
        self.last_change_at: float | None = None
        self._reading = reading
        self._loop = PollLoop(path, self.poll_once, interval_s=poll_interval_s or DEFAULT_POLL_INTERVAL_S,
                              name=f"agentdesk-{follower.origin}-watcher", due=follower.due)
        self._loop.start(self._prime)

    def _prime(self) -> None:
        with self._reading() as conn:
            self.follower.prime(conn)

    def poll_once(self) -> int:
        """Read what changed and publish it as one batch; returns its size."""
        with self._reading() as conn:
            changes = self.follower.poll(conn)
        if changes:
            self.last_change_at = time.time()
            self.bus.publish(changes)
        return len(changes)
