"""The maka source while maka keeps writing: change events from a writer process, resets on
deletion, and read-only opening that leaves the database (and its WAL) byte-identical."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.sources import open_source
from agentdesk.store.sources.follow import follower
from agentdesk.store.sources.maka import MakaSource
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_maka_writer import MakaWriter
from tests.store.sources.test_maka import REPO, wait_for
from tests.waiting import watcher_polled

WRITER = """
import sqlite3, sys, time
from tests.store.sources.fixtures_maka_writer import MakaWriter, permission_request
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)
conn.execute("PRAGMA foreign_keys=ON")
w, now = MakaWriter(conn, tag="live"), int(time.time() * 1000)
with w.tx():
    w.attempt("ses_grand", "run_g1", now, 300, logical="lc_live")
with w.tx():
    w.tool_prepared("ses_grand", "run_g1", now + 1, "live_1", "Read", {"path": "README.md"})
with w.tx():
    w.tool_outcome("ses_grand", "run_g1", now + 2, "live_1", "Read", "# readme")
with w.tx():
    w.append(w.event("ses_grand", "run_g1", now + 3, "system", "host", event_id="evt_live_hidden",
                     modelVisibility="hidden", content={"kind": "text", "text": "hidden live note"}))
with w.tx():
    w.request("ses_grand", "run_g1", "req_live", now + 4, permission_request("live_2", "Bash", "make deploy"))
with w.tx():
    w.set_run_status("ses_grand", "run_g1", "waiting_for_user", now + 5)
with w.tx():
    w.session("ses_new", "A new session", now + 6, project_id="prj_acme")
    w.run("ses_new", "run_n1", now + 6)
conn.close()
"""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("maka_live") / "pristine.sqlite"
    build_maka_fixture(path)
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "runtime.sqlite"
    shutil.copy(pristine, path)
    return path


@pytest.fixture
def src(db: Path) -> Iterator[MakaSource]:
    source = open_source(str(db))
    assert isinstance(source, MakaSource)
    yield source
    source.close()


@pytest.fixture
def watched(db: Path) -> Iterator[tuple[MakaSource, list[Change]]]:
    source = open_source(str(db))
    assert isinstance(source, MakaSource)
    seen: list[Change] = []

    def collect(batch: Sequence[Change]) -> None:
        seen.extend(batch)

    source.bus.subscribe(collect)
    source.watch()
    yield source, seen
    source.close()


def has(seen: list[Change], entity: str, op: str, entity_id: str) -> Change | None:
    return next((c for c in list(seen) if (c.entity, c.op, c.id) == (entity, op, entity_id)), None)


def test_writer_process_commits_arrive_as_changes(watched: tuple[MakaSource, list[Change]],
                                                   db: Path) -> None:
    source, seen = watched
    subprocess.run([sys.executable, "-c", WRITER, str(db)], cwd=REPO, check=True, timeout=20)
    expected = [("span", "insert", "model:ses_grand/run_g1/att_live00001"),
                ("span", "insert", "tool:ses_grand/run_g1/live_1"),
                ("approval", "insert", "req_live"), ("context_item", "insert", "evt_live_hidden"),
                ("run", "update", "ses_grand/run_g1"), ("session", "insert", "ses_new"),
                ("agent", "insert", "agent:ses_new"), ("run", "insert", "ses_new/run_n1")]
    assert wait_for(lambda: all(has(seen, *e) for e in expected), timeout=10.0), \
        [e for e in expected if not has(seen, *e)]  # how soon they arrive is measured in bench/
    approval = has(seen, "approval", "insert", "req_live")
    assert approval is not None and approval.parents == {
        "project": "prj_acme", "task": "task:prj_acme", "session": "ses_main", "agent": "agent:ses_grand",
        "run": "ses_grand/run_g1"}
    item = has(seen, "context_item", "insert", "evt_live_hidden")
    assert item is not None and item.parents["agent"] == "agent:ses_grand"
    # and the reads show what was written
    table = source.span_table("ses_grand/run_g1")
    assert dict(zip(table.ids, table.statuses, strict=True))["tool:ses_grand/run_g1/live_1"] == "ok"
    assert "req_live" in [a.id for a in source.approvals()]
    hidden = next(i for i in source.context("agent:ses_grand").items if i.id == "evt_live_hidden")
    assert not hidden.visible and hidden.content == "hidden live note"
    assert source.run("ses_grand/run_g1").status == "waiting"
    assert "ses_new" in [s.id for s in source.sessions("task:prj_acme")]


def test_partial_stream_updates_and_deletion_reset(src: MakaSource, db: Path) -> None:
    src.prime_high_water()
    conn = sqlite3.connect(db, isolation_level=None)
    MakaWriter(conn, tag="s").partial("ses_grand", "run_g1", "stream_g1", " more", int(time.time() * 1000))
    changes = src.poll_changes()
    assert any(c.entity == "span" and c.op == "update" and c.id == "stream:ses_grand/run_g1/stream_g1"
               for c in changes)
    conn.execute("DELETE FROM runtime_partial_snapshots WHERE stream_key = 'stream_g1'")
    assert any(c.op == "delete" and c.id == "stream:ses_grand/run_g1/stream_g1" for c in src.poll_changes())
    conn.execute("DELETE FROM core_interaction_requests WHERE request_id = 'req_allowed'")  # a purge
    conn.close()
    assert any(c.op == RESET for c in src.poll_changes())
    assert src.poll_changes() == []


def test_one_poll_reads_every_new_row_parents_first(src: MakaSource, db: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follower, "READ_BATCH", 3)  # force several batches in one poll
    src.prime_high_water()
    conn = sqlite3.connect(db, isolation_level=None)
    w, now = MakaWriter(conn, tag="b"), int(time.time() * 1000)
    with w.tx():
        w.session("ses_b", "batch", now, project_id="prj_acme")
        w.run("ses_b", "run_b", now)
        written = [w.append(w.event("ses_b", "run_b", now + i, "model", "agent",
                                    content={"kind": "text", "text": f"chunk {i}"})) for i in range(10)]
    conn.close()
    changes = src.poll_changes()
    assert [c.id for c in changes if c.entity == "context_item"] == written
    order = [(c.entity, c.id) for c in changes]
    assert order.index(("session", "ses_b")) < order.index(("run", "ses_b/run_b")) < order.index(
        ("context_item", written[0]))
    assert len(src.context("agent:ses_b").items) == 10


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def read_everything(src: MakaSource) -> None:
    for project in src.projects():
        for task in src.tasks(project.id):
            for session in src.sessions(task.id):
                for agent in src.agents(session.id):
                    src.context(agent.id)
                    for run in src.runs(agent.id).items:
                        table = src.span_table(run.id)
                        for span_id in table.ids[:12]:
                            src.span(span_id)
                            src.sent_context(span_id)
                        src.locate("run", run.id)
    for approval in src.approvals("all"):
        src.approval(approval.id)
        src.locate("approval", approval.id)
    src.info()
    src.showcase_run()


def test_read_only_open_leaves_a_quiet_file_byte_identical(db: Path) -> None:
    wal = db.with_name(db.name + "-wal")
    before = digest(db)
    assert before is not None and not wal.exists()
    src = open_source(str(db))
    watcher = src.watch()
    read_everything(src)
    watcher_polled(watcher)
    src.close()
    assert digest(db) == before
    assert not wal.exists() or wal.stat().st_size == 0  # a reader may leave an empty WAL, never frames


def test_read_only_open_leaves_a_live_wal_byte_identical(db: Path) -> None:
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")  # keep the runtime's frames in the WAL
    w = MakaWriter(writer, tag="wal")
    with w.tx():
        w.attempt("ses_grand", "run_g1", int(time.time() * 1000), 200, logical="lc_wal")
    wal = db.with_name(db.name + "-wal")
    before = (digest(db), digest(wal))
    assert before[1] is not None and wal.stat().st_size > 0
    src = open_source(str(db))
    assert isinstance(src, MakaSource)
    watcher = src.watch()
    read_everything(src)
    assert "model:ses_grand/run_g1/att_wal00001" in src.span_table("ses_grand/run_g1").ids
    watcher_polled(watcher)
    assert watcher.healthy
    src.close()
    assert (digest(db), digest(wal)) == before
    writer.close()
