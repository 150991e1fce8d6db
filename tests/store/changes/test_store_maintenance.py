"""Pruning the change log: a window by age and count, front-only, never the newest row."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentdesk.store.changes import maintenance
from agentdesk.store.changes.maintenance import prune_change_log
from agentdesk.store.errors import InvalidInput, ReadOnlyStore
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World, raw_connect
from tests.waiting import wait_until


def change_seqs(path: Path) -> list[int]:
    conn = raw_connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT seq FROM change_log ORDER BY seq")]
    finally:
        conn.close()


def churn(rt: AgentRuntime, agent: str, n: int) -> None:
    for k in range(n):
        rt.set_agent_status(agent, "waiting" if k % 2 else "running")


def test_prune_keeps_the_newest_rows(store: Store, rt: AgentRuntime, world: World, store_path: Path) -> None:
    churn(rt, world.sub_agent, 30)
    before = change_seqs(store_path)
    deleted = prune_change_log(store, keep_seconds=None, keep_rows=10)
    assert change_seqs(store_path) == before[-10:]
    assert deleted == len(before) - 10
    assert prune_change_log(store, keep_seconds=None, keep_rows=10) == 0


def test_prune_by_age_keeps_recent_rows(store: Store, rt: AgentRuntime, world: World,
                                        store_path: Path) -> None:
    old = change_seqs(store_path)
    time.sleep(0.02)
    cutoff = time.time()
    churn(rt, world.sub_agent, 5)
    recent = change_seqs(store_path)[len(old):]
    assert prune_change_log(store, keep_seconds=0, keep_rows=1, now=cutoff) == len(old)
    assert change_seqs(store_path) == recent


def test_prune_only_cuts_the_front_of_the_log(store: Store, rt: AgentRuntime, world: World,
                                              store_path: Path) -> None:
    churn(rt, world.sub_agent, 6)
    seqs = change_seqs(store_path)
    conn = raw_connect(store_path)  # clocks are not monotonic: one late row carries an old time
    conn.execute("UPDATE change_log SET at = 0")
    conn.execute("UPDATE change_log SET at = ? WHERE seq = ?", (time.time(), seqs[3]))
    conn.commit()
    conn.close()
    prune_change_log(store, keep_seconds=10, keep_rows=1)
    assert change_seqs(store_path) == seqs[3:]  # no hole a watcher could fall into


def test_prune_never_empties_the_log(store: Store, rt: AgentRuntime, world: World, store_path: Path) -> None:
    with pytest.raises(InvalidInput):
        prune_change_log(store, keep_seconds=None, keep_rows=0)
    prune_change_log(store, keep_seconds=None, keep_rows=1)
    [last] = change_seqs(store_path)
    rt.create_project("after pruning")
    assert change_seqs(store_path)[-1] > last  # seqs keep growing: watchers' marks stay meaningful


def test_prune_works_in_chunks_and_is_audited(store: Store, rt: AgentRuntime, world: World,
                                              store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maintenance, "DELETE_CHUNK", 7)
    churn(rt, world.sub_agent, 30)
    total = len(change_seqs(store_path))
    assert prune_change_log(store, keep_seconds=None, keep_rows=2, actor="janitor") == total - 2
    conn = raw_connect(store_path)
    actions = conn.execute("SELECT actor, action FROM audit_log WHERE action = 'changelog.prune'").fetchall()
    conn.close()
    assert actions and all(a == ("janitor", "changelog.prune") for a in actions)
    assert len(actions) == -(-(total - 2) // 7)


def test_prune_refuses_a_read_only_store(store_path: Path, world: World) -> None:
    ro = open_store(str(store_path), read_only=True)
    try:
        with pytest.raises(ReadOnlyStore):
            prune_change_log(ro)
    finally:
        ro.close()


def test_the_schedule_prunes_while_the_store_is_open(store: Store, rt: AgentRuntime, world: World,
                                                     store_path: Path) -> None:
    from agentdesk.store.changes.maintenance import PruneSchedule
    churn(rt, world.sub_agent, 6)
    raw = raw_connect(store_path)
    raw.execute("UPDATE change_log SET at = 0")  # every row is older than a day
    raw.commit()
    raw.close()
    before = len(change_seqs(store_path))
    schedule = PruneSchedule(store, interval_s=0.05, first_after_s=0.01, keep_rows=1).start()
    try:
        wait_until(lambda: schedule.runs >= 2, timeout_s=30, what="two pruning runs")
    finally:
        schedule.stop()
    assert schedule.runs >= 2 and schedule.deleted == before - 1
    assert len(change_seqs(store_path)) == 1  # never the newest row


def test_admin_prune_on_the_command_line(store: Store, rt: AgentRuntime, world: World, store_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from agentdesk.cli.main import main
    churn(rt, world.sub_agent, 6)
    raw = raw_connect(store_path)
    raw.execute("UPDATE change_log SET at = 0")
    raw.commit()
    raw.close()
    total = len(change_seqs(store_path))
    assert main(["--store", str(store_path), "admin", "prune", "--keep-days", "1"]) == 0
    assert capsys.readouterr().out.strip() == f"Pruned {total - 1} change-log rows older than 1 days."
    assert main(["--store", str(store_path), "admin", "prune", "--keep-days", "0"]) == 2  # not positive
