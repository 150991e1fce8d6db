"""A vgxness database for tests and screenshots, built from its own migrations.

The schema is vgxness's migrations 001-005 verbatim and the reference story (§5.3) verbatim, from
`fixtures_vgxness_sql`. Like the runtime, the file stays in the default rollback journal (vgxness never
sets WAL). On top, a second project is generated relative to *now*: an agent registry with nested
sub-agents, a busy run of hundreds of events and several checkpoints (tool calls with HTML-looking and
unicode payloads, a failed verification, memory operations naming an observation and an artifact,
a multi-megabyte execution result), runs waiting on a pending approval, approved / rejected /
cancelled approvals, and a run whose agent the registry does not hold.

Run `python -m tests.store.sources.fixtures_vgxness OUT.db` to write one.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.store.sources.fixtures_vgxness_sql import MIGRATIONS, REFERENCE_ROWS

# Write conventions of the runtime (reference §3: `sequence` = MAX+1 per run inside an immediate tx).
INSERT_EVENT = """INSERT INTO run_events
  (id, run_id, sequence, kind, title, payload_json, related_type, related_id, created_at)
  SELECT ?, ?, COALESCE(MAX(sequence), 0) + 1, ?, ?, ?, ?, ?, ? FROM run_events WHERE run_id = ?"""
INSERT_CHECKPOINT = """INSERT INTO run_checkpoints (id, run_id, sequence, label, state_json, created_at)
  SELECT ?, ?, COALESCE(MAX(sequence), 0) + 1, ?, ?, ? FROM run_checkpoints WHERE run_id = ?"""
INSERT_APPROVAL = """INSERT INTO run_approvals
  (id, run_id, decision_event_id, status, requested_at, resolved_at, resolved_by, resolution_reason)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""
INSERT_RUN = """INSERT INTO runs
  (id, project, user_intent, workflow, phase, selected_agent_id, provider_adapter, model,
   status, outcome, outcome_reason, latest_checkpoint_id, created_at, updated_at, completed_at)
  VALUES (?, ?, ?, ?, ?, ?, 'claude-code', ?, ?, ?, ?, NULL, ?, ?, ?)"""
INSERT_AGENT = """INSERT INTO agents
  (id, project, scope, mode, name, description, instructions_json, capabilities_json, permissions_json,
   memory_json, workflows_json, skills_json, adapters_json, parent_agent_id, created_at, updated_at)
  VALUES (?, ?, 'project', ?, ?, ?, '[]', '[]', '{}', '{}', '[]', '[]', '["claude-code"]', ?, ?, ?)"""

PROJECT = "orbit-api"
HTML_TITLE = '<img src=x onerror=alert(1)> Bash: echo "<b>hi</b>" &amp;'
UNICODE_TITLE = "Édition du résumé — 東京 📦"
BASH = ("tool", "Bash")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Writer:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.n = 0

    def event(self, run_id: str, kind: str, title: str, payload: dict[str, Any], at: datetime,
              related: tuple[str | None, str | None] = (None, None), event_id: str | None = None) -> str:
        self.n += 1
        event_id = event_id or f"rev_{run_id}_{self.n:04d}"
        body = json.dumps(payload, ensure_ascii=False)
        self.conn.execute(INSERT_EVENT, (event_id, run_id, kind, title, body, related[0], related[1], iso(at),
                                         run_id))
        return event_id

    def checkpoint(self, checkpoint_id: str, run_id: str, label: str, state: dict[str, Any],
                   at: datetime) -> None:
        self.conn.execute(INSERT_CHECKPOINT, (checkpoint_id, run_id, label, json.dumps(state), iso(at),
                                              run_id))
        self.conn.execute("UPDATE runs SET latest_checkpoint_id = ?, updated_at = ? WHERE id = ?",
                          (checkpoint_id, iso(at), run_id))


def _busy_run(w: _Writer, run_id: str, start: datetime, ids: dict[str, str]) -> datetime:
    """~330 events and 4 checkpoints, one event every ~1.5 s."""
    t = start
    w.event(run_id, "timeline", "Run planned", {"phase": "plan"}, t)
    for i in range(80):
        t += timedelta(milliseconds=1500)
        if i % 20 == 0:
            w.checkpoint(f"chk_{run_id}_{i // 20 + 1}", run_id, f"before batch {i // 20 + 1}",
                         {"git_head": f"{i:07x}"}, t)
        command = f"pytest tests/test_{i}.py"
        call = w.event(run_id, "tool-call", f"Bash: {command}",
                       {"tool": "Bash", "args": {"command": command}}, t, BASH)
        t += timedelta(milliseconds=700)
        w.event(run_id, "operation-execution", f"pytest {i}: {30 + i} passed",
                {"tool": "Bash", "ok": True, "call": call}, t, BASH)
        t += timedelta(milliseconds=300)
        w.event(run_id, "evidence", f"coverage {70 + i % 20}%", {"coverage": 70 + i % 20}, t)
        if i % 10 == 3:
            failed = i % 20 == 3
            w.event(run_id, "verification", f"lint batch {i}", {"ok": not failed, "exit_code": int(failed)},
                    t)
        if i % 16 == 7:
            w.event(run_id, "memory-operation", "Recall: flaky test policy",
                    {"op": "search", "query": "flaky"}, t, ("observation", "obs_flaky"))
    ids["html_event"] = w.event(run_id, "tool-call", HTML_TITLE,
                                {"tool": "Bash", "args": {"command": "echo <b>"}}, t, BASH)
    ids["unicode_event"] = w.event(run_id, "timeline", UNICODE_TITLE, {"note": "naïve café ✓"}, t)
    ids["artifact_event"] = w.event(run_id, "artifact-reference", "Proposal saved",
                                    {"path": "sdd/proposal.md"}, t, ("artifact", "art_orbit"))
    line = "PASS tests/integration/test_%05d.py <span class='ok'>✓</span>\n"
    big = "".join(line % i for i in range(int(3_000_000 / len(line % 0))))
    ids["big_event"] = w.event(run_id, "operation-execution", "Integration suite output",
                               {"tool": "Bash", "ok": True, "stdout": big}, t + timedelta(seconds=2), BASH)
    return t + timedelta(seconds=2)


def build_vgxness_fixture(path: Path) -> dict[str, str]:
    """Write the fixture to `path` (which must not exist); return the ids tests and screenshots use."""
    now = datetime.now(UTC).replace(microsecond=0)
    base = now - timedelta(hours=2)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    for _, sql in MIGRATIONS:
        conn.executescript(sql)
    conn.executescript(REFERENCE_ROWS)
    w = _Writer(conn)
    ids = {"project": PROJECT, "task": f"{PROJECT}/task", "session": f"{PROJECT}/session",
           "agent": "agt_planner", "sub_agent": "agt_coder", "sub_sub_agent": "agt_tester",
           "unregistered_agent": "agt_legacy",
           "run": "run_busy", "waiting_run": "run_wait", "pending_approval": "apv_wait",
           "approved_approval": "apv_ok", "rejected_approval": "apv_no", "cancelled_approval": "apv_cancel",
           "checkpoint": "chk_run_busy_1", "reference_pending": "apv_1", "reference_project": "acme-web"}
    conn.execute("BEGIN IMMEDIATE")
    for agent_id, mode, name, parent in (("agt_planner", "agent", "planner", None),
                                         ("agt_coder", "subagent", "coder", "agt_planner"),
                                         ("agt_tester", "subagent", "tester ✓", "agt_coder")):
        conn.execute(INSERT_AGENT, (agent_id, PROJECT, mode, name, f"{name} for {PROJECT}", parent,
                                    iso(base - timedelta(days=1)), iso(base - timedelta(days=1))))
    conn.execute("INSERT INTO observations VALUES ('obs_flaky', ?, 'project', 'policy', 'Flaky tests',"
                 " 'Quarantine a test after 3 flaky runs <em>in a row</em>.', 'tests/flaky', ?, ?)",
                 (PROJECT, iso(base), iso(base)))
    conn.execute("INSERT INTO artifacts VALUES ('art_orbit', ?, 'sdd/orbit/proposal', 'proposal',"
                 " '# Proposal\n<script>x</script>', 'obs_flaky', ?, ?)", (PROJECT, iso(base), iso(base)))
    conn.execute(INSERT_RUN, ("run_busy", PROJECT, "Stabilise the test suite", "sdd", "verify", "agt_coder",
                              "claude-sonnet", "running", None, None, iso(base), iso(base), None))
    end = _busy_run(w, "run_busy", base, ids)
    conn.execute("UPDATE runs SET status = 'completed', outcome = 'partial', outcome_reason = ?,"
                 " updated_at = ?, completed_at = ? WHERE id = 'run_busy'",
                 ("2 suites skipped", iso(end), iso(end)))
    for run_id, agent, status, outcome, reason, at in (
            ("run_ok", "agt_planner", "completed", "success", None, base - timedelta(hours=3)),
            ("run_blocked", "agt_tester", "blocked", "blocked", "CI runner offline",
             base - timedelta(hours=2)),
            ("run_legacy", "agt_legacy", "cancelled", "cancelled", "superseded", base - timedelta(hours=1))):
        done = iso(at + timedelta(minutes=4))
        conn.execute(INSERT_RUN, (run_id, PROJECT, f"Task for {agent}", "quick", "apply", agent,
                                  "claude-haiku", status, outcome, reason, iso(at), done, done))
        w.event(run_id, "timeline", "Run planned", {"phase": "plan"}, at)
    for apv, run_id, status, by, why in (("apv_ok", "run_ok", "approved", "ada", None),
                                         ("apv_no", "run_blocked", "rejected", "grace", "not on a Friday"),
                                         ("apv_cancel", "run_legacy", "cancelled", "runtime", "superseded")):
        at = base - timedelta(hours={"run_ok": 3, "run_blocked": 2, "run_legacy": 1}[run_id], minutes=-1)
        request = {"tool": "Deploy", "decision": "ask", "args": {"env": "prod"}}
        event = w.event(run_id, "permission-decision", f"{by} asked: deploy?", request, at,
                        ("run_approval", apv))
        resolved = iso(at + timedelta(minutes=1))
        conn.execute(INSERT_APPROVAL, (apv, run_id, event, status, iso(at), resolved, by, why))
    t = now - timedelta(minutes=10)
    conn.execute(INSERT_RUN, ("run_wait", PROJECT, "Rotate the API keys", "sdd", "apply", "agt_planner",
                              "claude-sonnet", "running", None, None, iso(t), iso(t), None))
    rotate = {"command": "vault rotate api-key --env=prod"}
    w.event("run_wait", "tool-call", "Bash: vault rotate api-key", {"tool": "Bash", "args": rotate}, t, BASH)
    asked = t + timedelta(seconds=1)
    ask = w.event("run_wait", "permission-decision", "Secret rotation requires approval",
                  {"tool": "Bash", "decision": "ask", "args": rotate}, asked, ("run_approval", "apv_wait"))
    conn.execute(INSERT_APPROVAL, ("apv_wait", "run_wait", ask, "pending", iso(asked), None, None, None))
    conn.execute("UPDATE runs SET status = 'needs-human', updated_at = ? WHERE id = 'run_wait'",
                 (iso(asked),))
    ids["pending_event"] = ask
    conn.execute("COMMIT")
    conn.close()
    return ids


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "vgxness-fixture.db")
    if target.exists():
        sys.exit(f"{target} exists; choose a new path.")
    print(json.dumps(build_vgxness_fixture(target), indent=2))
