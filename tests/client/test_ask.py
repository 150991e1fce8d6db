"""`run.ask` / `run.aask`: an agent asks, blocks, and is released by an operator's answer.

Locally (the agent opens the store) and over HTTP (the agent holds a URL and a token, in a second process).
An agent token can ask and take back its own question, never answer one, nor touch another agent's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.client import AgentDesk, QuestionCancelled, QuestionExpired
from agentdesk.store.agents import tokens
from agentdesk.store.asks import commands as asks
from agentdesk.store.asks.reads import Ask, list_asks, read_ask
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.client.gate_processes import AgentProcess, env
from tests.conftest import prebuilt
from tests.security.test_http_gate import World, call
from tests.waiting import eventually


def pending_one(store: Store) -> Ask:
    return eventually(lambda: next(iter(list_asks(store, pending_only=True)), None), what="a pending question")


def test_an_agent_in_another_process_is_released_by_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "agentdesk.sqlite"
    store = open_store(str(path), create=True)
    script = textwrap.dedent(f"""
        import json
        from agentdesk.client import AgentDesk
        with AgentDesk.connect({str(path)!r}) as desk:
            agent = desk.register(project="p", agent="asker")
            with agent.run("r") as run:
                print(json.dumps({{"answer": run.ask("Which branch?", ["main", "dev"], expires_in=60)}}), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env())
    try:
        asked = pending_one(store)
        assert (asked.question, asked.options, asked.agent_name) == ("Which branch?", ("main", "dev"), "asker")
        asks.answer(store, asked.id, "dev", "alice")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"answer": "dev"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()


def test_expiry_and_timeout_raise_typed_errors(store_path: Path) -> None:
    with AgentDesk.connect(str(store_path)) as desk:
        run = desk.register(project="p", agent="a").start_run("r")
        with pytest.raises(QuestionExpired):
            run.ask("Anyone?", expires_in=0.05)
        with pytest.raises(QuestionCancelled, match="stopped waiting"):
            run.ask("Anyone?", expires_in=60, timeout=0.05)
        statuses = sorted(a.status for a in list_asks(desk.runtime.store))  # type: ignore[attr-defined]
        assert statuses == ["cancelled", "expired"]


def test_aask_awaits_the_answer_and_a_cancelled_task_takes_the_question_back(store_path: Path) -> None:
    with AgentDesk.connect(str(store_path)) as desk:
        store: Store = desk.runtime.store  # type: ignore[attr-defined]
        run = desk.register(project="p", agent="a").start_run("r")

        async def main() -> str:
            asking = asyncio.create_task(run.aask("Proceed?", ["yes", "no"]))
            asked = await asyncio.to_thread(pending_one, store)
            await asyncio.to_thread(asks.answer, store, asked.id, "yes", "bob")
            return await asking

        assert asyncio.run(main()) == "yes"

        async def cancelled() -> None:
            asking = asyncio.create_task(run.aask("Again?"))
            await asyncio.to_thread(pending_one, store)
            asking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asking

        asyncio.run(cancelled())
        assert [a.status for a in list_asks(store)] == ["cancelled", "answered"]


@pytest.fixture
def http(store_path: Path) -> Iterator[tuple[Store, str, str, str]]:
    store = open_store(str(prebuilt(store_path)), create=True)
    alice = tokens.create(store, "alice-bot", "operator")[1]
    mallory = tokens.create(store, "mallory-bot", "operator")[1]
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = thread.start()
    yield store, f"http://{host}:{port}", alice, mallory
    thread.stop()
    store.close()


def test_over_http_a_second_process_asks_and_is_released(http: tuple[Store, str, str, str]) -> None:
    store, url, alice, _ = http
    agent = AgentProcess(url, alice, """
        with AgentDesk.connect() as desk:
            with desk.register(project="p", agent="a").run("r") as run:
                print(json.dumps({"answer": run.ask("Which one?", ["x", "y"])}), flush=True)
    """)
    try:
        asked = pending_one(store)
        asks.answer(store, asked.id, "y", "alice")
        assert agent.result() == {"answer": "y"}
    finally:
        agent.kill()


def test_an_agent_token_cannot_answer_nor_touch_another_agents_question(http: tuple[Store, str, str, str]) -> None:
    store, url, alice, mallory = http
    host, port = url.removeprefix("http://").split(":")
    w = World(store, host, int(port), alice, mallory, "", *[""] * 7)
    with AgentDesk.connect(url, token=alice) as desk:
        run = desk.register(project="p", agent="a").start_run("r")
        ask_id = desk.runtime.ask(run.id, "Deploy?", None, 60, None)
    for token in (alice, mallory):
        for path in (f"/agent/v1/asks/{ask_id}/answer", f"/agent/v1/asks/{ask_id}/decide"):
            status, _ = call(w, "POST", path, {"answer": "yes"}, token=token)
            assert status == 404
    assert call(w, "GET", f"/agent/v1/asks/{ask_id}", token=mallory)[0] == 403
    assert call(w, "POST", f"/agent/v1/asks/{ask_id}/cancel", {"reason": "mine now"}, token=mallory)[0] == 403
    assert call(w, "POST", f"/agent/v1/asks/{ask_id}/wait", {"timeout_s": 0}, token=mallory)[0] == 403
    assert call(w, "POST", f"/agent/v1/runs/{run.id}/asks", {"question": "hijack?"}, token=mallory)[0] == 403
    status, answer = call(w, "POST", f"/agent/v1/runs/{run.id}/asks", {"question": "x" * 1_000_001}, token=alice)
    assert status == 400 and "limit" in answer["error"]
    assert read_ask(store, ask_id).status == "pending"
    status, answer = call(w, "POST", f"/agent/v1/asks/{ask_id}/cancel", {"reason": "done"}, token=alice)
    assert (status, answer["status"]) == (200, "cancelled")


def test_an_answer_from_another_thread_wakes_an_http_wait(http: tuple[Store, str, str, str]) -> None:
    store, url, alice, _ = http
    with AgentDesk.connect(url, token=alice) as desk:
        run = desk.register(project="p", agent="a").start_run("r")
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.append(run.ask("Now?")))
        waiter.start()
        asks.answer(store, pending_one(store).id, "now", "carol")
        waiter.join(30)
        assert got == ["now"]
