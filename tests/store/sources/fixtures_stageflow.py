"""A stageflow database for tests and screenshots, built with stageflow's own SQL.

The schema and the reference story come from `fixtures_stageflow_sql` (reference §5.2: DDL inferred,
rows verbatim, times fixed on 2026-11-30 so its pending `apr_2` is long overdue and not swept). On top
of that a second project is generated relative to *now*: a release agent whose big turn holds
hundreds of spans (nested sub-agents, an error, a guardrail, an approval gate, HTML-looking tool
output, unicode, a multi-megabyte tool result), a waiting turn with a pending approval, a failed
turn, decided and expired approvals, eval scores, messages and a delivery.

Run `python -m tests.store.sources.fixtures_stageflow OUT.db` to write one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.store.sources.fixtures_stageflow_sql import DDL, REFERENCE_ROWS

# The runtime's statements (dist/agents/store.js 0.40.0), positional like better-sqlite3's `.run(...)`.
INSERT_SESSION = """INSERT INTO agent_sessions
  (session_id, project_key, agent_id, revision, backend, status, source, source_ref, thread_key, title,
   created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
NEXT_TURN_SEQ = "SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM agent_turns WHERE session_id = ?"
INSERT_TURN = """INSERT INTO agent_turns
  (turn_id, session_id, seq, revision, trace_id, status, error_code, input_tokens, output_tokens, cost_usd,
   started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
INSERT_SPAN = """INSERT INTO agent_spans
  (span_id, turn_id, parent_span_id, name, kind, status, started_at, ended_at, duration_ms,
   input_tokens, output_tokens, attributes_json, input_text, output_text)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
INSERT_APPROVAL = """INSERT INTO agent_approvals
  (approval_id, session_id, turn_id, tool, payload_json, payload_hash, status, created_at, expires_at,
   decided_at, actor_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
NEXT_MESSAGE_SEQ = "SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM agent_messages WHERE session_id = ?"
INSERT_MESSAGE = """INSERT INTO agent_messages
  (message_id, session_id, seq, turn_id, role, author, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""
RECORD_EVAL = """INSERT INTO agent_eval_scores (turn_id, metric, score, recorded_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (turn_id, metric) DO UPDATE SET score = excluded.score, recorded_at = excluded.recorded_at"""
UPDATE_SESSION = "UPDATE agent_sessions SET updated_at = ?, status = ? WHERE session_id = ?"
FINISH_TURN = """UPDATE agent_turns
  SET status = ?, error_code = ?, input_tokens = ?, output_tokens = ?, cost_usd = ?, ended_at = ?
  WHERE turn_id = ?"""

PROJECT = "b7c41e09d2f35a18"
AGENT = "release-captain"
HTML_OUTPUT = '<script>alert("pwned")</script><b>bold?</b> &amp; <img src=x onerror=alert(1)>'
UNICODE_NAME = "résumé_lookup 📦 日本語"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def big_tool_result(megabytes: float = 3.0) -> str:
    """A multi-megabyte tool result: log lines, some of which look like markup."""
    line = '{"level":"info","msg":"artifact chunk <div class=\\"x\\">ok</div> ✓","offset":%08d}\n'
    count = int(megabytes * 1_000_000 / len(line % 0))
    return "".join(line % i for i in range(count))


class _Writer:
    """Adds rows with the runtime's statements; keeps span clock and ids simple."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.spans = 0

    def turn(self, turn_id: str, session_id: str, status: str, started: datetime, revision: int = 3) -> None:
        seq = self.conn.execute(NEXT_TURN_SEQ, (session_id,)).fetchone()[0]
        self.conn.execute(INSERT_TURN, (turn_id, session_id, seq, revision, f"trc_{turn_id}", status, None,
                                        None, None, None, iso(started), None))

    def span(self, turn_id: str, parent: str | None, name: str, kind: str, start: datetime, ms: int,
             status: str = "ok", tokens: tuple[int | None, int | None] = (None, None),
             attributes: dict[str, Any] | None = None, input_text: str | None = None,
             output_text: str | None = None, span_id: str | None = None) -> str:
        self.spans += 1
        span_id = span_id or f"sp_{turn_id}_{self.spans:04d}"
        self.conn.execute(INSERT_SPAN, (span_id, turn_id, parent, name, kind, status, iso(start),
                                        iso(start + timedelta(milliseconds=ms)), ms, tokens[0], tokens[1],
                                        json.dumps(attributes or {}), input_text, output_text))
        return span_id

    def message(self, message_id: str, session_id: str, turn_id: str | None, role: str, author: str,
                text: str, at: datetime) -> None:
        seq = self.conn.execute(NEXT_MESSAGE_SEQ, (session_id,)).fetchone()[0]
        self.conn.execute(INSERT_MESSAGE, (message_id, session_id, seq, turn_id, role, author, text, iso(at)))

    def approval(self, approval_id: str, session_id: str, turn_id: str, payload: dict[str, Any], status: str,
                 created: datetime, expires: datetime, decided: datetime | None = None,
                 actor: dict[str, str] | None = None) -> None:
        body = json.dumps(payload, ensure_ascii=False)
        self.conn.execute(INSERT_APPROVAL, (approval_id, session_id, turn_id, payload.get("tool", "deploy"),
                                            body, sha(body), status, iso(created), iso(expires),
                                            iso(decided) if decided else None,
                                            json.dumps(actor) if actor else None))


def _big_turn(w: _Writer, turn_id: str, start: datetime, ids: dict[str, str]) -> datetime:
    """One turn with ~330 spans: model/tool rounds, nested sub-agents, a guardrail, an error, a gate."""
    root = w.span(turn_id, None, AGENT, "agent", start, 1, tokens=(0, 0), attributes={"revision": 3},
                  span_id=f"sp_{turn_id}_root")
    t = start + timedelta(milliseconds=50)
    for i in range(110):
        w.span(turn_id, root, "claude-sonnet", "model", t, 900 + i * 7, tokens=(1200 + i * 40, 80 + i),
               attributes={"provider": "anthropic", "round": i})
        t += timedelta(milliseconds=950 + i * 7)
        w.span(turn_id, root, "read_file", "tool", t, 40, attributes={"path": f"src/mod_{i}.py"},
               input_text=json.dumps({"path": f"src/mod_{i}.py"}), output_text=f"# module {i}\n")
        t += timedelta(milliseconds=60)
        if i % 6 == 0:
            sub = w.span(turn_id, root, "test-runner", "sub_agent", t, 2400, tokens=(600, 40),
                         attributes={"agent": "test-runner", "depth": 1})
            w.span(turn_id, sub, "claude-haiku", "model", t + timedelta(milliseconds=20), 700,
                   tokens=(600, 40))
            w.span(turn_id, sub, "run_tests", "tool", t + timedelta(milliseconds=740), 900,
                   input_text='{"suite":"unit"}', output_text=f"{120 + i} passed")
            inner = w.span(turn_id, sub, "flake-hunter", "sub_agent", t + timedelta(milliseconds=1650), 700,
                           attributes={"agent": "flake-hunter", "depth": 2})
            w.span(turn_id, inner, "claude-haiku", "model", t + timedelta(milliseconds=1660), 600,
                   tokens=(300, 20))
            t += timedelta(milliseconds=2450)
        if i % 12 == 5:
            w.span(turn_id, root, "secrets-guardrail", "guardrail", t, 15, attributes={"verdict": "pass"})
            t += timedelta(milliseconds=20)
    ids["html_span"] = w.span(turn_id, root, "fetch_page", "tool", t, 300,
                              input_text='{"url":"https://example.test"}', output_text=HTML_OUTPUT)
    t += timedelta(milliseconds=320)
    ids["unicode_span"] = w.span(turn_id, root, UNICODE_NAME, "tool", t, 80,
                                 input_text='{"q":"naïve café — 東京"}', output_text="Résultat: ✓ 東京 🚀")
    t += timedelta(milliseconds=100)
    ids["error_span"] = w.span(turn_id, root, "deploy_preview", "tool", t, 1200, status="error",
                               attributes={"error": "ECONNRESET while uploading"},
                               input_text='{"env":"preview"}')
    t += timedelta(milliseconds=1250)
    ids["big_span"] = w.span(turn_id, root, "collect_build_logs", "tool", t, 4200,
                             input_text='{"build":"8812"}', output_text=big_tool_result())
    t += timedelta(milliseconds=4300)
    ids["gate_span"] = w.span(turn_id, root, "deploy approval", "gate", t, 65_000,
                              attributes={"approval_id": "apr_rc_approved"})
    t += timedelta(milliseconds=65_100)
    w.span(turn_id, root, "deploy", "tool", t, 3000, input_text='{"env":"production"}',
           output_text='{"ok":true}')
    t += timedelta(milliseconds=3100)
    w.conn.execute("UPDATE agent_spans SET ended_at = ?, duration_ms = ? WHERE span_id = ?",
                   (iso(t), int((t - start).total_seconds() * 1000), root))
    return t


def build_stageflow_fixture(path: Path, *, journal_mode: str = "wal") -> dict[str, str]:
    """Write the fixture to `path` (which must not exist); return the ids tests and screenshots use."""
    now = datetime.now(UTC).replace(microsecond=0)
    base = now - timedelta(hours=3)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode={journal_mode}")
    conn.executescript(DDL)
    conn.executescript(REFERENCE_ROWS)
    ids = {"project": PROJECT, "task": f"{PROJECT}/{AGENT}", "session": "ses_rc", "agent": f"ses_rc/{AGENT}",
           "run": "trn_rc1", "waiting_run": "trn_rc3", "failed_run": "trn_rc2",
           "pending_approval": "apr_rc_pending", "overdue_approval": "apr_rc_overdue",
           "approved_approval": "apr_rc_approved", "denied_approval": "apr_rc_denied",
           "reference_project": "3f2a9c1d0b7e4a66", "reference_overdue": "apr_2",
           "reference_pending_run": "trn_a2"}
    w = _Writer(conn)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO agent_definitions VALUES (?, ?, 3, 0, ?, '[]', ?, ?)",
                 (PROJECT, AGENT, "sha256:77aa", iso(base - timedelta(days=2)), iso(base)))
    conn.execute("INSERT INTO agent_definitions VALUES (?, 'docs-writer', 1, 1, NULL, '[]', ?, ?)",
                 (PROJECT, iso(base - timedelta(days=9)), iso(base - timedelta(days=1))))
    for rev, model in ((1, "claude-haiku"), (2, "claude-sonnet"), (3, "claude-sonnet")):
        conn.execute("INSERT INTO agent_revisions VALUES (?, ?, ?, ?, ?, 'file', 'grace', ?, NULL, ?)",
                     (PROJECT, AGENT, rev, json.dumps({"id": AGENT, "model": model}),
                      f"id: {AGENT}\nmodel: {model}\n", f"revision {rev}",
                      iso(base - timedelta(days=3 - rev))))
    conn.execute("INSERT INTO agent_revisions VALUES (?, 'docs-writer', 1, ?, '', 'file', NULL, NULL, NULL,"
                 " ?)", (PROJECT, '{"model":"claude-haiku"}', iso(base - timedelta(days=9))))
    conn.execute(INSERT_SESSION, ("ses_rc", PROJECT, AGENT, 3, "anthropic", "running", "cli", "grace", None,
                                  "Ship 2.4 — <release> notes & “quotes”", iso(base), iso(base)))
    conn.execute(INSERT_SESSION, ("ses_docs", PROJECT, "docs-writer", 1, "anthropic", "closed", "web", None,
                                  None, None, iso(base - timedelta(days=1)), iso(base - timedelta(hours=20))))
    w.message("msg_rc1", "ses_rc", "trn_rc1", "user", "grace", "Ship 2.4 please 🚀 <b>today</b>", base)
    w.turn("trn_rc1", "ses_rc", "running", base)
    end = _big_turn(w, "trn_rc1", base, ids)
    w.approval("apr_rc_approved", "ses_rc", "trn_rc1", {"tool": "deploy", "env": "production"}, "approved",
               base + timedelta(minutes=2), base + timedelta(minutes=17), base + timedelta(minutes=3),
               {"kind": "user", "id": "U0OPS1", "name": "Grace"})
    conn.execute(FINISH_TURN, ("succeeded", None, 91_000, 6_100, 0.4123, iso(end), "trn_rc1"))
    conn.execute(RECORD_EVAL, ("trn_rc1", "helpfulness", 0.93, iso(end)))
    conn.execute(RECORD_EVAL, ("trn_rc1", "groundedness", 0.71, iso(end)))
    w.message("msg_rc2", "ses_rc", "trn_rc1", "assistant", AGENT, "Deployed 2.4 ✓", end)
    t2 = end + timedelta(minutes=5)
    w.turn("trn_rc2", "ses_rc", "running", t2)
    w.span("trn_rc2", None, AGENT, "agent", t2, 2000, status="error",
           attributes={"error_code": "agent.host_restarted"})
    w.approval("apr_rc_denied", "ses_rc", "trn_rc2", {"tool": "drop_table", "table": "users"}, "denied",
               t2, t2 + timedelta(minutes=15), t2 + timedelta(seconds=40),
               {"kind": "user", "id": "U0OPS2", "name": "Ada"})
    failed_at = iso(t2 + timedelta(seconds=2))
    conn.execute(FINISH_TURN, ("failed", "agent.host_restarted", 4_000, 90, 0.011, failed_at, "trn_rc2"))
    t3 = now - timedelta(minutes=20)
    w.message("msg_rc3", "ses_rc", "trn_rc3", "user", "grace", "Roll back the canary if errors > 1%", t3)
    w.turn("trn_rc3", "ses_rc", "waiting", t3)
    w.span("trn_rc3", None, "claude-sonnet", "model", t3, 1800, tokens=(2300, 120))
    w.approval("apr_rc_pending", "ses_rc", "trn_rc3",
               {"tool": "rollback", "target": "canary", "note": "naïve ✓"}, "pending",
               t3 + timedelta(seconds=2), now + timedelta(days=1))
    w.approval("apr_rc_overdue", "ses_rc", "trn_rc3", {"tool": "scale", "replicas": 0}, "pending",
               t3 + timedelta(seconds=3), now - timedelta(minutes=5))
    conn.execute(UPDATE_SESSION, (iso(t3), "waiting", "ses_rc"))
    conn.execute("COMMIT")
    conn.close()
    return ids


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "stageflow-fixture.db")
    if target.exists():
        sys.exit(f"{target} exists; choose a new path.")
    print(json.dumps(build_stageflow_fixture(target), indent=2))
