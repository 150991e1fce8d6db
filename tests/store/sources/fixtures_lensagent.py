"""lensagent fixture databases: the reference's story plus generated volume, in three layouts.

- `0.1.2`: a fresh 0.1.2 database (the verbatim schema string; the new columns sit first in
  `workspaces` and `results`, in the middle elsewhere).
- `0.1.0`: the derived 0.1.0 schema: none of the five new tables and none of the new columns.
- `0.1.2-upgraded`: a 0.1.0 database brought to 0.1.2 in place: `ALTER TABLE ... ADD COLUMN`
  (new columns physically *last*), then the 0.1.2 schema string, which creates only the
  missing tables. Readers must therefore read columns by name.

Every layout holds the same story. Rows are written by column name and a row's columns that a
layout lacks are dropped, exactly what a 0.1.0 runtime would not have stored.

    python -m tests.store.sources.fixtures_lensagent PATH [--version 0.1.0|0.1.2|0.1.2-upgraded]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.store.sources.fixtures_lensagent_sql import DDL_0_1_2, ROWS_0_1_2, ddl_0_1_0, upgrade_statements

VERSIONS = ("0.1.2", "0.1.0", "0.1.2-upgraded")
BIG_RESULT_BYTES = 3_000_000
HTML_OUTPUT = (
    "<html><body><script>alert('pwned')</script><b>bold?</b> <a href='https://evil.example/'>"
    "click</a> <img src=x onerror=alert(1)></body></html>"
)
UNICODE_OUTPUT = (
    "Prix unitaire: 12,50 € ✓ · 価格の計算 (税率 10%) · שלום \u202eevil.exe\u202c · "
    "🚀 deployed · zero\u200bwidth"
)
T0 = datetime(2026, 11, 30, 9, 2, 1, tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def schema_script(version: str) -> str:
    if version == "0.1.2":
        return DDL_0_1_2
    if version == "0.1.0":
        return ddl_0_1_0()
    if version == "0.1.2-upgraded":
        return ddl_0_1_0() + "\n".join(upgrade_statements()) + "\n" + DDL_0_1_2
    raise ValueError(f"unknown lensagent fixture version {version!r}; one of {VERSIONS}")


def insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    """Insert by column name, dropping what this layout's table lacks (and skipping absent tables)."""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    if not have:
        return
    cols = [c for c in row if c in have]
    conn.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [row[c] for c in cols],
    )


def copy_reference_rows(conn: sqlite3.Connection) -> None:
    """§5.1's rows, run verbatim on a 0.1.2 scratch database and copied over by column name."""
    src = sqlite3.connect(":memory:")
    src.row_factory = sqlite3.Row
    src.executescript(DDL_0_1_2 + ROWS_0_1_2)
    tables = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    for table in tables:
        for row in src.execute(f"SELECT * FROM {table} ORDER BY rowid"):
            insert(conn, table, dict(row))
    src.close()


def build_lensagent_fixture(path: Path, version: str = "0.1.2", *, volume: bool = True) -> dict[str, str]:
    """Write a lensagent database at `path`; returns the ids tests and screenshots refer to."""
    path = Path(path)
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path)
    try:
        conn.executescript(schema_script(version))
        conn.execute("PRAGMA foreign_keys = OFF")  # rows are copied table by table, checked below
        if version == "0.1.2":
            conn.executescript(ROWS_0_1_2)
        else:
            copy_reference_rows(conn)
        ids = dict(REFERENCE_IDS)
        if volume:
            ids |= Volume(conn).build()
        conn.commit()
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        assert not problems, problems
    finally:
        conn.close()
    return ids


REFERENCE_IDS = {
    "project": "prj_demo",
    "task": "tsk_flaky",
    "session": "ses_1",
    "agent": "agt_main",
    "sub_agent": "agt_sub",
    "run": "run_1",
    "step_done": "stp_0",
    "step_waiting": "stp_1",
    "attempt_0": "att_0",
    "attempt_1": "att_1",
    "compaction_attempt": "att_c",
    "done_call": "cal_0",
    "pending_call": "cal_1",
    "result": "res_0",
    "locked_item": "ci_0",
    "covered_item": "ci_1",
    "compaction_item": "ci_3",
    "open_item": "ci_4",
    "done_group": "tg_0",
    "compaction_group": "tg_1",
    "open_group": "tg_2",
    "projection": "pjd_1",
}


class Volume:
    """Generated rows: a long sub-agent run, a nested sub-sub-agent, a second waiting agent, an archive."""

    def __init__(self, conn: sqlite3.Connection, seed: int = 7) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.ordinals: dict[str, int] = {}
        self.group_ordinals: dict[str, int] = {}
        self.sequences: dict[str, int] = {}

    def build(self) -> dict[str, str]:
        ids = self.sub_agent_run()
        ids |= self.nested_agent()
        ids |= self.second_task()
        self.conn.execute("UPDATE instance SET state_revision = state_revision + 400 WHERE id = 1")
        return ids

    # -- the explorer sub-agent: one long terminal run --------------------------------------
    def sub_agent_run(self) -> dict[str, str]:
        agent, run = "agt_sub", "run_sub"
        self.conn.execute(
            "UPDATE agents SET updated_at = ? WHERE id = ?", (iso(T0 + timedelta(minutes=9)), agent)
        )
        self.run_row(run, agent, "TERMINAL", "success", T0, T0 + timedelta(minutes=9), "msg_sub")
        self.message(
            "msg_sub",
            agent,
            "user",
            "Map every place the checkout flow waits on a timer.",
            T0,
            source_agent="agt_main",
        )
        t = T0
        special = {
            3: "html",
            5: "unicode",
            8: "big",
            11: "approved",
            14: "denied",
            17: "failed",
            20: "interrupted",
            23: "nested",
        }
        ids: dict[str, str] = {"sub_run": run}
        for n in range(60):
            t, made = self.step(agent, run, "s", n, t, special.get(n))
            ids |= made
        ids |= self.compaction(agent, t + timedelta(seconds=1), covered_steps=range(0, 6))
        return ids

    def step(
        self, agent: str, run: str, tag: str, n: int, t: datetime, special: str | None
    ) -> tuple[datetime, dict[str, str]]:
        """One turn: a model attempt, its tool batch (one partition), the results, the turn group."""
        step, group, attempt = f"stp_{tag}{n:03d}", f"tg_{tag}{n:03d}", f"att_{tag}{n:03d}"
        start = t
        self.group(group, agent, "turn", start, start)  # completed_at is set below
        t_model_end = start + timedelta(milliseconds=self.rng.randint(300, 2500))
        usage = {
            "input_tokens": 2000 + 137 * n,
            "output_tokens": self.rng.randint(40, 400),
            "cached_input_tokens": 1024 * (n % 3),
        }
        self.attempt(attempt, agent, step, "agent", "gpt-5-mini", start, t_model_end, usage, "success")
        calls = self.calls_for(special)
        self.item(
            agent,
            group,
            "tool_calls",
            attempt,
            "assistant",
            json.dumps(
                [{"id": f"p_{tag}{n:03d}_{k}", "name": c[0], "arguments": c[1]} for k, c in enumerate(calls)]
            ),
            start,
            tool=(f"p_{tag}{n:03d}_0", calls[0][0]),
        )
        partition = f"par_{tag}{n:03d}"
        insert(
            self.conn,
            "call_partitions",
            {
                "id": partition,
                "step_id": step,
                "ordinal": 0,
                "mode": "parallel" if len(calls) > 1 else "serial",
                "created_at": iso(t_model_end),
            },
        )
        ids: dict[str, str] = {}
        end = t_model_end
        for k, (tool, args, kind) in enumerate(calls):
            call = f"cal_{tag}{n:03d}_{k}"
            call_end = t_model_end + timedelta(milliseconds=self.rng.randint(20, 900))
            self.call(
                call,
                (agent, step, attempt, partition, group),
                k,
                (tool, args, kind),
                (t_model_end, call_end),
                n,
            )
            if kind != "plain":
                ids[f"{kind}_call"] = call
            end = max(end, call_end)
        outcome = {"failed": "failed", "interrupted": "interrupted"}.get(special or "", "success")
        self.step_row(step, run, group, n, "TERMINAL", outcome, start, end)
        self.conn.execute("UPDATE context_turn_groups SET completed_at = ? WHERE id = ?", (iso(end), group))
        return end + timedelta(milliseconds=50), ids

    def calls_for(self, special: str | None) -> list[tuple[str, dict[str, str], str]]:
        files = ["src/checkout/cart.ts", "tests/checkout.spec.ts", "src/checkout/timer.ts", "README.md"]
        plain = [
            ("read_file", {"path": self.rng.choice(files)}, "plain"),
            ("grep", {"pattern": "setTimeout|waitFor", "path": "src/"}, "plain"),
        ]
        if special is None:
            return plain[: self.rng.randint(1, 2)]
        tool = {"approved": "run_shell", "denied": "run_shell", "big": "run_shell", "nested": "batch"}.get(
            special, "read_file"
        )
        args = {"command": "npm test -- --repeat 50"} if tool == "run_shell" else {"path": files[0]}
        return [(tool, args, special), plain[1]]

    def call(
        self,
        call: str,
        owner: tuple[str, str, str, str, str],
        k: int,
        what: tuple[str, dict[str, str], str],
        span: tuple[datetime, datetime],
        n: int,
    ) -> None:
        agent, step, attempt, partition, group = owner
        tool, args, kind = what
        start, end = span
        outcome, content, error = "success", self.output(tool, args, n), None
        review, passed = None, None
        if kind in ("approved", "denied"):
            passed = 1 if kind == "approved" else 0
            review = {
                "approved": bool(passed),
                "risk": "medium",
                "rationale": "test command is read-only" if passed else "would wipe the build cache",
            }
        if kind == "denied":
            outcome, content = "cancelled", "Denied by reviewer"
            error = ("policy_denied", "would wipe the build cache")
        if kind == "failed":
            outcome, error = "failed", ("ENOENT", "no such file: src/checkout/cart.ts")
        if kind == "interrupted":
            outcome, error = "interrupted", ("host_restarted", "the runtime restarted while the call ran")
        if kind == "big":
            content = "".join(
                f"[{i:06d}] PASS checkout adds item and totals cart\n" for i in range(BIG_RESULT_BYTES // 48)
            )
        insert(
            self.conn,
            "calls",
            {
                "id": call,
                "project_id": "prj_demo",
                "workspace_id": "wsp_main",
                "agent_id": agent,
                "step_id": step,
                "attempt_id": attempt,
                "partition_id": partition,
                "parent_call_id": None,
                "source": "llm",
                "capability_id": tool,
                "provider_call_id": f"p_{call[4:]}",
                "call_ordinal": k,
                "input_json": json.dumps(args),
                "continuation_json": None,
                "effect": "full" if tool == "run_shell" else "read_only",
                "policy": "ask" if tool == "run_shell" else "auto_approve",
                "state": "TERMINAL",
                "wait_reason": None,
                "outcome": outcome,
                "outcome_unknown": 1 if kind == "interrupted" else 0,
                "auto_review_passed": passed,
                "auto_review_json": json.dumps(review) if review else None,
                "revision": 3,
                "created_at": iso(start),
                "updated_at": iso(end),
            },
        )
        result = f"res_{call[4:]}"
        insert(
            self.conn,
            "results",
            {
                "id": result,
                "call_id": call,
                "outcome": outcome,
                "content_json": json.dumps(content),
                "truncated": 0,
                "error_code": error[0] if error else None,
                "error_message": error[1] if error else None,
                "created_at": iso(end),
                "capture": "complete",
                "stored": "full",
            },
        )
        if kind == "big":
            self.artifact(result, len(content), end)
        if kind == "nested":
            self.children(call, agent, step, end)
        self.item(agent, group, "result", result, "tool", content[:4000], end, tool=(f"p_{call[4:]}", tool))

    def output(self, tool: str, args: dict[str, str], n: int) -> str:
        if n == 3:
            return HTML_OUTPUT
        if n == 5:
            return UNICODE_OUTPUT
        if tool == "grep":
            return "\n".join(
                f"src/checkout/timer.ts:{10 + i}: await setTimeout({500 * (i + 1)})" for i in range(4)
            )
        return f"// {args.get('path', '')}\nexport const WAIT_MS = {100 * (n % 7)};\n"

    def children(self, parent: str, agent: str, step: str, at: datetime) -> None:
        for k, path in enumerate(("a.ts", "b.ts")):
            child = f"{parent}_c{k}"
            insert(
                self.conn,
                "calls",
                {
                    "id": child,
                    "project_id": "prj_demo",
                    "workspace_id": "wsp_main",
                    "agent_id": agent,
                    "step_id": step,
                    "attempt_id": None,
                    "partition_id": None,
                    "parent_call_id": parent,
                    "source": "program",
                    "capability_id": "read_file",
                    "provider_call_id": None,
                    "call_ordinal": None,
                    "input_json": json.dumps({"path": path}),
                    "effect": "read_only",
                    "policy": "auto_approve",
                    "state": "TERMINAL",
                    "wait_reason": None,
                    "outcome": "success",
                    "outcome_unknown": 0,
                    "auto_review_passed": None,
                    "revision": 2,
                    "created_at": iso(at - timedelta(milliseconds=15)),
                    "updated_at": iso(at - timedelta(milliseconds=5)),
                },
            )
            insert(
                self.conn,
                "results",
                {
                    "id": f"res_{child[4:]}",
                    "call_id": child,
                    "outcome": "success",
                    "content_json": json.dumps(f"// {path}"),
                    "truncated": 0,
                    "created_at": iso(at - timedelta(milliseconds=5)),
                    "capture": "complete",
                    "stored": "full",
                },
            )

    def artifact(self, result: str, size: int, at: datetime) -> None:
        insert(
            self.conn,
            "artifacts",
            {
                "id": "art_big",
                "project_id": "prj_demo",
                "name": "npm-test.log",
                "media_type": "text/plain",
                "relative_path": "artifacts/npm-test.log",
                "sha256": "0" * 64,
                "size_bytes": size,
                "created_at": iso(at),
            },
        )
        insert(self.conn, "result_artifacts", {"result_id": result, "artifact_id": "art_big"})

    def compaction(self, agent: str, at: datetime, covered_steps: range) -> dict[str, str]:
        groups = [f"tg_s{n:03d}" for n in covered_steps]
        marks = ",".join("?" * len(groups))
        covered = [
            r[0]
            for r in self.conn.execute(
                f"SELECT id FROM context_items WHERE agent_id = ? AND turn_group_id IN ({marks}) "
                "ORDER BY ordinal",
                [agent, *groups],
            )
        ]
        attempt = "att_sc"
        self.attempt(
            attempt,
            agent,
            None,
            "compaction",
            "gpt-5-mini",
            at,
            at + timedelta(seconds=4),
            {"input_tokens": 9100, "output_tokens": 350, "cached_input_tokens": 0},
            "success",
        )
        group, item = "tg_sc", "ci_sc"
        self.group(group, agent, "compaction", at + timedelta(seconds=4), at + timedelta(seconds=4))
        self.item(
            agent,
            group,
            "compaction",
            attempt,
            "user",
            "Summary: timers live in src/checkout/timer.ts (500 to 2000 ms); the spec awaits a fixed 500 ms.",
            at + timedelta(seconds=4),
            item_id=item,
        )
        marks = ",".join("?" * len(covered))
        self.conn.execute(f"UPDATE context_items SET visible = 0 WHERE id IN ({marks})", covered)
        insert(
            self.conn,
            "context_compactions",
            {
                "context_item_id": item,
                "source_revision": 61,
                "covered_item_ids_json": json.dumps(covered),
                "focus": "where the checkout flow sleeps",
            },
        )
        insert(
            self.conn,
            "projection_decisions",
            {
                "id": "pjd_s1",
                "agent_id": agent,
                "attempt_id": None,
                "stage": "compaction",
                "source_tokens": 9100,
                "projected_tokens": 350,
                "details_json": json.dumps({"dropped_item_ids": covered}),
                "created_at": iso(at + timedelta(seconds=4)),
            },
        )
        self.conn.execute("UPDATE agents SET context_revision = 62 WHERE id = ?", (agent,))
        return {"sub_compaction_item": item, "sub_covered_item": covered[0]}

    # -- a nested sub-sub-agent, and a second task with its own pending approval -------------
    def nested_agent(self) -> dict[str, str]:
        agent, run = "agt_sub2", "run_sub2"
        start = T0 + timedelta(minutes=2)
        self.agent_row(agent, "tsk_flaky", "ses_1", "agt_sub", "grep-worker", "IDLE", start)
        self.run_row(run, agent, "TERMINAL", "success", start, start + timedelta(seconds=20), None)
        t = start
        for n in range(3):
            t, _ = self.step(agent, run, "w", n, t, None)
        return {"sub_sub_agent": agent, "sub_sub_run": run}

    def second_task(self) -> dict[str, str]:
        start = datetime(2026, 11, 30, 9, 10, tzinfo=UTC)
        insert(
            self.conn,
            "tasks",
            {
                "id": "tsk_docs",
                "project_id": "prj_demo",
                "title": "Document the checkout timers",
                "archived_at": None,
                "revision": 0,
                "created_at": iso(start),
                "updated_at": iso(start),
            },
        )
        insert(
            self.conn,
            "tasks",
            {
                "id": "tsk_old",
                "project_id": "prj_demo",
                "title": "Old spike (archived)",
                "archived_at": iso(start),
                "revision": 2,
                "created_at": iso(start - timedelta(days=3)),
                "updated_at": iso(start),
            },
        )
        insert(
            self.conn,
            "sessions",
            {
                "id": "ses_2",
                "task_id": "tsk_docs",
                "title": "README pass",
                "archived_at": None,
                "revision": 0,
                "created_at": iso(start),
                "updated_at": iso(start),
            },
        )
        agent, run, step, group = "agt_docs", "run_d", "stp_d0", "tg_d0"
        self.agent_row(agent, "tsk_docs", "ses_2", None, "docs", "WAITING", start)
        self.run_row(run, agent, "WAITING", None, start, start + timedelta(seconds=9), None)
        self.group(group, agent, "turn", start, None)
        self.attempt(
            "att_d0",
            agent,
            step,
            "agent",
            "gpt-5",
            start,
            start + timedelta(seconds=5),
            {"input_tokens": 3000, "output_tokens": 120, "cached_input_tokens": 0},
            "success",
        )
        self.step_row(step, run, group, 0, "WAITING", None, start, start + timedelta(seconds=9))
        args = {
            "path": "README.md",
            "content": "## Timers\nThe checkout waits on `waitFor`, never on sleeps.",
        }
        insert(
            self.conn,
            "calls",
            {
                "id": "cal_d1",
                "project_id": "prj_demo",
                "workspace_id": "wsp_main",
                "agent_id": agent,
                "step_id": step,
                "attempt_id": "att_d0",
                "partition_id": None,
                "parent_call_id": None,
                "source": "llm",
                "capability_id": "write_file",
                "provider_call_id": "p_d1",
                "call_ordinal": 0,
                "input_json": json.dumps(args),
                "effect": "workspace_write",
                "policy": "ask",
                "state": "WAITING",
                "wait_reason": "policy_review",
                "outcome": None,
                "outcome_unknown": 0,
                "auto_review_passed": None,
                "auto_review_json": None,
                "revision": 1,
                "created_at": iso(start + timedelta(seconds=5)),
                "updated_at": iso(start + timedelta(seconds=9)),
            },
        )
        self.item(
            agent,
            group,
            "tool_calls",
            "att_d0",
            "assistant",
            json.dumps([{"id": "p_d1", "name": "write_file", "arguments": args}]),
            start + timedelta(seconds=5),
            tool=("p_d1", "write_file"),
        )
        self.user_input_wait(agent, step, start + timedelta(seconds=7))
        return {
            "question_call": "cal_dq",
            "docs_task": "tsk_docs",
            "archived_task": "tsk_old",
            "docs_session": "ses_2",
            "docs_agent": agent,
            "docs_run": run,
            "pending_call_2": "cal_d1",
        }

    def user_input_wait(self, agent: str, step: str, at: datetime) -> None:
        """A call that asks the user (waitCall: WAITING / user_input, the prompt in continuation_json)."""
        insert(
            self.conn,
            "calls",
            {
                "id": "cal_dq", "project_id": "prj_demo", "workspace_id": "wsp_main", "agent_id": agent,
                "step_id": step, "attempt_id": "att_d0", "partition_id": None, "parent_call_id": None,
                "source": "llm", "capability_id": "ask_user", "provider_call_id": "p_dq", "call_ordinal": 5,
                "input_json": json.dumps({"question": "Should the README mention the old retry timer?"}),
                "continuation_json": json.dumps({"question": "Should the README mention the old retry timer?",
                                                 "options": ["Yes, as deprecated", "No, drop it"]}),
                "effect": "read_only", "policy": "read_only", "state": "WAITING", "wait_reason": "user_input",
                "outcome": None, "outcome_unknown": 0, "auto_review_passed": None, "auto_review_json": None,
                "revision": 2, "created_at": iso(at), "updated_at": iso(at),
            },
        )

    # -- row helpers -------------------------------------------------------------------------
    def agent_row(
        self, agent: str, task: str, session: str, parent: str | None, name: str, state: str, at: datetime
    ) -> None:
        insert(
            self.conn,
            "agents",
            {
                "id": agent,
                "task_id": task,
                "session_id": session,
                "workspace_id": "wsp_main",
                "parent_agent_id": parent,
                "name": name,
                "state": state,
                "model": "gpt-5-mini",
                "model_reasoning_effort": "low",
                "policy_preset": "ask",
                "context_revision": 3,
                "revision": 2,
                "created_at": iso(at),
                "updated_at": iso(at + timedelta(seconds=30)),
            },
        )

    def run_row(
        self,
        run: str,
        agent: str,
        state: str,
        outcome: str | None,
        start: datetime,
        end: datetime,
        goal: str | None,
    ) -> None:
        insert(
            self.conn,
            "runs",
            {
                "id": run,
                "agent_id": agent,
                "goal_message_ids_json": json.dumps([goal] if goal else []),
                "initial_step_pending": 0,
                "state": state,
                "outcome": outcome,
                "error_code": None,
                "revision": 4,
                "created_at": iso(start),
                "updated_at": iso(end),
            },
        )

    def step_row(
        self,
        step: str,
        run: str,
        group: str,
        ordinal: int,
        state: str,
        outcome: str | None,
        start: datetime,
        end: datetime,
    ) -> None:
        insert(
            self.conn,
            "steps",
            {
                "id": step,
                "run_id": run,
                "turn_group_id": group,
                "ordinal": ordinal,
                "state": state,
                "outcome": outcome,
                "error_code": None,
                "created_at": iso(start),
                "updated_at": iso(end),
            },
        )

    def message(
        self, msg: str, agent: str, role: str, content: str, at: datetime, source_agent: str | None = None
    ) -> None:
        insert(
            self.conn,
            "messages",
            {
                "id": msg,
                "agent_id": agent,
                "source_agent_id": source_agent,
                "role": role,
                "content": content,
                "metadata_json": None,
                "created_at": iso(at),
            },
        )

    def attempt(
        self,
        attempt: str,
        agent: str,
        step: str | None,
        kind: str,
        model: str,
        start: datetime,
        end: datetime,
        usage: dict[str, int],
        outcome: str,
    ) -> None:
        sequence = self.sequences.get(f"{agent}/{kind}", 0)
        self.sequences[f"{agent}/{kind}"] = sequence + 1
        insert(
            self.conn,
            "model_attempts",
            {
                "id": attempt,
                "agent_id": agent,
                "step_id": step,
                "kind": kind,
                "sequence": sequence,
                "model": model,
                "state": "TERMINAL",
                "outcome": outcome,
                "profile_id": "openai-default",
                "profile_version": 1,
                "profile_digest": "sha256:aa01",
                "config_digest": "sha256:cf03",
                "context_revision": 3 + sequence,
                "request_digest": f"sha256:{attempt}",
                "request_json": None,
                "observation_json": json.dumps({"finish_reason": "tool_calls"}),
                "preparation_json": json.dumps({"tools": ["read_file", "grep", "run_shell"]}),
                "usage_json": json.dumps(usage),
                "error_code": None,
                "created_at": iso(start),
                "updated_at": iso(end),
            },
        )

    def group(self, group: str, agent: str, kind: str, at: datetime, completed: datetime | None) -> None:
        ordinal = self.group_ordinals.get(agent, 0)
        self.group_ordinals[agent] = ordinal + 1
        insert(
            self.conn,
            "context_turn_groups",
            {
                "id": group,
                "agent_id": agent,
                "ordinal": ordinal,
                "kind": kind,
                "state": "COMPLETE" if completed else "OPEN",
                "revision": 0,
                "created_at": iso(at),
                "completed_at": iso(completed) if completed else None,
            },
        )

    def item(
        self,
        agent: str,
        group: str,
        kind: str,
        source: str,
        role: str,
        content: str,
        at: datetime,
        tool: tuple[str, str] | None = None,
        item_id: str | None = None,
    ) -> None:
        ordinal = self.ordinals.get(agent, 0)
        self.ordinals[agent] = ordinal + 1
        in_group = self.conn.execute(
            "SELECT count(*) FROM context_items WHERE turn_group_id = ?", (group,)
        ).fetchone()[0]
        insert(
            self.conn,
            "context_items",
            {
                "id": item_id or f"ci_{agent[4:]}_{ordinal:04d}",
                "agent_id": agent,
                "turn_group_id": group,
                "turn_group_ordinal": in_group,
                "kind": kind,
                "source_id": source,
                "role": role,
                "content": content,
                "tool_call_id": tool[0] if tool else None,
                "tool_name": tool[1] if tool else None,
                "ordinal": ordinal,
                "visible": 1,
                "locked": 0,
                "revision": 0,
                "created_at": iso(at),
                "updated_at": iso(at),
            },
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a lensagent fixture database.")
    parser.add_argument("path", type=Path)
    parser.add_argument("--version", choices=VERSIONS, default="0.1.2")
    parser.add_argument("--no-volume", action="store_true", help="only the reference's §5.1 story")
    args = parser.parse_args()
    ids = build_lensagent_fixture(args.path, args.version, volume=not args.no_volume)
    print(json.dumps({"path": str(args.path), "version": args.version, "ids": ids}, indent=2))


if __name__ == "__main__":
    main()
