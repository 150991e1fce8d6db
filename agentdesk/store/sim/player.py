"""The live simulator: several agents working on several projects, in real time.

Each agent is one thread writing through `AgentRuntime`, so everything it does
reaches other processes through the change log and this process through the
bus, exactly like a real runtime. Content is deterministic per seed (one Random
per agent, derived from the seed); timing is wall-clock and may vary.

    sim = Simulator(store, agents=3, seed=7, duration_s=60).start()
    ...
    sim.stop()
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.outage import RIDE_OUT_S, RideOut
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sim.content import ContentGenerator
from agentdesk.store.sim.control import Control, SimEvent
from agentdesk.store.sim.episode import AgentWorker
from agentdesk.store.sim.leftovers import close_gone_runs

__all__ = ["SimEvent", "Simulator"]
log = logging.getLogger(__name__)


class Simulator:
    """Plays `agents` agents until `duration_s` passes (None: until `stop()`).

    `speed` divides every simulated duration (model calls 0.5 to 3 s, tools 0.1 to 2 s at
    speed 1); approval deadlines stay in real seconds because humans decide them.
    `approval_rate` is the share of risky tool calls (write, shell, SQL, e-mail) that
    ask a human first; `error_rate` the share of tool calls that fail.
    """

    def __init__(self, store: Store, *, agents: int = 3, seed: int = 0, duration_s: float | None = None,
                 approval_timeout_s: float = 120.0, speed: float = 1.0, approval_rate: float = 0.5,
                 error_rate: float = 0.08, on_event: Callable[[SimEvent], None] | None = None) -> None:
        if agents < 1:
            raise ValueError("the simulator needs at least one agent")
        self.store = store
        self.agents = agents
        self.seed = seed
        self.duration_s = duration_s
        self.approval_timeout_s = approval_timeout_s
        self.speed = speed
        self.approval_rate = approval_rate
        self.error_rate = error_rate
        self.on_event = on_event
        self.control = Control(speed=speed, duration_s=duration_s, on_event=on_event)
        self.project_ids: list[str] = []
        self.closed_leftovers: list[str] = []
        """Waiting runs of gone agents this simulator closed when it started (store/sim/leftovers.py)."""
        self._threads: list[threading.Thread] = []
        self._finished: list[threading.Event] = []

    def start(self) -> Simulator:
        """Create the projects, then start one thread per agent (none once stopping); returns at once."""
        if self._threads:
            raise RuntimeError("this simulator was already started")
        self.control = Control(speed=self.speed, duration_s=self.duration_s, on_event=self.on_event)
        ride_out = RideOut(RIDE_OUT_S, self.control.pause_or_stop)  # a lost server is waited out, a stop is not
        runtime = AgentRuntime(self.store, actor="simulator", ride_out=ride_out)
        self.closed_leftovers = close_gone_runs(runtime)  # what a simulator that died while waiting left behind
        setup = ContentGenerator(random.Random(f"agentdesk-sim:{self.seed}:setup"))
        count = max(1, min(4, (self.agents + 1) // 2))
        self.project_ids = [runtime.create_project(setup.project_name()) for _ in range(count)]
        for index in range(self.agents):
            if self.control.stopping:  # the duration ended (or stop() came) while threads were starting
                break
            worker = AgentWorker(
                index, AgentRuntime(self.store, actor="simulator", ride_out=ride_out), self.control,
                random.Random(f"agentdesk-sim:{self.seed}:agent:{index}"), self.project_ids[index % count],
                approval_timeout_s=self.approval_timeout_s, approval_rate=self.approval_rate,
                error_rate=self.error_rate)
            finished = threading.Event()
            thread = threading.Thread(target=self._work, args=(worker, finished),
                                      name=f"agentdesk-sim-{index}", daemon=True)
            self._threads.append(thread)
            self._finished.append(finished)
            thread.start()
        return self

    @staticmethod
    def _work(worker: AgentWorker, finished: threading.Event) -> None:
        try:
            worker.run()
        finally:
            finished.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask every agent to stop, and wait for them to close what they had open."""
        self.control.stop_event.set()
        self.wait(timeout_s)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every agent thread ended (duration over or stopped); False on timeout.

        Waits on events, not `Thread.join()`: on Python 3.11 a join interrupted by Ctrl-C
        marks a still-running thread as stopped, and the process would then close the store
        under agents that are still closing their runs.
        """
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        for finished in self._finished:
            finished.wait(None if give_up is None else max(0.0, give_up - time.monotonic()))
        return not self.running

    def run(self) -> None:
        """start(), wait for the duration (or Ctrl-C), then stop cleanly."""
        self.start()
        try:
            self.wait()
        finally:
            self.stop()

    @property
    def running(self) -> bool:
        return not all(finished.is_set() for finished in self._finished)

    @property
    def events(self) -> list[SimEvent]:
        """A copy of everything the agents did so far, in the order it happened."""
        return self.control.snapshot()[0]

    @property
    def failures(self) -> list[str]:
        """Store errors the agents hit (and survived, up to a few in a row); empty when all went well."""
        return self.control.snapshot()[1]
