"""Pause and resume over HTTP: how fast a paused agent blocks at its next checkpoint, how fast a resume frees it.

Run: .venv/bin/python bench/control_bench.py [--rounds 60] [--step-ms 5]

`agentdesk receive` runs in a process of its own on a fresh SQLite store; the agent, in a third process, talks to
it with an agent token through the client library and takes a step every `--step-ms` (a checkpoint, then its
"work"); the operator is this process, with a store of its own, as another window or `agentdesk pause` would be.

1. Pause → blocked: this process pauses the run; the agent's next checkpoint reports it blocked (`held_at`,
   stamped in the agent's checkpoint transaction). Measured from the pause's commit time (`set_at`) to `held_at`:
   both are the time each unit of work took its write lock, on the same clock.
2. Resume → released: the agent waits in a long poll (released from the change bus: the receiver's watcher sees
   the commit of this other process); this process resumes; measured from the resume's `set_at` to the moment the
   agent's `checkpoint()` returned (its own clock, reported through shared memory).

Targets: pause → blocked p99 ≤ 100 ms; resume → released p99 ≤ 100 ms. Exit 1 when either is missed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentdesk.store.agents import tokens  # noqa: E402
from agentdesk.store.control import commands as control  # noqa: E402
from agentdesk.store.control.checkpoint import read_control  # noqa: E402
from agentdesk.store.persistence.database import open_store  # noqa: E402
from bench.http_gate_bench import start_receiver  # noqa: E402

BLOCKED_P99_MS = 100.0
RELEASED_P99_MS = 100.0
TOKEN_NAME = "control-bench-bot"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def agent(url: str, token: str, step_s: float, run_box: mp.Queue, released_at: Synchronized,  # type: ignore[type-arg]
          steps: Synchronized) -> None:  # type: ignore[type-arg]
    """The agent process: a checkpoint per step; after each, the time it returned and the step count."""
    from agentdesk.client import AgentDesk, RunStopped

    with AgentDesk.connect(url, token=token) as desk:
        run = desk.register(project="bench", agent="paused").start_run("steps")
        run_box.put(run.id)
        try:
            while True:
                run.checkpoint()
                with steps.get_lock():
                    released_at.value = time.time()
                    steps.value += 1
                time.sleep(step_s)
        except RunStopped:
            return


def wait(condition: object, timeout_s: float = 10.0) -> None:
    give_up = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > give_up:
            raise SystemExit("the agent did not answer in 10 s")
        time.sleep(0.001)


def measure(path: str, url: str, token: str, rounds: int, step_s: float) -> tuple[list[float], list[float]]:
    store = open_store(path)
    spawn = mp.get_context("spawn")  # a fresh interpreter, as an agent is: no store or threads inherited
    run_box: mp.Queue = spawn.Queue()  # type: ignore[type-arg]
    released_at = spawn.Value("d", 0.0)
    steps = spawn.Value("q", 0)
    proc = spawn.Process(target=agent, args=(url, token, step_s, run_box, released_at, steps))
    proc.start()
    blocked, released = [], []
    try:
        run_id = run_box.get(timeout=30)
        for _ in range(rounds):
            wait(lambda: steps.value > 0)
            paused = control.pause(store, run_id, "bench")
            wait(lambda: read_control(store, run_id).held)
            held_at = read_control(store, run_id).held_at
            assert held_at is not None and paused.set_at is not None
            blocked.append((held_at - paused.set_at) * 1000)
            before = steps.value
            resumed = control.resume(store, run_id, "bench")
            wait(lambda b=before: steps.value > b)
            assert resumed.set_at is not None
            released.append((released_at.value - resumed.set_at) * 1000)
        control.stop(store, run_id, "bench")
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
        store.close()
    return blocked, released


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--step-ms", type=float, default=5.0, help="the agent's work between two checkpoints")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentdesk-control-bench-") as tmp:
        path = str(Path(tmp) / "bench.sqlite")
        store = open_store(path, create=True)
        token = tokens.create(store, TOKEN_NAME, "bench")[1]
        store.close()
        receiver, url = start_receiver(path)
        try:
            blocked, released = measure(path, url, token, args.rounds, args.step_ms / 1000)
        finally:
            receiver.send_signal(signal.SIGINT)
            try:
                receiver.wait(30)
            except subprocess.TimeoutExpired:
                receiver.kill()
    print("agentdesk run control: `agentdesk receive` on SQLite WAL, a client-library agent over HTTP taking a "
          f"step every {args.step_ms:g} ms, operator in another process")
    for name, values in (("pause → blocked  ", blocked), ("resume → released", released)):
        print(f"{name} {len(values)} rounds: median {statistics.median(values):.1f} ms   "
              f"p99 {percentile(values, 0.99):.1f} ms   max {max(values):.1f} ms")
    verdicts = [("pause → blocked p99 ≤ 100 ms", percentile(blocked, 0.99) <= BLOCKED_P99_MS),
                ("resume → released p99 ≤ 100 ms", percentile(released, 0.99) <= RELEASED_P99_MS)]
    for name, ok in verdicts:
        print(f"target  {name}: {'met' if ok else 'MISSED'}")
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
