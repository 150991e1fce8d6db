"""How long a dry run over a large history takes, and what a rule costs per approval request.

Run: .venv/bin/python bench/rules_bench.py [--approvals 10000]

1. Dry run: a store with N decided run_shell approvals (a mix of distinct commands, chained and plain)
   and one allow rule; times `dry_run` over the whole history (the Rules panel runs it off the GUI
   thread on every edit, debounced). Target: ≤ 2 s for 10,000 approvals.
2. Request cost: `request_approval` with 20 live rules for the tool vs with none (median of 300).
   Target: the rules add ≤ 5 ms a request.
Exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import open_store
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
        rt.store.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
