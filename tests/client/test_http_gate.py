"""The gate over HTTP, across real processes: an agent holding only a URL and a token is released by an
operator's decision made in another process, withdraws when it stops waiting, sees expiry, and survives a
receiver restart while it waits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.cli.main import main
from agentdesk.client import AgentDesk
from agentdesk.store.agents import tokens
from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.context import commands as context_commands
from agentdesk.store.errors import NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.readmodel import Approval
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.client.gate_processes import ReceiverProcess, eventually, requesting
from tests.conftest import prebuilt


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    opened = open_store(str(prebuilt(store_path)), create=True)
    yield opened
    opened.close()


@pytest.fixture
def token(store: Store) -> str:
    return tokens.create(store, "refund-bot", "operator")[1]


@pytest.fixture
def receiver(store_path: Path, store: Store) -> Iterator[ReceiverProcess]:
    proc = ReceiverProcess(str(store_path))
    yield proc
    proc.stop()


def pending(store: Store) -> Approval:
    found = eventually(lambda: NativeSource(store).approvals("pending"), what="a pending approval")
    return found[0]  # type: ignore[no-any-return]


def requester(store: Store, approval_id: str) -> str:
    A = sc.AuditRow
    with store.reading() as s:
        return str(s.execute(select(A.actor).where(A.entity_id == approval_id, A.action == "approval.request"))
                   .scalar_one())


def test_an_operator_in_another_process_releases_the_agent(store: Store, token: str,
                                                           receiver: ReceiverProcess) -> None:
    agent = requesting(receiver.url, token)
    try:
        approval = pending(store)
        assert requester(store, approval.id) == "refund-bot"  # the token's name, not a name the agent typed
        assert main(["--store", str(store.url if store.is_postgres else store.path), "approve", approval.id,
                     "--actor", "alice", "--args", '{"order": 1042, "amount": 20}']) == 0
        result = agent.result()
    finally:
        agent.kill()
    assert result == {"outcome": "approved", "arguments": {"order": 1042, "amount": 20}, "decided_by": "alice",
                      "reason": None, "actor": "refund-bot"}


def test_a_denial_reaches_the_agent_with_its_reason(store: Store, token: str, receiver: ReceiverProcess) -> None:
    agent = requesting(receiver.url, token)
    try:
        approval_commands.decide(store, pending(store).id, False, "bob", "not on a Friday")
        result = agent.result()
    finally:
        agent.kill()
    assert (result["outcome"], result["reason"], result["decided_by"]) == ("denied", "not on a Friday", "bob")


def test_an_agent_that_stops_waiting_withdraws(store: Store, token: str, receiver: ReceiverProcess) -> None:
    agent = requesting(receiver.url, token, timeout=0.5)
    try:
        result = agent.result()
    finally:
        agent.kill()
    assert result["outcome"] == "withdrawn"
    withdrawn = NativeSource(store).approvals("withdrawn")
    assert len(withdrawn) == 1 and withdrawn[0].decided_by == "refund-bot"


def test_a_deadline_expires_the_request(store: Store, token: str, receiver: ReceiverProcess) -> None:
    agent = requesting(receiver.url, token, expires_in=0.5)
    try:
        result = agent.result()
    finally:
        agent.kill()
    assert result["outcome"] == "expired" and result["decided_by"] is None
    assert NativeSource(store).approvals("expired")


def test_a_wait_survives_a_receiver_restart(store_path: Path, store: Store, token: str) -> None:
    first = ReceiverProcess(str(store_path))
    agent = requesting(first.url, token)
    second = None
    try:
        approval = pending(store)
        first.stop()  # the agent is cut off mid-wait and keeps reconnecting
        approval_commands.decide(store, approval.id, True, "alice")
        second = ReceiverProcess(str(store_path), port=first.port)
        result = agent.result()
    finally:
        agent.kill()
        first.stop()
        if second is not None:
            second.stop()
    assert (result["outcome"], result["decided_by"]) == ("approved", "alice")


# -- in one process: the client's other calls over HTTP --------------------------------------
@pytest.fixture
def served(store: Store) -> Iterator[str]:
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = thread.start()
    yield f"http://{host}:{port}"
    thread.stop()


def test_the_context_comes_back_as_the_operator_left_it(store: Store, token: str, served: str) -> None:
    with AgentDesk.connect(served, token=token) as desk:
        assert desk.store is None  # nothing of the store in the agent's hands
        agent = desk.register(project="p", agent="a")
        first = agent.add_context("the first message")
        agent.new_turn()
        agent.add_context("to be hidden", role="assistant")
        item = NativeSource(store).context(agent.id).items[0]
        context_commands.edit_item(store, first, "edited by the operator", item.revision, "alice")
        group = NativeSource(store).context(agent.id).groups[1]
        context_commands.set_group_visibility(store, group.id, False, group.revision, "alice")
        seen = agent.context()
    assert seen.messages() == [{"role": "user", "content": "edited by the operator"}]
    assert seen.entries[0].edited and seen.hidden == 1


def test_spans_runs_and_sub_agents_are_written(store: Store, token: str, served: str) -> None:
    with AgentDesk.connect(served, token=token) as desk:
        agent = desk.register(project="p", agent="a")
        helper = agent.sub_agent("helper", "m2")
        with agent.run("work") as run, run.model_call("think", input="hi") as span:
            span.output, span.input_tokens, span.output_tokens = "ok", 3, 4
        with pytest.raises(RuntimeError), helper.run("fails"):
            raise RuntimeError("boom")
        agent.finish()
        again = desk.attach(agent.id)
    with store.reading() as s:
        statuses = dict(s.execute(select(sc.RunRow.title, sc.RunRow.status)).all())
        spans = s.execute(select(sc.SpanRow.name, sc.SpanRow.status, sc.SpanRow.output_text)).all()
        session = s.execute(select(sc.SessionRow.status).where(sc.SessionRow.id == agent.session_id)).scalar()
    assert statuses == {"work": "done", "fails": "failed"} and again.name == "a"
    assert ("think", "ok", "ok") in [tuple(row) for row in spans]
    assert session == "done"


def test_cancelling_an_async_wait_withdraws_over_http(store: Store, token: str, served: str) -> None:
    async def agent_task() -> None:
        with AgentDesk.connect(served, token=token) as desk:
            agent = desk.register(project="p", agent="a")
            with agent.run("r") as run:
                task = asyncio.ensure_future(run.arequest_approval("deploy", {"env": "prod"}))
                await asyncio.to_thread(pending, store)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

    asyncio.run(agent_task())
    assert [a.decided_by for a in NativeSource(store).approvals("withdrawn")] == ["refund-bot"]


def test_an_async_wait_gets_the_decision(store: Store, token: str, served: str) -> None:
    async def agent_task() -> str:
        with AgentDesk.connect(served, token=token) as desk:
            agent = desk.register(project="p", agent="a")
            with agent.run("r") as run:
                task = asyncio.ensure_future(run.arequest_approval("deploy", {"env": "prod"}))
                approval = await asyncio.to_thread(pending, store)
                await asyncio.to_thread(approval_commands.decide, store, approval.id, True, "alice")
                return (await task).outcome.value

    assert asyncio.run(agent_task()) == "approved"


def test_join_trace_waits_for_a_run_that_never_comes(token: str, served: str) -> None:
    with AgentDesk.connect(served, token=token) as desk, pytest.raises(NotFound):
        desk.join_trace("ab" * 16, wait_s=0.2)


def test_a_bad_token_is_one_sentence_at_connect(served: str) -> None:
    from agentdesk.store.agents.refusals import Unauthorized

    with pytest.raises(Unauthorized, match="valid agent token"):
        AgentDesk.connect(served, token="adt_not-a-token")


def test_the_url_and_token_come_from_the_environment(token: str, served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_URL", served)
    monkeypatch.setenv("AGENTDESK_TOKEN", token)
    with AgentDesk.connect() as desk:
        assert desk.actor == "refund-bot" and desk.store is None


def test_a_token_revoked_from_another_process_is_refused(store: Store, token: str,
                                                         receiver: ReceiverProcess) -> None:
    from agentdesk.store.agents.refusals import Unauthorized

    with AgentDesk.connect(receiver.url, token=token) as desk:
        desk.register(project="p", agent="a")  # the token is verified (and cached) by the receiver
        assert main(["--store", str(store.url if store.is_postgres else store.path), "agent-token", "revoke",
                     "refund-bot"]) == 0

        def refused() -> bool:
            try:
                desk.register(project="p", agent="b")
            except Unauthorized:
                return True
            return False

        assert eventually(refused, timeout_s=10, what="the revoked token to be refused")


def test_the_receiver_beats_for_a_held_wait_and_stops_when_it_ends(store: Store, token: str) -> None:
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    thread.receiver.agent_api.waits.heartbeat_s = 0.1  # the default is HEARTBEAT_INTERVAL_S (5 s)
    host, port = thread.start()
    try:
        with AgentDesk.connect(f"http://{host}:{port}", token=token) as desk:
            run = desk.register(project="p", agent="a").start_run("r")
            approval = desk.runtime.request_approval(run.id, "deploy", '{"env": "prod"}')
            waiting = threading.Thread(target=desk.runtime.wait_for_decision, args=(approval, 1.0), daemon=True)
            waiting.start()

            def beat() -> float | None:
                with store.reading() as s:
                    return s.execute(select(sc.ApprovalRow.requester_heartbeat_at)
                                     .where(sc.ApprovalRow.id == approval)).scalar()

            first = eventually(beat, what="a heartbeat while the wait is held")
            eventually(lambda: (beat() or 0) > first, what="a second heartbeat")
            waiting.join(10)
            assert not waiting.is_alive()
            assert eventually(lambda: thread.receiver.agent_api.waits.held == 0, what="the wait to end")
            assert NativeSource(store).approval(approval).status == "pending"  # beating decides nothing
    finally:
        thread.stop()


def test_a_killed_agent_is_no_longer_beaten_for(store: Store, token: str) -> None:
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    waits = thread.receiver.agent_api.waits
    waits.heartbeat_s = 0.1
    host, port = thread.start()
    agent = requesting(f"http://{host}:{port}", token)
    try:
        approval = pending(store)
        eventually(lambda: waits.held == 1, what="the agent's wait to be held")
        agent.kill()  # SIGKILL: no withdraw, the connection just closes
        eventually(lambda: waits.held == 0, what="the dead agent's wait to end")
        assert NativeSource(store).approval(approval.id).status == "pending"  # the queue will show it gone
    finally:
        agent.kill()
        thread.stop()
