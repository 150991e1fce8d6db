"""OTel import benchmark: one 100,000-span agent trace from the real OpenTelemetry SDK, imported.

    .venv/bin/python bench/otel_import.py [--spans 100000] [--curve 300000] [--format json|jsonl]

The trace is made by `opentelemetry-sdk` (nested agents, model calls with their
input/output messages, tool calls; an in-memory exporter), encoded by the OTLP
exporter's own encoder (`encode_spans`) and written as spec OTLP/JSON (hex ids,
integer enums) via protobuf's `json_format`. The import runs as a real
`agentdesk import` subprocess into a fresh store, so its wall time and peak RSS
(the child's `ru_maxrss`) are the command's own. Targets: the 100,000-span trace
in <= 20 s, and (issue 22) no longer than Python's own `json.load` of the same file, timed side by side in
this run in a child process of its own (JSON Lines: `json.loads` of every line); exits 1 when either is
missed. Generated files are cached in the temp folder.

It also measures the store's size (bench/store_size.py): bytes per span on disk after the import (the file
after a WAL checkpoint), then again once the search index is built (as a window builds it; `--no-index`
skips that), with the largest tables and indexes. Target: <= 2.5 KB per span after the import; exits 1 when
missed. `--pg URL` imports the same trace into a new database on that PostgreSQL server too and reports
`pg_database_size` per span and the largest tables (their TOAST and indexes included).

Measured on the 100,000-span trace (2-core VM shared with other work): before span attributes were stored
compressed, 2,854 B/span after the import and 6,749 B/span indexed; after, 1,811 and 4,652 B/span.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import store_size  # bench/ is not a package: the helpers beside this script
from pg_bench import fresh_pg

TARGET_S = 20.0
PG_RATIO = 1.3
"""Issue 21: a PostgreSQL import takes at most 1.3x SQLite's time for the same trace (`--pg`)."""
SPANS_PER_AGENT = 42
"""An agent invocation: itself, 10 turns of chat + tool, a guardrail... ~42 spans."""


def generate(spans: int) -> list[Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agents"}),
                              span_limits=SpanLimits(max_span_attributes=256))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench.otel", "1.0")
    rng = random.Random(7)
    made = 0

    def turn(agent: str, history: list[dict[str, Any]], n: int) -> None:
        nonlocal made
        call_id = f"call_{agent}_{n}"
        reply = {"role": "assistant", "parts": [
            {"type": "text", "content": f"Step {n}: I will inspect module {rng.randint(1, 999)}."},
            {"type": "tool_call", "id": call_id, "name": "read_file",
             "arguments": {"path": f"src/mod_{rng.randint(1, 999)}.py"}}]}
        with tracer.start_as_current_span("chat gpt-5", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-5", "gen_ai.response.model": "gpt-5-2026-08",
                "gen_ai.usage.input_tokens": rng.randint(500, 20_000),
                "gen_ai.usage.output_tokens": rng.randint(20, 800),
                "gen_ai.input.messages": json.dumps(history[-8:]),
                "gen_ai.output.messages": json.dumps([reply]),
                "gen_ai.response.finish_reasons": ["tool_calls"]}):
            made += 1
        with tracer.start_as_current_span("execute_tool read_file", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": json.dumps(reply["parts"][1]["arguments"]),
                "gen_ai.tool.call.result": "def f():\n    return 1\n" * rng.randint(1, 6)}):
            made += 1
        history.append(reply)
        history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                                    "response": "def f(): return 1"}]})

    def agent(name: str, depth: int) -> None:
        nonlocal made
        with tracer.start_as_current_span(f"invoke_agent {name}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                "gen_ai.conversation.id": "bench-conversation"}):
            made += 1
            history: list[dict[str, Any]] = [
                {"role": "system", "parts": [{"type": "text", "content": f"You are {name}. Be thorough."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Refactor the payment module."}]}]
            for n in range(10):
                turn(name, history, n)
                if made >= spans:
                    return
            if depth < 2:
                for k in range(2):
                    if made + SPANS_PER_AGENT > spans:
                        break
                    agent(f"{name}.{k}", depth + 1)

    with tracer.start_as_current_span("invoke_agent orchestrator", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orchestrator",
            "gen_ai.conversation.id": "bench-conversation"}):
        made += 1
        w = 0
        while made + 2 < spans:
            agent(f"worker{w}", 1)
            w += 1
            if made + SPANS_PER_AGENT > spans:
                while made < spans - 1:
                    with tracer.start_as_current_span("plan", attributes={"gen_ai.operation.name": "plan"}):
                        made += 1
                break
    provider.shutdown()
    return list(exporter.get_finished_spans())


def to_otlp_json(spans: list[Any]) -> dict[str, Any]:
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc = json_format.MessageToDict(encode_spans(spans))
    kinds = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
             "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:  # the OTLP/JSON spec differs from proto3 JSON: hex ids, integer enums
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
                s["kind"] = kinds.get(s.get("kind", "SPAN_KIND_UNSPECIFIED"), 0)
                if "status" in s and isinstance(s["status"].get("code"), str):
                    s["status"]["code"] = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(s["status"]["code"], 0)
    return doc


def trace_file(spans: int, fmt: str) -> Path:
    """The cached trace file, generated in a child process when missing: a generating parent would be
    gigabytes big when it starts the import, and the import child's peak RSS would count that."""
    path = Path(tempfile.gettempdir()) / f"agentdesk-bench-otel-{spans}.{fmt}"
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--generate", str(spans), "--format", fmt], check=True)
    return path


def write_trace_file(spans: int, fmt: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"agentdesk-bench-otel-{spans}.{fmt}"
    began = time.perf_counter()
    doc = to_otlp_json(generate(spans))
    with path.with_suffix(".part").open("w") as f:
        if fmt == "json":
            json.dump(doc, f)
        else:  # JSON Lines, one TracesData per 512 spans (the SDK's default export batch)
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for n in range(0, len(ss["spans"]), 512):
                        f.write(json.dumps({"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [
                            {"scope": ss["scope"], "spans": ss["spans"][n:n + 512]}]}]}) + "\n")
    path.with_suffix(".part").replace(path)
    print(f"generated {spans:,} SDK spans as {fmt} ({path.stat().st_size / 2**20:.0f} MiB) in "
          f"{time.perf_counter() - began:.1f} s", flush=True)
    return path


def import_once(path: Path, spans: int, measure: Callable[[str], None] | None = None,
                store_url: str | None = None) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system) of one `agentdesk import`; `measure` is
    called with the store (path or `store_url`) before it is removed."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentdesk-bench-otel-") as folder, \
            tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        store = store_url or str(Path(folder) / "bench.sqlite")  # removed afterwards: ~200 MB at 100,000 spans
        child = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", store, "import",
                                  str(path), "--quiet"], env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak RSS and CPU, nobody else's
        elapsed = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        if child.returncode == 0 and measure is not None:
            measure(store)
    if child.returncode != 0:
        print(stdout, stderr, file=sys.stderr)
        raise SystemExit(f"import failed with exit code {child.returncode}")
    print("  " + stdout.strip())
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def json_load_seconds(path: Path, fmt: str) -> float:
    """Python's `json.load` of the file, in a fresh child process (the file already in the page cache from the
    import before it): the floor issue 22 sets for the whole import."""
    code = ("import json, sys, time\n"
            "began = time.perf_counter()\n"
            "with open(sys.argv[1], 'rb') as f:\n"
            "    docs = [json.loads(line) for line in f] if sys.argv[2] == 'jsonl' else [json.load(f)]\n"
            "print(time.perf_counter() - began)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path), fmt], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--curve", type=int, nargs="*", default=[], metavar="N",
                        help="also import traces of these sizes (e.g. 300000) for a scaling curve")
    parser.add_argument("--format", choices=("json", "jsonl"), default="json")
    parser.add_argument("--no-index", action="store_true", help="skip building the search index to measure it")
    parser.add_argument("--pg", metavar="URL", help="also import into a new database on this PostgreSQL server")
    parser.add_argument("--generate", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        write_trace_file(args.generate, args.format)
        return 0
    results = []
    sizes: dict[str, float] = {}
    for n in [args.spans, *args.curve]:
        path = trace_file(n, args.format)
        seconds, rss, cpu = import_once(path, n, (lambda store: measure_sqlite(Path(store), not args.no_index, sizes))
                                        if n == args.spans else None)
        results.append((n, seconds, rss))
        print(f"import {n:>9,} spans ({args.format}): {seconds:6.1f} s  {n / seconds:8,.0f} spans/s  "
              f"peak RSS {rss:6.0f} MiB  CPU {cpu:6.1f} s  (load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores)", flush=True)
    if args.pg:
        measure_pg(args.pg, trace_file(args.spans, args.format), args.spans, sizes)
    main_seconds = results[0][1]
    parse_s = json_load_seconds(trace_file(args.spans, args.format), args.format)
    print(f"json.load of the same file: {parse_s:.2f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
    ok = main_seconds <= TARGET_S
    print(f"target: {args.spans:,} spans in <= {TARGET_S:.0f} s: {'met' if ok else 'MISSED'} ({main_seconds:.1f} s)")
    parse_bound = main_seconds <= parse_s
    print(f"target: the import no longer than json.load of the file: {'met' if parse_bound else 'MISSED'} "
          f"({main_seconds:.1f} s against {parse_s:.2f} s, {main_seconds / parse_s:.1f}x)")
    pg_seconds = sizes.pop("PostgreSQL import s", None)
    pg_ok = pg_seconds is None or pg_seconds <= PG_RATIO * main_seconds
    if pg_seconds is not None:  # issue 21: PostgreSQL at most 1.3x SQLite's time for the same trace
        print(f"target: the PostgreSQL import <= {PG_RATIO}x SQLite's: {'met' if pg_ok else 'MISSED'} "
              f"({pg_seconds:.1f} s against {main_seconds:.1f} s, {pg_seconds / main_seconds:.2f}x)")
    # What an operator's store settles at: indexed, when the index was built (the window builds it).
    settled = sizes.get("SQLite indexed", sizes["sqlite"])
    small = settled <= store_size.TARGET_BYTES and all(v <= store_size.TARGET_BYTES for v in sizes.values())
    print(f"target: <= {store_size.TARGET_BYTES:,.0f} B/span on disk, search index built (SQLite) and on "
          f"PostgreSQL: {'met' if small else 'MISSED'} ("
          + "; ".join(f"{'SQLite after the import' if k == 'sqlite' else k} {v:,.0f}" for k, v in sizes.items())
          + " B/span)")
    return 0 if ok and parse_bound and small and pg_ok else 1


def measure_sqlite(path: Path, indexed: bool, sizes: dict[str, float]) -> None:
    size, spans = store_size.sqlite_bytes(path)
    sizes["sqlite"] = store_size.report("SQLite after the import", size, spans, store_size.sqlite_breakdown(path))
    if indexed:
        seconds = store_size.index_search(path)
        size, spans = store_size.sqlite_bytes(path)
        sizes["SQLite indexed"] = store_size.report(f"SQLite with the search index (built in {seconds:.1f} s)",
                                                    size, spans, store_size.sqlite_breakdown(path))


def measure_pg(base_url: str, path: Path, n: int, sizes: dict[str, float]) -> None:
    name = f"agentdesk_bench_otel_{os.getpid()}"
    url = fresh_pg(base_url, name)
    try:
        def measure(store: str) -> None:
            size, spans, parts = store_size.pg_bytes(store)
            sizes["PostgreSQL"] = store_size.report("PostgreSQL after the import", size, spans, parts)
        seconds, _, cpu = import_once(path, n, measure, store_url=url)
        sizes["PostgreSQL import s"] = seconds
        print(f"import {n:>9,} spans into PostgreSQL: {seconds:6.1f} s  CPU {cpu:6.1f} s", flush=True)
    finally:
        store_size.drop_pg(base_url, name)


if __name__ == "__main__":
    sys.exit(main())
