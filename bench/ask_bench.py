"""Questions: how soon another window sees an agent's question, and how soon an answer releases the agent.

Run: .venv/bin/python bench/ask_bench.py [--count 60] [--pace-ms 50]

1. Ask → visible: an agent in another process asks `count` questions, paced (`store.asks.commands.create`,
   what `run.ask` writes); this process is a window: a watching `NativeSource`, its `Services` and the
   Questions tab's `AskModel` (Qt, offscreen). Measured from just before the agent's write to the moment the
   question is a row of the model.
2. Answer → released: the agent asks and blocks in the local client's wait (`store.asks.waiting.wait`, what
   `run.ask` does on a local store); this process answers (`store.asks.commands.answer`). Measured from just
   before the answer's write to the moment the agent's wait returned it.

On SQLite (a temporary store). Targets (issue 24): ask → visible ≤ 150 ms p99; answer → released ≤ 100 ms
p99. Prints the figures, says plainly which target missed, and exits 1 if any did.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentdesk.store.asks import commands as asks  # noqa: E402
from agentdesk.store.asks import waiting  # noqa: E402
from agentdesk.store.persistence.database import open_store  # noqa: E402
from agentdesk.store.runtime import AgentRuntime  # noqa: E402

VISIBLE_P99_MS = 150.0
RELEASED_P99_MS = 100.0


def setup(path: str) -> str:
    store = open_store(path, create=True)
    rt = AgentRuntime(store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("bench"), "t"), "s"),
                                       "asker", "m"), "r")
    store.close()
    return run


def asking_agent(path: str, run_id: str, count: int, pace_s: float, out: Connection) -> None:
    """Asks `count` questions, paced; sends (ask id, wall time just before the write) for each."""
    store = open_store(path)
    out.send("ready")
    out.recv()
    for n in range(count):
        ask_id = f"ask_bench_{n:05d}"
        started = time.time()
        asks.create(store, run_id, f"Question {n}?", ["yes", "no"], expires_in=600, ask_id=ask_id)
        out.send((ask_id, started))
        time.sleep(pace_s)
    out.send(None)
    store.close()


def waiting_agent(path: str, run_id: str, count: int, out: Connection) -> None:
    """Asks, blocks until answered, and sends the wall time its wait returned; `count` times."""
    store = open_store(path)
    for n in range(count):
        ask_id = asks.create(store, run_id, f"Blocking question {n}?", expires_in=600, ask_id=f"ask_wait_{n:05d}")
        out.send(ask_id)
        found = waiting.wait(store, ask_id, "asker")
        out.send((ask_id, time.time(), found.status))
    store.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def visible_latencies(path: str, run_id: str, count: int, pace_s: float) -> list[float]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from agentdesk.model.asks.model import AskModel
    from agentdesk.model.services import Services
    from agentdesk.store.native import NativeSource

    app = QApplication.instance() or QApplication([])
    source = NativeSource.open(path)
    source.watch()
    services = Services.create(source, actor="bench")
    model = AskModel(services)
    seen: dict[str, float] = {}

    def look() -> None:
        now = time.time()
        for row in range(model.rowCount()):
            ask = model.ask_at(row)
            if ask is not None and ask.id not in seen:
                seen[ask.id] = now

    model.loaded.connect(look)
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    agent = ctx.Process(target=asking_agent, args=(path, run_id, count, pace_s, theirs))
    agent.start()
    assert ours.recv() == "ready"
    ours.send("go")
    started: dict[str, float] = {}
    done = False
    give_up = time.monotonic() + 120
    while (not done or len(seen) < len(started)) and time.monotonic() < give_up:
        app.processEvents()
        while ours.poll():
            item = ours.recv()
            if item is None:
                done = True
            else:
                started[item[0]] = item[1]
        time.sleep(0.001)
    agent.join(30)
    services.close()
    source.close()
    missing = set(started) - set(seen)
    if missing:
        print(f"  {len(missing)} questions never reached the window's model")
    return [(seen[i] - started[i]) * 1000 for i in started if i in seen]


def released_latencies(path: str, run_id: str, count: int) -> list[float]:
    store = open_store(path)
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    agent = ctx.Process(target=waiting_agent, args=(path, run_id, count, theirs))
    agent.start()
    found: list[float] = []
    for _ in range(count):
        ask_id = ours.recv()
        time.sleep(0.03)  # the agent is blocked in its wait by now
        started = time.time()
        asks.answer(store, ask_id, "yes", "bench")
        answered_id, released, status = ours.recv()
        assert answered_id == ask_id and status == "answered", (answered_id, status)
        found.append((released - started) * 1000)
    agent.join(30)
    store.close()
    return found


def report(name: str, values: list[float], target: float) -> bool:
    if not values:
        print(f"{name}: no samples; MISSED the target of ≤ {target:g} ms p99")
        return False
    p50, p99 = statistics.median(values), percentile(values, 0.99)
    ok = p99 <= target
    verdict = "met" if ok else "MISSED"
    print(f"{name}: n={len(values)}  p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {max(values):.1f} ms  "
          f"(target ≤ {target:g} ms p99: {verdict})")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--pace-ms", type=float, default=50.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    os.environ.setdefault("AGENTDESK_CONFIG_DIR", str(work / "config"))
    path = str(work / "agentdesk.sqlite")
    run_id = setup(path)
    visible = visible_latencies(path, run_id, args.count, args.pace_ms / 1000)
    released = released_latencies(path, run_id, args.count)
    results = [report("ask → visible in another window's model", visible, VISIBLE_P99_MS),
               report("answer → agent released", released, RELEASED_P99_MS)]
    missed = results.count(False)
    print("Every target met." if not missed else f"{missed} target{'s' if missed > 1 else ''} missed.")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
