"""Questions, messages and run control ride out a PostgreSQL server that stops and comes back.

A throwaway server of this module's own (tests/postgres/own_server.py, `server.start()`): the session's is
shared. Each agent is a real process using the client library, on the store itself ("local") or, for the ask
and the message, through a real `agentdesk receive` with an agent token ("http"); each test stops the server
under it while it waits (or while its next call is due), waits for the agent's one line about the lost server
where the agent meets it itself, brings the server back, and checks the end state: the operator's answer
given after the outage reaches the waiting `run.ask`; a message queued before it is delivered exactly once,
at the next model call; a pause held across it obeys the resume or the stop given after it. Nothing
crashed, doubled or left waiting.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TypeVar

import pytest
from sqlalchemy import func, select

from agentdesk.store.asks import commands as asks
from agentdesk.store.control import commands as control
from agentdesk.store.errors import ServerUnreachable
from agentdesk.store.messages import commands as messages
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.outage import RideOut
from tests.postgres.own_server import OwnServer, own_server_fixture  # noqa: F401 - the fixture
from tests.postgres.test_outage import UNREACHABLE, child_env, said
from tests.waiting import eventually, wait_until

T = TypeVar("T")


@pytest.fixture
def store(own_server: OwnServer) -> Iterator[Store]:
    opened = open_store(own_server.url)
    yield opened
    opened.close()


def reached(call: Callable[[], T]) -> T | None:
    """`call()` once the server answers again (None while it does not: the pool's old connections die first)."""
    try:
        return call()
    except ServerUnreachable:
        return None


class Agent:
    """An agent process on the store: its stdout lines, its stderr file, a line to release it on stdin."""

    def __init__(self, code: str, url: str, err: Path, token: str | None = None) -> None:
        self.err = err
        env = child_env() | ({"AGENTDESK_TOKEN": token} if token else {})
        with err.open("w") as err_file:
            self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), url], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err_file, text=True, env=env)

    @property
    def stdin(self) -> IO[str]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def line(self) -> str:
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline()
        assert got, f"the agent ended early: {self.err.read_text()}"
        return got.strip()

    def release(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def finish(self) -> str:
        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, self.err.read_text()
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def said_one_outage(self, most: int = 1) -> None:
        text = self.err.read_text()
        assert "Traceback" not in text, text
        assert sum(UNREACHABLE in line for line in text.splitlines()) <= most, text


@pytest.fixture(params=["local", "http"])
def reach(request: pytest.FixtureRequest, own_server: OwnServer, store: Store) -> Iterator[tuple[str, str | None]]:
    """(URL, token) an agent connects with: the store itself, or a receiver's agent API on it."""
    if request.param == "local":
        yield own_server.url, None
        return
    from agentdesk.store.agents import tokens
    from tests.client.gate_processes import ReceiverProcess
    token = tokens.create(store, f"outage-{uuid.uuid4().hex[:6]}", "operator")[1]
    receiver = ReceiverProcess(own_server.url)
    try:
        yield receiver.url, token
    finally:
        receiver.proc.send_signal(signal.SIGTERM)
        _out, err = receiver.proc.communicate(timeout=30)
        assert "Traceback" not in err, err


def outage_under(own_server: OwnServer, agent: Agent) -> None:
    """Stop the server, wait for the agent's line about it (it is waiting on the server), start it again."""
    own_server.stop()
    try:
        wait_until(lambda: said(agent.err, UNREACHABLE), what="the agent's one line about the lost server")
    finally:
        own_server.start()
    assert agent.proc.poll() is None, agent.err.read_text()  # still waiting, not crashed


ASKER = """
    import json, sys
    from agentdesk.client import AgentDesk
    with AgentDesk.connect(sys.argv[1]) as desk:
        agent = desk.register(project="outage", agent="asker", model="m")
        with agent.run("ask across an outage") as run:
            print(json.dumps({"agent": agent.id, "run": run.id}), flush=True)
            answer = run.ask("Which region?", ["eu", "us"], expires_in=None)
            print(json.dumps({"answer": answer}), flush=True)
        agent.finish()
"""


def test_an_agent_waiting_in_ask_gets_the_answer_given_after_the_outage(
        own_server: OwnServer, store: Store, reach: tuple[str, str | None], tmp_path: Path) -> None:
    agent = Agent(ASKER, reach[0], tmp_path / "asker.err", reach[1])
    try:
        run_id = json.loads(agent.line())["run"]
        ask_id = eventually(lambda: pending_asks(store, run_id), what="the agent's question")[0]
        if reach[1] is None:
            outage_under(own_server, agent)
        else:  # over HTTP the receiver holds the wait: it meets the outage, the agent need not
            own_server.stop()
            own_server.start()
        eventually(lambda: reached(lambda: asks.answer(store, ask_id, "eu", "operator")),
                   what="the answer, once the server is back")
        assert json.loads(agent.line()) == {"answer": "eu"}
        agent.finish()
    finally:
        agent.kill()
    agent.said_one_outage()
    with store.reading() as s:
        assert s.execute(select(func.count()).select_from(sc.AskRow).where(sc.AskRow.run_id == run_id)).scalar() == 1
        run = s.get(sc.RunRow, run_id)
        assert run is not None and run.status == "done"


def pending_asks(store: Store, run_id: str) -> list[str]:
    with store.reading() as s:
        return list(s.execute(select(sc.AskRow.id).where(sc.AskRow.run_id == run_id,
                                                         sc.AskRow.status == "pending")).scalars())


MESSAGED = """
    import json, sys
    from agentdesk.client import AgentDesk
    with AgentDesk.connect(sys.argv[1]) as desk:
        agent = desk.register(project="outage", agent="messaged", model="m")
        with agent.run("a message across an outage") as run:
            with run.model_call("first"):
                pass
            print(json.dumps({"agent": agent.id, "run": run.id}), flush=True)
            sys.stdin.readline()  # released while the server is down: the next model call meets the outage
            for name in ("second", "third"):
                with run.model_call(name):
                    seen = [e.content for e in agent.context().entries]
                print(json.dumps({name: seen}), flush=True)
        agent.finish()
"""


def test_a_message_queued_before_the_outage_is_delivered_once_at_the_next_model_call(
        own_server: OwnServer, store: Store, reach: tuple[str, str | None], tmp_path: Path) -> None:
    agent = Agent(MESSAGED, reach[0], tmp_path / "messaged.err", reach[1])
    text = "Stop retrying the refund; ask me first."
    try:
        ids = json.loads(agent.line())
        message = messages.send(store, ids["agent"], text, "operator")
        own_server.stop()
        try:
            agent.release()
            wait_until(lambda: said(agent.err, UNREACHABLE), what="the agent's one line about the lost server")
        finally:
            own_server.start()
        second, third = json.loads(agent.line()), json.loads(agent.line())
        agent.finish()
    finally:
        agent.kill()
    agent.said_one_outage()
    assert second["second"].count(text) == 1 and third["third"].count(text) == 1  # delivered once, then kept
    with store.reading() as s:
        row = s.get(sc.MessageRow, message)
        assert row is not None and row.status == "delivered"
        assert s.execute(select(func.count()).select_from(sc.ContextItemRow).where(
            sc.ContextItemRow.agent_id == ids["agent"], sc.ContextItemRow.role == "user")).scalar() == 1


PAUSED = """
    import json, sys
    from agentdesk.client import AgentDesk, RunStopped
    with AgentDesk.connect(sys.argv[1]) as desk:
        agent = desk.register(project="outage", agent="paused", model="m")
        try:
            with agent.run("a pause across an outage") as run:
                print(json.dumps({"run": run.id}), flush=True)
                sys.stdin.readline()  # released once the operator paused the run
                run.checkpoint()  # blocks while paused, across the outage
                print(json.dumps({"after": "resume"}), flush=True)
        except RunStopped:
            print(json.dumps({"after": "stop"}), flush=True)
        agent.finish()
"""


@pytest.mark.parametrize(("action", "status"), [("resume", "done"), ("stop", "cancelled")])
def test_a_run_paused_across_the_outage_obeys_the_control_given_after_it(
        own_server: OwnServer, store: Store, tmp_path: Path, action: str, status: str) -> None:
    agent = Agent(PAUSED, own_server.url, tmp_path / "paused.err")
    try:
        run_id = json.loads(agent.line())["run"]
        control.pause(store, run_id, "operator")
        agent.release()
        eventually(lambda: control_held(store, run_id), what="the agent blocked at its checkpoint")
        outage_under(own_server, agent)
        act = control.resume if action == "resume" else control.stop
        eventually(lambda: reached(lambda: act(store, run_id, "operator")), what=f"the {action}, once it is back")
        assert json.loads(agent.line()) == {"after": action}
        agent.finish()
    finally:
        agent.kill()
    agent.said_one_outage()
    with store.reading() as s:
        run = s.get(sc.RunRow, run_id)
        assert run is not None and run.status == status


def control_held(store: Store, run_id: str) -> bool:
    with store.reading() as s:
        row = s.get(sc.RunControlRow, run_id)
        return row is not None and row.held_at is not None


def test_the_rule_applier_follows_across_the_outage(own_server: OwnServer, store: Store, tmp_path: Path) -> None:
    """`agentdesk rules apply --follow` as an operator: one line when the server goes, and it rules on a request
    made after the server came back."""
    import psycopg

    from agentdesk.store.persistence.postgres.engine import libpq_url
    from agentdesk.store.rules.commands import add_rule
    from agentdesk.store.runtime import AgentRuntime
    from tests.postgres.conftest import login_url

    names = {level: f"o_{level}_{uuid.uuid4().hex[:6]}" for level in ("agent", "operator")}
    with psycopg.connect(libpq_url(own_server.url), autocommit=True) as conn:
        for level, name in names.items():
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret'")
            conn.execute(f"GRANT agentdesk_{level} TO {name}")
    rule = add_rule(store, "allow", "read_file", {"kind": "fields", "fields": {"path": {"under": "/src"}}}, "admin")
    agent_store = open_store(login_url(own_server.url, names["agent"], "secret"))
    err = tmp_path / "apply.err"
    with err.open("w") as err_file:
        applier = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store",
                                    login_url(own_server.url, names["operator"], "secret"), "rules", "apply",
                                    "--follow"], stdout=subprocess.PIPE, stderr=err_file, text=True, env=child_env())
    try:
        assert applier.stdout is not None
        assert "Applying standing rules" in applier.stdout.readline(), err.read_text()  # it is following
        own_server.stop()
        try:
            wait_until(lambda: said(err, UNREACHABLE), what="the applier's one line about the lost server")
        finally:
            own_server.start()
        rt = AgentRuntime(agent_store, ride_out=RideOut(30.0))
        pid = rt.create_project("applied after the outage")
        run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m"), "r")
        approval = rt.request_approval(run, "read_file", {"path": "/src/a.py"}, timeout_s=None)
        decision = rt.wait_for_decision(approval, timeout_s=30)
        assert (decision.status, decision.actor) == ("approved", f"rules (applied by {names['operator']})")
        applier.send_signal(signal.SIGINT)
        out, _ = applier.communicate(timeout=30)
    finally:
        if applier.poll() is None:
            applier.kill()
        agent_store.close()
    assert applier.returncode == 130 and f"{approval} (read_file): approved by rule {rule.id}" in out
    text = err.read_text()
    assert "Traceback" not in text and sum(UNREACHABLE in line for line in text.splitlines()) == 1, text
