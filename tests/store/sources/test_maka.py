"""The maka source against a maka-written `runtime.sqlite`: tree, spans, approvals, context,
live updates from a writer process, settling permissions (with racing deciders), and
read-only opening that leaves the file byte-identical."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from agentdesk.store.errors import AlreadyDecided, NotFound, ReadOnlyStore, StoreUnavailable
from agentdesk.store.persistence.bus import Change
from agentdesk.store.source import Capability, context_writer, require_context_writer
from agentdesk.store.sources import open_source
from agentdesk.store.sources.foreign import Unsupported
from agentdesk.store.sources.maka import MakaSource
from tests.store.sources.fixtures_maka import BIG_RESULT_BYTES, BULK_TOOLS, HTML_RESULT, build_maka_fixture

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("maka") / "pristine.sqlite"
    return path, build_maka_fixture(path)


@pytest.fixture
def db(pristine: tuple[Path, dict[str, str]], tmp_path: Path) -> Path:
    path = tmp_path / "runtime.sqlite"
    shutil.copy(pristine[0], path)
    return path


@pytest.fixture
def ids(pristine: tuple[Path, dict[str, str]]) -> dict[str, str]:
    return pristine[1]


@pytest.fixture
def src(db: Path) -> Iterator[MakaSource]:
    source = open_source(str(db))
    assert isinstance(source, MakaSource)
    yield source
    source.close()


@pytest.fixture
def writable(db: Path) -> Iterator[MakaSource]:
    source = open_source(str(db), allow_writes=True)
    assert isinstance(source, MakaSource)
    yield source
    source.close()


def wait_for(predicate: Callable[[], bool], timeout: float = 1.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def outcome_rows(db: Path) -> dict[str, dict]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r: json.loads(j) for r, j in conn.execute("SELECT request_id, record_json FROM "
                                                           "core_interaction_outcomes")}
    finally:
        conn.close()


# -- detection -------------------------------------------------------------------------------
def test_detected_as_maka_v11_read_only(src: MakaSource) -> None:
    d = src.descriptor
    assert (d.kind, d.schema_version, d.read_only) == ("maka", "11", True)
    assert "in memory" in d.notes and "another process" in d.notes
    assert src.capabilities == frozenset()


@pytest.mark.parametrize("version", [10, 12, 15])
def test_refuses_other_schema_versions(db: Path, version: int) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    with pytest.raises(StoreUnavailable, match=f"version {version}"):
        open_source(str(db))
    with pytest.raises(StoreUnavailable, match=f"version {version}"):
        MakaSource(db)


# -- tree ------------------------------------------------------------------------------------
def test_projects_tasks_sessions(src: MakaSource, ids: dict[str, str]) -> None:
    projects = {p.id: p for p in src.projects()}
    assert set(projects) == {"prj_acme", "prj_uni", "maka:no-project"}
    acme = projects["prj_acme"]
    assert (acme.status, acme.pending_approvals, acme.task_count) == ("waiting", 3, 1)
    assert projects["prj_uni"].name == "ünïcödé-tools 🚀" and projects["prj_uni"].status == "failed"
    assert projects["maka:no-project"].status == "cancelled"
    [task] = src.tasks("prj_acme")
    assert task.id == ids["task"] and "no task level" in task.title
    sessions = src.sessions(task.id)
    assert [s.id for s in sessions] == ["ses_main"]  # sub-agent sessions are agents, not sessions
    assert sessions[0].status == "waiting" and sessions[0].pending_approvals == 3
    assert [s.id for s in src.sessions("task:maka:no-project")] == ["ses_loose"]
    assert src.tasks("nope") == [] and src.sessions("task:nope") == []


def test_agents_nest_sub_agent_sessions_and_header_agents(src: MakaSource, ids: dict[str, str]) -> None:
    agents = src.agents("ses_main")
    by_id = {a.id: a for a in agents}
    order = [a.id for a in agents]
    assert order.index(ids["agent_child"]) < order.index(ids["agent_grandchild"])
    assert by_id[ids["agent_main"]].parent_agent_id is None
    assert by_id[ids["agent_child"]].parent_agent_id == ids["agent_main"]
    assert by_id[ids["agent_grandchild"]].parent_agent_id == ids["agent_child"]
    assert by_id[ids["agent_reviewer"]].parent_agent_id == ids["agent_main"]
    assert by_id[ids["agent_reviewer"]].name == "Code reviewer"
    assert {a.session_id for a in agents} == {"ses_main"}
    assert [(by_id[i].status, by_id[i].pending_approvals, by_id[i].run_count) for i in
            (ids["agent_main"], ids["agent_child"], ids["agent_grandchild"], ids["agent_reviewer"])] == [
        ("waiting", 2, 2), ("waiting", 1, 1), ("running", 0, 1), ("done", 0, 1)]
    assert by_id[ids["agent_main"]].context_budget == 200000


def test_runs_newest_first_with_paging(src: MakaSource, ids: dict[str, str]) -> None:
    page = src.runs(ids["agent_main"], offset=0, limit=1)
    assert page.total == 2 and page.has_more and page.items[0].id == ids["run_waiting"]
    rest = src.runs(ids["agent_main"], offset=1, limit=5)
    assert [r.id for r in rest.items] == [ids["run_main"]] and not rest.has_more
    run = rest.items[0]
    assert run.title.startswith("The checkout test fails") and run.status == "done"
    assert run.ended_at is not None and run.ended_at > run.started_at and run.usage.input_tokens > 0
    failed = src.run(ids["run_failed"])
    assert failed.status == "failed" and "gave up after 3 attempts" in failed.error
    assert src.run(ids["run_cancelled"]).status == "cancelled"
    assert src.run(ids["run_waiting"]).pending_approvals == 2


def test_node_and_locate(src: MakaSource, ids: dict[str, str]) -> None:
    assert next(p for p in src.projects() if p.id == "prj_acme").name == "acme-web"
    assert next(t for t in src.tasks("prj_acme") if t.id == ids["task"]).project_id == "prj_acme"
    assert next(s for s in src.sessions(ids["task"]) if s.id == "ses_main").title == "Fix flaky checkout test"
    assert src.agent(ids["agent_grandchild"]).name == "grep-helper"
    loc = src.locate("span", "tool:ses_grand/run_g1/g_0")
    assert loc.agent_ids == (ids["agent_main"], ids["agent_child"], ids["agent_grandchild"])
    assert (loc.project_id, loc.task_id, loc.session_id, loc.run_id) == ("prj_acme", ids["task"], "ses_main",
                                                                         ids["run_grandchild"])
    loc = src.locate("approval", ids["pending_child"])
    assert loc.span_id == "perm:ses_child/run_c1/req_pending_2" and loc.agent_ids[-1] == ids["agent_child"]
    assert src.locate("agent", ids["agent_reviewer"]).agent_ids == (ids["agent_main"], ids["agent_reviewer"])
    for entity, bogus in (("run", "ses_main/nope"), ("agent", "agent:nope"), ("session", "ses_child"),
                          ("span", "garbage"), ("approval", "nope"), ("project", "nope")):
        with pytest.raises(NotFound):
            src.locate(entity, bogus)
    with pytest.raises(NotFound):
        src.run("no-slash")


# -- spans -----------------------------------------------------------------------------------
def test_span_table_projects_the_session_trace(src: MakaSource, ids: dict[str, str]) -> None:
    table = src.span_table(ids["run_main"])
    assert len(table) > 2 * BULK_TOOLS
    root = table.ids[0]
    assert root == "turn:ses_main/run_1" and table.kinds[0] == "agent" and table.parent_ids[0] is None
    assert all(p == root for p in table.parent_ids[1:])
    kinds = {k: table.kinds.count(k) for k in set(table.kinds)}
    assert kinds["tool"] == BULK_TOOLS + 2 and kinds["sub_agent"] == 1 and kinds["gate"] == 3
    assert kinds["model"] == BULK_TOOLS + 3  # a retried call (two attempts), the bulk, the compaction call
    assert all(e is None or e >= s for s, e in zip(table.starts, table.ends, strict=True))
    run_usage = src.run(ids["run_main"]).usage
    assert sum(table.input_tokens[1:]) == table.input_tokens[0] == run_usage.input_tokens
    status = dict(zip(table.ids, table.statuses, strict=True))
    assert status[ids["failed_span"]] == "error" and status["tool:ses_main/run_1/r1_push"] == "error"
    assert [status[f"perm:ses_main/run_1/req_{x}"] for x in ("allowed", "denied", "expired")] == [
        "ok", "error", "cancelled"]
    names = dict(zip(table.ids, table.names, strict=True))
    assert any(n == "compaction" for n in names.values()) and "error: rate_limited" in names.values()
    assert table.statuses.count("error") >= 4


def test_span_texts_stay_literal_and_large(src: MakaSource, ids: dict[str, str]) -> None:
    html = src.span(ids["html_span"])
    assert html.output_text == HTML_RESULT and json.loads(html.input_text or "")["pattern"] == "setTimeout"
    big = src.span(ids["big_span"])
    assert big.output_text is not None and len(big.output_text) >= BIG_RESULT_BYTES
    spawn = src.span("tool:ses_main/run_1/spawn")
    assert spawn.kind == "sub_agent" and spawn.attributes["child_session_id"] == "ses_child"
    retry = [s for s in src.span_table(ids["run_main"]).names if "retry" in s]
    assert retry == ["main · claude-sonnet-4 (retry 1)"]
    first = src.span(next(i for i, n in zip(src.span_table(ids["run_main"]).ids,
                                            src.span_table(ids["run_main"]).names, strict=True)
                          if n == "main · claude-sonnet-4"))
    assert first.status == "error" and first.attributes["native_status"] == "failed"
    turn = src.span("turn:ses_main/run_1")
    assert turn.input_text and turn.input_text.startswith("The checkout test") and turn.output_text
    gate = src.span(ids["pending_span"])
    assert gate.status == "running" and gate.ended_at is None and "rm -rf build" in (gate.input_text or "")
    err = src.span(next(i for i in src.span_table(ids["run_failed"]).ids if i.startswith("error:")))
    assert err.error == "Anthropic 529: overloaded"
    stream = src.span("stream:ses_grand/run_g1/stream_g1")
    assert stream.status == "running" and stream.output_text == (
        "Found 14 matches; the ones in checkout/ are in step_3.ts and step_7.ts…")
    assert src.sent_context(ids["html_span"]) == []
    with pytest.raises(NotFound):
        src.span("tool:ses_main/run_1/nope")


# -- questions -------------------------------------------------------------------------------
def test_questions_are_shown_read_only_with_the_reason(src: MakaSource, ids: dict[str, str],
                                                       capsys: pytest.CaptureFixture[str], db: Path) -> None:
    [asked] = src.asks()
    assert (asked.id, asked.question, asked.options) == (ids["question"], "Which Node version should CI use?",
                                                        ("20", "22"))
    assert asked.status == "pending" and asked.source == "maka" and asked.read_only is not None
    assert "question_answer" in asked.read_only and "answer it in maka" in asked.read_only
    from agentdesk.cli.main import main

    assert main(["--store", str(db), "--allow-writes", "answer", ids["question"], "--option", "1", "--as", "ana"]) == 2
    assert "cannot be answered here" in capsys.readouterr().err


# -- approvals -------------------------------------------------------------------------------
def test_approval_queue(src: MakaSource, ids: dict[str, str]) -> None:
    pending = src.approvals()
    assert [a.id for a in pending] == [ids["pending_child"], ids["pending"]]  # the question is in src.asks()
    first = src.approval(ids["pending"])
    assert (first.tool_name, first.status) == ("Bash", "pending")
    assert first.expires_at is None and first.decided_at is None
    assert json.loads(first.arguments) == {"command": "rm -rf build && npm ci"}
    assert (first.agent_id, first.run_id) == (ids["agent_main"], ids["run_waiting"])
    assert first.project_name == "acme-web"
    assert first.span_id == ids["pending_span"] and first.tool_call_id == "r2_rm"
    assert src.approval(ids["question"]).tool_name == "question"
    every = src.approvals("all")
    assert [a.created_at for a in every] == sorted((a.created_at for a in every), reverse=True)
    status = {a.id: a for a in every}
    assert [status[ids[k]].status for k in ("approved", "denied", "expired", "sandbox")] == [
        "approved", "denied", "expired", "approved"]
    assert "timed_out" in (status[ids["expired"]].reason or "")
    assert status[ids["approved"]].decided_by == "user" and status[ids["approved"]].decided_at is not None
    assert [a.id for a in src.approvals("denied")] == [ids["denied"]]
    assert len(src.approvals("all", limit=2)) == 2
    with pytest.raises(NotFound):
        src.approval("nope")


# -- context ---------------------------------------------------------------------------------
def test_context_is_read_only_with_visibility_flags(writable: MakaSource, ids: dict[str, str]) -> None:
    ctx = writable.context(ids["agent_main"])
    items = {i.id: i for i in ctx.items}
    assert not items[ids["hidden_item"]].visible and sum(not i.visible for i in ctx.items) == 1
    assert [g.id for g in ctx.groups] == [ids["run_main"], ids["run_waiting"]]
    assert {i.group_id for i in ctx.items} == {g.id for g in ctx.groups}
    assert [i.position for i in ctx.items] == list(range(len(ctx.items)))
    assert any(i.kind == "compaction" for i in ctx.items) and ctx.budget == 200000
    assert HTML_RESULT in {i.content for i in ctx.items}
    assert writable.context(ids["agent_reviewer"]).groups[0].id == ids["run_reviewer"]
    assert context_writer(writable) is None  # maka's context is immutable: no context commands at all
    for capability in (Capability.SET_VISIBILITY, Capability.LOCK, Capability.EDIT_ITEM, Capability.COMPACT,
                       Capability.UNDO_COMPACTION):
        assert capability not in writable.capabilities and writable.why_not(capability)
        with pytest.raises(Unsupported, match="maka"):
            require_context_writer(writable, capability)
    with pytest.raises(NotFound):
        writable.context("agent:nope")


# -- writes ----------------------------------------------------------------------------------
def test_decide_writes_makas_permission_outcome(writable: MakaSource, db: Path, ids: dict[str, str]) -> None:
    got: list[Sequence[Change]] = []
    writable.bus.subscribe(got.append)
    before = time.time()
    decided = writable.decide(ids["pending"], True, actor="ana", reason="looks safe")
    assert (decided.status, decided.decided_by) == ("approved", "user")
    stored = outcome_rows(db)[ids["pending"]]
    assert stored == {"sessionId": "ses_main", "turnId": "turn_run_2", "runId": "run_2",
                      "requestId": ids["pending"], "outcome": {
                          "kind": "permission_answer", "reviewer": "user",
                          "committedAt": stored["outcome"]["committedAt"], "decision": "allow",
                          "rememberForTurn": False}}
    assert before * 1000 - 1 <= stored["outcome"]["committedAt"] <= time.time() * 1000 + 1
    assert any(c.entity == "approval" and c.id == ids["pending"] for batch in got for c in batch)
    with pytest.raises(AlreadyDecided, match="approved by user"):
        writable.decide(ids["pending"], False, actor="bob")
    denied = writable.decide(ids["pending_child"], False, actor="ana")
    assert denied.status == "denied"
    assert outcome_rows(db)[ids["pending_child"]]["outcome"]["decision"] == "deny"
    assert [a.id for a in writable.approvals()] == []
    assert [a.id for a in writable.asks()] == [ids["question"]]
    with pytest.raises(AlreadyDecided, match="expired by maka runtime"):
        writable.decide(ids["expired"], True, actor="ana")


def test_decide_refusals(src: MakaSource, writable: MakaSource, db: Path, ids: dict[str, str]) -> None:
    with pytest.raises(ReadOnlyStore):
        src.decide(ids["pending"], True, actor="ana")
    with pytest.raises(Unsupported, match="a maka question, not a permission: it is in the Questions tab"):
        writable.decide(ids["question"], True, actor="ana")
    with pytest.raises(Unsupported, match="arguments"):
        writable.decide(ids["pending"], True, actor="ana", edited_arguments='{"command": "ls"}')
    with pytest.raises(NotFound):
        writable.decide("nope", True, actor="ana")
    assert set(outcome_rows(db)) == {ids[k] for k in ("approved", "denied", "expired", "sandbox")}
    assert Capability.EXPIRE not in writable.capabilities
    assert "deadline" in writable.why_not(Capability.EXPIRE)


def test_concurrent_thread_deciders_exactly_one_wins(db: Path, ids: dict[str, str]) -> None:
    sources = [open_source(str(db), allow_writes=True) for _ in range(8)]
    barrier, results = threading.Barrier(len(sources)), []

    def decide(n: int) -> None:
        barrier.wait()
        try:
            sources[n].decide(ids["pending"], n % 2 == 0, actor=f"op{n}")
            results.append(("won", n))
        except AlreadyDecided:
            results.append(("lost", n))

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(len(sources))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for s in sources:
        s.close()
    winners = [n for r, n in results if r == "won"]
    assert len(results) == 8 and len(winners) == 1
    decision = outcome_rows(db)[ids["pending"]]["outcome"]["decision"]
    assert decision == ("allow" if winners[0] % 2 == 0 else "deny")


DECIDER = """
import pathlib, sys, time
from agentdesk.store.errors import AlreadyDecided
from agentdesk.store.sources import open_source
db, req, go, n = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4])
src = open_source(db, allow_writes=True)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
try:
    src.decide(req, n % 2 == 0, actor=f"proc{n}")
    print("won", n)
except AlreadyDecided:
    print("lost", n)
"""


def test_concurrent_process_deciders_exactly_one_wins(db: Path, tmp_path: Path, ids: dict[str, str]) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", DECIDER, str(db), ids["pending_child"], str(go), str(n)],
                              cwd=REPO, stdout=subprocess.PIPE, text=True) for n in range(4)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    outs = [p.communicate(timeout=20)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    winners = [int(o[1]) for o in outs if o[0] == "won"]
    assert len(winners) == 1 and sum(o[0] == "lost" for o in outs) == 3
    decision = outcome_rows(db)[ids["pending_child"]]["outcome"]["decision"]
    assert decision == ("allow" if winners[0] % 2 == 0 else "deny")
