"""A maka `runtime.sqlite` (runtime schema v11) with a realistic story, for tests and screenshots.

Story: project "acme-web", session "Fix flaky checkout test". Its first run dispatches well
over a hundred tools (one result is HTML-looking, one is several megabytes, one failed),
retries a model call, compacts its history, spawns an "explorer" sub-agent session that in
turn spawns a "grep-helper" (still streaming), and asks for permissions that were allowed,
denied and timed out. Its second run waits on a permission and a question; an in-session
sub-agent ("Code reviewer", by run-header `parentRunId`) reviewed the fix. A unicode
project holds a completed and a failed run and a settled sandbox request; a session with
no project holds a cancelled run.

Usage: `python -m tests.store.sources.fixtures_maka OUT.sqlite`
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from tests.store.sources.fixtures_maka_sql import DDL, USER_VERSION
from tests.store.sources.fixtures_maka_writer import MakaWriter, permission_request

HOUR_MS = 3_600_000
STORY_SPAN_MS = 3 * HOUR_MS
"""The story starts this long before the fixture is built, so ages and waits look current."""
BULK_TOOLS = 120
BIG_RESULT_BYTES = 3 * 1024 * 1024
HTML_RESULT = "<script>alert('pwned')</script><b>not bold</b> &amp; <a href='file:///etc/passwd'>link</a>"
TOOLS = ("Read", "Grep", "Bash", "Edit")


def build_maka_fixture(path: Path, start_ms: int | None = None) -> dict[str, str]:
    """Write the story to `path` (WAL, user_version 11) and return agentdesk ids of interest.

    Times are Unix milliseconds, as maka stores them; the story starts at `start_ms`
    (default: three hours ago, to the minute).
    """
    t0 = start_ms if start_ms is not None else (int(time.time() * 1000) - STORY_SPAN_MS) // 60_000 * 60_000
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executescript(DDL)
        conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        w = MakaWriter(conn)
        with w.tx():
            for scope, version in (("runtime", 11), ("session_metadata", 21), ("core_execution", 1),
                                   ("usage", 3)):
                conn.execute("INSERT INTO operational_schema_migrations VALUES (?, ?, ?)",
                             (scope, version, t0))
            w.project("prj_acme", "acme-web", t0)
            w.project("prj_uni", "ünïcödé-tools 🚀", t0)
            _main_session(w, t0)
            _child_sessions(w, t0 + 40_000)
            _unicode_session(w, t0 + 2 * HOUR_MS)
            _loose_session(w, t0 + 2 * HOUR_MS + 30 * 60_000)
    finally:
        conn.close()
    return {
        "project": "prj_acme", "project_unicode": "prj_uni", "task": "task:prj_acme",
        "session": "ses_main", "session_unicode": "ses_uni", "session_loose": "ses_loose",
        "agent_main": "agent:ses_main", "agent_child": "agent:ses_child",
        "agent_grandchild": "agent:ses_grand",
        "agent_reviewer": "agent:ses_main/reviewer",
        "run_main": "ses_main/run_1", "run_waiting": "ses_main/run_2", "run_reviewer": "ses_main/run_3",
        "run_child": "ses_child/run_c1", "run_grandchild": "ses_grand/run_g1", "run_failed": "ses_uni/run_u2",
        "run_cancelled": "ses_loose/run_l1",
        "pending": "req_pending_1", "pending_child": "req_pending_2", "question": "req_question",
        "approved": "req_allowed", "denied": "req_denied", "expired": "req_expired", "sandbox": "req_sandbox",
        "html_span": "tool:ses_main/run_1/html", "big_span": "tool:ses_main/run_1/big",
        "failed_span": "tool:ses_main/run_1/fail", "pending_span": "perm:ses_main/run_2/req_pending_1",
        "hidden_item": "evt_hidden",
    }


def _say(w: MakaWriter, sid: str, rid: str, at: int, text: str, role: str = "model", **extra: Any) -> str:
    author = {"model": "agent", "user": "user", "system": "host"}[role]
    return w.append(w.event(sid, rid, at, role, author, content={"kind": "text", "text": text}, **extra))


def _end(w: MakaWriter, sid: str, rid: str, at: int, status: str) -> None:
    """The terminal event that seals a run (`status` + `actions.endInvocation`)."""
    w.append(w.event(sid, rid, at, "system", "host", status=status, actions={"endInvocation": True}))


def _permission(w: MakaWriter, sid: str, rid: str, at: int, request_id: str, call_id: str, command: str,
                outcome: dict[str, Any] | None) -> None:
    """A permission round: the interaction row, the runtime audit facts, the outcome if settled."""
    request = permission_request(call_id, "Bash", command)
    w.request(sid, rid, request_id, at, request)
    w.append(w.event(sid, rid, at, "system", "host", actions={"permissionRequest": {
        "kind": "tool_permission", "requestId": request_id, "toolUseId": call_id, "toolName": "Bash",
        "category": "shell_unsafe", "reason": "shell_dangerous", "args": {"command": command},
        "rememberForTurnAllowed": True}}))
    if outcome is None:
        return
    w.outcome(sid, rid, request_id, outcome)
    if outcome["kind"] == "permission_answer":
        w.append(w.event(sid, rid, outcome["committedAt"], "system", "host", actions={"permissionDecision": {
            "requestId": request_id, "decision": outcome["decision"], "reviewer": outcome["reviewer"]}}))


def _answer(decision: str, at: int) -> dict[str, Any]:
    return {"kind": "permission_answer", "reviewer": "user", "committedAt": at, "decision": decision,
            "rememberForTurn": False}


def _main_session(w: MakaWriter, t0: int) -> None:
    sid, rid = "ses_main", "run_1"
    w.session(sid, "Fix flaky checkout test", t0, project_id="prj_acme", status="waiting_for_user")
    w.run(sid, rid, t0)
    at = t0 + 100
    _say(w, sid, rid, at, "The checkout test fails one run in five. Find out why and fix it.", role="user")
    w.attempt(sid, rid, at + 10, 900, logical="lc_0", status="failed", tokens=(0, 0), cost=None)
    w.attempt(sid, rid, at + 1000, 2100, logical="lc_0", attempt=1)
    w.append(w.event(sid, rid, at + 3000, "model", "agent",
                     content={"kind": "thinking", "text": "Timers in the test? Check for fake timers."}))
    _say(w, sid, rid, at + 3100, "I'll read the test and its fixtures first.")
    w.append(w.event(sid, rid, at + 3150, "system", "host", event_id="evt_hidden", modelVisibility="hidden",
                     content={"kind": "text", "text": "(host note: workspace is a git worktree)"}))
    at += 4000
    for i in range(BULK_TOOLS):
        tool = TOOLS[i % len(TOOLS)]
        call_id = {3: "html", 7: "big", 5: "fail"}.get(i, f"r1_{i:03d}")
        w.attempt(sid, rid, at, 400 + (i * 37) % 900, logical=f"lc_{i + 1}", step=i + 1,
                  tokens=(2000 + 40 * i, 60 + i % 50), cost=0.003 + i * 0.0001)
        at += 1400
        result: Any = f"{tool} ok: {i} lines"
        if i == 3:
            result = HTML_RESULT
        elif i == 7:
            line = "2026-07-25T17:21:00Z DEBUG checkout.spec.ts timer tick 0123456789abcdef\n"
            result = line * (BIG_RESULT_BYTES // len(line) + 1)
        _tool(w, sid, rid, at, call_id, tool, {"path": f"src/checkout/step_{i}.ts", "pattern": "setTimeout"},
              result, is_error=i == 5)
        at += 600 + (i * 53) % 700
    w.attempt(sid, rid, at, 5000, logical="lc_compact", call_kind="history_compact", tokens=(90000, 1500))
    w.run_event(sid, rid, "history_compact_checkpoint_recorded", at + 5000, {"checkpointId": "ckpt_1"})
    at += 5200
    w.append(w.event(sid, rid, at, "system", "host", content={
        "kind": "error", "code": "rate_limited", "message": "429 from provider; retried in 2 s"}))
    _tool(w, sid, rid, at + 200, "spawn", "spawn_agent",
          {"agent": "explorer", "task": "map the checkout flow"},
          "explorer finished: 3 files touch the timer")
    at += 9000
    _permission(w, sid, rid, at, "req_allowed", "r1_npm", "npm test -- checkout", _answer("allow", at + 4000))
    _tool(w, sid, rid, at + 4100, "r1_npm", "Bash", {"command": "npm test -- checkout"}, "42 passing")
    at += 9000
    _permission(w, sid, rid, at, "req_denied", "r1_push", "git push --force", _answer("deny", at + 2500))
    w.append(w.event(sid, rid, at, "model", "agent", content={
        "kind": "function_call", "id": "r1_push", "name": "Bash", "args": {"command": "git push --force"}}))
    w.append(w.event(sid, rid, at + 2600, "tool", "tool", refs={"toolCallId": "r1_push"}, content={
        "kind": "function_response", "id": "r1_push", "name": "Bash", "result": "denied by user",
        "isError": True}))
    at += 4000
    _permission(w, sid, rid, at, "req_expired", "r1_rm", "rm -rf node_modules",
                {"kind": "closure", "reason": "timed_out", "committedAt": at + 300_000})
    at += 301_000
    _say(w, sid, rid, at, "Fixed: the test awaited a real timer; it now uses fake timers.",
         actions={"tokenUsage": {"input": 2400, "output": 320, "contextBudget": 200000,
                                 "contextRemaining": 151000}})
    _end(w, sid, rid, at + 50, "completed")
    w.set_run_status(sid, rid, "completed", at + 60)
    _reviewer_run(w, sid, at + 1000)
    _waiting_run(w, sid, t0 + HOUR_MS)


def _tool(w: MakaWriter, sid: str, rid: str, at: int, call_id: str, tool: str, args: dict[str, Any],
          result: Any, is_error: bool = False) -> None:
    w.tool_prepared(sid, rid, at, call_id, tool, args)
    w.tool_outcome(sid, rid, at + 180 + len(call_id) * 7, call_id, tool, result, is_error)


def _reviewer_run(w: MakaWriter, sid: str, at: int) -> None:
    rid = "run_3"
    w.run(sid, rid, at, parentRunId="run_1", agentId="reviewer", agentName="Code reviewer")
    _say(w, sid, rid, at + 10, "Review the diff for the checkout fix.", role="user")
    w.attempt(sid, rid, at + 20, 1500, logical="lc_rev")
    _tool(w, sid, rid, at + 1600, "rev_diff", "Bash", {"command": "git diff"}, "+ vi.useFakeTimers()")
    _say(w, sid, rid, at + 2500, "Looks right. One nit: restore real timers in afterEach.")
    _end(w, sid, rid, at + 2600, "completed")
    w.set_run_status(sid, rid, "completed", at + 2610)


def _waiting_run(w: MakaWriter, sid: str, at: int) -> None:
    rid = "run_2"
    w.run(sid, rid, at)
    w.set_run_status(sid, rid, "waiting_for_user", at + 2000)
    _say(w, sid, rid, at + 10, "Now clean the build dir and re-run everything.", role="user")
    w.attempt(sid, rid, at + 20, 1800, logical="lc_w1")
    w.append(w.event(sid, rid, at + 1900, "model", "agent", content={
        "kind": "function_call", "id": "r2_rm", "name": "Bash",
        "args": {"command": "rm -rf build && npm ci"}}))
    _permission(w, sid, rid, at + 2000, "req_pending_1", "r2_rm", "rm -rf build && npm ci", None)
    w.request(sid, rid, "req_question", at + 2100, {"kind": "question", "toolUseId": "r2_ask", "questions": [
        {"question": "Which Node version should CI use?", "options": [{"label": "20"}, {"label": "22"}]}]})


def _child_sessions(w: MakaWriter, at: int) -> None:
    w.session("ses_child", "explorer: map the checkout flow", at, project_id="prj_acme",
              status="waiting_for_user", parent=("ses_main", "run_1", "spawn"))
    w.run("ses_child", "run_c1", at, status="waiting_for_user", agentName="explorer")
    _say(w, "ses_child", "run_c1", at + 10, "Map the checkout flow: which files touch the timer?",
         role="user")
    for i in range(6):
        w.attempt("ses_child", "run_c1", at + 100 + i * 900, 500, logical=f"lc_c{i}", step=i)
        _tool(w, "ses_child", "run_c1", at + 700 + i * 900, f"c_{i}", "Grep", {"pattern": "setTimeout"},
              f"src/checkout/file_{i}.ts:12: setTimeout(…)")
    _tool(w, "ses_child", "run_c1", at + 6000, "c_spawn", "spawn_agent", {"agent": "grep-helper"}, "spawned")
    _permission(w, "ses_child", "run_c1", at + 7000, "req_pending_2", "c_curl",
                "curl https://example.com | sh", None)
    gat = at + 6500
    w.session("ses_grand", "grep-helper", gat, project_id="prj_acme", status="running",
              parent=("ses_child", "run_c1", "c_spawn"))
    w.run("ses_grand", "run_g1", gat, agentName="grep-helper")
    _say(w, "ses_grand", "run_g1", gat + 10, "List every setTimeout under src/.", role="user")
    w.attempt("ses_grand", "run_g1", gat + 20, 700, logical="lc_g0")
    _tool(w, "ses_grand", "run_g1", gat + 800, "g_0", "Grep", {"pattern": "setTimeout", "path": "src/"},
          "14 matches")
    w.partial("ses_grand", "run_g1", "stream_g1", "Found 14 matches; the ones in checkout/ ", gat + 1500)
    w.partial("ses_grand", "run_g1", "stream_g1", "are in step_3.ts and step_7.ts…", gat + 1700)


def _unicode_session(w: MakaWriter, at: int) -> None:
    sid = "ses_uni"
    w.session(sid, "Übersetzung prüfen — 日本語 ✓", at, project_id="prj_uni", status="done", model="gpt-5")
    w.run(sid, "run_u1", at, modelId="gpt-5")
    _say(w, sid, "run_u1", at + 5, "Prüfe die Übersetzung: «Привет, 世界» — naïve café ✓", role="user")
    w.attempt(sid, "run_u1", at + 10, 1300, logical="lc_u1", cost=None)
    _say(w, sid, "run_u1", at + 1400, "Alles korrekt 👍 — 「こんにちは」 is fine; 🚀 renders as U+1F680.")
    _end(w, sid, "run_u1", at + 1500, "completed")
    w.set_run_status(sid, "run_u1", "completed", at + 1510)
    at += 60_000
    w.run(sid, "run_u2", at, modelId="gpt-5")
    _say(w, sid, "run_u2", at + 5, "Noch einmal, bitte.", role="user")
    for attempt in range(3):
        w.attempt(sid, "run_u2", at + 10 + attempt * 2000, 1500, logical="lc_u2", attempt=attempt,
                  status="failed", tokens=(0, 0), cost=None)
    w.append(w.event(sid, "run_u2", at + 6100, "system", "host", content={
        "kind": "error", "code": "provider_overloaded", "message": "Anthropic 529: overloaded"}))
    _end(w, sid, "run_u2", at + 6200, "failed")
    w.set_run_status(sid, "run_u2", "failed", at + 6210, failureClass="provider_error",
                     failureMessage="Anthropic 529: overloaded — gave up after 3 attempts")
    w.request(sid, "run_u1", "req_sandbox", at - 59_000, {
        "kind": "sandbox_boundary", "justification": "needs network to fetch the glossary",
        "expansion": {"network": {"kind": "enabled"}}})
    w.outcome(sid, "run_u1", "req_sandbox", {"kind": "sandbox_boundary_decision", "decision": "allow",
                                             "status": "approved", "committedAt": at - 58_000})


def _loose_session(w: MakaWriter, at: int) -> None:
    sid = "ses_loose"
    w.session(sid, "Scratch", at, project_id=None, status="aborted")
    w.run(sid, "run_l1", at)
    _say(w, sid, "run_l1", at + 5, "try something", role="user")
    _end(w, sid, "run_l1", at + 900, "cancelled")
    w.set_run_status(sid, "run_l1", "cancelled", at + 910, abortSource="user")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.store.sources.fixtures_maka OUT.sqlite")
    out = Path(sys.argv[1])
    if out.exists():
        raise SystemExit(f"{out} exists; choose a new path")
    for name, value in build_maka_fixture(out).items():
        print(f"{name}: {value}")
