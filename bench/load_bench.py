"""Many agents writing at full speed into one store, and an operator deciding meanwhile.

Run: .venv/bin/python bench/load_bench.py [--agents 1,5,20,50] [--seconds 6] [--store URL]

For each agent count N, N runtime threads spread over up to `--processes` writer
processes (real runtimes are separate processes; threads of one process are what the
simulator does) write as fast as they can through `AgentRuntime`: a model span with
its context snapshot, a context item, the span's end, and every 5th turn an approval
request; each turn is one `runtime.batch()`, and every 20 turns a fresh agent
and run. Meanwhile this process, as the operator, decides a pending approval every
100 ms (the latency of `decide` is what the person waits for) and follows the store
with a `ChangeWatcher` (lag = callback time minus the change's commit-side time).

Figures per N: changes/s committed, writer failures (any store error a writer or the
operator hit), lock wait p50/p99/max of the runtime writers, decision latency
p50/p99 and the p99 of the part of it spent waiting for the lock ("its wait"),
watcher lag p99.

Targets: 0 writer failures; decision p99 <= 100 ms. The lock waits and watcher lag
are reported, not judged. `--store` takes a store URL (SQLite file by default, a
fresh file per N; `postgresql://...` writes into that database, which must be one
agentdesk may migrate).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from agentdesk.store.bus import Change
from agentdesk.store.commands import decide
from agentdesk.store.database import open_store
from agentdesk.store.errors import Conflict, StoreError
from agentdesk.store.retry import observe_lock_waits
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.schema import ApprovalRow, ChangeRow
from agentdesk.store.watcher import ChangeWatcher

DECISION_P99_TARGET_MS = 100.0
DECIDE_EVERY_S = 0.1
TURNS_PER_RUN = 20
APPROVAL_EVERY = 5
IMPORT_TRACE_SPANS = 20


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Agent:
    rt: AgentRuntime
    index: int
    session: str
    agent: str
    run: str
    group: str
    span: str


def set_up(rt: AgentRuntime, project: str, index: int) -> Agent:
    """Before the clock starts: the agent's hierarchy, an open model span and one pending approval."""
    task = rt.create_task(project, f"load {index}")
    session = rt.create_session(task, f"load {index}")
    agent = rt.create_agent(session, f"agent-{index}", "bench-model")
    run = rt.start_run(agent, "full speed")
    span = rt.start_span(run, "model", "chat", context_of_agent=agent)
    rt.request_approval(run, "shell", {"command": "echo ready"}, span_id=span, timeout_s=None)
    return Agent(rt, index, session, agent, run, rt.new_turn_group(agent), span)


def agent_loop(a: Agent, stop: threading.Event, failures: list[str]) -> None:
    """One runtime at full speed; a store error is counted and the agent carries on, as a runtime would."""
    rt, turn = a.rt, 0
    while not stop.is_set():
        turn += 1
        try:
            if turn % TURNS_PER_RUN == 0:  # a fresh agent and run keep the context (and its snapshots) bounded
                with rt.batch():
                    rt.finish_span(a.span, "ok")
                    rt.set_run_status(a.run, "done")
                    a.agent = rt.create_agent(a.session, f"agent-{a.index}", "bench-model")
                    a.run = rt.start_run(a.agent, "full speed")
                    a.group = rt.new_turn_group(a.agent)
                    a.span = rt.start_span(a.run, "model", "chat", context_of_agent=a.agent)
            # The hot path as a runtime writes it: end the model call, record its answer, start the next.
            with rt.batch():
                rt.finish_span(a.span, "ok", output_text="ok", input_tokens=10, output_tokens=5, cost_usd=0.0001)
                rt.append_context(a.agent, a.group, "message", "assistant", f"turn {turn} of agent {a.index}")
                if turn % APPROVAL_EVERY == 0:
                    rt.request_approval(a.run, "shell", {"command": f"echo {turn}"}, span_id=a.span,
                                        timeout_s=None)
                a.span = rt.start_span(a.run, "model", "chat", attributes={"turn": turn},
                                       context_of_agent=a.agent)
        except StoreError as exc:
            failures.append(str(exc))


def writer_process(url: str, project: str, first: int, count: int, out: Connection) -> None:
    store = open_store(url)
    waits: list[float] = []
    stop = threading.Event()
    failures: list[str] = []
    agents = [set_up(AgentRuntime(store, actor=f"agent-{first + i}"), project, first + i) for i in range(count)]
    observe_lock_waits(lambda seconds, priority: waits.append(seconds) if not priority else None)
    threads = [threading.Thread(target=agent_loop, args=(a, stop, failures), daemon=True) for a in agents]
    out.send("ready")
    out.recv()
    for thread in threads:
        thread.start()
    out.recv()
    stop.set()
    for thread in threads:
        thread.join(30)
    out.send({"waits": waits, "failures": failures})
    store.close()


def operator(url: str, stop: threading.Event, latencies: list[float], failures: list[str],
             lock_waits: list[float]) -> None:
    store = open_store(url)
    unregister = observe_lock_waits(lambda seconds, priority: lock_waits.append(seconds) if priority else None)
    try:
        while not stop.wait(DECIDE_EVERY_S):
            with store.reading() as s:
                pending = s.execute(select(ApprovalRow.id).where(ApprovalRow.status == "pending")
                                    .order_by(ApprovalRow.created_at.desc()).limit(1)).scalar()
            if pending is None:
                continue
            started = time.perf_counter()
            try:
                decide(store, pending, True, "operator")
            except Conflict:
                pass  # cannot happen here (one operator), but it is not a writer failure
            except StoreError as exc:
                failures.append(f"operator: {exc}")
                continue
            latencies.append(time.perf_counter() - started)
    finally:
        unregister()
        store.close()


def max_seq(url: str) -> int:
    store = open_store(url)
    try:
        with store.reading() as s:
            return int(s.execute(select(func.max(ChangeRow.seq))).scalar() or 0)
    finally:
        store.close()


def measure(url: str, agents: int, seconds: float, processes: int) -> dict[str, Any]:
    store = open_store(url)
    project = AgentRuntime(store, actor="bench").create_project(f"load {agents}")
    lags: list[float] = []

    def follow(batch: Sequence[Change]) -> None:
        now = time.time()
        lags.extend(now - c.at for c in batch if c.at)

    watcher = ChangeWatcher(store).start()
    store.bus.subscribe(follow)
    ctx = mp.get_context("spawn")
    workers = min(processes, agents)
    shares = [agents // workers + (1 if i < agents % workers else 0) for i in range(workers)]
    pipes, procs, first = [], [], 0
    for share in shares:
        here, there = ctx.Pipe()
        proc = ctx.Process(target=writer_process, args=(url, project, first, share, there), daemon=True)
        proc.start()
        pipes.append(here)
        procs.append(proc)
        first += share
    for pipe in pipes:
        pipe.recv()
    start_seq = max_seq(url)
    stop = threading.Event()
    latencies: list[float] = []
    failures: list[str] = []
    operator_waits: list[float] = []
    decider = threading.Thread(target=operator, args=(url, stop, latencies, failures, operator_waits),
                               daemon=True)
    started = time.monotonic()
    for pipe in pipes:
        pipe.send("go")
    decider.start()
    time.sleep(seconds)
    for pipe in pipes:
        pipe.send("stop")
    stop.set()
    waits: list[float] = []
    for pipe, proc in zip(pipes, procs, strict=True):
        result = pipe.recv()
        waits += result["waits"]
        failures += result["failures"]
        proc.join(30)
    elapsed = time.monotonic() - started
    decider.join(30)
    time.sleep(0.3)  # let the watcher read the tail
    watcher.stop()
    store.close()
    return {"agents": agents, "changes_per_s": (max_seq(url) - start_seq) / elapsed, "failures": failures,
            "wait_p50": pct(waits, 0.5), "wait_p99": pct(waits, 0.99), "wait_max": max(waits, default=0.0),
            "decisions": len(latencies), "decide_p50": pct(latencies, 0.5), "decide_p99": pct(latencies, 0.99),
            "decide_wait_p99": pct(operator_waits, 0.99),
            "lag_p99": pct(lags, 0.99)}


def otlp_file(path: Path, spans: int, per_trace: int = IMPORT_TRACE_SPANS) -> Path:
    """OTLP/JSON Lines of `spans` spans in traces of `per_trace` (an agent, model calls and tool calls)."""
    base = int(time.time() * 1e9)
    with path.open("w", encoding="utf-8") as out:
        for t in range(max(1, spans // per_trace)):
            trace = f"{t + 1:032x}"
            root = f"{t + 1:08x}00000000"
            rows = [{"traceId": trace, "spanId": root, "name": "invoke_agent planner", "kind": 1,
                     "startTimeUnixNano": str(base), "endTimeUnixNano": str(base + per_trace * 2_000_000),
                     "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                                    {"key": "gen_ai.agent.name", "value": {"stringValue": "planner"}}]}]
            for n in range(1, per_trace):
                op = "chat" if n % 2 else "execute_tool"
                rows.append({"traceId": trace, "spanId": f"{t + 1:08x}{n:08x}", "parentSpanId": root,
                             "name": f"{op} {n}", "kind": 3 if op == "chat" else 1,
                             "startTimeUnixNano": str(base + n * 2_000_000),
                             "endTimeUnixNano": str(base + n * 2_000_000 + 1_000_000),
                             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": op}},
                                            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "100"}}]})
            doc = {"resourceSpans": [{"resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": "load-import"}}]},
                "scopeSpans": [{"scope": {"name": "load_bench"}, "spans": rows}]}]}
            out.write(json.dumps(doc) + "\n")
    return path


def import_process(url: str, path: str, out: Connection) -> None:
    from agentdesk.store.otel.importer import import_files

    store = open_store(url)
    out.recv()
    began = time.perf_counter()
    result = import_files(store, [Path(path)], helper=False)
    out.send({"seconds": time.perf_counter() - began, "spans": result.report.spans_written,
              "error": str(result.error) if result.error else None})
    store.close()


def measure_import(url: str, spans: int, tmp: Path) -> dict[str, Any]:
    """Decisions every 100 ms while an import of `spans` spans (small traces) runs in another process."""
    store = open_store(url)
    rt = AgentRuntime(store, actor="bench")
    a = set_up(rt, rt.create_project("import load"), 0)
    for n in range(300):  # enough pending approvals for a long import
        rt.request_approval(a.run, "shell", {"command": f"echo {n}"}, span_id=a.span, timeout_s=None)
    path = otlp_file(tmp / f"import-{spans}.jsonl", spans)
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=import_process, args=(url, str(path), there), daemon=True)
    proc.start()
    stop = threading.Event()
    latencies: list[float] = []
    failures: list[str] = []
    waits: list[float] = []
    decider = threading.Thread(target=operator, args=(url, stop, latencies, failures, waits), daemon=True)
    here.send("go")
    decider.start()
    result = here.recv()
    stop.set()
    proc.join(30)
    decider.join(30)
    store.close()
    if result["error"]:
        failures.append(f"import: {result['error']}")
    return {"spans": result["spans"], "seconds": result["seconds"], "failures": failures,
            "decisions": len(latencies), "decide_p50": pct(latencies, 0.5), "decide_p99": pct(latencies, 0.99),
            "decide_wait_p99": pct(waits, 0.99)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1,5,20,50", help="comma-separated agent counts")
    parser.add_argument("--seconds", type=float, default=6.0, help="load duration per agent count")
    parser.add_argument("--processes", type=int, default=4, help="writer processes the agents spread over")
    parser.add_argument("--store", default=None, help="store URL (default: a fresh SQLite file per count)")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.agents.split(",")]
    missed: list[str] = []
    print(f"machine load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    print(f"{'agents':>6} {'changes/s':>10} {'fail':>5} {'wait p50':>9} {'wait p99':>9} {'wait max':>9} "
          f"{'decide p50':>10} {'decide p99':>10} {'its wait':>9} {'lag p99':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            url = args.store or str(Path(tmp) / f"load-{n}.sqlite")
            r = measure(url, n, args.seconds, args.processes)
            print(f"{n:>6} {r['changes_per_s']:>10.0f} {len(r['failures']):>5} {r['wait_p50'] * 1e3:>7.1f}ms "
                  f"{r['wait_p99'] * 1e3:>7.1f}ms {r['wait_max'] * 1e3:>7.0f}ms {r['decide_p50'] * 1e3:>8.1f}ms "
                  f"{r['decide_p99'] * 1e3:>8.1f}ms {r['decide_wait_p99'] * 1e3:>7.1f}ms "
                  f"{r['lag_p99'] * 1e3:>6.0f}ms  ({r['decisions']} decisions)",
                  flush=True)
            if r["failures"]:
                missed.append(f"{n} agents: {len(r['failures'])} writer failures (target 0); "
                              f"first: {r['failures'][0]}")
            if r["decisions"] == 0:
                missed.append(f"{n} agents: no decision was measured")
            elif r["decide_p99"] * 1e3 > DECISION_P99_TARGET_MS:
                missed.append(f"{n} agents: decision p99 {r['decide_p99'] * 1e3:.0f} ms "
                              f"(target <= {DECISION_P99_TARGET_MS:.0f} ms)")
    for line in missed:
        print(f"MISSED: {line}")
    if not missed:
        print("all load targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
