"""Red team over HTTP, run control: an agent token cannot resume its own paused run, nor undo a stop.

The agent API serves an agent only its checkpoint and the wait for its run's control (store/agents/service.py);
pause, resume and stop are an operator's and have no route there. On SQLite and PostgreSQL (PG_MODULES).
"""

from __future__ import annotations

import pytest

from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import read_control
from agentdesk.store.readmodel import ControlState
from tests.security.test_http_gate import World, call, footprint, world

__all__ = ["world"]

GUESSES = [("POST", "resume"), ("POST", "stop"), ("POST", "pause"), ("POST", "control"), ("PUT", "control"),
           ("POST", "control/resume"), ("PATCH", "control"), ("DELETE", "control"), ("POST", "unpause")]


@pytest.mark.parametrize("who", ["owner", "other"])
def test_an_agent_token_cannot_lift_a_pause(world: World, who: str) -> None:
    control.pause(world.store, world.run_id, "alice", "hold")
    token = world.alice if who == "owner" else world.mallory
    before = footprint(world.store)
    through = []
    for method, verb in GUESSES:
        status, answer = call(world, method, f"/agent/v1/runs/{world.run_id}/{verb}",
                              {"actor": "alice", "state": "running"}, token=token)
        if status not in (403, 404, 405):
            through.append(f"{method} {verb}: {status} {answer}")
    assert through == []
    assert footprint(world.store) == before
    assert read_control(world.store, world.run_id).state is ControlState.PAUSED


def test_the_owners_checkpoint_reports_it_blocked_and_the_pause_stays(world: World) -> None:
    control.pause(world.store, world.run_id, "alice")
    status, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/checkpoint", token=world.alice)
    assert status == 200 and answer["state"] == "paused" and answer["held_at"] is not None
    status, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/control/wait", {"timeout_s": 0},
                          token=world.alice)
    assert status == 200 and answer["state"] == "paused"
    assert read_control(world.store, world.run_id).held


def test_another_agents_checkpoint_is_403_and_changes_nothing(world: World) -> None:
    control.pause(world.store, world.run_id, "alice")
    for path in ("checkpoint", "control/wait"):
        status, _ = call(world, "POST", f"/agent/v1/runs/{world.run_id}/{path}", {"timeout_s": 0}
                         if path == "control/wait" else None, token=world.mallory)
        assert status == 403
    assert not read_control(world.store, world.run_id).held


def test_after_a_stop_the_agent_can_only_end_the_run_cancelled(world: World) -> None:
    control.stop(world.store, world.run_id, "carol", "wrong branch")
    status, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/checkpoint", token=world.alice)
    assert status == 200 and answer["state"] == "stopped" and answer["set_by"] == "carol"
    status, answer = call(world, "POST", f"/agent/v1/runs/{world.run_id}/status", {"status": "running"},
                          token=world.alice)
    assert status == 409 and "was stopped by" in answer["error"] and "carol" in answer["error"]
    assert read_control(world.store, world.run_id).state is ControlState.STOPPED  # a status write undoes nothing
    with pytest.raises(control.RunFinished):
        control.resume(world.store, world.run_id, "mallory")


def test_a_paused_agent_is_released_by_the_resume_through_its_long_poll(world: World) -> None:
    """The wait is answered from the change bus, on both backends: the agent's `checkpoint()` returns."""
    import threading

    from agentdesk.client import AgentDesk, Run
    from tests.waiting import wait_until

    control.pause(world.store, world.run_id, "alice")
    returned = threading.Event()

    def agent() -> None:
        with AgentDesk.connect(f"http://{world.host}:{world.port}", token=world.alice) as desk:
            Run(desk.attach(world.agent_id), world.run_id).checkpoint()
        returned.set()

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    wait_until(lambda: read_control(world.store, world.run_id).held, what="the agent blocked")
    assert not returned.is_set()
    control.resume(world.store, world.run_id, "alice")
    thread.join(timeout=30)
    assert returned.is_set()
