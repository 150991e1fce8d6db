"""Writers wait for a locked store instead of failing, and never apply a write twice.

No timed assertions: the lock is held by another connection until the test releases it,
and the tests check what was written, not how fast.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from agentdesk.store.approvals.commands import decide
from agentdesk.store.errors import NotFound, StoreUnavailable
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.retry import WRITE_DEADLINE_S
from agentdesk.store.persistence.sqlite import writer_gate
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.uow import UnitOfWork


def hold_lock(path: Path) -> sqlite3.Connection:
    """Another process's writer, as SQLite sees it: a connection inside BEGIN IMMEDIATE."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def world(rt: AgentRuntime) -> tuple[str, str, str]:
    project = rt.create_project("p")
    session = rt.create_session(rt.create_task(project, "t"), "s")
    agent = rt.create_agent(session, "a", "m")
    return agent, rt.start_run(agent, "r"), rt.new_turn_group(agent)


def count(store: Store, table: type[sc.Base]) -> int:
    with store.reading() as s:
        return int(s.execute(select(func.count()).select_from(table)).scalar_one())


def test_a_runtime_write_outlasts_the_busy_timeout_instead_of_failing(store_path: Path) -> None:
    store = open_store(str(store_path), busy_timeout_s=0.05)
    rt = AgentRuntime(store)
    _agent, run, _group = world(rt)
    blocker = hold_lock(store_path)
    result: list[object] = []
    writer = threading.Thread(target=lambda: result.append(rt.start_span(run, "model", "chat")))
    writer.start()
    writer.join(0.5)  # far past the 50 ms busy timeout: the old code had failed by now
    assert writer.is_alive(), "the writer gave up while the store was locked"
    blocker.commit()
    blocker.close()
    writer.join(30)
    assert len(result) == 1 and str(result[0]).startswith("spn")
    assert count(store, sc.SpanRow) == 1
    store.close()


def test_an_operator_decision_waits_for_the_lock_within_its_busy_timeout(store_path: Path) -> None:
    store = open_store(str(store_path), busy_timeout_s=10.0)
    rt = AgentRuntime(store)
    _agent, run, _group = world(rt)
    approval = rt.request_approval(run, "shell", {"command": "ls"}, timeout_s=None)
    blocker = hold_lock(store_path)
    decided: list[str] = []
    operator = threading.Thread(target=lambda: decided.append(decide(store, approval, True, "op").status))
    operator.start()
    operator.join(0.3)
    assert operator.is_alive()
    blocker.rollback()
    blocker.close()
    operator.join(30)
    assert decided == ["approved"]
    store.close()


def test_an_operator_write_gives_up_at_its_busy_timeout_a_runtime_write_does_not(store_path: Path) -> None:
    """`--busy-timeout` bounds a person's wait; an agent waits the full write deadline."""
    store = open_store(str(store_path), busy_timeout_s=0.2)
    assert UnitOfWork(store).deadline_s == 0.2
    assert UnitOfWork(store, runtime=True).deadline_s == WRITE_DEADLINE_S
    rt = AgentRuntime(store)
    _agent, run, _group = world(rt)
    approval = rt.request_approval(run, "shell", {"command": "ls"}, timeout_s=None)
    blocker = hold_lock(store_path)
    try:
        with pytest.raises(StoreUnavailable, match="stayed locked"):
            decide(store, approval, True, "op")
    finally:
        blocker.rollback()
        blocker.close()
    assert decide(store, approval, True, "op").status == "approved"
    store.close()


def test_past_the_deadline_the_writer_says_so_in_one_sentence(store_path: Path) -> None:
    store = open_store(str(store_path), busy_timeout_s=0.01)
    AgentRuntime(store).create_project("p")
    blocker = hold_lock(store_path)
    try:
        locked = r"stayed locked by another writer for [\d.]+ s; nothing was written"
        with pytest.raises(StoreUnavailable, match=locked), UnitOfWork(store, runtime=True, deadline_s=0.2):
            pass
        with pytest.raises(StoreUnavailable, match="stayed locked"), UnitOfWork(store, deadline_s=0.2):
            pass
    finally:
        blocker.rollback()
        blocker.close()
    assert count(store, sc.ProjectRow) == 1
    store.close()


def test_a_batch_is_one_transaction_and_rolls_back_whole(store: Store, rt: AgentRuntime) -> None:
    agent, run, group = world(rt)
    seen: list[list[Change]] = []
    store.bus.subscribe(lambda batch: seen.append(list(batch)))
    with rt.batch():
        span = rt.start_span(run, "model", "chat", context_of_agent=agent)
        rt.append_context(agent, group, "message", "assistant", "hello")
        rt.finish_span(span, "ok", output_text="hi")
    assert len(seen) == 1 and {c.entity for c in seen[0]} >= {"span", "context_item"}
    spans_before = count(store, sc.SpanRow)
    with pytest.raises(NotFound), rt.batch():
        rt.start_span(run, "model", "lost")
        rt.finish_span("spn_missing", "ok")
    assert count(store, sc.SpanRow) == spans_before
    assert len(seen) == 1, "a rolled-back batch was published"


def test_waiting_inside_a_batch_is_refused(store: Store, rt: AgentRuntime) -> None:
    _agent, run, _group = world(rt)
    approval = rt.request_approval(run, "shell", {"command": "ls"}, timeout_s=None)
    with pytest.raises(RuntimeError, match="batch"), rt.batch():
        rt.wait_for_decision(approval, timeout_s=0)


def test_runtime_writers_step_aside_while_an_operator_waits(store_path: Path) -> None:
    store = open_store(str(store_path))
    gate = writer_gate(store_path)
    assert not gate.operator_waiting()
    with gate.operator():
        assert gate.operator_waiting()
    assert not gate.operator_waiting()
    store.close()


def test_a_commit_that_landed_but_reported_an_error_is_a_success_once(
        store: Store, rt: AgentRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ambiguous failure: COMMIT went through, then the driver raised. No error, no second copy."""
    _agent, run, _group = world(rt)
    real_commit = Session.commit

    def commit_then_fail(self: Session) -> None:
        real_commit(self)
        raise OperationalError("COMMIT", {}, sqlite3.OperationalError("disk I/O error"))

    seen: list[Change] = []
    store.bus.subscribe(seen.extend)
    monkeypatch.setattr(Session, "commit", commit_then_fail)
    span = rt.start_span(run, "model", "chat")
    monkeypatch.setattr(Session, "commit", real_commit)
    with store.reading() as s:
        assert s.execute(select(func.count()).where(sc.SpanRow.id == span)).scalar_one() == 1
    assert [c.id for c in seen if c.entity == "span"] == [span]


def test_a_commit_that_did_not_land_is_reported(store: Store, rt: AgentRuntime,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _agent, run, _group = world(rt)

    def fail(self: Session) -> None:
        raise OperationalError("COMMIT", {}, sqlite3.OperationalError("disk I/O error"))

    before = count(store, sc.SpanRow)
    monkeypatch.setattr(Session, "commit", fail)
    with pytest.raises(StoreUnavailable, match="disk I/O error"):
        rt.start_span(run, "model", "chat")
    monkeypatch.undo()
    assert count(store, sc.SpanRow) == before


def test_many_threads_many_writes_no_failure(store: Store) -> None:
    """Eight runtime threads of one process against one store: every write lands, none fails."""
    rt = AgentRuntime(store)
    agent, run, group = world(rt)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for n in range(15):
                with rt.batch():
                    span = rt.start_span(run, "model", "chat")
                    rt.append_context(agent, group, "message", "assistant", f"{n}")
                    rt.finish_span(span, "ok")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert count(store, sc.SpanRow) == 8 * 15
