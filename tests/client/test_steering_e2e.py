"""Issue 24 end to end: one client-library agent in a second process (a URL and a token, never the store) asks a
question and gets the answer, receives an operator's message at its next model call, is paused at its next
checkpoint, resumed, and stopped (`RunStopped`, the run `cancelled` naming who).

The agent prints a line at each step; the test reads those lines and the store's state, never sleeps.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from agentdesk.store.asks import commands as asks
from agentdesk.store.asks.reads import list_asks
from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.messages import commands as messages
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.client.gate_processes import env
from tests.waiting import eventually, wait_until

AGENT = textwrap.dedent("""
    import sys
    from agentdesk.client import AgentDesk, RunStopped

    with AgentDesk.connect() as desk:
        agent = desk.register(project="p", agent="steered")
        try:
            with agent.run("steer me") as run:
                print("run", run.id, agent.id, flush=True)
                print("answer", run.ask("Which branch?", options=["main", "release"], expires_in=60), flush=True)
                sys.stdin.readline()  # the operator has queued a message
                with run.model_call("chat"):
                    said = [e.content for e in agent.context().entries if e.author == "alice"]
                    print("heard", *said, flush=True)
                while True:
                    sys.stdin.readline()  # the test says when to take the next step
                    run.checkpoint()
                    print("step", flush=True)
        except RunStopped as stopped:
            print("stopped", stopped.stopped_by, stopped.reason, flush=True)
""")


def test_one_agent_is_answered_messaged_paused_resumed_and_stopped(receiver: tuple[Store, str, str],
                                                                   tmp_path: Path) -> None:
    store, url, token = receiver
    agent = subprocess.Popen([sys.executable, "-c", AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=env(AGENTDESK_URL=url, AGENTDESK_TOKEN=token,
                                     AGENTDESK_STORE=str(tmp_path / "not-there.sqlite")))
    assert agent.stdin is not None and agent.stdout is not None

    def step() -> None:
        assert agent.stdin is not None
        agent.stdin.write("\n")
        agent.stdin.flush()

    try:
        _, run_id, agent_id = agent.stdout.readline().split()
        [question] = eventually(lambda: list_asks(store, pending_only=True, run_id=run_id), what="the question")
        assert question.question == "Which branch?" and question.options == ("main", "release")
        asks.answer(store, question.id, "release", "alice")
        assert agent.stdout.readline() == "answer release\n"

        messages.send(store, agent_id, "Skip the flaky test.", "alice")
        step()
        assert agent.stdout.readline() == "heard Skip the flaky test.\n"  # delivered at its next model call

        control.pause(store, run_id, "alice", "checking the diff")
        step()  # the agent goes on to its next checkpoint, and blocks there
        wait_until(lambda: read_control(store, run_id).held, what="the agent reported blocked at its checkpoint")
        control.resume(store, run_id, "alice")
        assert agent.stdout.readline() == "step\n"  # released

        control.stop(store, run_id, "alice", "wrong branch")
        step()
        assert agent.stdout.readline() == "stopped alice wrong branch\n"
        assert agent.wait(timeout=30) == 0, agent.stderr.read() if agent.stderr else ""
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    run = NativeSource(store).run(run_id)
    assert run.status == "cancelled" and run.error == "stopped by alice: wrong branch"
    answered = list_asks(store, run_id=run_id)
    assert [(a.status, a.answer, a.answered_by) for a in answered] == [("answered", "release", "alice")]
