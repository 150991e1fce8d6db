"""How fast and how cheaply a process hears of another process's commits.

Run: .venv/bin/python bench/bus_latency.py [--poll 0.025] [--changes 1000] [--pace-ms 5]

1. Latency: a writer in another process commits one change per transaction,
   paced; it notes each commit's wall time (its own bus fires right after
   commit, carrying the change's seq). This process watches with a
   ChangeWatcher and notes when each seq first reaches a subscriber (a batch
   covers every seq up to its highest, coalesced or not). Prints the median and
   p99 of commit→callback.
2. Idle cost: process CPU time while the watcher watches an idle store.
3. Burst: a writer commits ≥10,000 changes/s (batched transactions); prints the
   subscriber's callbacks per second, which must stay ≤ 1 / poll interval.

Targets: p99 ≤ 100 ms at the default poll interval; idle < 1% of one core.
"""

from __future__ import annotations

import argparse
import bisect
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from sqlalchemy import update

from agentdesk.store.changes.watcher import DEFAULT_POLL_INTERVAL_S
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.schema import RunRow
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.uow import UnitOfWork

P99_TARGET_MS = 100.0
IDLE_TARGET = 0.01


def paced_writer(path: str, agent_id: str, count: int, pace_s: float, out: Connection) -> None:
    """One change per transaction every `pace_s`; sends back {seq: commit wall time}."""
    store = open_store(path)
    committed: dict[int, float] = {}

    def note(batch: Sequence[Change]) -> None:
        now = time.time()
        for change in batch:
            if change.seq is not None:
                committed[change.seq] = now

    store.bus.subscribe(note)
    rt = AgentRuntime(store)
    out.send("ready")
    out.recv()
    start = time.monotonic()
    for n in range(count):
        delay = start + n * pace_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        rt.set_agent_status(agent_id, "waiting" if n % 2 == 0 else "running")
    out.send(committed)
    store.close()


def burst_writer(path: str, run_ids: list[str], seconds: float, out: Connection) -> None:
    """As many changes as SQLite takes, `len(run_ids)` per transaction; sends back (changes, seconds)."""
    store = open_store(path)
    out.send("ready")
    out.recv()
    changes, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        with UnitOfWork(store) as uow:
            uow.session.execute(update(RunRow).where(RunRow.id.in_(run_ids))
                                .values(revision=RunRow.revision + 1))
            for rid in run_ids:
                uow.record("run", "update", rid)
        changes += len(run_ids)
    out.send((changes, time.monotonic() - start))
    store.close()


class Subscriber:
    """Notes (callback wall time, highest seq in the batch) for every batch it receives."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: Sequence[Change]) -> None:
        now = time.time()
        top = max((c.seq for c in batch if c.seq is not None), default=0)
        with self.lock:
            self.calls.append((now, top))

    def highest(self) -> int:
        with self.lock:
            return self.calls[-1][1] if self.calls else 0

    def delivered_at(self, seq: int) -> float | None:
        """When `seq` first reached the subscriber: the first batch reaching that high."""
        with self.lock:
            tops = [top for _, top in self.calls]
            at = bisect.bisect_left(tops, seq)
            return self.calls[at][0] if at < len(self.calls) else None


def run_child(target: object, *args: object) -> tuple[mp.process.BaseProcess, Connection]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child), daemon=True)  # type: ignore[attr-defined]
    proc.start()
    assert parent.recv() == "ready"
    return proc, parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure_latency(path: str, agent_id: str, source: NativeSource, count: int, pace_s: float) -> list[float]:
    sub = Subscriber()
    unsubscribe = source.bus.subscribe(sub)
    proc, pipe = run_child(paced_writer, path, agent_id, count, pace_s)
    pipe.send("go")
    committed: dict[int, float] = pipe.recv()
    proc.join()
    deadline = time.monotonic() + 5
    while sub.highest() < max(committed) and time.monotonic() < deadline:
        time.sleep(0.01)
    unsubscribe()
    delays = []
    for seq, at in committed.items():
        got = sub.delivered_at(seq)
        if got is None:
            raise SystemExit(f"change {seq} never reached the subscriber")
        delays.append((got - at) * 1000)
    return delays


def measure_idle(seconds: float) -> float:
    cpu, wall = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - cpu) / (time.monotonic() - wall)


def measure_burst(path: str, run_ids: list[str], source: NativeSource, seconds: float,
                  poll_s: float) -> tuple[float, float, float]:
    sub = Subscriber()
    unsubscribe = source.bus.subscribe(sub)
    proc, pipe = run_child(burst_writer, path, run_ids, seconds)
    pipe.send("go")
    changes, took = pipe.recv()
    proc.join()
    time.sleep(poll_s * 4)
    unsubscribe()
    times = [t for t, _ in sub.calls]
    span = max(times[-1] - times[0], poll_s) if times else took
    busiest = max((sum(1 for t in times if s <= t < s + 1.0) for s in times), default=0)
    return changes / took, len(times) / span, float(busiest)


def build(path: str, runs: int) -> tuple[str, list[str]]:
    store = open_store(path)
    rt = AgentRuntime(store)
    session = rt.create_session(rt.create_task(rt.create_project("bench"), "bus latency"), "s")
    agent = rt.create_agent(session, "writer", "model")
    run_ids = [rt.start_run(agent, f"run {n}") for n in range(runs)]
    store.close()
    return agent, run_ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--poll", type=float, default=DEFAULT_POLL_INTERVAL_S, help="poll interval, s")
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--pace-ms", type=float, default=5.0)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--burst-s", type=float, default=3.0)
    parser.add_argument("--burst-tx", type=int, default=250, help="changes per burst transaction")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="agentdesk-bench-") as tmp:
        path = str(Path(tmp) / "bench.sqlite")
        agent_id, run_ids = build(path, args.burst_tx)
        source = NativeSource.open(path)
        source.watch(poll_interval_s=args.poll)
        try:
            delays = measure_latency(path, agent_id, source, args.changes, args.pace_ms / 1000)
            idle = measure_idle(args.idle_s)
            rate, callbacks, busiest = measure_burst(path, run_ids, source, args.burst_s, args.poll)
        finally:
            source.close()

    median, p99 = statistics.median(delays), percentile(delays, 0.99)
    bound = 1 / args.poll
    print(f"agentdesk change bus, SQLite WAL, watcher poll {args.poll * 1000:.0f} ms")
    print(f"latency  {len(delays)} commits from another process, one every {args.pace_ms:g} ms")
    print(f"         commit→callback  median {median:.1f} ms   p90 {percentile(delays, 0.9):.1f} ms   "
          f"p99 {p99:.1f} ms   max {max(delays):.1f} ms")
    print(f"idle     watching an idle store for {args.idle_s:g} s: {idle * 100:.3f}% of one core")
    print(f"burst    writer {rate:,.0f} changes/s ({args.burst_tx} per transaction) for {args.burst_s:g} s")
    print(f"         subscriber {callbacks:.1f} callbacks/s (busiest second {busiest:.0f}); "
          f"bound {bound:.0f}/s")
    verdicts = [("p99 ≤ 100 ms", p99 <= P99_TARGET_MS), ("idle < 1% of a core", idle < IDLE_TARGET),
                ("burst callbacks ≤ 1/poll", busiest <= bound + 1),
                ("burst ≥ 10,000 changes/s", rate >= 10_000)]
    print("targets  " + "   ".join(f"{name}: {'ok' if ok else 'MISSED'}" for name, ok in verdicts))
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
