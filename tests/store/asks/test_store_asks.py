"""Asks in the store, on SQLite and PostgreSQL: asked, answered exactly once, refused with who and when.

Every refusal also checks that nothing was written (the dump is the same). Racing operators: several threads
(hypothesis picks how many and who) answer one question at once; exactly one wins, the others are told who.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentdesk.store.asks import commands as asks
from agentdesk.store.asks.reads import list_asks, pending_count, read_ask
from agentdesk.store.audit import verify_chain
from agentdesk.store.errors import Conflict, InvalidInput, NotFound, StoreError
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store
from tests.conftest import World, dump


@contextmanager
def refused(path: Path, error: type[StoreError], match: str | None = None) -> Iterator[None]:
    before = dump(path)
    with pytest.raises(error, match=match):
        yield
    assert dump(path) == before


def audit_actions(store: Store, ask_id: str) -> list[tuple[str, str]]:
    with store.reading() as s:
        rows = s.execute(select(sc.AuditRow.action, sc.AuditRow.actor).where(sc.AuditRow.entity_id == ask_id)
                         .order_by(sc.AuditRow.seq)).all()
    return [(r.action, r.actor) for r in rows]


def test_ask_then_answer_is_audited_and_published(store: Store, world: World) -> None:
    heard: list[Change] = []
    store.bus.subscribe(heard.extend)
    ask_id = asks.create(store, world.run, "Which branch?", ["main", "dev"], expires_in=60, actor="planner")
    pending = read_ask(store, ask_id)
    assert (pending.status, pending.options, pending.agent_name, pending.run_id) == (
        "pending", ("main", "dev"), "planner", world.run)
    assert pending_count(store) == 1
    done = asks.answer(store, ask_id, "dev", "alice", expected_revision=pending.revision)
    assert (done.status, done.answer, done.answered_by, done.revision) == ("answered", "dev", "alice", 2)
    assert audit_actions(store, ask_id) == [("ask.create", "planner"), ("ask.answered", "alice")]
    assert [(c.entity, c.op, c.id) for c in heard if c.entity == "ask"] == [
        ("ask", "insert", ask_id), ("ask", "update", ask_id)]
    assert [a.id for a in list_asks(store, pending_only=True)] == []
    with store.reading() as s:
        assert verify_chain(s).ok


def test_second_answer_is_refused_with_who_and_nothing_written(store: Store, store_path: Path,
                                                               world: World) -> None:
    ask_id = asks.create(store, world.run, "Deploy now?")
    asks.answer(store, ask_id, "yes", "alice")
    with refused(store_path, asks.AlreadyAnswered, match=r"already answered by alice at \d{4}-"):
        asks.answer(store, ask_id, "no", "bob")


def test_expired_ask_is_refused_with_when(store: Store, store_path: Path, world: World) -> None:
    ask_id = asks.create(store, world.run, "Deploy now?", expires_in=1e-6)
    with refused(store_path, asks.AskExpired, match=r"expired at \d{4}-.* can no longer be answered"):
        asks.answer(store, ask_id, "yes", "alice")
    closed = asks.close(store, ask_id, "expired", "runtime")
    assert closed.status == "expired"
    with refused(store_path, asks.AskExpired, match="expired at"):
        asks.answer(store, ask_id, "yes", "alice")


def test_cancelled_ask_says_who_cancelled(store: Store, store_path: Path, world: World) -> None:
    ask_id = asks.create(store, world.run, "Deploy now?")
    asks.close(store, ask_id, "cancelled", "planner", "the agent stopped waiting")
    with refused(store_path, asks.AlreadyAnswered, match="already cancelled by planner"):
        asks.answer(store, ask_id, "yes", "alice")
    with refused(store_path, asks.AlreadyAnswered):
        asks.close(store, ask_id, "cancelled", "planner")


def test_stale_revision_and_unknown_ids_are_refused(store: Store, store_path: Path, world: World) -> None:
    ask_id = asks.create(store, world.run, "Deploy now?")
    with refused(store_path, Conflict, match="changed since you saw it"):
        asks.answer(store, ask_id, "yes", "alice", expected_revision=7)
    with refused(store_path, NotFound, match="no question with id ask_nope"):
        asks.answer(store, "ask_nope", "yes", "alice")
    with pytest.raises(NotFound):
        asks.create(store, "run_nope", "Deploy now?")


@pytest.mark.parametrize("bad", [
    {"question": ""}, {"question": "x" * 1_000_001}, {"options": ["a", ""]}, {"options": "ab"},
    {"options": [1, 2]}, {"expires_in": 0},
])
def test_bad_questions_are_refused_in_one_sentence(store: Store, store_path: Path, world: World,
                                                   bad: dict[str, object]) -> None:
    given = {"question": "Deploy now?", "options": None, "expires_in": None} | bad
    with refused(store_path, InvalidInput):
        asks.create(store, world.run, given["question"], given["options"],  # type: ignore[arg-type]
                    expires_in=given["expires_in"])  # type: ignore[arg-type]


def test_oversize_answer_is_refused(store: Store, store_path: Path, world: World) -> None:
    ask_id = asks.create(store, world.run, "Deploy now?")
    with refused(store_path, InvalidInput, match="limit is 1,000,000 bytes"):
        asks.answer(store, ask_id, "y" * 1_000_001, "alice")
    with refused(store_path, InvalidInput, match="needs some text"):
        asks.answer(store, ask_id, "  ", "alice")


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(names=st.lists(st.sampled_from(["alice", "bob", "carol", "dave"]), min_size=2, max_size=4))
def test_racing_operators_answer_exactly_once(store: Store, world: World, names: list[str]) -> None:
    ask_id = asks.create(store, world.run, "Which one?")
    start = threading.Barrier(len(names))
    won: list[str] = []
    lost: list[str] = []

    def answer(name: str) -> None:
        start.wait()
        try:
            asks.answer(store, ask_id, f"answer of {name}", name)
            won.append(name)
        except asks.AlreadyAnswered as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=answer, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == len(names) - 1
    final = read_ask(store, ask_id)
    assert final.answered_by == won[0] and final.answer == f"answer of {won[0]}"
    assert all(f"by {won[0]} at" in sentence for sentence in lost)
    assert [a for a, _ in audit_actions(store, ask_id)].count("ask.answered") == 1


RACER = """
import sys
from agentdesk.store.asks import commands as asks
from agentdesk.store.persistence.database import open_store
store = open_store(sys.argv[1])
sys.stdin.readline()  # everyone starts together
try:
    asks.answer(store, sys.argv[2], "answer of " + sys.argv[3], sys.argv[3])
    print("won")
except asks.AlreadyAnswered as exc:
    print("lost:", exc)
store.close()
"""


@pytest.mark.slow  # three interpreters start (a few seconds on a busy machine)
def test_racing_operator_processes_answer_exactly_once(store: Store, store_path: Path, world: World) -> None:
    import subprocess
    import sys

    from tests.client.gate_processes import env

    ask_id = asks.create(store, world.run, "Which one?")
    names = ("alice", "bob", "carol")
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(store_path), ask_id, name], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
             for name in names]
    outs = []
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outs.append(out.strip())
    winners = [name for name, out in zip(names, outs, strict=True) if out == "won"]
    assert len(winners) == 1
    final = read_ask(store, ask_id)
    assert final.answered_by == winners[0]
    assert all(out.startswith(f"lost: Question {ask_id} was already answered by {winners[0]} at")
               for out in outs if out != "won")
