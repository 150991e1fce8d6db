"""examples/otel_agent.py end to end, every part in its own process.

The receiver (`agentdesk receive`) takes the example's spans and serves the agent API the example
is gated through (it holds a URL and an agent token, never the store); the example blocks on
its dangerous tool; the approval shows up in `agentdesk approvals`; `agentdesk
approve --args` from yet another process releases it with edited arguments, and
the example deletes only what the operator left in.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from tests.waiting import eventually

ROOT = Path(__file__).parent.parent.parent


def cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(store), *args],
                          capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def wait_for_pending(store: Path, timeout_s: float = 60) -> dict[str, object]:
    def listed() -> list[dict[str, object]]:  # one CLI process per look: a person refreshing the queue
        shown = cli(store, "approvals", "--json")
        assert shown.returncode == 0, shown.stderr
        return list(json.loads(shown.stdout))

    return dict(eventually(listed, timeout_s=timeout_s, poll_s=0.2, what="an approval in the queue")[0])


def test_example_agent_is_gated_by_an_operator_in_another_process(tmp_path: Path) -> None:
    store = tmp_path / "agentdesk.sqlite"
    assert cli(store, "init").returncode == 0
    made = cli(store, "agent-token", "create", "cleanup-agent")
    assert made.returncode == 0, made.stderr
    token = made.stdout.splitlines()[1]
    receiver = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store), "receive",
                                 "--port", "0", "--every", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env(), cwd=ROOT)
    agent = None
    try:
        assert receiver.stdout is not None
        found = re.search(r"http://(127\.0\.0\.1:\d+)/v1/traces", receiver.stdout.readline())
        assert found
        agent = subprocess.Popen([sys.executable, str(ROOT / "examples" / "otel_agent.py")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                 env=env(AGENTDESK_STORE="/nonexistent/agentdesk.sqlite",  # URL + token only
                                         AGENTDESK_URL=f"http://{found.group(1)}", AGENTDESK_TOKEN=token,
                                         OTEL_BSP_SCHEDULE_DELAY="100",
                                         OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{found.group(1)}"))
        approval = wait_for_pending(store)
        assert approval["tool"] == "delete_files"
        asked = approval["arguments"]
        assert isinstance(asked, dict) and sorted(asked["paths"]) == ["old-1.log", "old-2.log"]
        edited = json.dumps({"folder": asked["folder"], "paths": ["old-1.log"]})
        decided = cli(store, "approve", str(approval["id"]), "--actor", "operator-ann", "--args", edited)
        assert decided.returncode == 0, decided.stderr
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
    finally:
        if agent is not None and agent.poll() is None:
            agent.kill()
        receiver.send_signal(signal.SIGINT)
        receiver_out, receiver_err = receiver.communicate(timeout=30)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    decision = next(e for e in events if e["event"] == "decision")
    assert decision["outcome"] == "approved" and decision["edited"] is True
    assert decision["arguments"]["paths"] == ["old-1.log"] and decision["decided_by"] == "operator-ann"
    deleted = next(e for e in events if e["event"] == "tool" and e["tool"] == "delete_files")
    assert deleted["output"] == ["old-1.log"]
    assert events[-1]["event"] == "done" and events[-1]["remaining"] == ["keep.txt", "old-2.log"]
    assert receiver.returncode == 0 and "0 refused" in receiver_out, receiver_err
    opened = open_store(str(store), read_only=True)
    try:  # the OTel spans came in through the receiver, and the gate sits in that same run, under the tool
        source = NativeSource(opened)
        decided_row = source.approval(str(approval["id"]))
        assert decided_row.run_id.startswith("otr_")
        table = source.span_table(decided_row.run_id)
        names = dict(zip(table.ids, table.names, strict=True))
        assert {"invoke_agent janitor", "chat scripted-model", "execute_tool delete_files",
                "approval: delete_files"} <= set(names.values())
        gate = source.span(decided_row.span_id or "")
        assert gate.kind == "gate" and names[gate.parent_span_id or ""] == "execute_tool delete_files"
        assert [p.name for p in source.projects()] == ["cleanup-agent"]
        agents = [a for t in source.tasks(decided_row.project_id) for ses in source.sessions(t.id)
                  for a in source.agents(ses.id)]
        assert agents and all(a.status not in ("running", "waiting") for a in agents)  # the wait left nothing live
    finally:
        opened.close()
