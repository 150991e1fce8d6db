"""`kill -9` writers at random points; the store must come back whole every time.

Three writer kinds run on one store at once, each restarted as soon as it is
killed: the simulator at full speed, an `approve`/`deny` from the command line and
an `agentdesk import` of an OTLP/JSON file. Each is SIGKILLed after a random delay
scaled to how long a command takes on this machine; after every kill (while the
other two keep writing) the test checks:

- `PRAGMA integrity_check` is ok;
- the audit chain verifies (in process after every kill, `agentdesk verify` every tenth);
- the change log is contiguous (no gap in its sequence numbers), its rows keep
  commit order (`at` never decreases), and nothing committed earlier was lost or rewritten;
- the decision in flight is all or nothing: still pending with no decision in the
  audit log, or decided by the killed command with exactly one audit record;
- a new writer continues: runtime writes and an operator decision succeed.

`test_a_decision_killed_inside_its_transaction_leaves_nothing` kills a decision
deterministically between its writes and its commit, the one point a random kill
rarely hits. AGENTDESK_CRASH_KILLS changes the number of kills (default 30).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.store.approvals.commands import decide
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime

KILLS = int(os.environ.get("AGENTDESK_CRASH_KILLS", "30"))
ROOT = Path(__file__).resolve().parents[2]
ACTOR = "crash-operator"


def env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen",
            "AGENTDESK_CONFIG_DIR": os.environ.get("AGENTDESK_CONFIG_DIR", str(tmp / "config"))}


def cli(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "agentdesk.cli", "--store", str(store), *args]


def otlp_file(path: Path, round_no: int, traces: int = 40, spans: int = 6) -> Path:
    """A plain OTLP/JSON file of agent traces whose ids are unique to this round."""
    resource_spans = []
    for t in range(traces):
        trace_id = f"{round_no:08x}{t:08x}".ljust(32, "a")
        root = f"{t:08x}".ljust(16, "b")
        start = 1_700_000_000_000_000_000 + (round_no * 1000 + t) * 10_000_000
        items = [{"traceId": trace_id, "spanId": root, "name": "invoke_agent planner", "kind": 1,
                  "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 9_000_000),
                  "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                                 {"key": "gen_ai.agent.name", "value": {"stringValue": "planner"}}]}]
        for s in range(1, spans):
            items.append({"traceId": trace_id, "spanId": f"{t:08x}{s:08x}", "parentSpanId": root,
                          "name": "chat gpt-5", "kind": 3, "startTimeUnixNano": str(start + s * 1_000_000),
                          "endTimeUnixNano": str(start + s * 1_000_000 + 500_000),
                          "attributes": [
                              {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                              {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-5"}},
                              {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(10 + s)}}]})
        resource_spans.append({"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": f"crash-{round_no}"}}]},
            "scopeSpans": [{"scope": {"name": "crash"}, "spans": items}]})
    path.write_text(json.dumps({"resourceSpans": resource_spans}))
    return path


class Checker:
    """What must hold after every crash, and what the store looked like before it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log_before: list[tuple[int, float, str, str]] = []
        self.store = open_store(str(path))  # the test's own writer: it is never killed

    def close(self) -> None:
        self.store.close()

    def integrity(self) -> None:
        conn = sqlite3.connect(self.path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            log = conn.execute("SELECT seq, at, entity, entity_id FROM change_log ORDER BY seq").fetchall()
        finally:
            conn.close()
        seqs = [row[0] for row in log]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "the change log has a gap"
        ats = [row[1] for row in log]
        assert all(a <= b for a, b in itertools.pairwise(ats)), "change-log rows out of commit order"
        assert log[:len(self.log_before)] == self.log_before, "a committed change-log row was lost or rewritten"
        self.log_before = log

    def chain(self) -> None:
        report = NativeSource(self.store).verify()
        assert report.ok, f"audit chain broken at {report.broken_seq}: {report.reason}"

    def decision(self, approval_id: str) -> str:
        """All or nothing; returns the approval's status."""
        with self.store.reading() as s:
            row = s.get(sc.ApprovalRow, approval_id)
            assert row is not None
            status, decided_by, tool_call = row.status, row.decided_by, row.tool_call_id
            records = s.execute(select(sc.AuditRow.action, sc.AuditRow.actor).where(
                sc.AuditRow.entity_id == approval_id, sc.AuditRow.action != "approval.request")).all()
            call = s.get(sc.ToolCallRow, tool_call) if tool_call else None
            call_status = call.status if call else None
        if status == "pending":
            assert records == [], f"a decision of pending approval {approval_id} reached the audit log"
            assert call_status == "pending"
        else:
            assert status in ("approved", "denied")
            assert records == [(f"approval.{status}", ACTOR)], f"{approval_id}: {records}"
            assert decided_by == ACTOR and call_status == status
        return status

    def writer_continues(self, run: str, spare_approval: str) -> None:
        rt = AgentRuntime(self.store, actor="after-crash")
        span = rt.start_span(run, "model", "after the crash")
        rt.finish_span(span, "ok", output_text="still writing")
        assert decide(self.store, spare_approval, True, "after-crash").status == "approved"


def prepare(path: Path, approvals: int) -> tuple[str, list[str]]:
    store = open_store(str(path))
    try:
        rt = AgentRuntime(store, actor="crash-setup")
        project = rt.create_project("crash")
        session = rt.create_session(rt.create_task(project, "crash"), "crash")
        run = rt.start_run(rt.create_agent(session, "crash", "m"), "crash")
        ids = [rt.request_approval(run, "shell", {"command": f"echo {n}"}, timeout_s=None)
               for n in range(approvals)]
    finally:
        store.close()
    return run, ids


def kill_after(proc: subprocess.Popen[bytes], delay_s: float) -> bool:
    """SIGKILL the process after `delay_s` unless it ended first; True when it was killed."""
    deadline = time.monotonic() + delay_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    return killed


def simulator(path: Path, environ: dict[str, str], seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cli(path, "simulate", "--agents", "2", "--speed", "50", "--duration", "60",
                                "--seed", str(seed), "--approval-timeout", "600"),
                            env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def importer(path: Path, environ: dict[str, str], tmp: Path, round_no: int) -> subprocess.Popen[bytes]:
    source = otlp_file(tmp / f"traces-{round_no}.json", round_no)
    return subprocess.Popen(cli(path, "import", "--quiet", str(source)), env=environ,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def calibrate(path: Path, environ: dict[str, str], tmp: Path, approval: str) -> float:
    """Run one decision to its end beside the simulator and an import; returns its duration."""
    others = [simulator(path, environ, 10_000), importer(path, environ, tmp, 10_000)]
    started = time.monotonic()
    subprocess.run(cli(path, "approve", approval, "--actor", ACTOR), env=environ, check=True,
                   capture_output=True, timeout=120)
    elapsed = time.monotonic() - started
    for proc in others:
        kill_after(proc, 0)
    return elapsed


@dataclass
class Slot:
    """One writer kind kept running: when its process is killed (or ends), the next one starts."""

    kind: str
    proc: subprocess.Popen[bytes] | None = None
    kill_at: float = 0.0
    target: str | None = None


def test_kill_9_at_random_points_never_breaks_the_store(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    path = tmp_path / "crash.sqlite"
    environ = env(tmp_path)
    run, approvals = prepare(path, 3 * KILLS + 4)
    check = Checker(path)
    request.addfinalizer(check.close)
    check.integrity()
    rng = random.Random(20261201)
    # How long a command takes here while the others run, start to exit: the kills are spread around it.
    command_s = calibrate(path, environ, tmp_path, approvals.pop())
    spread = {"simulate": (0.4, 1.6), "decide": (0.3, 1.0), "import": (0.3, 1.2)}
    outcomes: dict[str, int] = {"pending": 0, "approved": 0, "denied": 0}
    kills: dict[str, int] = {"simulate": 0, "decide": 0, "import": 0}
    started = 0

    def launch(slot: Slot) -> None:
        nonlocal started
        started += 1
        if slot.kind == "simulate":
            slot.proc = simulator(path, environ, started)
        elif slot.kind == "import":
            slot.proc = importer(path, environ, tmp_path, started)
        else:
            slot.target = approvals.pop()
            decision = (["approve", slot.target, "--actor", ACTOR] if rng.random() < 0.5
                        else ["deny", slot.target, "--actor", ACTOR, "--reason", "crash test"])
            slot.proc = subprocess.Popen(cli(path, *decision), env=environ, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        slot.kill_at = time.monotonic() + rng.uniform(*spread[slot.kind]) * command_s

    slots = [Slot(kind) for kind in spread]
    for slot in slots:
        launch(slot)
    try:
        while sum(kills.values()) < KILLS:
            slot = min(slots, key=lambda s: s.kill_at)
            assert slot.proc is not None
            if kill_after(slot.proc, max(0.0, slot.kill_at - time.monotonic())):
                kills[slot.kind] += 1
            # The others keep writing while the store is checked, as they would in real life.
            check.integrity()
            check.chain()
            if slot.target is not None:
                outcomes[check.decision(slot.target)] += 1
            check.writer_continues(run, approvals.pop())
            if sum(kills.values()) % 10 == 0:
                cli_verify(path, environ)
            launch(slot)
    finally:
        for slot in slots:
            if slot.proc is not None:
                kill_after(slot.proc, 0)
    check.integrity()
    check.chain()
    for slot in slots:
        if slot.target is not None:
            check.decision(slot.target)
    cli_verify(path, environ)
    assert min(kills.values()) >= 1, f"some writer kind was never killed: {kills}"
    print(f"kills: {kills}; decisions killed in flight ended {outcomes}")  # shown with -s


def cli_verify(path: Path, environ: dict[str, str]) -> None:
    verified = subprocess.run(cli(path, "verify"), env=environ, capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr


DECIDE_AND_HANG = """
import sys, time
from agentdesk.store import uow
from agentdesk.store.approvals.commands import decide
from agentdesk.store.persistence.database import open_store

real = uow.UnitOfWork._write_change_log
def hang(self):
    published = real(self)
    print("inside", flush=True)  # every row of the decision is written, the commit is next
    time.sleep(60)
    return published
uow.UnitOfWork._write_change_log = hang
decide(open_store(sys.argv[1]), sys.argv[2], True, sys.argv[3])
"""


def test_a_decision_killed_inside_its_transaction_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "crash.sqlite"
    run, (target, spare) = prepare(path, 2)
    proc = subprocess.Popen([sys.executable, "-c", DECIDE_AND_HANG, str(path), target, ACTOR],
                            env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == b"inside\n", proc.stderr.read() if proc.stderr else line
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    check = Checker(path)
    try:
        check.integrity()
        check.chain()
        assert check.decision(target) == "pending"
        check.writer_continues(run, spare)
        # and the decision can still be made, exactly once
        assert decide(check.store, target, False, ACTOR, reason="after the crash").status == "denied"
        assert check.decision(target) == "denied"
    finally:
        check.close()

