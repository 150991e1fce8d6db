"""vgxness's database opened in place: tree, point-event timeline, queue, live changes, guarded writes."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.errors import AlreadyDecided, InvalidInput, ReadOnlyStore, StoreUnavailable
from agentdesk.store.source import Capability, require_context_writer
from agentdesk.store.sources import open_source
from agentdesk.store.sources.foreign import Unsupported
from agentdesk.store.sources.vgxness import VgxnessSource
from tests.store.sources.fixtures_vgxness import HTML_TITLE, UNICODE_TITLE, build_vgxness_fixture
from tests.store.sources.fixtures_vgxness_sql import MIGRATIONS
from tests.store.sources.foreign_helpers import Collector, race_processes, race_threads, run_python, sha, stored
from tests.waiting import watcher_polled


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("vgxness") / "memory.db"
    return path, build_vgxness_fixture(path)


@pytest.fixture
def db(built: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A private copy, for tests that write or watch."""
    path = tmp_path / "memory.db"
    shutil.copy(built[0], path)
    return path, built[1]


@pytest.fixture
def source(built: tuple[Path, dict[str, str]]) -> Iterator[VgxnessSource]:
    src = opened(built[0])
    yield src
    src.close()



def opened(path: Path, *, allow_writes: bool = False) -> VgxnessSource:
    """`open_source`, checked to have detected the right system (and typed as it)."""
    src = open_source(str(path), allow_writes=allow_writes)
    assert isinstance(src, VgxnessSource)
    return src




# -- reads -----------------------------------------------------------------------------------
def test_detected_by_its_migrations(source: VgxnessSource) -> None:
    assert (source.descriptor.kind, source.descriptor.schema_version) == ("vgxness", "005_run_approvals.sql")
    assert source.descriptor.read_only and source.capabilities == frozenset()
    assert "no deadline" in source.why_not(Capability.EXPIRE)
    assert "no agent context" in source.why_not(Capability.COMPACT)


def test_an_older_vgxness_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        for name, sql in MIGRATIONS[:4]:
            conn.executescript(sql)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (name,))
    with pytest.raises(StoreUnavailable, match=r"vgxness store at migration 004_run_runtime\.sql"):
        open_source(str(path))


def test_tree_with_pass_through_levels_and_the_registry(source: VgxnessSource,
                                                        built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    projects = {p.id: p for p in source.projects()}
    assert set(projects) == {ids["project"], ids["reference_project"]}
    assert (projects[ids["project"]].status, projects[ids["project"]].pending_approvals) == ("waiting", 1)
    [task] = source.tasks(ids["project"])
    assert (task.id, task.title) == (ids["task"], "All runs (vgxness has no task level)")
    [session] = source.sessions(task.id)
    assert session.id == ids["session"] and "no session" in session.title
    agents = source.agents(session.id)
    assert [a.id for a in agents] == ["agt_planner", "agt_coder", "agt_tester", "agt_legacy"]  # parents first
    by_id = {a.id: a for a in agents}
    assert by_id["agt_tester"].parent_agent_id == "agt_coder" and by_id["agt_tester"].name == "tester ✓"
    assert "not in the agent registry" in by_id["agt_legacy"].name
    assert (by_id["agt_planner"].status, by_id["agt_planner"].pending_approvals) == ("waiting", 1)
    runs = source.runs("agt_planner").items
    assert [r.id for r in runs] == ["run_wait", "run_ok"]
    assert runs[0].status == "waiting" and runs[0].ended_at is None and runs[0].usage.total_tokens == 0
    [blocked] = source.runs("agt_tester").items
    assert (blocked.status, blocked.error) == ("failed", "CI runner offline") and "blocked" in blocked.title
    [busy] = source.runs("agt_coder").items
    assert (busy.status, busy.title) == ("done", "Stabilise the test suite · sdd/verify · partial")
    assert source.locate("run", "run_blocked").agent_ids == ("agt_planner", "agt_coder", "agt_tester")
    assert source.run("run_busy") == busy
    assert source.run_attributes("run_busy")["latest_checkpoint"]["label"] == "before batch 4"


def test_timeline_is_point_events_and_milestones(source: VgxnessSource,
                                                 built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    table = source.span_table(ids["run"])
    assert len(table) > 250
    assert table.starts == table.ends  # no durations are invented
    assert table.starts == sorted(table.starts)
    assert {"tool", "gate", "guardrail", "internal"} == set(table.kinds) and "error" in table.statuses
    checkpoint = source.span(ids["checkpoint"])
    assert (checkpoint.kind, checkpoint.attributes["milestone"], checkpoint.duration_s) == ("gate", True, 0.0)
    html = source.span(ids["html_event"])
    assert html.name == HTML_TITLE and html.attributes["point_event"] is True
    assert html.attributes["native_kind"] == "tool-call" and html.ended_at == html.started_at
    assert source.span(ids["unicode_event"]).name == UNICODE_TITLE
    big = source.span(ids["big_event"])
    assert big.input_text is not None and len(big.input_text) > 2_000_000
    artifact = source.span(ids["artifact_event"])
    assert artifact.output_text == "# Proposal\n<script>x</script>"
    names = dict(zip(table.ids, table.names, strict=True))
    memory = next(source.span(i) for i, name in names.items() if name.startswith("Recall"))
    assert memory.attributes["observation"]["title"] == "Flaky tests" and "<em>" in (memory.output_text or "")
    failed = next(source.span(i) for i, s in zip(table.ids, table.statuses, strict=True) if s == "error")
    assert failed.kind == "guardrail" and failed.attributes["payload"]["ok"] is False
    assert [o["id"] for o in source.observations(ids["project"], "flaky tests")] == ["obs_flaky"]
    assert source.context("agt_planner").items == () and source.sent_context(ids["html_event"]) == []


def test_queue_with_the_event_that_raised_each_approval(source: VgxnessSource,
                                                        built: tuple[Path, dict[str, str]]) -> None:
    ids = built[1]
    pending = source.approvals()
    assert [a.id for a in pending] == [ids["reference_pending"], ids["pending_approval"]]  # oldest first
    wait = pending[1]
    assert wait.tool_name == "Bash"
    assert json.loads(wait.arguments) == {"command": "vault rotate api-key --env=prod"}
    assert (wait.span_id, wait.run_id, wait.agent_id, wait.project_id) == (
        ids["pending_event"], ids["waiting_run"], "agt_planner", ids["project"])
    assert wait.expires_at is None and wait.payload_hash == ""
    assert source.span(wait.span_id or "").attributes["approval_id"] == wait.id
    rejected = source.approval(ids["rejected_approval"])
    assert (rejected.status, rejected.decided_by, rejected.reason) == ("denied", "grace", "not on a Friday")
    assert [a.id for a in source.approvals("denied")] == [ids["rejected_approval"]]
    assert [a.id for a in source.approvals("cancelled")] == [ids["cancelled_approval"]]
    assert source.approvals("expired") == []
    assert len(source.approvals("all")) == 6 and len(source.approvals(None, limit=3)) == 3
    assert source.locate("approval", wait.id).span_id == ids["pending_event"]


# -- writes ----------------------------------------------------------------------------------
def test_read_only_source_refuses_every_write(source: VgxnessSource,
                                              built: tuple[Path, dict[str, str]]) -> None:
    with pytest.raises(ReadOnlyStore):
        source.decide(built[1]["pending_approval"], True, "ada")
    with pytest.raises(Unsupported, match="no agent context"):
        require_context_writer(source, Capability.LOCK).set_item_locked("x", True, 0, "ada")


def test_resolution_satisfies_the_check_and_tells_the_loser(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    src = opened(path, allow_writes=True)
    try:
        assert src.capabilities == {Capability.APPROVE, Capability.DENY}
        assert src.expire_overdue() == []  # nothing ever expires: vgxness approvals have no deadline
        with pytest.raises(InvalidInput):
            src.decide(ids["pending_approval"], False, "ada")
        decided = src.decide(ids["pending_approval"], False, "ada", reason="rotate after the freeze")
        assert (decided.status, decided.decided_by) == ("denied", "ada")
        assert decided.reason == "rotate after the freeze"
        row = stored(path, "SELECT status, resolved_at, resolved_by, resolution_reason FROM run_approvals"
                           " WHERE id = ?", ids["pending_approval"])[0]
        assert row[0] == "rejected" and str(row[1]).endswith("Z")
        assert row[2:] == ("ada", "rotate after the freeze")
        with pytest.raises(AlreadyDecided, match="denied by ada") as lost:
            src.decide(ids["pending_approval"], True, "grace")
        assert lost.value.at == row[1]
        approved = src.decide(ids["reference_pending"], True, "grace")  # no reason: NULL satisfies the CHECK
        assert approved.status == "approved" and approved.reason is None
        assert stored(path, "SELECT status FROM runs WHERE id = ?", ids["waiting_run"]) == [("needs-human",)]
        assert stored(path, "PRAGMA journal_mode") == [("delete",)]
    finally:
        src.close()



def test_concurrent_deciders_exactly_one_wins(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    results = race_processes(path, ids["pending_approval"])
    assert len([r for r in results if r["won"]]) == 1
    resolved_at, resolved_by = stored(path, "SELECT resolved_at, resolved_by FROM run_approvals WHERE id = ?",
                                      ids["pending_approval"])[0]
    assert all((r["actor"], r["at"]) == (resolved_by, resolved_at) for r in results if not r["won"])
    sources = [opened(path, allow_writes=True) for _ in range(6)]
    try:
        assert race_threads(sources, ids["reference_pending"]) == ["AlreadyDecided"] * 5 + ["won"]
    finally:
        for src in sources:
            src.close()


# -- live ------------------------------------------------------------------------------------
WRITER = """
import sqlite3, sys, time
from tests.store.sources.fixtures_vgxness import INSERT_APPROVAL, INSERT_CHECKPOINT, INSERT_EVENT, INSERT_RUN, iso
from datetime import UTC, datetime
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA foreign_keys = ON")
conn.execute("PRAGMA busy_timeout = 5000")
now = iso(datetime.now(UTC))
step = sys.argv[2]
conn.execute("BEGIN IMMEDIATE")
if step == "event":
    conn.execute(INSERT_EVENT, ("rev_live", "run_wait", "tool-call", "Bash: <live>", '{"tool":"Bash"}',
                                "tool", "Bash", now, "run_wait"))
    conn.execute(INSERT_CHECKPOINT, ("chk_live", "run_wait", "live point", "{}", now, "run_wait"))
elif step == "approval":
    conn.execute(INSERT_RUN, ("run_live", "orbit-api", "Live run", "quick", "apply", "agt_coder",
                              "claude-haiku", "running", None, None, now, now, None))
    conn.execute(INSERT_EVENT, ("rev_ask", "run_live", "permission-decision", "Deploy?", '{"tool":"Deploy"}',
                                "run_approval", "apv_live", now, "run_live"))
    conn.execute(INSERT_APPROVAL, ("apv_live", "run_live", "rev_ask", "pending", now, None, None, None))
    conn.execute("UPDATE runs SET status = 'needs-human', updated_at = ? WHERE id = 'run_live'", (now,))
elif step == "resolve":
    conn.execute("UPDATE run_approvals SET status = 'cancelled', resolved_at = ?, resolved_by = 'runtime' "
                 "WHERE id = 'apv_live' AND status = 'pending'", (now,))
    conn.execute("UPDATE runs SET status = 'cancelled', outcome = 'cancelled', completed_at = ?, "
                 "updated_at = ? WHERE id = 'run_live'", (now, now))
elif step == "project":
    conn.execute(INSERT_RUN, ("run_new", "zeta ✓", "Brand new", "quick", "plan", "agt_nobody", "m", "created",
                              None, None, now, now, None))
conn.execute("COMMIT")
print(time.time())
"""


def test_live_changes_follow_the_runtime(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    src = opened(path)
    seen = Collector(src)
    src.watch()
    try:
        base = {"project": ids["project"], "task": ids["task"], "session": ids["session"]}
        committed = float(run_python(WRITER, str(path), "event"))
        for span_id in ("rev_live", "chk_live"):
            at, change = seen.wait_for("span", "insert", span_id)
            assert dict(change.parents) == base | {"agent": "agt_planner", "run": "run_wait"}
            assert at - committed < 1.0
        table = src.span_table("run_wait").ids
        assert {"rev_live", "chk_live"} <= set(table) and table[-1] in ("rev_live", "chk_live")
        assert src.span("chk_live").attributes["milestone"] is True

        committed = float(run_python(WRITER, str(path), "approval"))
        at, change = seen.wait_for("approval", "insert", "apv_live")
        assert dict(change.parents) == base | {"agent": "agt_coder", "run": "run_live"}
        assert at - committed < 1.0
        seen.wait_for("run", "insert", "run_live")
        assert "apv_live" in [a.id for a in src.approvals()]
        assert src.runs("agt_coder").items[0].status == "waiting"

        run_python(WRITER, str(path), "resolve")
        seen.wait_for("approval", "update", "apv_live")
        seen.wait_for("run", "update", "run_live")
        assert src.approval("apv_live").status == "cancelled"

        run_python(WRITER, str(path), "project")
        for entity, entity_id in (("project", "zeta ✓"), ("task", "zeta ✓/task"),
                                  ("session", "zeta ✓/session"), ("agent", "agt_nobody"), ("run", "run_new")):
            seen.wait_for(entity, "insert", entity_id)
        assert [a.id for a in src.agents("zeta ✓/session")] == ["agt_nobody"]
    finally:
        src.close()


def test_read_only_opening_leaves_the_file_byte_identical(db: tuple[Path, dict[str, str]]) -> None:
    path, ids = db
    digest = sha(path)
    src = opened(path)
    watcher = src.watch()
    for project in src.projects():
        for agent in src.agents(f"{project.id}/session"):
            src.context(agent.id)
            for run in src.runs(agent.id).items:
                for span_id in src.span_table(run.id).ids[:40]:
                    src.span(span_id)
    src.approvals("all")
    src.info()
    src.locate("approval", ids["pending_approval"])
    watcher_polled(watcher)
    src.close()
    assert sha(path) == digest
    assert sorted(p.name for p in path.parent.iterdir()) == ["memory.db"]  # no -journal, no -wal left behind
