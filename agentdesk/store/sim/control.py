"""What the simulator's threads share: the stop signal, the clock scale and the event record.

Sleeping goes through here so a stop (or the end of the duration) interrupts any
wait at once, and so `speed` scales the simulated work but never the real-time
waits for human decisions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


class Stopped(Exception):
    """The simulator is stopping: unwind, closing what is open."""


@dataclass(frozen=True, slots=True)
class SimEvent:
    """Something a simulated agent did; `tool` and `arguments` make runs comparable across seeds."""

    worker: int
    agent: str
    kind: str
    """run_started, run_finished, tool, approval_requested, approval_decided, sub_agent, outage or failure."""
    tool: str | None = None
    arguments: str | None = None
    """Canonical JSON of the arguments the agent asked for (before any operator edit)."""
    detail: str = ""
    entity_id: str | None = None
    at: float = 0.0


class Control:
    def __init__(self, *, speed: float, duration_s: float | None,
                 on_event: Callable[[SimEvent], None] | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.deadline = None if duration_s is None else time.monotonic() + duration_s
        self.on_event = on_event
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self.events: list[SimEvent] = []
        self.failures: list[str] = []

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def sleep(self, simulated_s: float) -> None:
        """Wait `simulated_s / speed` seconds; raise `Stopped` if the simulator stops meanwhile."""
        if self.pause_or_stop(simulated_s / self.speed):
            raise Stopped

    def pause_or_stop(self, real_s: float) -> bool:
        """Wait up to `real_s` seconds of wall-clock time; True when the simulator is stopping."""
        remaining = self.remaining()
        wait = real_s if remaining is None else min(real_s, remaining)
        return self.stop_event.wait(max(0.0, wait)) or self.stopping

    def emit(self, worker: int, agent: str, kind: str, *, tool: str | None = None,
             arguments: str | None = None,
             detail: str = "", entity_id: str | None = None) -> None:
        event = SimEvent(worker, agent, kind, tool, arguments, detail, entity_id, time.time())
        with self._lock:
            self.events.append(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken printer must not kill an agent thread
                log.exception("simulator event callback failed")

    def snapshot(self) -> tuple[list[SimEvent], list[str]]:
        with self._lock:
            return list(self.events), list(self.failures)

    def failure(self, agent: str, exc: BaseException) -> None:
        log.warning("simulated agent %s hit a store error: %s", agent, exc)
        with self._lock:
            self.failures.append(f"{agent}: {exc}")
        self.emit(-1, agent, "failure", detail=str(exc))
