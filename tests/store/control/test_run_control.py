"""Pause, resume and stop a run (store/control), on SQLite and PostgreSQL (tests/conftest.py: PG_MODULES).

Each action is a compare-and-set on the run's control state, audited and on the change bus; the agent's
checkpoint reports it blocked while paused and ends the run `cancelled`, naming who stopped it, after a stop.
A property test drives random sequences of actions and checkpoints against the transition table.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentdesk.store.control import commands as control
from agentdesk.store.control.checkpoint import reach_checkpoint, read_control
from agentdesk.store.control.commands import RunFinished, WrongState
from agentdesk.store.control.state import Action, ControlState, next_state
from agentdesk.store.errors import NotFound
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import Change, EntityKind
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.source import Capability, require_run_controller


def by(store: Store, name: str) -> str:
    """Who set a state, as it is shown: the typed name, after the server-known login on PostgreSQL."""
    return name if store.login is None or store.login.name == name else f"{store.login.name} (typed: {name})"


def new_run(rt: AgentRuntime) -> str:
    project = rt.create_project("p")
    agent = rt.create_agent(rt.create_session(rt.create_task(project, "t"), "s"), "a", "m")
    return rt.start_run(agent, "r")


def audit_actions(store: Store, run_id: str) -> list[tuple[str, str]]:
    with store.reading() as s:
        return [(r.action, r.actor) for r in s.execute(
            select(sc.AuditRow).where(sc.AuditRow.entity_id == run_id).order_by(sc.AuditRow.seq)).scalars()
            if r.action in CONTROL_ACTIONS]


CONTROL_ACTIONS = {"run.pause", "run.resume", "run.stop", "run.stopped"}


def test_pause_resume_stop_are_audited_on_the_bus_and_shown_in_the_read_model(store: Store, rt: AgentRuntime
                                                                               ) -> None:
    run_id = new_run(rt)
    heard: list[Change] = []
    store.bus.subscribe(heard.extend)
    source = NativeSource(store)

    paused = control.pause(store, run_id, "alice", "look at the logs")
    assert paused.state is ControlState.PAUSED and paused.set_by == "alice"
    assert any(c.entity == EntityKind.RUN and c.id == run_id for c in heard)
    shown = source.run(run_id)
    assert shown.control == "paused" and f"paused by {by(store, 'alice')}" in shown.control_note
    assert "look at the logs" in shown.control_note

    assert control.resume(store, run_id, "bob").state is ControlState.RUNNING
    assert control.stop(store, run_id, "carol", "wrong branch").state is ControlState.STOPPING
    assert source.run(run_id).control == "stopping"
    assert audit_actions(store, run_id) == [("run.pause", "alice"), ("run.resume", "bob"), ("run.stop", "carol")]
    assert source.verify().ok


def test_the_checkpoint_reports_the_agent_blocked_once_and_ends_a_stopped_run_cancelled(store: Store,
                                                                                      rt: AgentRuntime) -> None:
    run_id = new_run(rt)
    assert reach_checkpoint(store, run_id, "agent").state is ControlState.RUNNING
    control.pause(store, run_id, "alice")
    held = reach_checkpoint(store, run_id, "agent")
    assert held.held and held.held_at is not None
    assert reach_checkpoint(store, run_id, "agent").held_at == held.held_at  # stamped once
    assert read_control(store, run_id).held

    control.stop(store, run_id, "alice", "enough")
    assert reach_checkpoint(store, run_id, "agent").state is ControlState.STOPPED
    run = NativeSource(store).run(run_id)
    assert run.status == "cancelled" and run.error == f"stopped by {by(store, 'alice')}: enough"
    assert run.ended_at is not None
    assert audit_actions(store, run_id)[-1] == ("run.stopped", "agent")
    assert NativeSource(store).verify().ok


@pytest.mark.parametrize(("setup", "action", "error", "words"), [
    ([], Action.RESUME, WrongState, "is not paused (it is running)"),
    ([Action.PAUSE], Action.PAUSE, WrongState, "is already paused (paused by {alice}"),
    ([Action.STOP], Action.STOP, WrongState, "is already being stopped (stop requested by {alice}"),
    ([Action.STOP], Action.RESUME, WrongState, "is not paused (it is stopping; stop requested by {alice}"),
])
def test_a_refused_action_says_why_in_one_sentence_and_writes_nothing(
        store: Store, rt: AgentRuntime, setup: list[Action], action: Action, error: type[Exception],
        words: str) -> None:
    run_id = new_run(rt)
    for step in setup:
        control.control(store, run_id, step, "alice")
    before = (read_control(store, run_id), audit_actions(store, run_id))
    with pytest.raises(error) as refused:
        control.control(store, run_id, action, "bob")
    assert words.format(alice=by(store, "alice")) in str(refused.value) and str(refused.value).count(". ") == 0
    assert (read_control(store, run_id), audit_actions(store, run_id)) == before


@pytest.mark.parametrize("action", list(Action))
def test_a_finished_run_cannot_be_paused_resumed_or_stopped(store: Store, rt: AgentRuntime, action: Action) -> None:
    run_id = new_run(rt)
    rt.set_run_status(run_id, "done")
    with pytest.raises(RunFinished, match=rf"^Run {run_id} has already finished \(done\); there is nothing to "):
        control.control(store, run_id, action, "alice")


def test_an_unknown_run_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="There is no run with id nope"):
        control.pause(store, "nope", "alice")
    with pytest.raises(NotFound):
        reach_checkpoint(store, "nope", "agent")


def test_the_native_source_is_a_run_controller(store: Store, rt: AgentRuntime) -> None:
    source = NativeSource(store)
    run_id = new_run(rt)
    assert Capability.CONTROL_RUN in source.capabilities
    require_run_controller(source).pause_run(run_id, "alice")
    assert source.run_control(run_id).state is ControlState.PAUSED


STEPS = st.lists(st.sampled_from([*Action, "checkpoint", "finish"]), max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_any_sequence_follows_the_transition_table(store: Store, rt: AgentRuntime, steps: list[str]) -> None:
    """The store and the table agree after every step; an agent's checkpoint never lifts a pause or a stop."""
    run_id = new_run(rt)
    state, status = ControlState.RUNNING, "running"
    for step in steps:
        if step == "finish":
            if status == "running":
                rt.set_run_status(run_id, "done")
                status = "done"
            continue
        if step == "checkpoint":
            seen = reach_checkpoint(store, run_id, "agent")
            if state is ControlState.STOPPING:
                state, status = ControlState.STOPPED, "cancelled"
            assert seen.state is state
            continue
        expected = next_state(state, Action(step), status)
        try:
            control.control(store, run_id, Action(step), "alice")
        except (WrongState, RunFinished):
            assert expected is None
        else:
            assert expected is not None
            state = expected
        assert read_control(store, run_id).state is state
    assert NativeSource(store).run(run_id).status == status


def test_racing_operators_pause_exactly_once(store: Store, rt: AgentRuntime) -> None:
    """Two operators press Pause at the same moment: one pause is recorded, the other is told who came first."""
    import threading

    run_id = new_run(rt)
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def press(actor: str) -> None:
        start.wait()
        try:
            control.pause(store, run_id, actor)
            outcomes.append("paused")
        except WrongState as lost:
            outcomes.append(str(lost))

    threads = [threading.Thread(target=press, args=(who,)) for who in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes)[-1] == "paused" and outcomes.count("paused") == 1
    assert f"paused by {read_control(store, run_id).who}" in sorted(outcomes)[0]
    assert [a for a, _ in audit_actions(store, run_id)] == ["run.pause"]
