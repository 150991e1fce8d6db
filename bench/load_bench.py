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

`--views N` also measures, on each backend side by side (issue 21): the timeline's store read of a run of
N spans (its first 10,000 spans, and all of them), a search in it (while its spans are still unindexed,
and after the indexer caught up) and an import of an N-span OTLP file; `--only-views` measures just that.
Targets there: PostgreSQL's timeline reads within 1.5x SQLite's, its search <= 1 s, its import within
1.3x SQLite's, the same hits on both.

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

from agentdesk.store.approvals.commands import decide
from agentdesk.store.changes.watcher import ChangeWatcher
from agentdesk.store.errors import Conflict, StoreError
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.retry import observe_lock_waits
from agentdesk.store.persistence.schema import ApprovalRow, ChangeRow
from agentdesk.store.runtime import AgentRuntime

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
    from agentdesk.store.ingest.importer import import_files

    store = open_store(url)
    out.recv()
    began = time.perf_counter()
    result = import_files(store, [Path(path)], helper=False)
    out.send({"seconds": time.perf_counter() - began, "spans": result.report.spans_written,
              "error": str(result.error) if result.error else None})
    store.close()


def measure_import(url: str, spans: int, tmp: Path, per_trace: int = IMPORT_TRACE_SPANS) -> dict[str, Any]:
    """Decisions every 100 ms while an import of `spans` spans (traces of `per_trace`: small ones, or
    `per_trace=spans` for one large trace, written staged) runs in another process."""
    store = open_store(url)
    rt = AgentRuntime(store, actor="bench")
    a = set_up(rt, rt.create_project("import load"), 0)
    for n in range(300):  # enough pending approvals for a long import
        rt.request_approval(a.run, "shell", {"command": f"echo {n}"}, span_id=a.span, timeout_s=None)
    path = otlp_file(tmp / f"import-{spans}-{per_trace}.jsonl", spans, per_trace)
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


# -- the views on both backends (issue 21) -----------------------------------------------------------
TIMELINE_RATIO = 1.5
"""PostgreSQL's timeline read (first spans, all spans) within this many times SQLite's."""
SEARCH_S = 1.0
"""A search in a run of `--views` spans, on PostgreSQL."""
IMPORT_RATIO = 1.3
"""PostgreSQL's import of the same trace file within this many times SQLite's."""
SEARCH_QUERY = "read_file"
FIRST_SPANS = 10_000
"""What the timeline reads first (model/timeline/feed.py's FIRST_SPANS)."""


def _best(fn: Any, repeat: int = 5) -> float:
    """The fastest of `repeat` calls, in seconds: warm caches, the machine's noise (2 shared cores) mostly out."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def _populate(url: str, spans: int) -> str:
    """A store with one run of `spans` spans among 20 small ones (the timeline bench's store); its run id.
    The big run's token sums pass 2**31: PostgreSQL's `runs` columns are BIGINT since 0022_bigint_tokens."""
    from agentdesk.store.sim import generator

    store = open_store(url)
    try:
        return generator.populate_bulk(store, projects=1, runs=20, big_run_spans=spans, detailed_runs=5).big_run_id
    finally:
        store.close()


def measure_views(url: str, import_url: str, spans: int, tmp: Path, per_trace: int) -> dict[str, Any]:
    """The timeline read (first spans, all), a search (before and after the index caught up) and an import
    of `spans` spans, in one process, best of five for the reads."""
    from agentdesk.store.ingest.importer import import_files
    from agentdesk.store.native import NativeSource
    from agentdesk.store.search.indexer import drain
    from agentdesk.store.search.run_search import search_run
    from agentdesk.store.timeline.read import span_columns

    run = _populate(url, spans)
    source = NativeSource.open(url)
    try:
        first_call = _best(lambda: span_columns(source, run, FIRST_SPANS), 1)  # cold-ish: the store just opened
        count = len(span_columns(source, run))
        first = _best(lambda: span_columns(source, run, FIRST_SPANS))
        whole = _best(lambda: span_columns(source, run))
        unindexed = _best(lambda: search_run(source, run, SEARCH_QUERY), 1)
        drain(source.store.engine if source.store.is_postgres else source.store.write_engine)
        found = search_run(source, run, SEARCH_QUERY)
        indexed = _best(lambda: search_run(source, run, SEARCH_QUERY))
    finally:
        source.close()
    path = tmp / f"views-import-{spans}-{per_trace}.jsonl"
    if not path.exists():
        otlp_file(path, spans, per_trace)
    store = open_store(import_url)
    try:
        began = time.perf_counter()
        result = import_files(store, [path], helper=False)
        imported = time.perf_counter() - began
    finally:
        store.close()
    return {"spans": count, "first_call_s": first_call, "first_s": first, "whole_s": whole,
            "search_unindexed_s": unindexed,
            "search_s": indexed, "hits": found.total, "import_s": imported,
            "imported": result.report.spans_written, "import_error": str(result.error) if result.error else None}


def judge_views(results: dict[str, dict[str, Any]], spans: int, missed: list[str]) -> None:
    """Print both backends side by side and the ratios; a missed target goes to `missed`."""
    names = list(results)
    rows = [("spans in the run", "spans", "{:,}"),
            (f"timeline: first {FIRST_SPANS:,}, first call", "first_call_s", "{:.3f} s"),
            (f"timeline: first {FIRST_SPANS:,} spans", "first_s", "{:.3f} s"),
            ("timeline: all spans", "whole_s", "{:.3f} s"),
            (f"search {SEARCH_QUERY!r}, unindexed", "search_unindexed_s", "{:.3f} s"),
            (f"search {SEARCH_QUERY!r}, indexed", "search_s", "{:.3f} s"), ("  hits", "hits", "{:,}"),
            (f"import of {spans:,} spans", "import_s", "{:.2f} s")]
    print(f"\nviews at {spans:,} spans (load {os.getloadavg()[0]:.2f}):")
    print(f"{'':<34}" + "".join(f"{n:>14}" for n in names) + ("       ratio" if len(names) == 2 else ""))
    for label, key, fmt in rows:
        cells = [fmt.format(results[n][key]) for n in names]
        ratio = ""
        if len(names) == 2 and key.endswith("_s") and results[names[0]][key] > 0:
            ratio = f"{results[names[1]][key] / results[names[0]][key]:>11.2f}x"
        print(f"{label:<34}" + "".join(f"{c:>14}" for c in cells) + ratio)
    for name in names:
        r = results[name]
        if r["spans"] != spans:
            missed.append(f"{name}: the run has {r['spans']:,} spans, not {spans:,}")
        if r["import_error"] or r["imported"] != spans:
            missed.append(f"{name}: the import wrote {r['imported']:,} of {spans:,} spans ({r['import_error']})")
    if "PostgreSQL" not in results:
        return
    pg = results["PostgreSQL"]
    if pg["search_s"] > SEARCH_S or pg["search_unindexed_s"] > SEARCH_S:
        missed.append(f"PostgreSQL: a search took {max(pg['search_s'], pg['search_unindexed_s']):.2f} s "
                      f"(target <= {SEARCH_S:.0f} s)")
    lite = results.get("SQLite")
    if lite is None:
        return
    if pg["hits"] != lite["hits"]:
        missed.append(f"the search found {pg['hits']:,} spans on PostgreSQL and {lite['hits']:,} on SQLite")
    for key, limit, what in (("first_call_s", TIMELINE_RATIO, "the timeline's first spans (first call)"),
                             ("first_s", TIMELINE_RATIO, "the timeline's first spans"),
                             ("whole_s", TIMELINE_RATIO, "the timeline's whole run"),
                             ("import_s", IMPORT_RATIO, "the import")):
        times = float(pg[key] / lite[key]) if lite[key] > 0 else float("inf")
        if times > limit:
            missed.append(f"{what}: PostgreSQL {times:.2f}x SQLite (target <= {limit}x)")


@dataclass
class Backend:
    """Where one column of figures is measured: a fresh SQLite file or PostgreSQL database per run."""

    name: str
    fresh: Any
    """fresh(label) -> a store URL no one else writes."""
    cleanup: Any = None


def sqlite_backend(tmp: Path) -> Backend:
    return Backend("SQLite", lambda label: str(tmp / f"{label}.sqlite"))


def postgres_backend(choice: str) -> tuple[Backend | None, str]:
    """`choice`: a server URL, or "auto": $AGENTDESK_TEST_PG, else a throwaway server started as tests do."""
    try:
        import psycopg
    except ImportError:
        return None, "psycopg is not installed"
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from agentdesk.store.persistence.postgres.engine import libpq_url

    stops: list[Any] = []
    url = choice if choice != "auto" else os.environ.get("AGENTDESK_TEST_PG", "")
    if not url:
        try:
            from tests.postgres import server
        except ImportError:
            return None, "tests/postgres/server.py is not beside this benchmark"
        bin_dir = server.find_bin_dir()
        if bin_dir is None:
            return None, "no PostgreSQL binaries (set AGENTDESK_TEST_PG or PG_BIN)"
        try:
            folder, url = server.start(bin_dir)
        except Exception as exc:  # the bench reports the SQLite column anyway
            return None, f"a throwaway server could not be started ({exc})"
        stops.append(lambda: server.stop(bin_dir, folder))
    base, _, query = url.partition("?")
    made: list[str] = []

    def admin() -> Any:
        return psycopg.connect(libpq_url(url), autocommit=True)

    def fresh(label: str) -> str:
        name = f"agentdesk_load_{label}_{os.getpid()}".replace("-", "_")
        with admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def cleanup() -> None:
        try:
            with admin() as conn:
                for name in made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            for stop in stops:
                stop()

    try:
        with admin():
            pass
    except Exception as exc:
        cleanup()
        return None, f"the server at {base} refused a connection ({exc})"
    return Backend("PostgreSQL", fresh, cleanup), ""


HEADER = (f"{'agents':>6} {'changes/s':>10} {'fail':>5} {'wait p50':>9} {'wait p99':>9} {'wait max':>9} "
          f"{'decide p50':>10} {'decide p99':>10} {'its wait':>9} {'lag p99':>8}")


def row(r: dict[str, Any]) -> str:
    return (f"{r['agents']:>6} {r['changes_per_s']:>10.0f} {len(r['failures']):>5} {r['wait_p50'] * 1e3:>7.1f}ms "
            f"{r['wait_p99'] * 1e3:>7.1f}ms {r['wait_max'] * 1e3:>7.0f}ms {r['decide_p50'] * 1e3:>8.1f}ms "
            f"{r['decide_p99'] * 1e3:>8.1f}ms {r['decide_wait_p99'] * 1e3:>7.1f}ms "
            f"{r['lag_p99'] * 1e3:>6.0f}ms  ({r['decisions']} decisions)")


def judge(label: str, r: dict[str, Any], missed: list[str]) -> None:
    if r["failures"]:
        missed.append(f"{label}: {len(r['failures'])} writer failures (target 0); first: {r['failures'][0]}")
    if r["decisions"] == 0:
        missed.append(f"{label}: no decision was measured")
    elif r["decide_p99"] * 1e3 > DECISION_P99_TARGET_MS:
        missed.append(f"{label}: decision p99 {r['decide_p99'] * 1e3:.0f} ms "
                      f"(target <= {DECISION_P99_TARGET_MS:.0f} ms)")


def side_by_side(results: dict[str, dict[int, dict[str, Any]]], counts: list[int]) -> None:
    names = list(results)
    print("\nside by side (fail / wait p50 / wait p99 / decide p99 / lag p99):")
    print(f"{'agents':>6}  " + "  ".join(f"{n:<44}" for n in names))
    for n in counts:
        cells = []
        for name in names:
            r = results[name].get(n)
            cells.append("-" if r is None else
                         f"{len(r['failures'])} / {r['wait_p50'] * 1e3:.1f} / {r['wait_p99'] * 1e3:.0f} / "
                         f"{r['decide_p99'] * 1e3:.0f} / {r['lag_p99'] * 1e3:.0f} ms")
        print(f"{n:>6}  " + "  ".join(f"{c:<44}" for c in cells))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1,5,20,50", help="comma-separated agent counts")
    parser.add_argument("--seconds", type=float, default=6.0, help="load duration per agent count")
    parser.add_argument("--processes", type=int, default=4, help="writer processes the agents spread over")
    parser.add_argument("--store", default=None,
                        help="one store URL to measure (default: a fresh SQLite file and PostgreSQL "
                             "database per count)")
    parser.add_argument("--pg", default="auto",
                        help="PostgreSQL server URL for the second column; 'auto' (default): $AGENTDESK_TEST_PG, "
                             "else a throwaway server started as the tests do; 'off' to skip")
    parser.add_argument("--import-spans", type=int, default=20_000,
                        help="spans (small traces) imported while the operator decides; 0 to skip")
    parser.add_argument("--import-trace-spans", type=int, default=IMPORT_TRACE_SPANS,
                        help=f"spans per imported trace (default {IMPORT_TRACE_SPANS}; = --import-spans for one "
                             "large trace, which the import writes in short staged transactions)")
    parser.add_argument("--views", type=int, default=0,
                        help="also read the timeline, search and import a run of this many spans on each backend, "
                             f"side by side (targets: timeline <= {TIMELINE_RATIO}x SQLite, "
                             f"search <= {SEARCH_S:.0f} s, import <= {IMPORT_RATIO}x SQLite); 0 (default) to skip")
    parser.add_argument("--only-views", action="store_true", help="with --views: skip the load and import runs")
    args = parser.parse_args(argv)
    counts = [] if args.only_views else [int(n) for n in args.agents.split(",")]
    if args.only_views:
        args.import_spans = 0
    missed: list[str] = []
    results: dict[str, dict[int, dict[str, Any]]] = {}
    print(f"machine load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        backends: list[Backend] = []
        if args.store:
            backends.append(Backend(args.store.split(":", 1)[0] if "://" in args.store else "SQLite",
                                    lambda label: args.store))
        else:
            backends.append(sqlite_backend(Path(tmp)))
            if args.pg != "off":
                pg, why = postgres_backend(args.pg)
                if pg is None:
                    print(f"PostgreSQL: not measured: {why}")
                else:
                    backends.append(pg)
        try:
            for backend in backends if counts or args.import_spans else ():
                print(f"\n{backend.name}  (load {os.getloadavg()[0]:.2f})\n{HEADER}", flush=True)
                results[backend.name] = {}
                for n in counts:
                    r = measure(backend.fresh(f"load-{n}"), n, args.seconds, args.processes)
                    results[backend.name][n] = r
                    print(row(r), flush=True)
                    judge(f"{backend.name}, {n} agents", r, missed)
                if args.import_spans:
                    per = args.import_trace_spans
                    r = measure_import(backend.fresh("import"), args.import_spans, Path(tmp), per)
                    print(f"during an import of {r['spans']:,} spans ({max(1, args.import_spans // per):,} "
                          f"traces, {r['seconds']:.1f} s): decide p50 {r['decide_p50'] * 1e3:.1f} ms, "
                          f"p99 {r['decide_p99'] * 1e3:.1f} ms, its wait p99 {r['decide_wait_p99'] * 1e3:.1f} ms "
                          f"({r['decisions']} decisions, load {os.getloadavg()[0]:.2f})", flush=True)
                    judge(f"{backend.name}, during an import", r, missed)
            if args.views:
                views = {backend.name: measure_views(backend.fresh("views"), backend.fresh("views-import"),
                                                     args.views, Path(tmp), args.import_trace_spans)
                         for backend in backends}
                judge_views(views, args.views, missed)
        finally:
            for backend in backends:
                if backend.cleanup is not None:
                    backend.cleanup()
    if len(results) > 1 and counts:
        side_by_side(results, counts)
    for line in missed:
        print(f"MISSED: {line}")
    if not missed:
        print("all load targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
