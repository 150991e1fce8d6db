"""stageflow's database opened in place: tree, spans, queue, live changes, guarded decisions, no writes."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.errors import AlreadyDecided, Expired, InvalidInput, ReadOnlyStore
from agentdesk.store.source import Capability, require_context_writer
from agentdesk.store.sources import open_source
from agentdesk.store.sources.foreign import Unsupported
from agentdesk.store.sources.stageflow import StageflowSource
from tests.store.sources.fixtures_stageflow import HTML_OUTPUT, UNICODE_NAME, build_stageflow_fixture
from tests.store.sources.foreign_helpers import Collector, race_processes, race_threads, run_python, sha, stored
from tests.waiting import watcher_polled


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("stageflow") / "agents.db"
    return path, build_stageflow_fixture(path)


@pytest.fixture
def db(built: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A private copy, for tests that write or watch."""
    path = tmp_path / "agents.db"
    shutil.copy(built[0], path)
    return path, built[1]


@pytest.fixture
def source(built: tuple[Path, dict[str, str]]) -> Iterator[StageflowSource]:
    src = opened(built[0])
    yield src
    src.close()



def opened(path: Path, *, allow_writes: bool = False) -> StageflowSource:
    """`open_source`, checked to have detected the right system (and typed as it)."""
    src = open_source(str(path), allow_writes=allow_writes)
    assert isinstance(src, StageflowSource)
    return src




# -- reads -----------------------------------------------------------------------------------
def test_detected_and_opened_read_only(source: StageflowSource) -> None:
    assert source.descriptor.kind == "stageflow"
    assert source.descriptor.read_only
    assert source.capabilities == frozenset()
    assert "read-only" in source.why_not(Capability.APPROVE)
    assert "no editable context" in source.why_not(Capability.SET_VISIBILITY)
    assert "payload_hash" in source.why_not(Capability.EDIT_ARGUMENTS)


def test_tree_maps_definitions_sessions_and_turns(source: StageflowSource,
                                                  built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    projects = {p.id: p for p in source.projects()}
    assert set(projects) == {ids["project"], ids["reference_project"]}
    assert projects[ids["project"]].pending_approvals == 1  # the overdue one is not pending any more
    assert projects[ids["project"]].status == "waiting"
    tasks = {t.id: t for t in source.tasks(ids["project"])}
    assert tasks[ids["task"]].title == "agent release-captain · definition r3"
    assert "(archived)" in tasks[f"{ids['project']}/docs-writer"].title
    sessions = source.sessions(ids["task"])
    assert [s.id for s in sessions] == [ids["session"]]
    assert sessions[0].title == "Ship 2.4 — <release> notes & “quotes”"
    [agent] = source.agents(ids["session"])
    assert (agent.id, agent.name, agent.model, agent.run_count) == (ids["agent"], "release-captain r3",
                                                                    "claude-sonnet", 3)
    page = source.runs(agent.id)
    assert [r.id for r in page.items] == [ids["waiting_run"], ids["failed_run"], ids["run"]]  # newest first
    waiting, failed, done = page.items
    assert (waiting.status, waiting.pending_approvals) == ("waiting", 1)
    assert (failed.status, failed.error) == ("failed", "agent.host_restarted")
    assert done.status == "done" and done.ended_at is not None
    assert done.title == "Turn 1 · groundedness 0.71 · helpfulness 0.93"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.cost_usd) == (91_000, 6_100, 0.4123)
    assert source.run_attributes(ids["run"])["eval_scores"] == {"groundedness": 0.71, "helpfulness": 0.93}
    assert source.runs(agent.id, offset=1, limit=1).items[0].id == ids["failed_run"]
    assert source.agent(ids["agent"]) == agent
    assert source.run(ids["run"]) == done
    loc = source.locate("span", ids["gate_span"])
    assert (loc.project_id, loc.task_id, loc.session_id, loc.agent_ids, loc.run_id, loc.span_id) == (
        ids["project"], ids["task"], ids["session"], (ids["agent"],), ids["run"], ids["gate_span"])


def test_native_spans_with_nesting_tokens_and_literal_text(source: StageflowSource,
                                                           built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    table = source.span_table(ids["run"])
    assert len(table) > 300
    assert set(table.kinds) == {"agent", "model", "tool", "sub_agent", "guardrail", "gate"}
    assert table.starts == sorted(table.starts)
    assert all(end is not None and end >= start for start, end in zip(table.starts, table.ends, strict=True))
    parent = dict(zip(table.ids, table.parent_ids, strict=True))
    kind = dict(zip(table.ids, table.kinds, strict=True))
    nested = [s for s in table.ids if kind[s] == "sub_agent" and kind.get(parent[s] or "") == "sub_agent"]
    assert nested, "a sub-agent inside a sub-agent"
    assert sum(table.input_tokens) > 100_000 and set(table.costs) == {0.0}
    html = source.span(ids["html_span"])
    assert html.output_text == HTML_OUTPUT and html.kind == "tool"
    assert source.span(ids["unicode_span"]).name == UNICODE_NAME
    big = source.span(ids["big_span"])
    assert big.output_text is not None and len(big.output_text) > 2_000_000
    error = source.span(ids["error_span"])
    assert (error.status, error.error) == ("error", "ECONNRESET while uploading")
    assert source.span(ids["gate_span"]).attributes == {"approval_id": "apr_rc_approved"}
    assert source.sent_context(ids["html_span"]) == []


def test_context_is_the_transcript_read_only(source: StageflowSource,
                                             built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    ctx = source.context(ids["agent"])
    assert [i.content for i in ctx.items][:1] == ["Ship 2.4 please 🚀 <b>today</b>"]
    assert [g.id for g in ctx.groups] == ["trn_rc1", "trn_rc2", "trn_rc3"]
    assert ctx.context_revision == len(ctx.items) == 3
    with pytest.raises(Unsupported, match="no editable context"):
        require_context_writer(source, Capability.COMPACT).compact(ids["agent"], [], "s", "f", 0, "ada")


def test_queue_shows_overdue_as_expired_before_the_sweep(source: StageflowSource,
                                                         built: tuple[Path, dict[str, str]]) -> None:
    path, ids = built
    assert [a.id for a in source.approvals()] == [ids["pending_approval"]]
    expired = {a.id for a in source.approvals("expired")}
    assert {ids["overdue_approval"], ids["reference_overdue"], "apr_0"} <= expired
    # the runtime has not swept it; agentdesk only shows it as expired
    assert stored(path, "SELECT status FROM agent_approvals WHERE approval_id = ?",
                  ids["overdue_approval"]) == [("pending",)]
    pending = source.approval(ids["pending_approval"])
    assert (pending.tool_name, pending.run_id, pending.agent_id, pending.agent_name) == (
        "rollback", ids["waiting_run"], ids["agent"], "release-captain")
    assert json.loads(pending.arguments)["note"] == "naïve ✓" and len(pending.payload_hash) == 64
    assert pending.expires_at is not None and pending.created_at < pending.expires_at
    approved = source.approval(ids["approved_approval"])
    assert (approved.status, approved.decided_by, approved.span_id) == ("approved", "Grace", ids["gate_span"])
    assert source.approval(ids["denied_approval"]).status == "denied"
    everything = source.approvals("all")
    assert len(everything) == 7 and everything[0].created_at >= everything[-1].created_at
    assert len(source.approvals("all", limit=2)) == 2
    assert source.info().counts["overdue approvals not yet swept"] == 2


# -- writes ----------------------------------------------------------------------------------
def test_read_only_source_refuses_every_write(source: StageflowSource,
                                              built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    with pytest.raises(ReadOnlyStore):
        source.decide(ids["pending_approval"], True, "ada")
    with pytest.raises(ReadOnlyStore):
        source.expire_overdue()
    with pytest.raises(Unsupported):
        require_context_writer(source, Capability.SET_VISIBILITY).set_group_visibility("trn_rc1", False, 0, "ada")


def test_decide_is_guarded_and_tells_the_loser(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    src = opened(path, allow_writes=True)
    try:
        assert {Capability.APPROVE, Capability.DENY, Capability.EXPIRE} == src.capabilities
        with pytest.raises(InvalidInput):
            src.decide(ids["pending_approval"], False, "ada")  # a denial needs a reason
        with pytest.raises(Unsupported, match="payload_hash"):
            src.decide(ids["pending_approval"], True, "ada", edited_arguments="{}")
        decided = src.decide(ids["pending_approval"], True, "Ada Lovelace", reason="canary is red")
        assert (decided.status, decided.decided_by) == ("approved", "Ada Lovelace")
        assert decided.reason == "canary is red"
        status, decided_at, actor = stored(path, "SELECT status, decided_at, actor_json FROM agent_approvals"
                                                 " WHERE approval_id = ?", ids["pending_approval"])[0]
        assert status == "approved" and str(decided_at).endswith("Z")
        assert json.loads(str(actor))["name"] == "Ada Lovelace"
        with pytest.raises(AlreadyDecided, match="Ada Lovelace") as lost:
            src.decide(ids["pending_approval"], False, "grace", reason="too late")
        assert lost.value.at == decided_at
        with pytest.raises(Expired):
            src.decide(ids["overdue_approval"], True, "ada")
        assert stored(path, "SELECT status, actor_json FROM agent_approvals WHERE approval_id = ?",
                      ids["overdue_approval"]) == [("pending", None)]
        assert set(src.expire_overdue()) == {ids["overdue_approval"], ids["reference_overdue"]}
        assert stored(path, "SELECT status, actor_json FROM agent_approvals WHERE approval_id = ?",
                      ids["overdue_approval"]) == [("expired", None)]
        assert stored(path, "PRAGMA journal_mode") == [("wal",)]
    finally:
        src.close()



def test_concurrent_deciders_exactly_one_wins(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    results = race_processes(path, ids["pending_approval"])
    assert len([r for r in results if r["won"]]) == 1
    decided_at, actor = stored(path, "SELECT decided_at, actor_json FROM agent_approvals"
                                     " WHERE approval_id = ?", ids["pending_approval"])[0]
    assert all((r["actor"], r["at"]) == (json.loads(str(actor))["name"], decided_at)
               for r in results if not r["won"])
    # and threads, each with its own connection, on another pending approval
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agent_approvals SET expires_at = '2999-01-01T00:00:00.000Z'"
                     " WHERE approval_id = 'apr_2'")
    sources = [opened(path, allow_writes=True) for _ in range(6)]
    try:
        assert race_threads(sources, "apr_2") == ["AlreadyDecided"] * 5 + ["won"]
    finally:
        for src in sources:
            src.close()


# -- live ------------------------------------------------------------------------------------
WRITER = """
import json, sqlite3, sys, time
from datetime import UTC, datetime, timedelta
from tests.store.sources.fixtures_stageflow import INSERT_APPROVAL, INSERT_SPAN, NEXT_MESSAGE_SEQ, INSERT_MESSAGE
from tests.store.sources.fixtures_stageflow import NEXT_TURN_SEQ, INSERT_TURN, iso
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
now = datetime.now(UTC)
step = sys.argv[2]
conn.execute("BEGIN")
if step == "span":
    conn.execute(INSERT_SPAN, ("sp_live", "trn_rc3", None, "live_tool <i>", "tool", "ok", iso(now),
                               iso(now + timedelta(seconds=1)), 1000, 5, 7, "{}", "in", "out"))
elif step == "approval":
    expires = iso(now + timedelta(seconds=float(sys.argv[3])))
    conn.execute(INSERT_APPROVAL, ("apr_live", "ses_rc", "trn_rc3", "purge_cache", '{"all":true}', "ab" * 32,
                                   "pending", iso(now), expires, None, None))
elif step == "turn":
    seq = conn.execute(NEXT_TURN_SEQ, ("ses_rc",)).fetchone()[0]
    conn.execute(INSERT_TURN, ("trn_live", "ses_rc", seq, 3, "trc_live", "running", None, None, None, None,
                               iso(now), None))
    seq = conn.execute(NEXT_MESSAGE_SEQ, ("ses_rc",)).fetchone()[0]
    conn.execute(INSERT_MESSAGE, ("msg_live", "ses_rc", seq, "trn_live", "user", "grace", "again?", iso(now)))
    conn.execute("UPDATE agent_sessions SET updated_at = ?, status = ? WHERE session_id = ?",
                 (iso(now), "running", "ses_rc"))
elif step == "decide":
    conn.execute("UPDATE agent_approvals SET status = ?, decided_at = ?, actor_json = ? "
                 "WHERE approval_id = ? AND status = 'pending'",
                 ("denied", iso(now), '{"name":"Bot"}', "apr_live"))
conn.execute("COMMIT")
print(time.time())
"""


def test_live_changes_follow_the_runtime(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    src = opened(path)
    seen = Collector(src)
    src.watch()
    try:
        parents = {"project": ids["project"], "task": ids["task"], "session": ids["session"],
                   "agent": ids["agent"], "run": ids["waiting_run"]}
        committed = float(run_python(WRITER, str(path), "span"))
        at, change = seen.wait(lambda c: c.entity == "span" and c.id == "sp_live")
        assert (change.op, dict(change.parents)) == ("insert", parents) and at - committed < 1.0
        assert "sp_live" in src.span_table(ids["waiting_run"]).ids
        assert src.span("sp_live").name == "live_tool <i>"

        committed = float(run_python(WRITER, str(path), "approval", "3600"))
        at, change = seen.wait(lambda c: c.entity == "approval" and c.id == "apr_live")
        assert (change.op, dict(change.parents)) == ("insert", parents) and at - committed < 1.0
        assert "apr_live" in [a.id for a in src.approvals()]

        committed = float(run_python(WRITER, str(path), "turn"))
        for entity, op, entity_id in (("run", "insert", "trn_live"), ("session", "update", ids["session"]),
                                      ("agent", "update", ids["agent"]),
                                      ("context_item", "insert", "msg_live"),
                                      ("context", "update", ids["agent"])):
            at, _ = seen.wait_for(entity, op, entity_id)
            assert at - committed < 1.0
        assert src.runs(ids["agent"]).items[0].id == "trn_live"
        assert src.sessions(ids["task"])[0].status == "running"

        run_python(WRITER, str(path), "decide")
        seen.wait_for("approval", "update", "apr_live")
        assert src.approval("apr_live").decided_by == "Bot"
    finally:
        src.close()


def test_a_passing_deadline_is_announced_without_a_commit(db: tuple[Path, dict[str, str]]) -> None:
    path, _ = db
    src = opened(path)
    seen = Collector(src)
    src.watch()
    try:
        run_python(WRITER, str(path), "approval", "1.5")
        seen.wait_for("approval", "insert", "apr_live")
        assert src.approval("apr_live").status == "pending"
        seen.wait_for("approval", "update", "apr_live", timeout=4)
        assert src.approval("apr_live").status == "expired"
        assert stored(path, "SELECT status FROM agent_approvals WHERE approval_id = ?", "apr_live") == [
            ("pending",)]
    finally:
        src.close()


# -- the file is theirs ----------------------------------------------------------------------

@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_read_only_opening_leaves_the_files_byte_identical(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "agents.db"
    ids = build_stageflow_fixture(path, journal_mode=journal)
    # the runtime, alive, with its last commit still in the WAL
    runtime = sqlite3.connect(path, isolation_level=None)
    runtime.execute("PRAGMA wal_autocheckpoint=0")
    runtime.execute("UPDATE agent_sessions SET updated_at = updated_at WHERE session_id = 'ses_rc'")
    wal = Path(f"{path}-wal")
    before = (sha(path), sha(wal))
    assert journal != "wal" or wal.stat().st_size > 0
    src = opened(path)
    watcher = src.watch()
    for project in src.projects():
        for task in src.tasks(project.id):
            for session in src.sessions(task.id):
                for agent in src.agents(session.id):
                    src.context(agent.id)
                    for run in src.runs(agent.id).items:
                        for span_id in src.span_table(run.id).ids[:50]:
                            src.span(span_id)
    src.approvals("all")
    src.info()
    src.locate("approval", ids["pending_approval"])
    watcher_polled(watcher)
    src.close()
    assert (sha(path), sha(wal)) == before
    runtime.close()
