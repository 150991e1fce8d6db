"""Team mode on PostgreSQL beside SQLite: live delivery latency, racing operators, idle listener cost.

Run: .venv/bin/python bench/pg_bench.py [--changes 300] [--approvals 1000] [--operators 10]

Starts a throwaway PostgreSQL over its Unix socket (tests/postgres/server.py; $AGENTDESK_TEST_PG instead
when exported) and a SQLite file, and on each:
1. commit -> subscriber: a writer process commits one change per transaction, paced, noting each commit's
   time; this process's watcher (LISTEN/NOTIFY on PostgreSQL, data_version polling on SQLite) notes when
   each seq first reaches a subscriber. p50/p99.
2. operators: N processes race over the same approvals in the same order; decisions/s, conflicts,
   doubles (must be 0).
3. idle: process CPU while the watcher follows an idle store.

Targets: PostgreSQL p99 <= 20 ms, zero doubles on both, idle < 1 % of a core. Exit 1 on a miss.

Measured (2-core VM, shared): before the watcher read on the listener's connection, PostgreSQL p50 9.3 /
p99 26.3 ms at load 6; after, p50 0.7 / p99 9.8 ms at load 5-11, p50 0.6 / p99 6.3 ms at load 4.5-6.4
(SQLite beside it: p50 27 / p99 66 ms, p50 26 / p99 56 ms).
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentdesk.store.errors import AlreadyDecided, StoreUnavailable
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime

P99_TARGET_MS = 20.0
IDLE_TARGET = 0.01


def writer(url: str, agent: str, count: int, pace_s: float, out: mp.Queue) -> None:
    store = open_store(url)
    rt = AgentRuntime(store)
    times: dict[int, float] = {}
    store.bus.subscribe(lambda batch: times.update({c.seq: time.time() for c in batch if c.seq}))
    for n in range(count):
        rt.set_agent_status(agent, "waiting" if n % 2 else "running")
        time.sleep(pace_s)
    store.close()
    out.put(times)


def latency(url: str, count: int) -> tuple[float, float]:
    store = open_store(url)
    rt = AgentRuntime(store)
    pid = rt.create_project("bench")
    agent = rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m")
    source = NativeSource(store)
    tops: list[tuple[int, float]] = []  # (highest seq of a batch, when it arrived): a coalesced batch covers all below
    lock = threading.Lock()

    def on_batch(batch: Sequence[Change]) -> None:
        now = time.time()
        top = max((c.seq for c in batch if c.seq is not None), default=0)
        with lock:
            if not tops or top > tops[-1][0]:
                tops.append((top, now))

    source.bus.subscribe(on_batch)
    source.watch()
    queue: mp.Queue = mp.Queue()
    proc = mp.Process(target=writer, args=(url, agent, count, 0.01, queue))
    proc.start()
    committed: dict[int, float] = queue.get(timeout=600)
    proc.join()
    last = max(committed)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (tops and tops[-1][0] >= last):
        time.sleep(0.05)
    source.close()
    keys = [top for top, _ in tops]
    delays = []
    for seq, at in committed.items():
        i = bisect.bisect_left(keys, seq)
        if i < len(tops):
            delays.append((tops[i][1] - at) * 1000)
    delays.sort()
    missing = len(committed) - len(delays)
    if missing:
        print(f"  {missing} changes never arrived")
    return statistics.median(delays), delays[int(len(delays) * 0.99) - 1]


def operator(url: str, me: str, ids: list[str], out: mp.Queue) -> None:
    """Decide every id; a writer lock held past the busy timeout (a loaded machine) is retried, not fatal."""
    won: list[str] = []
    lost = 0
    source = NativeSource.open(url, busy_timeout_s=30.0)
    try:
        for approval_id in ids:
            while True:
                try:
                    source.decide(approval_id, approve=True, actor=me)
                    won.append(approval_id)
                except AlreadyDecided:
                    lost += 1
                except StoreUnavailable:
                    continue
                break
    finally:
        source.close()
        out.put((won, lost))


def race(url: str, approvals: int, operators: int) -> tuple[float, int, int]:
    store = open_store(url)
    rt = AgentRuntime(store)
    pid = rt.create_project("race")
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m"), "r")
    # No expiry: on a loaded machine the race can outlast the default 300 s, and an expired approval
    # (decided by nobody) was counted as a double (seen at load 10: SQLite, 3 decisions/s).
    ids = [rt.request_approval(run, "shell", {"n": n}, timeout_s=None) for n in range(approvals)]
    store.close()
    queue: mp.Queue = mp.Queue()
    procs = [mp.Process(target=operator, args=(url, f"op{n}", ids, queue)) for n in range(operators)]
    start = time.monotonic()
    for p in procs:
        p.start()
    results = [queue.get(timeout=1200) for _ in procs]
    elapsed = time.monotonic() - start
    for p in procs:
        p.join()
    won = [a for w, _ in results for a in w]
    doubles = len(won) - len(set(won)) + (approvals - len(set(won)))
    return approvals / elapsed, sum(lost for _, lost in results), doubles


def idle_cpu(url: str, seconds: float = 5.0) -> float:
    source = NativeSource.open(url)
    source.watch()
    time.sleep(0.5)
    before = time.process_time()
    time.sleep(seconds)
    used = time.process_time() - before
    source.close()
    return used / seconds


def fresh_pg(base_url: str, name: str) -> str:
    import psycopg

    from agentdesk.store.persistence.postgres.engine import libpq_url
    with psycopg.connect(libpq_url(base_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    head, _, query = base_url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--approvals", type=int, default=1000)
    parser.add_argument("--operators", type=int, default=10)
    args = parser.parse_args()
    from tests.postgres import server
    started = None
    base = os.environ.get(server.URL_ENV)
    if not base:
        bin_dir = server.find_bin_dir()
        if bin_dir is None:
            print("MISSED: no PostgreSQL to measure (install postgresql-15 or export AGENTDESK_TEST_PG)")
            return 1
        root, base = server.start(bin_dir)
        started = (bin_dir, root)
    tmp = Path(tempfile.mkdtemp())
    missed: list[str] = []
    try:
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores")
        backends = (("sqlite", lambda n: str(tmp / f"{n}.sqlite")), ("postgresql", lambda n: fresh_pg(base, n)))
        for label, make in backends:
            p50, p99 = latency(make("lat"), args.changes)
            rate, conflicts, doubles = race(make("race"), args.approvals, args.operators)
            idle = idle_cpu(make("idle"))
            print(f"{label:>10}: commit->subscriber p50 {p50:.1f} ms p99 {p99:.1f} ms | {args.operators} operators: "
                  f"{rate:.0f} decisions/s, {conflicts} conflicts, {doubles} doubles | "
                  f"idle {idle * 100:.2f}% of a core")
            if doubles:
                missed.append(f"{label}: {doubles} approvals decided twice or never")
            if idle >= IDLE_TARGET:
                missed.append(f"{label}: idle watcher {idle * 100:.2f}% >= 1% of a core")
            if label == "postgresql" and p99 > P99_TARGET_MS:
                missed.append(f"postgresql: p99 {p99:.1f} ms > {P99_TARGET_MS:g} ms")
    finally:
        if started:
            server.stop(*started)
    for line in missed:
        print("MISSED:", line)
    print(json.dumps({"missed": len(missed)}))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
