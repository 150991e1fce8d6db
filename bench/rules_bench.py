"""How long a dry run over a large history takes, and what a rule costs per approval request.

Run: .venv/bin/python bench/rules_bench.py [--approvals 10000]

1. Dry run: a store with N decided run_shell approvals (a mix of distinct commands, chained and plain)
   and one allow rule; times `dry_run` over the whole history (the Rules panel runs it off the GUI
   thread on every edit, debounced). Target: ≤ 2 s for 10,000 approvals.
2. Request cost: `request_approval` with 20 live rules for the tool vs with none (median of 300).
   Target: the rules add ≤ 5 ms a request.
3. Hostile commands: `request_approval` of commands built to be slow to parse (18,000 characters of nested
   `<(ls `, 7,800 characters of it, 8,000 characters of words, 1,000 characters of `ls a && …`) with the 20
   rules: how long the call takes and how long the analysis took (it runs before the write transaction),
   and how long an operator's decision takes while an agent thread sends such commands back to back.
   Targets: each analysis ≤ 25 ms of CPU time (the budget is 20 ms); the operator's decision p99 ≤ 100 ms.
Exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import insert

from agentdesk.store.ids import new_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import open_store
from agentdesk.store.rules.command import analyse, clear_cache
from agentdesk.store.rules.commands import add_rule
from agentdesk.store.rules.dryrun import dry_run
from agentdesk.store.rules.model import Effect, Rule, parse_matcher
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.validation import canonical_arguments, payload_hash

COMMANDS = ["npm test", "npm run lint", "git status", "npm test && rm -rf ~", "cd /w && npm test", "pytest -x",
            "npm test $(id)", "ls -la | grep x", "make build && make test", "echo `whoami`"]
MATCHER = {"kind": "shell", "field": "command", "commands": [["npm", "test", "*"], ["npm", "run", "lint", "*"]],
           "fields": {"cwd": {"any": True}}}


def build(path: Path, approvals: int) -> tuple[AgentRuntime, str]:
    store = open_store(str(path))
    rt = AgentRuntime(store)
    agent = rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"), "a", "m")
    run = rt.start_run(agent, "r")
    with store.engine.begin() as conn:
        row = conn.execute(sc.RunRow.__table__.select().where(sc.RunRow.id == run)).mappings().one()
        rows = []
        for n in range(approvals):
            args = canonical_arguments({"command": f"{COMMANDS[n % len(COMMANDS)]} {n % 97}", "cwd": "/w"})
            rows.append(dict(id=new_id("apr"), tool_call_id=None, project_id=row["project_id"],
                             task_id=row["task_id"], session_id=row["session_id"], agent_id=agent, run_id=run,
                             span_id=None, tool_name="run_shell", arguments=args,
                             payload_hash=payload_hash("run_shell", args),
                             status="approved" if n % 3 else "denied", created_at=time.time() - n,
                             expires_at=None, decided_at=time.time(), decided_by="op", revision=2))
        conn.execute(insert(sc.ApprovalRow), rows)
    return rt, run


HOSTILE = {"18,000 chars of nested <(ls": "ls " + "<(ls " * 3000 + ")" * 3000,
           "7,800 chars of nested <(ls": "ls " + "<(ls " * 1300 + ")" * 1300,
           "7,800 chars of nested $(ls": "ls " + "$(ls " * 1300 + ")" * 1300,
           "8,000 chars of words": "ls " + "a " * 4000,
           "1,000 chars of ls a &&": "ls a && " * 124 + "ls"}


def hostile(rt: AgentRuntime, run: str) -> bool:
    failed = False
    for label, command in HOSTILE.items():
        clear_cache()
        start, cpu = time.perf_counter(), time.thread_time()
        view = analyse(command)
        wall_ms = (time.perf_counter() - start) * 1000
        parse_ms = (time.thread_time() - cpu) * 1000
        clear_cache()
        start = time.perf_counter()
        aid = rt.request_approval(run, "run_shell", {"command": command, "cwd": "/w"})
        call_ms = (time.perf_counter() - start) * 1000
        status = NativeSource(rt.store).approval(aid).status
        print(f"{label}: analysis {parse_ms:.1f} ms CPU, {wall_ms:.1f} ms wall "
              f"({'unreadable' if not view.readable else 'read'}: "
              f"{view.why_not or 'plain'}), request_approval {call_ms:.1f} ms, {status}")
        failed |= parse_ms > 25.0 or status != "pending"
    source = NativeSource(rt.store)
    waiting = [rt.request_approval(run, "read_file", {"path": f"{n}.py"}) for n in range(200)]
    stop = threading.Event()

    def agent() -> None:
        commands = list(HOSTILE.values())
        n = 0
        while not stop.is_set():
            clear_cache()
            rt.request_approval(run, "run_shell", {"command": commands[n % len(commands)], "cwd": "/w"})
            n += 1

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    samples = []
    for aid in waiting:
        start = time.perf_counter()
        source.decide(aid, True, "bench")
        samples.append((time.perf_counter() - start) * 1000)
    stop.set()
    thread.join(30)
    samples.sort()
    p99 = samples[int(len(samples) * 0.99) - 1]
    print(f"operator decide while an agent sends hostile commands back to back: median "
          f"{statistics.median(samples):.1f} ms, p99 {p99:.1f} ms, max {samples[-1]:.1f} ms")
    return failed or p99 > 100.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--approvals", type=int, default=10_000)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        rt, run = build(Path(tmp) / "bench.sqlite", args.approvals)
        draft = Rule("", Effect.ALLOW, "run_shell", parse_matcher("run_shell", json.loads(json.dumps(MATCHER))))
        draft_wild = Rule("", Effect.DENY, "run_shell", parse_matcher("run_shell", {
            "kind": "shell", "field": "command", "commands": [["rm", "*"]]}))
        for label, rule in (("allow npm test|lint", draft), ("deny rm *", draft_wild)):
            start = time.perf_counter()
            result = dry_run(rt.store, rule, limit=args.approvals)
            took = time.perf_counter() - start
            print(f"dry run ({label}) over {result.examined:,} approvals: {took * 1000:.0f} ms, "
                  f"{len(result.rows):,} matched, {result.differing:,} differ")
            failed |= took > 2.0 * args.approvals / 10_000
        def request_ms() -> float:
            samples = []
            for _ in range(300):
                start = time.perf_counter()
                rt.request_approval(run, "run_shell", {"command": "make deploy", "cwd": "/w"})
                samples.append((time.perf_counter() - start) * 1000)
            return statistics.median(samples)
        bare = request_ms()
        for n in range(20):
            add_rule(rt.store, "allow", "run_shell", {**MATCHER, "commands": [["tool", str(n)]]}, "bench")
        ruled = request_ms()
        print(f"request_approval median: {bare:.2f} ms without rules, {ruled:.2f} ms with 20 live rules "
              f"(+{ruled - bare:.2f} ms)")
        failed |= ruled - bare > 5.0
        failed |= hostile(rt, run)
        rt.store.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
