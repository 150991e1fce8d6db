"""End to end: a client-library agent in a second process (a URL and a token, never the store) is paused at its
next checkpoint, resumed, and stopped: `RunStopped` is raised in it and the run ends `cancelled`, naming who.

The agent prints a line after every checkpoint it passes; the test reads those lines and the store's state
(the agent reported blocked: `held_at`), never sleeps.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from tests.client.gate_processes import env
from tests.waiting import wait_until

AGENT = textwrap.dedent("""
    import sys
    from agentdesk.client import AgentDesk, RunStopped

    with AgentDesk.connect() as desk:
        agent = desk.register(project="p", agent="looper")
        try:
            with agent.run("loop") as run:
                print("run", run.id, flush=True)
                step = 0
                while True:
                    run.checkpoint()
                    step += 1
                    print("step", step, flush=True)
                    sys.stdin.readline()  # the test says when to take the next step
        except RunStopped as stopped:
            print("stopped", stopped.stopped_by, stopped.reason, flush=True)
""")


def test_an_agent_in_another_process_is_paused_resumed_and_stopped(receiver: tuple[Store, str, str],
                                                                   tmp_path: Path) -> None:
    store, url, token = receiver
    agent = subprocess.Popen([sys.executable, "-c", AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=env(AGENTDESK_URL=url, AGENTDESK_TOKEN=token,
                                     AGENTDESK_STORE=str(tmp_path / "not-there.sqlite")))
    assert agent.stdin is not None and agent.stdout is not None
    try:
        run_id = agent.stdout.readline().split()[1]
        assert agent.stdout.readline() == "step 1\n"

        control.pause(store, run_id, "alice", "checking the diff")
        agent.stdin.write("\n")
        agent.stdin.flush()  # the agent goes on to its next checkpoint, and blocks there
        wait_until(lambda: read_control(store, run_id).held, what="the agent reported blocked at its checkpoint")
        assert NativeSource(store).run(run_id).control == "paused"

        control.resume(store, run_id, "alice")
        assert agent.stdout.readline() == "step 2\n"  # released

        control.stop(store, run_id, "alice", "wrong branch")
        agent.stdin.write("\n")
        agent.stdin.flush()
        assert agent.stdout.readline() == "stopped alice wrong branch\n"
        assert agent.wait(timeout=30) == 0, agent.stderr.read() if agent.stderr else ""
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    run = NativeSource(store).run(run_id)
    assert run.status == "cancelled" and run.error == "stopped by alice: wrong branch"
    assert run.control == "stopped"
