"""Many operators on one PostgreSQL store: exactly-once decisions across processes, and killed transactions."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import psycopg
import pytest

from agentdesk.store.errors import AlreadyDecided, StoreUnavailable
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.waiting import eventually

OPERATOR = textwrap.dedent("""
    import json, sys
    from agentdesk.store.errors import AlreadyDecided
    from agentdesk.store.native import NativeSource
    url, me = sys.argv[1], sys.argv[2]
    source = NativeSource.open(url)
    ids = json.loads(sys.stdin.read())  # both processes are open before either gets the list
    won, lost = [], []
    for approval_id in ids:
        try:
            source.decide(approval_id, approve=True, actor=me)
            won.append(approval_id)
        except AlreadyDecided as exc:
            assert exc.actor not in (None, me) and exc.at, exc
            lost.append([approval_id, exc.actor])
    source.close()
    print(json.dumps({"won": won, "lost": lost}), flush=True)
""")


def seed_approvals(rt: AgentRuntime, count: int) -> list[str]:
    pid = rt.create_project("race")
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m"), "r")
    return [rt.request_approval(run, "shell", {"n": n}) for n in range(count)]


@pytest.mark.slow
def test_two_processes_decide_each_of_400_approvals_exactly_once(pg_url: str, pg_rt: AgentRuntime) -> None:
    """Both race on every id, so each of the 400 is a contest (a thousand took 18 s of the suite for no
    more kinds of interleaving)."""
    ids = seed_approvals(pg_rt, 400)
    procs = [subprocess.Popen([sys.executable, "-c", OPERATOR, pg_url, who], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for who in ("alice", "bob")]
    for proc in procs:  # both open first, then both get the same list at once: they race on every id
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(ids))
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    results = {}
    for who, proc in zip(("alice", "bob"), procs, strict=True):
        assert proc.stdout is not None
        out = proc.stdout.read()
        assert proc.wait(timeout=600) == 0
        results[who] = json.loads(out.splitlines()[-1])
    alice, bob = results["alice"], results["bob"]
    assert sorted(alice["won"] + bob["won"]) == sorted(ids)  # one winner each: no double, no none
    assert not set(alice["won"]) & set(bob["won"])
    assert {a for a, _ in alice["lost"]} == set(bob["won"]) and {a for a, _ in bob["lost"]} == set(alice["won"])
    assert all(winner == "bob" for _, winner in alice["lost"]) and all(w == "alice" for _, w in bob["lost"])
    source = NativeSource.open(pg_url)
    try:
        assert source.verify().ok
    finally:
        source.close()


def test_a_decision_killed_by_the_server_is_cleanly_failed(pg_url: str, pg_store: Store,
                                                           pg_rt: AgentRuntime) -> None:
    (approval,) = seed_approvals(pg_rt, 1)
    source = NativeSource(pg_store)
    before = source.verify().records
    outcome: list[BaseException | None] = []
    with psycopg.connect(libpq_url(pg_url)) as blocker:
        # The decision updates the approval and appends the audit, then waits on the change log: mid-transaction.
        blocker.execute("LOCK TABLE change_log IN ACCESS EXCLUSIVE MODE")

        def decide() -> None:
            try:
                source.decide(approval, approve=True, actor="alice")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=decide)
        thread.start()
        pid = wait_for_blocked_backend(blocker)
        blocker.execute("SELECT pg_terminate_backend(%s)", (pid,))
        thread.join(30)
        blocker.rollback()
    assert len(outcome) == 1 and isinstance(outcome[0], StoreUnavailable), outcome
    assert "connection" in str(outcome[0]) and "\n" not in str(outcome[0])
    assert source.approval(approval).status == "pending"  # never half: nothing of it was kept
    report = source.verify()
    assert report.ok and report.records == before
    source.decide(approval, approve=True, actor="alice")  # the pool replaced the dead connection
    with pytest.raises(AlreadyDecided, match="alice"):
        source.decide(approval, approve=False, actor="bob", reason="late")


def wait_for_blocked_backend(conn: psycopg.Connection) -> int:
    def blocked() -> object:
        return conn.execute("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                            "AND pid <> pg_backend_pid() AND datname = current_database()").fetchone()

    row = eventually(blocked, timeout_s=30, what="the decision blocked on the change log")
    return int(row[0])  # type: ignore[index]


EDITOR = textwrap.dedent("""
    import json, sys
    from sqlalchemy import text
    from agentdesk.store.errors import StaleRevision
    from agentdesk.store.native import NativeSource
    url, me, item, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    source = NativeSource.open(url)
    won = stale = 0
    for n in range(rounds):
        with source.store.reading() as session:
            revision = session.execute(text("SELECT revision FROM context_items WHERE id = :i"), {"i": item}).scalar()
        try:
            source.edit_item(item, f"{me} {n}", revision, me)
            won += 1
        except StaleRevision:
            stale += 1
    source.close()
    print(json.dumps([won, stale]), flush=True)
""")


@pytest.mark.slow
def test_two_processes_editing_one_item_never_lose_an_edit(pg_url: str, pg_rt: AgentRuntime) -> None:
    pid = pg_rt.create_project("edit")
    agent = pg_rt.create_agent(pg_rt.create_session(pg_rt.create_task(pid, "t"), "s"), "a", "m")
    item = pg_rt.append_context(agent, pg_rt.new_turn_group(agent, "turn"), "message", "user", "start")
    procs = [subprocess.Popen([sys.executable, "-c", EDITOR, pg_url, who, item, "150"], stdout=subprocess.PIPE,
                              text=True) for who in ("alice", "bob")]
    results = []
    for proc in procs:
        assert proc.stdout is not None
        results.append(json.loads(proc.stdout.read().splitlines()[-1]))
        assert proc.wait(timeout=600) == 0
    wins = sum(won for won, _ in results)
    assert sum(won + stale for won, stale in results) == 300
    with psycopg.connect(libpq_url(pg_url)) as conn:
        revision = conn.execute("SELECT revision FROM context_items WHERE id = %s", (item,)).fetchone()
        history = conn.execute("SELECT count(*) FROM context_item_revisions WHERE item_id = %s", (item,)).fetchone()
    assert revision == (1 + wins,)  # every accepted edit moved the revision once: none overwrote another
    assert history is not None and history[0] >= wins
