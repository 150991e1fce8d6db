"""The change bus: after-commit delivery, coalescing, and the cross-process watcher."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from agentdesk.store.changes import watcher as watcher_module
from agentdesk.store.changes.maintenance import prune_change_log
from agentdesk.store.changes.polling import PollLoop
from agentdesk.store.changes.watcher import ChangeWatcher, logged_origin
from agentdesk.store.errors import StaleRevision
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import RESET, Change, ChangeBus, ChangeOp, EntityKind, coalesce
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.schema import ChangeRow, ProjectRow
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.uow import UnitOfWork
from tests.conftest import World
from tests.waiting import wait_until, watcher_polled


class Recorder:
    """A subscriber that keeps every batch and lets a test wait for a condition."""

    def __init__(self) -> None:
        self.batches: list[list[Change]] = []
        self._cond = threading.Condition()

    def __call__(self, batch: Sequence[Change]) -> None:
        with self._cond:
            self.batches.append(list(batch))
            self._cond.notify_all()

    @property
    def changes(self) -> list[Change]:
        with self._cond:
            return [c for batch in self.batches for c in batch]

    def wait_for(self, predicate: Callable[[list[Change]], bool], timeout: float = 10.0) -> list[Change]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate([c for b in self.batches for c in b]):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; got {self.batches}"
                self._cond.wait(left)
            return [c for b in self.batches for c in b]


def run_writer(path: Path, body: str) -> None:
    """Run `body` in another Python process with `rt` (an AgentRuntime on the store) in scope."""
    script = ("from agentdesk.store.persistence.database import open_store\n"
              "from agentdesk.store.runtime import AgentRuntime\n"
              f"rt = AgentRuntime(open_store({str(path)!r}), actor='other')\n" + textwrap.dedent(body))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def project_row(uow: UnitOfWork, pid: str) -> None:
    uow.session.add(ProjectRow(id=pid, name=pid, created_at=uow.now, revision=1))
    uow.record("project", "insert", pid)


def exists(store: Store, pid: str) -> bool:
    with store.reading() as s:
        return s.get(ProjectRow, pid) is not None


# -- in-process delivery ---------------------------------------------------------------------

def test_subscribers_hear_only_after_commit(store: Store) -> None:
    seen_committed: list[bool] = []
    store.bus.subscribe(lambda batch: seen_committed.append(exists(store, batch[0].id)))
    with UnitOfWork(store) as uow:
        project_row(uow, "prj_a")
        uow.session.flush()
        assert seen_committed == []
    assert seen_committed == [True]


def test_a_rolled_back_unit_of_work_publishes_nothing(store: Store) -> None:
    recorder = Recorder()
    store.bus.subscribe(recorder)
    with pytest.raises(RuntimeError), UnitOfWork(store) as uow:
        project_row(uow, "prj_b")
        uow.session.flush()
        raise RuntimeError("the body failed after writing")
    assert recorder.batches == []
    assert not exists(store, "prj_b")
    with store.reading() as s:
        assert s.query(ChangeRow).count() == 0


def test_a_failed_command_publishes_nothing(source: NativeSource, world: World) -> None:
    recorder = Recorder()
    source.bus.subscribe(recorder)
    group = source.context(world.agent).groups[0]
    with pytest.raises(StaleRevision):
        source.set_group_visibility(group.id, False, group.revision + 5, "alice")
    assert recorder.batches == []


def test_one_transaction_is_one_batch_with_ascending_seqs(source: NativeSource, rt: AgentRuntime,
                                                          world: World) -> None:
    recorder = Recorder()
    source.bus.subscribe(recorder)
    rt.append_context(world.agent, world.groups[0], "message", "user", "more")
    [batch] = recorder.batches
    assert [c.entity for c in batch] == ["context_item", "context_group", "context"]
    seqs = [c.seq for c in batch]
    assert seqs == sorted(seqs) and None not in seqs
    assert source.bus.last_seq == seqs[-1]
    assert batch[0].parent("agent") == world.agent and batch[0].origin == logged_origin(source.store)


def test_a_failing_subscriber_does_not_stop_the_others(store: Store) -> None:
    recorder = Recorder()

    def broken(batch: Sequence[Change]) -> None:
        raise ValueError("broken view")

    store.bus.subscribe(broken)
    store.bus.subscribe(recorder)
    with UnitOfWork(store) as uow:
        project_row(uow, "prj_c")
    assert len(recorder.batches) == 1


def test_unsubscribe_stops_delivery() -> None:
    bus, recorder = ChangeBus(), Recorder()
    unsubscribe = bus.subscribe(recorder)
    unsubscribe()
    unsubscribe()
    bus.publish([Change("project", "insert", "p", seq=1)])
    assert recorder.batches == [] and bus.last_seq == 1


# -- coalescing ------------------------------------------------------------------------------

def c(entity: str, op: str, ident: str, seq: int, revision: int | None = None) -> Change:
    return Change(entity, op, ident, seq=seq, revision=revision)


def test_coalesce_keeps_one_change_per_entity_with_the_latest_values() -> None:
    merged = coalesce([c("run", "update", "r", 1, 2), c("run", "update", "r", 2, 3),
                       c("span", "update", "s", 3)])
    assert [(x.id, x.revision, x.seq) for x in merged] == [("r", 3, 2), ("s", None, 3)]


def test_coalesce_keeps_parents_before_children() -> None:
    batch = [c("agent", "insert", "a", 1), c("run", "insert", "r", 2, 1), c("agent", "update", "a", 3, 2)]
    merged = coalesce(batch)
    assert [(x.entity, x.op, x.revision) for x in merged] == [("agent", "insert", 2), ("run", "insert", 1)]


def test_coalesce_drops_rows_born_and_gone_in_one_batch() -> None:
    merged = coalesce([c("context_item", "insert", "i", 1), c("context_item", "update", "i", 2),
                       c("context_item", "delete", "i", 3), c("context_item", "update", "j", 4)])
    assert [(x.id, x.op) for x in merged] == [("j", "update")]
    assert [x.op for x in coalesce([c("run", "update", "r", 1), c("run", "delete", "r", 2)])] == ["delete"]


def test_coalesce_reduces_a_batch_with_a_reset_to_one_reset() -> None:
    merged = coalesce([c("run", "update", "r", 5), Change("*", RESET, "*", seq=7),
                       c("run", "update", "r", 9)])
    assert [(x.op, x.seq) for x in merged] == [(RESET, 9)]


def test_coalescing_twice_changes_nothing() -> None:
    batch = [c("agent", "insert", "a", 1), c("run", "insert", "r", 2), c("agent", "update", "a", 3),
             c("context_item", "insert", "i", 4), c("context_item", "delete", "i", 5), c("run", "update", "r", 6)]
    once = coalesce(batch)
    assert coalesce(once) == once
    assert coalesce(coalesce(batch[:3]) + coalesce(batch[3:])) == once


def test_changes_hold_enums_and_refuse_unknown_kinds() -> None:
    change = Change("span", "update", "s")
    assert change.entity is EntityKind.SPAN and change.op is ChangeOp.UPDATE
    assert change.entity == "span" and change == Change(EntityKind.SPAN, ChangeOp.UPDATE, "s")
    with pytest.raises(ValueError, match="gizmo"):
        Change("gizmo", "update", "s")
    with pytest.raises(ValueError, match="upsert"):
        Change("span", "upsert", "s")


# -- the cross-process watcher ---------------------------------------------------------------

def test_watcher_turns_another_process_commits_into_events(source: NativeSource, rt: AgentRuntime,
                                                           store_path: Path, world: World) -> None:
    recorder = Recorder()
    source.bus.subscribe(recorder)
    watcher = source.watch(poll_interval_s=0.01)
    assert watcher.healthy and watcher.running
    rt.set_agent_status(world.sub_agent, "waiting")  # our own write: published once, by the unit of work
    run_writer(store_path, f"""
        rid = rt.start_run({world.agent!r}, "from another process")
        rt.set_run_status(rid, "done")
    """)
    got = recorder.wait_for(lambda cs: any(x.entity == "run" and x.origin != source.store.origin for x in cs))
    foreign = [x for x in got if x.origin != source.store.origin]
    assert {x.entity for x in foreign} >= {"run", "agent"}
    assert all(x.seq is not None for x in got)
    seqs = [x.seq for x in got]
    assert len(seqs) == len(set(seqs)), "a change was delivered twice"
    assert watcher.high_water == max(s for s in seqs if s is not None)
    assert watcher.last_change_at is not None
    source.close()
    assert not watcher.healthy and not watcher.running


def test_include_own_sees_every_change(store: Store, rt: AgentRuntime) -> None:
    bus, recorder = ChangeBus(), Recorder()
    bus.subscribe(recorder)
    watcher = ChangeWatcher(store, include_own=True, bus=bus, poll_interval_s=0.01).start()
    try:
        pid = rt.create_project("mine")
        recorder.wait_for(lambda cs: [x.id for x in cs] == [pid])
    finally:
        watcher.stop()


def test_a_burst_costs_few_callbacks(source: NativeSource, store_path: Path, world: World) -> None:
    """Each read of the feed delivers at most one batch, coalesced: 301 changes, far fewer callbacks."""
    recorder = Recorder()
    source.bus.subscribe(recorder)
    watcher = source.watch(poll_interval_s=0.05)
    reads = counted_reads(watcher)
    run_writer(store_path, f"""
        for n in range(300):
            rt.set_agent_status({world.sub_agent!r}, "waiting" if n % 2 else "running")
        rt.create_project("done marker")
    """)
    recorder.wait_for(lambda cs: any(x.entity == "project" for x in cs))
    assert 0 < len(recorder.batches) <= reads[0]
    updates = [x for x in recorder.changes if x.entity == "agent"]
    assert len(updates) <= len(recorder.batches)  # coalesced: one agent update per batch at most
    assert len(recorder.changes) < 301  # so the 300 updates were folded
    source.close()


def counted_reads(watcher: ChangeWatcher) -> list[int]:
    """A one-item list counting the watcher's reads of the feed (both loops call `_read` per read)."""
    loop = watcher._loop
    real, reads = loop._read, [0]

    def counting() -> object:
        reads[0] += 1
        return real()

    loop._read = counting
    return reads


def test_watcher_resets_when_the_log_was_pruned_past_it(store: Store, rt: AgentRuntime, world: World,
                                                        store_path: Path) -> None:
    bus, recorder = ChangeBus(), Recorder()
    bus.subscribe(recorder)
    behind = ChangeWatcher(store, bus=bus)
    behind.high_water = store.bus.last_seq  # as if started now; we poll by hand below
    for n in range(20):
        rt.set_agent_status(world.sub_agent, "waiting" if n % 2 else "running")
    assert prune_change_log(store, keep_seconds=None, keep_rows=5) > 0
    behind.poll_once()
    assert [x.op for x in recorder.changes] == [RESET]
    assert behind.high_water == store.bus.last_seq and behind.resets == 1
    rt.set_agent_status(world.sub_agent, "done")
    assert behind.poll_once() == 0  # own origin: skipped, but the mark moved on
    assert behind.high_water == store.bus.last_seq
    run_writer(store_path, f"rt.set_agent_status({world.sub_agent!r}, 'waiting')")
    behind.poll_once()
    assert [x.op for x in recorder.changes] == [RESET, "update"]


def test_watcher_resets_when_it_fell_too_far_behind(store: Store, rt: AgentRuntime, world: World,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watcher_module, "MAX_CATCH_UP", 3)
    bus, recorder = ChangeBus(), Recorder()
    bus.subscribe(recorder)
    behind = ChangeWatcher(store, bus=bus, include_own=True)
    behind.high_water = store.bus.last_seq
    for n in range(4):
        rt.set_agent_status(world.sub_agent, "waiting" if n % 2 else "running")
    behind.poll_once()
    assert [x.op for x in recorder.changes] == [RESET]


def test_watcher_resets_when_the_feed_went_backwards(store: Store, world: World) -> None:
    bus, recorder = ChangeBus(), Recorder()
    bus.subscribe(recorder)
    confused = ChangeWatcher(store, bus=bus)
    confused.high_water = store.bus.last_seq + 1000  # e.g. the file was replaced by an older copy
    confused.poll_once()
    assert [x.op for x in recorder.changes] == [RESET]
    assert confused.high_water == store.bus.last_seq


@pytest.mark.sqlite_only
def test_idle_watching_does_not_spin(store: Store) -> None:
    """Idle, the watcher sleeps a whole interval between polls and never reads; a commit makes it read."""
    watcher = ChangeWatcher(store, poll_interval_s=0.01)
    reads = counted_reads(watcher)
    loop = watcher._loop
    assert isinstance(loop, PollLoop)
    real_wait, waits = loop._thread.wait, []

    def recorded_wait(seconds: float) -> bool:
        waits.append(seconds)
        return real_wait(seconds)

    loop._thread.wait = recorded_wait  # type: ignore[method-assign]
    watcher.start()
    try:
        watcher_polled(watcher, 20)
        assert reads[0] == 0, "an idle watcher read the feed"
        assert waits and min(waits) >= 0.01, "the loop polled without sleeping its interval"
        run_writer(Path(str(store.path)), "rt.create_project('news')")  # another process commits: now it reads
        wait_until(lambda: reads[0] > 0, what="a read after a foreign commit")
    finally:
        watcher.stop()


def test_watcher_survives_a_failing_poll_and_recovers(store: Store, rt: AgentRuntime,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    bus, recorder = ChangeBus(), Recorder()
    bus.subscribe(recorder)
    watcher = ChangeWatcher(store, bus=bus, include_own=True, poll_interval_s=0.01).start()
    real = watcher._read_new
    failures = iter([True, True])

    def flaky() -> list[Change]:
        if next(failures, False):
            raise OSError("disk hiccup")
        return real()

    monkeypatch.setattr(watcher, "_read_new", flaky)
    try:
        pid = rt.create_project("after the hiccup")
        recorder.wait_for(lambda cs: any(x.id == pid for x in cs))
        wait_until(lambda: watcher.healthy, what="the watcher healthy again")
    finally:
        watcher.stop()


def test_a_read_only_viewer_follows_a_writer(store_path: Path, rt: AgentRuntime, world: World) -> None:
    viewer = NativeSource.open(str(store_path), read_only=True)
    recorder = Recorder()
    viewer.bus.subscribe(recorder)
    viewer.watch(poll_interval_s=0.01)
    try:
        rid = rt.start_run(world.agent, "seen by a read-only viewer")
        recorder.wait_for(lambda cs: any(x.id == rid for x in cs))
        assert viewer.runs(world.agent).items[0].id == rid
    finally:
        viewer.close()
