"""`run.checkpoint()` on a local store: where `request_approval`, `model_call` and asyncio agents honour a pause
and a stop (store/control). Waits are for the state the test expects (tests/waiting.py), never a fixed sleep."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.client import AgentDesk, RunStopped
from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from tests.conftest import prebuilt
from tests.waiting import wait_until


@pytest.fixture
def setting(store_path: Path) -> Iterator[tuple[AgentDesk, Store]]:
    operator = open_store(str(prebuilt(store_path)), create=True)
    with AgentDesk.connect(str(store_path), actor="test-agent") as desk:
        yield desk, operator
    operator.close()


def test_a_running_run_passes_at_once_and_a_stopped_one_raises_before_asking(
        setting: tuple[AgentDesk, Store]) -> None:
    desk, operator = setting
    agent = desk.register(project="p", agent="a")
    run = agent.start_run("r")
    run.checkpoint()
    control.stop(operator, run.id, "alice", "enough")
    with pytest.raises(RunStopped, match="stopped by alice: enough") as stopped:
        run.request_approval("shell", {"cmd": "ls"})
    assert stopped.value.stopped_by == "alice"
    source = NativeSource(operator)
    assert source.approvals("all") == []  # nothing was asked after the stop
    assert source.run(run.id).status == "cancelled"
    with pytest.raises(RunStopped):
        run.checkpoint()  # and it stays stopped


def test_a_model_call_blocks_while_paused_and_goes_on_when_resumed(setting: tuple[AgentDesk, Store]) -> None:
    desk, operator = setting
    run = desk.register(project="p", agent="a").start_run("r")
    control.pause(operator, run.id, "alice")
    called = threading.Event()

    def step() -> None:
        with run.model_call("think"):
            called.set()

    worker = threading.Thread(target=step, daemon=True)
    worker.start()
    wait_until(lambda: read_control(operator, run.id).held, what="the agent blocked at its checkpoint")
    assert not called.is_set()
    control.resume(operator, run.id, "alice")
    worker.join(timeout=30)
    assert called.is_set()


def test_the_run_block_leaves_a_stopped_run_cancelled_with_who(setting: tuple[AgentDesk, Store]) -> None:
    desk, operator = setting
    agent = desk.register(project="p", agent="a")
    with pytest.raises(RunStopped), agent.run("r") as run:
        control.stop(operator, run.id, "bob")
        run.checkpoint()
    shown = NativeSource(operator).run(run.id)
    assert (shown.status, shown.error) == ("cancelled", "stopped by bob")


def test_acheckpoint_keeps_the_loop_running_while_paused(setting: tuple[AgentDesk, Store]) -> None:
    desk, operator = setting
    run = desk.register(project="p", agent="a").start_run("r")
    control.pause(operator, run.id, "alice")

    async def main() -> int:
        waiting = asyncio.ensure_future(run.acheckpoint())
        ticks = 0
        while not read_control(operator, run.id).held:
            ticks += 1
            await asyncio.sleep(0)
        control.resume(operator, run.id, "alice")
        await waiting
        control.stop(operator, run.id, "alice")
        with pytest.raises(RunStopped):
            await run.acheckpoint()
        return ticks

    assert asyncio.run(main()) > 0
