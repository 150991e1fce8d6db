"""The client library receives an operator's message at its next model call: in-process on both backends, and
an agent in another process that holds only the receiver's URL and a token (the real path)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.client import AgentDesk
from agentdesk.store.agents import tokens
from agentdesk.store.errors import Conflict
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.reads import read_message
from agentdesk.store.persistence.database import Store, open_store
from tests.client.gate_processes import ReceiverProcess, env
from tests.conftest import BACKENDS, prebuilt


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_message_joins_the_context_at_the_next_model_call(store_path: Path) -> None:
    with AgentDesk.connect(str(store_path), actor="planner-process") as desk:
        agent = desk.register(project="ops", agent="planner")
        agent.add_context("You are a careful planner.", role="system")
        message_id = messages.send(desk.store, agent.id, "Prefer the read replica.", "alice")
        assert all(e.content != "Prefer the read replica." for e in agent.context().entries)
        with agent.run("plan") as run, run.model_call("llm"):
            sent = agent.context()
        assert [(e.role, e.content, e.author) for e in sent.entries] == [
            ("system", "You are a careful planner.", None), ("user", "Prefer the read replica.", "alice")]
        assert sent.messages()[-1] == {"role": "user", "content": "Prefer the read replica."}
        taken = read_message(desk.store, message_id)
        assert taken is not None and (taken.status, taken.settled_by) == ("delivered", "planner-process")
        assert agent.inbox() == []  # delivered once
        with pytest.raises(Conflict):
            messages.cancel(desk.store, message_id, "alice")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_inbox_takes_pending_messages_explicitly(store_path: Path) -> None:
    with AgentDesk.connect(str(store_path), actor="planner-process") as desk:
        agent = desk.register(project="ops", agent="planner")
        first = messages.send(desk.store, agent.id, "one", "alice")
        second = messages.send(desk.store, agent.id, "two", "bob")
        messages.cancel(desk.store, second, "bob")
        third = messages.send(desk.store, agent.id, "three", "carol")
        got = agent.inbox()
        assert [(d.message_id, d.content, d.author) for d in got] == [(first, "one", "alice"),
                                                                      (third, "three", "carol")]
        assert [e.content for e in agent.context().entries] == ["one", "three"]


AGENT = """
import json, sys
from agentdesk.client import AgentDesk
with AgentDesk.connect() as desk:
    agent = desk.register(project="ops", agent="planner", model="m")
    print(json.dumps({"agent": agent.id}), flush=True)
    sys.stdin.readline()  # the operator sends a message meanwhile
    with agent.run("plan") as run, run.model_call("llm"):
        entries = agent.context().entries
    print(json.dumps({"context": [[e.role, e.content, e.author] for e in entries], "again": len(agent.inbox())}),
          flush=True)
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Store, ReceiverProcess, str]]:
    path = str(prebuilt(tmp_path / "agentdesk.sqlite"))
    store = open_store(path, create=True)
    token = tokens.create(store, "planner-bot", "operator")[1]
    receiver = ReceiverProcess(path)
    try:
        yield store, receiver, token
    finally:
        receiver.stop()
        store.close()


def test_an_agent_in_another_process_receives_the_message_at_its_next_model_call(
        served: tuple[Store, ReceiverProcess, str]) -> None:
    store, receiver, token = served
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(AGENT)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(AGENTDESK_URL=receiver.url, AGENTDESK_TOKEN=token,
                                    AGENTDESK_STORE="/nonexistent/agentdesk.sqlite"))
    try:
        assert proc.stdout is not None and proc.stdin is not None
        agent_id = json.loads(proc.stdout.readline())["agent"]
        message_id = messages.send(store, agent_id, "Stop after the dry run \u200b.", "alice")
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"context": [["user", "Stop after the dry run \u200b.", "alice"]], "again": 0}
    taken = read_message(store, message_id)
    assert taken is not None and (taken.status, taken.settled_by) == ("delivered", "planner-bot")
