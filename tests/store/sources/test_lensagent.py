"""lensagent as a source: both versions, read by column name, live, and written only as its store writes.

Every read test runs on three layouts (fresh 0.1.2, 0.1.0, 0.1.0 upgraded in place to 0.1.2
with the new columns physically last); the writes run on 0.1.2 and 0.1.0.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentdesk.store.errors import AlreadyDecided, Conflict, InvalidInput, NotFound, ReadOnlyStore, StaleRevision
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.source import Capability, Source
from agentdesk.store.sources import open_source
from agentdesk.store.sources.foreign import Unsupported
from agentdesk.store.sources.lensagent import LensagentSource
from tests.store.sources.fixtures_lensagent import BIG_RESULT_BYTES, HTML_OUTPUT, VERSIONS, build_lensagent_fixture
from tests.store.sources.fixtures_lensagent_sql import ddl_0_1_0
from tests.waiting import wait_until, watcher_polled

SEED_0_1_0_SHA256 = "739a98e4fcb8ad67c4d9af5dacb7c45b70dd45902bce067f2171021c74a0135d"
"""sha256 of the 0.1.0 `schema` string decoded from shared/seeds/000 (schema.d.ts, the `-` side)."""
WRITABLE_VERSIONS = ("0.1.2", "0.1.0")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lensagent")
    paths = {}
    for version in VERSIONS:
        paths[version] = folder / f"lensagent-{version}.sqlite"
        build_lensagent_fixture(paths[version], version)
    return paths


def copy_of(built: dict[str, Path], version: str, tmp_path: Path) -> Path:
    target = tmp_path / f"copy-{version}.sqlite"
    shutil.copy(built[version], target)
    return target


@pytest.fixture(params=VERSIONS)
def reader(request: pytest.FixtureRequest, built: dict[str, Path]) -> Iterator[LensagentSource]:
    source = open_source(str(built[request.param]))
    assert isinstance(source, LensagentSource)
    yield source
    source.close()


@pytest.fixture(params=WRITABLE_VERSIONS)
def writer(
    request: pytest.FixtureRequest, built: dict[str, Path], tmp_path: Path
) -> Iterator[LensagentSource]:
    source = open_source(str(copy_of(built, request.param, tmp_path)), allow_writes=True)
    assert isinstance(source, LensagentSource)
    yield source
    source.close()


def query(path: Path, sql: str, *params: object) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def scalar(path: Path, sql: str, *params: object) -> Any:
    return query(path, sql, *params)[0][0]


def digest(path: Path) -> dict[str, str]:
    """The database file and its WAL (an absent WAL counts as empty: no bytes were written)."""
    out = {}
    for suffix in ("", "-wal"):
        file = Path(f"{path}{suffix}")
        out[suffix or "db"] = hashlib.sha256(file.read_bytes() if file.exists() else b"").hexdigest()
    return out


# -- schema versions and detection -----------------------------------------------------------------
def test_derived_0_1_0_schema_is_the_seeds_own() -> None:
    assert hashlib.sha256(ddl_0_1_0().encode()).hexdigest() == SEED_0_1_0_SHA256


def test_fixture_layouts_differ_as_the_reference_says(built: dict[str, Path]) -> None:
    tables = {
        v: {r[0] for r in query(p, "SELECT name FROM sqlite_master WHERE type='table'")}
        for v, p in built.items()
    }
    assert "context_compactions" in tables["0.1.2"] and "context_compactions" not in tables["0.1.0"]
    assert tables["0.1.2"] - tables["0.1.0"] == {
        "todo_reminder_state",
        "working_context_items",
        "working_contexts",
        "context_compactions",
        "purge_cleanups",
    }
    results = {v: [r[1] for r in query(p, "PRAGMA table_info(results)")] for v, p in built.items()}
    assert results["0.1.2"][:2] == ["capture", "stored"]
    assert results["0.1.2-upgraded"][-2:] == ["capture", "stored"]
    assert "capture" not in results["0.1.0"]


@pytest.mark.parametrize(
    "version, expected", [("0.1.2", "0.1.2"), ("0.1.0", "0.1.0"), ("0.1.2-upgraded", "0.1.2")]
)
def test_open_source_detects_lensagent_and_its_version(
    built: dict[str, Path], version: str, expected: str
) -> None:
    source = open_source(str(built[version]))
    assert isinstance(source, LensagentSource) and isinstance(source, Source)
    try:
        assert source.descriptor.kind == "lensagent" and source.descriptor.schema_version == expected
        assert source.descriptor.read_only
        assert "EventLog" in source.descriptor.notes and "cannot keep it in step" in source.descriptor.notes
        assert source.info().counts["pending_approvals"] == 2
    finally:
        source.close()


def test_reads_agree_whatever_the_physical_column_order(built: dict[str, Path]) -> None:
    fresh, upgraded = (LensagentSource(built[v]) for v in ("0.1.2", "0.1.2-upgraded"))
    try:
        for run in ("run_1", "run_sub"):
            assert fresh.span_table(run) == upgraded.span_table(run)
        assert fresh.span("call:cal_s008_0") == upgraded.span("call:cal_s008_0")
        assert fresh.approvals("all") == upgraded.approvals("all")
        assert fresh.context("agt_main") == upgraded.context("agt_main")
    finally:
        fresh.close()
        upgraded.close()


# -- the tree --------------------------------------------------------------------------------------
def test_tree_from_project_to_runs(reader: LensagentSource) -> None:
    [project] = reader.projects()
    assert (project.id, project.name, project.status, project.pending_approvals, project.task_count) == (
        "prj_demo",
        "demo-service",
        "waiting",
        2,
        3,
    )
    tasks = {t.id: t for t in reader.tasks("prj_demo")}
    assert tasks["tsk_old"].status == "archived"
    assert (tasks["tsk_flaky"].status, tasks["tsk_flaky"].pending_approvals) == ("waiting", 1)
    [session] = reader.sessions("tsk_flaky")
    assert (session.title, session.project_id, session.pending_approvals) == (
        "Investigate CI failure",
        "prj_demo",
        1,
    )
    agents = reader.agents("ses_1")
    assert [(a.id, a.parent_agent_id, a.status) for a in agents] == [
        ("agt_main", None, "waiting"),
        ("agt_sub", "agt_main", "idle"),
        ("agt_sub2", "agt_sub", "idle"),
    ]
    assert agents[0].context_revision == 7 and agents[0].pending_approvals == 1 and agents[0].run_count == 1
    [run] = reader.runs("agt_main").items
    assert run.title == "The checkout test fails ~1 in 5 runs on CI. Find out why and fix it."
    assert (run.status, run.ended_at, run.pending_approvals) == ("waiting", None, 1)
    assert (run.usage.input_tokens, run.usage.output_tokens) == (5120 + 14800 + 6900, 310 + 420 + 188)
    [done] = reader.runs("agt_sub").items
    assert done.status == "done" and done.ended_at is not None and done.ended_at > done.started_at
    assert reader.locate("agent", "agt_sub2").agent_ids == ("agt_main", "agt_sub", "agt_sub2")
    assert reader.run("run_1") == run
    assert reader.agent("agt_sub") == agents[1]


def test_locate_spans_and_approvals(reader: LensagentSource) -> None:
    where = reader.locate("approval", "cal_1")
    assert (
        where.project_id,
        where.task_id,
        where.session_id,
        where.agent_ids,
        where.run_id,
        where.span_id,
    ) == ("prj_demo", "tsk_flaky", "ses_1", ("agt_main",), "run_1", "call:cal_1")
    assert reader.locate("span", "attempt:att_c").run_id == "run_1"  # a compaction: by the run's time window
    with pytest.raises(NotFound):
        reader.locate("span", "nonsense")
    with pytest.raises(NotFound):
        reader.locate("task", "tsk_missing")
    with pytest.raises(NotFound):
        reader.agent("agt_missing")


# -- the timeline ----------------------------------------------------------------------------------
def test_spans_derived_from_steps_attempts_and_calls(reader: LensagentSource) -> None:
    table = reader.span_table("run_1")
    rows = {
        i: (p, k, n, s)
        for i, p, k, n, s in zip(
            table.ids, table.parent_ids, table.kinds, table.names, table.statuses, strict=True
        )
    }
    assert rows == {
        "run:run_1": (None, "agent", "main", "running"),
        "step:stp_0": ("run:run_1", "internal", "step 0", "ok"),
        "attempt:att_0": ("step:stp_0", "model", "gpt-5 #0", "ok"),
        "call:cal_0": ("attempt:att_0", "tool", "read_file", "ok"),
        "attempt:att_c": ("run:run_1", "model", "compaction · gpt-5-mini", "ok"),
        "step:stp_1": ("run:run_1", "internal", "step 1", "running"),
        "attempt:att_1": ("step:stp_1", "model", "gpt-5 #1", "ok"),
        "call:cal_1": ("attempt:att_1", "tool", "run_shell", "running"),
        "gate:cal_1": ("call:cal_1", "gate", "approval: run_shell", "running"),
    }
    at = {i: n for n, i in enumerate(table.ids)}
    call = at["call:cal_0"]
    end = table.ends[call]
    assert end is not None and end - table.starts[call] == pytest.approx(1.0)  # a call ends at its result
    assert table.ends[at["run:run_1"]] is None and table.ends[at["gate:cal_1"]] is None
    assert (table.input_tokens[at["attempt:att_1"]], table.output_tokens[at["attempt:att_1"]]) == (6900, 188)
    assert table.starts == sorted(table.starts)
    big = reader.span_table("run_sub")
    assert len(big) > 200 and set(big.kinds) == {"agent", "internal", "model", "tool"}


def test_span_details_keep_lensagent_words(reader: LensagentSource) -> None:
    call = reader.span("call:cal_0")
    assert call.input_text == '{\n  "path": "tests/checkout.spec.ts"\n}'
    assert call.output_text is not None and call.output_text.startswith("import { test }")
    assert call.attributes["policy"] == "auto_approve" and call.attributes["native_state"] == "TERMINAL"
    attempt = reader.span("attempt:att_1")
    assert attempt.context_revision == 7 and attempt.usage.input_tokens == 6900
    assert attempt.attributes["projection"][0]["saved_tokens"] == 14800 - 6900
    assert attempt.attributes["capabilities"] == ["read_file", "run_shell"]
    html = reader.span("call:cal_s003_0")
    assert html.output_text == HTML_OUTPUT  # agent text stays data, never interpreted
    big = reader.span("call:cal_s008_0")
    assert big.output_text is not None and len(big.output_text) >= BIG_RESULT_BYTES * 0.99
    assert big.attributes["result"]["artifacts"][0]["name"] == "npm-test.log"
    failed = reader.span("call:cal_s017_0")
    assert (failed.status, failed.error) == ("error", "no such file: src/checkout/cart.ts")
    child = reader.span("call:cal_s023_0_c0")
    assert child.parent_span_id == "call:cal_s023_0"
    assert reader.span("gate:cal_1").attributes["expires_at"] is None
    with pytest.raises(NotFound):
        reader.span("call:cal_missing")


def test_sent_context_only_when_known_exactly(reader: LensagentSource) -> None:
    sent = reader.sent_context("attempt:att_1")  # the agent's context is still at revision 7
    assert [(s.item_id, s.kind) for s in sent] == [("ci_0", "message"), ("ci_3", "compaction")]
    assert reader.sent_context("attempt:att_0") == []  # the context moved on since: not rebuilt by guesswork
    assert reader.sent_context("call:cal_0") == []


# -- approvals -------------------------------------------------------------------------------------
def test_pending_approvals_are_calls_in_policy_review(reader: LensagentSource) -> None:
    pending = reader.approvals()
    assert [a.id for a in pending] == ["cal_1", "cal_d1"]  # oldest first
    first = pending[0]
    assert (first.tool_call_id, first.tool_name, first.status, first.expires_at) == (
        "cal_1",
        "run_shell",
        "pending",
        None,
    )
    assert json.loads(first.arguments) == {"command": "npm test -- checkout --runInBand --repeat 20"}
    assert first.payload_hash.startswith("sha256:")
    assert (
        first.project_id,
        first.task_id,
        first.session_id,
        first.agent_id,
        first.run_id,
        first.span_id,
    ) == ("prj_demo", "tsk_flaky", "ses_1", "agt_main", "run_1", "call:cal_1")
    assert (first.agent_name, first.project_name, first.context_revision) == ("main", "demo-service", 7)
    decided = {a.id: a for a in reader.approvals("all")}
    assert decided["cal_s011_0"].status == "approved" and decided["cal_s014_0"].status == "denied"
    assert decided["cal_s014_0"].reason == "would wipe the build cache"
    assert [a.id for a in reader.approvals("denied")] == ["cal_s014_0"]
    assert reader.approval("cal_1") == first
    with pytest.raises(NotFound):
        reader.approval("cal_0")  # never held for review: not an approval


# -- the context editor ----------------------------------------------------------------------------
def test_context_groups_items_and_compactions(reader: LensagentSource) -> None:
    ctx = reader.context("agt_main")
    assert ctx.context_revision == 7
    assert [(g.id, g.kind, g.revision) for g in ctx.groups] == [
        ("tg_0", "turn", 2),
        ("tg_1", "compaction", 0),
        ("tg_2", "turn", 0),
    ]
    items = {i.id: i for i in ctx.items}
    assert [i.id for i in ctx.items] == ["ci_0", "ci_1", "ci_2", "ci_3", "ci_4"]
    assert items["ci_0"].locked and items["ci_0"].visible and items["ci_0"].revision == 1
    assert not items["ci_1"].visible and items["ci_3"].summary_of == "ci_3"
    [compaction] = ctx.compactions
    assert compaction.undone_at is None and compaction.summary_item_id == "ci_3"
    if reader.version == "0.1.2":
        assert compaction.covered_item_ids == ("ci_1", "ci_2") and compaction.source_revision == 5
        assert items["ci_1"].compaction_id == "ci_3" and items["ci_2"].compaction_id == "ci_3"
        assert compaction.focus == (
            "keep the failing assertion and timing details · projection saved 7,900 "
            "tokens (14,800 → 6,900, stage compaction)"
        )
    else:  # 0.1.0 records no covered items: nothing is guessed from hidden rows
        assert compaction.covered_item_ids == () and items["ci_1"].compaction_id is None
    [saving] = reader.projection_savings("agt_main")
    assert (saving.stage, saving.saved_tokens, saving.attempt_id) == ("compaction", 7900, "att_1")
    with pytest.raises(NotFound):
        reader.context("agt_missing")


# -- read-only -------------------------------------------------------------------------------------
def test_read_only_open_leaves_the_file_byte_identical(built: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    before = digest(path)
    source = open_source(str(path))
    assert isinstance(source, LensagentSource)
    watcher = source.watch(0.01)
    for project in source.projects():
        for task in source.tasks(project.id):
            for session in source.sessions(task.id):
                for agent in source.agents(session.id):
                    source.context(agent.id)
                    for run in source.runs(agent.id).items:
                        for span_id in source.span_table(run.id).ids:
                            source.span(span_id)
    source.approvals("all")
    watcher_polled(watcher)
    assert watcher.healthy
    assert source.capabilities == frozenset()
    with pytest.raises(ReadOnlyStore):
        source.decide("cal_1", True, "ops")
    with pytest.raises(ReadOnlyStore):
        source.set_group_visibility("tg_2", False, 0, "ops")
    with pytest.raises(ReadOnlyStore):
        source.edit_item("ci_4", "[]", 0, "ops")
    source.close()
    assert digest(path) == before


def test_unsupported_commands_say_why(built: dict[str, Path], tmp_path: Path) -> None:
    source = LensagentSource(copy_of(built, "0.1.2", tmp_path), allow_writes=True)
    try:
        assert source.capabilities == {
            Capability.APPROVE,
            Capability.DENY,
            Capability.SET_VISIBILITY,
            Capability.EDIT_ITEM,
            Capability.SEND_MESSAGE,
            Capability.CONTROL_RUN,  # stop only (test_lensagent_stop.py)
        }
        with pytest.raises(Unsupported, match="no paused state"):
            source.pause_run("run_1", "ops")
        with pytest.raises(Unsupported, match="no API to change them"):
            source.set_item_locked("ci_4", True, 0, "ops")
        with pytest.raises(Unsupported, match="compactContext"):
            source.compact("agt_main", ["ci_4"], "summary", "", 7, "ops")
        with pytest.raises(Unsupported, match="cannot undo"):
            source.undo_compaction("ci_3", "ops")
        with pytest.raises(Unsupported, match="edited arguments"):
            source.decide("cal_1", True, "ops", edited_arguments='{"command": "ls"}')
        assert "no deadline" in source.why_not(Capability.EXPIRE)
    finally:
        source.close()


# -- writes ----------------------------------------------------------------------------------------
def test_approve_moves_the_call_to_queued(writer: LensagentSource) -> None:
    path = writer.path
    state_revision = scalar(path, "SELECT state_revision FROM instance")
    heard: list[Change] = []
    writer.bus.subscribe(heard.extend)
    approved = writer.decide("cal_1", True, "ops@example.com", "looks safe")
    assert approved.status == "approved"
    assert query(
        path, "SELECT state, wait_reason, auto_review_passed, revision FROM calls WHERE id = 'cal_1'"
    ) == [("QUEUED", None, 1, 2)]
    assert scalar(path, "SELECT state_revision FROM instance") == state_revision + 1
    if writer.version == "0.1.2":
        review = json.loads(scalar(path, "SELECT auto_review_json FROM calls WHERE id = 'cal_1'"))
        assert (review["approved"], review["actor"], review["reviewer"]) == (
            True,
            "ops@example.com",
            "operator",
        )
        assert review["auto_review"]["rationale"] == "shell command needs operator review"
        assert (approved.decided_by, approved.reason) == ("ops@example.com", "looks safe")
        assert writer.span("gate:cal_1").status == "ok"
    assert ("approval", "cal_1") in {(c.entity, c.id) for c in heard}
    assert [a.id for a in writer.approvals()] == ["cal_d1"]
    with pytest.raises(AlreadyDecided):
        writer.decide("cal_1", False, "other", "too late")


def test_deny_ends_the_call_with_a_result(writer: LensagentSource) -> None:
    with pytest.raises(InvalidInput):
        writer.decide("cal_d1", False, "ops", "")  # a denial needs its reason
    denied = writer.decide("cal_d1", False, "ops", "no README edits today")
    assert denied.status == "denied" and denied.reason == "no README edits today"
    assert query(
        writer.path, "SELECT state, outcome, wait_reason, revision FROM calls WHERE id = 'cal_d1'"
    ) == [("TERMINAL", "cancelled", None, 2)]
    [(outcome, code, message, content)] = query(
        writer.path,
        "SELECT outcome, error_code, error_message, content_json FROM results WHERE call_id = 'cal_d1'",
    )
    assert (outcome, code, message) == ("cancelled", "policy_denied", "no README edits today")
    assert "Denied by operator ops" in json.loads(content)
    if writer.version == "0.1.2":
        assert query(writer.path, "SELECT capture, stored FROM results WHERE call_id = 'cal_d1'") == [
            ("complete", "full")
        ]
    assert writer.span("call:cal_d1").status == "cancelled"
    with pytest.raises(NotFound):
        writer.decide("cal_0", True, "ops")


def test_concurrent_deciders_exactly_one_wins(built: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    sources = [LensagentSource(path, allow_writes=True) for _ in range(6)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(sources))

    def decide(n: int) -> None:
        barrier.wait()
        try:
            sources[n].decide("cal_1", n % 2 == 0, f"op{n}", f"reason {n}")
            outcomes.append("won")
        except (AlreadyDecided, Conflict) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(len(sources))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for source in sources:
        source.close()
    assert sorted(outcomes) == ["AlreadyDecided"] * 5 + ["won"]
    assert scalar(path, "SELECT revision FROM calls WHERE id = 'cal_1'") == 2
    assert scalar(path, "SELECT count(*) FROM results WHERE call_id = 'cal_1'") in (0, 1)


def test_visibility_per_turn_group_bumps_every_revision(writer: LensagentSource) -> None:
    path = writer.path
    state_revision = scalar(path, "SELECT state_revision FROM instance")
    heard: list[Change] = []
    writer.bus.subscribe(heard.extend)
    with pytest.raises(StaleRevision):
        writer.set_group_visibility("tg_2", False, 5, "ops")
    writer.set_group_visibility("tg_2", False, 0, "ops")
    assert query(path, "SELECT visible, revision FROM context_items WHERE id = 'ci_4'") == [(0, 1)]
    assert scalar(path, "SELECT revision FROM context_turn_groups WHERE id = 'tg_2'") == 1
    assert query(path, "SELECT context_revision, revision FROM agents WHERE id = 'agt_main'") == [(8, 10)]
    assert scalar(path, "SELECT state_revision FROM instance") == state_revision + 1
    assert {(c.entity, c.id) for c in heard} >= {
        ("context_item", "ci_4"),
        ("context_group", "tg_2"),
        ("context", "agt_main"),
    }
    writer.set_group_visibility("tg_2", True, 1, "ops")
    assert writer.context("agt_main").context_revision == 9
    # tg_0 holds ci_0 (the goal, locked) and, on 0.1.2, ci_1 and ci_2, covered by the compaction ci_3
    with pytest.raises(Conflict, match="covered by a compaction" if writer.version == "0.1.2" else "locked"):
        writer.set_group_visibility("tg_0", False, 2, "ops")
    with pytest.raises(NotFound):
        writer.set_group_visibility("tg_missing", False, 0, "ops")


def test_item_edits_guard_revision_lock_and_compaction(writer: LensagentSource) -> None:
    path = writer.path
    new = '[{"id":"call_B1","name":"run_shell","arguments":{"command":"npm test -- checkout"}}]'
    with pytest.raises(StaleRevision):
        writer.edit_item("ci_4", new, 3, "ops")
    with pytest.raises(InvalidInput):
        writer.edit_item("ci_4", "not json", 0, "ops")
    writer.edit_item("ci_4", new, 0, "ops")
    assert query(path, "SELECT content, revision FROM context_items WHERE id = 'ci_4'") == [(new, 1)]
    assert scalar(path, "SELECT revision FROM context_turn_groups WHERE id = 'tg_2'") == 1
    assert scalar(path, "SELECT context_revision FROM agents WHERE id = 'agt_main'") == 8
    with pytest.raises(Conflict, match="locked"):
        writer.edit_item("ci_0", "changed goal", 1, "ops")
    if writer.version == "0.1.2":
        with pytest.raises(Conflict, match="compaction"):
            writer.edit_item("ci_1", "[]", 1, "ops")
    assert writer.context("agt_main").items[4].content == new


# -- live changes ----------------------------------------------------------------------------------
RUNTIME_WRITES = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA busy_timeout = 5000")
conn.execute("BEGIN IMMEDIATE")
conn.execute(
    "INSERT INTO calls (id, project_id, workspace_id, agent_id, step_id, attempt_id, partition_id, "
    "parent_call_id, source, capability_id, provider_call_id, call_ordinal, input_json, effect, policy, "
    "state, wait_reason, outcome, outcome_unknown, auto_review_passed, revision, created_at, updated_at) "
    "VALUES ('cal_live', 'prj_demo', 'wsp_main', 'agt_docs', 'stp_d0', 'att_d0', NULL, NULL, 'llm', "
    "'run_shell', 'p_live', 1, "
    "'{\\"command\\":\\"rm -rf dist\\"}', 'full', 'ask', 'WAITING', 'policy_review', NULL, 0, 0, 0, "
    "'2026-12-01T10:00:00.000Z', '2026-12-01T10:00:00.000Z')")
conn.execute("UPDATE agents SET context_revision = context_revision + 1, revision = revision + 1, "
             "updated_at = '2026-12-01T10:00:01.000Z' WHERE id = 'agt_main'")
conn.execute("UPDATE context_items SET visible = 0, revision = revision + 1, "
             "updated_at = '2026-12-01T10:00:01.000Z' WHERE turn_group_id = 'tg_2'")
conn.execute("UPDATE instance SET state_revision = state_revision + 1 WHERE id = 1")
conn.execute("COMMIT")
"""


def wait_for(heard: list[Change], wanted: set[tuple[str, str, str]], timeout: float = 20.0) -> set:
    def seen() -> set[tuple[str, str, str]]:
        return {(c.entity, c.op, c.id) for c in list(heard)}

    wait_until(lambda: wanted <= seen(), timeout_s=timeout, what=f"the changes {sorted(wanted)}")
    return seen()


@pytest.mark.parametrize("version", VERSIONS)
def test_runtime_writes_arrive_as_changes(built: dict[str, Path], tmp_path: Path, version: str) -> None:
    path = copy_of(built, version, tmp_path)
    source = open_source(str(path))
    assert isinstance(source, LensagentSource)
    heard: list[Change] = []
    source.bus.subscribe(heard.extend)
    source.watch(0.02)
    try:
        subprocess.run([sys.executable, "-c", RUNTIME_WRITES, str(path)], check=True, timeout=20)
        wanted = {
            ("approval", "insert", "cal_live"),
            ("span", "insert", "call:cal_live"),
            ("context_item", "update", "ci_4"),
            ("context", "update", "agt_main"),
        }
        assert wanted <= wait_for(heard, wanted)
        approval = next(c for c in heard if c.entity == "approval")
        assert approval.parents == {
            "project": "prj_demo",
            "task": "tsk_docs",
            "session": "ses_2",
            "agent": "agt_docs",
            "run": "run_d",
        }
        assert [a.id for a in source.approvals()] == ["cal_1", "cal_d1", "cal_live"]
        assert not next(i for i in source.context("agt_main").items if i.id == "ci_4").visible
    finally:
        source.close()


def test_a_delete_resets_the_views(built: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    source = LensagentSource(path)
    try:
        source.prime_high_water()
        assert source.poll_changes() == []
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM tasks WHERE id = 'tsk_old'")
        conn.commit()
        conn.close()
        changes: Sequence[Change] = source.poll_changes()
        assert [(c.entity, c.op) for c in changes] == [("*", RESET)]
    finally:
        source.close()


def test_same_millisecond_rows_are_neither_lost_nor_repeated(built: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    source = LensagentSource(path)
    try:
        source.prime_high_water()
        stamp = "2026-12-02T08:00:00.000Z"
        conn = sqlite3.connect(path)
        for n in range(2):
            conn.execute("UPDATE projects SET updated_at = ? WHERE id = 'prj_demo'", (stamp,))
            conn.execute(
                "INSERT INTO tasks (id, project_id, title, archived_at, revision, created_at, updated_at) "
                "VALUES (?, 'prj_demo', 'new', NULL, 0, ?, ?)",
                (f"tsk_new{n}", stamp, stamp),
            )
            conn.commit()
            ids = {(c.entity, c.op, c.id) for c in source.poll_changes()}
            assert ("task", "insert", f"tsk_new{n}") in ids
            assert ("task", "insert", "tsk_new0") not in ids or n == 0
        conn.close()
        assert source.poll_changes() == []
    finally:
        source.close()


def test_the_runtime_deciding_first_is_a_conflict_not_a_second_decision(
    built: dict[str, Path], tmp_path: Path
) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    source = LensagentSource(path, allow_writes=True)
    try:
        [pending] = [a for a in source.approvals() if a.id == "cal_1"]
        conn = sqlite3.connect(path)  # lensagent's own reviewCall gets there first
        conn.execute(
            "UPDATE calls SET state = 'QUEUED', wait_reason = NULL, auto_review_passed = 1, "
            "revision = revision + 1, updated_at = '2026-12-01T11:00:00.000Z' WHERE id = 'cal_1'"
        )
        conn.commit()
        conn.close()
        with pytest.raises(AlreadyDecided, match="already approved"):
            source.decide(pending.id, False, "ops", "changed my mind")
        assert scalar(path, "SELECT state FROM calls WHERE id = 'cal_1'") == "QUEUED"
        assert scalar(path, "SELECT count(*) FROM results WHERE call_id = 'cal_1'") == 0
    finally:
        source.close()


def test_odd_runtime_values_are_shown_not_fatal(built: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(built, "0.1.2", tmp_path)
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE model_attempts SET usage_json = 'not json', created_at = 'yesterday' WHERE id = 'att_0'"
    )
    conn.execute(
        'UPDATE model_attempts SET usage_json = \'{"prompt_tokens": 11, "completion_tokens": 4}\' '
        "WHERE id = 'att_1'"
    )
    conn.execute("UPDATE runs SET goal_message_ids_json = '{oops' WHERE id = 'run_1'")
    conn.commit()
    conn.close()
    source = LensagentSource(path, allow_writes=True)
    try:
        table = source.span_table("run_1")
        at = {i: n for n, i in enumerate(table.ids)}
        assert table.input_tokens[at["attempt:att_0"]] == 0 and table.starts[at["attempt:att_0"]] == 0.0
        assert (table.input_tokens[at["attempt:att_1"]], table.output_tokens[at["attempt:att_1"]]) == (11, 4)
        assert source.runs("agt_main").items[0].title == "Run run_1"
        with pytest.raises(InvalidInput):
            source.edit_item("ci_4", "x" * 5_000_000, 0, "ops")
        with pytest.raises(InvalidInput):
            source.decide("cal_1", True, "   ")
    finally:
        source.close()


def test_a_finished_run_also_changes_its_own_span(built: dict[str, Path], tmp_path: Path) -> None:
    """The timeline refreshes a foreign run by changed span ids: the root span must be named too."""
    path = copy_of(built, "0.1.2", tmp_path)
    source = LensagentSource(path)
    try:
        source.prime_high_water()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE runs SET state = 'TERMINAL', outcome = 'success', revision = revision + 1, "
                     "updated_at = '2026-12-02T09:00:00.000Z' WHERE id = 'run_1'")
        conn.commit()
        conn.close()
        changes = {(c.entity, c.op, c.id): c for c in source.poll_changes()}
        assert ("run", "update", "run_1") in changes
        assert changes[("span", "update", "run:run_1")].parents["run"] == "run_1"
        assert source.span_table("run_1", ["run:run_1"]).statuses == ["ok"]
    finally:
        source.close()


def test_a_decision_on_arguments_other_than_shown_is_refused(writer: LensagentSource) -> None:
    """The shown-arguments hash guards foreign writes too: a stale hash writes nothing."""
    from agentdesk.store.errors import StaleRevision
    from agentdesk.store.text.arguments import arguments_hash, short_hash

    path = writer.path
    before = query(path, "SELECT state, revision FROM calls WHERE id = 'cal_1'")
    with pytest.raises(StaleRevision, match="changed since they were shown"):
        writer.decide("cal_1", True, "ops", "ok", expected_arguments_hash="0" * 12)
    assert query(path, "SELECT state, revision FROM calls WHERE id = 'cal_1'") == before
    shown = short_hash(arguments_hash(writer.approval("cal_1").arguments))
    assert writer.decide("cal_1", True, "ops", "ok", expected_arguments_hash=shown).status == "approved"
