"""The operator's commands: pause, resume, stop. One transaction each, compare-and-set, audited, on the bus.

On PostgreSQL the server does the write (`agentdesk_run_control`, migration 0017, EXECUTE to operators only);
on SQLite the same compare-and-set runs here under `BEGIN IMMEDIATE`. A guard that fails writes nothing and
raises one sentence: `NotFound` (exit 4) for an unknown run, `RunFinished` or `WrongState` (both `Conflict`,
exit 3) otherwise.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from agentdesk.store.control.state import FINISHED_RUN, Action, ControlState, RunControl, next_state, read_in
from agentdesk.store.errors import Conflict, NotFound, StoreError
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes
from agentdesk.store.validation import check_name

SERVER_CONTROL = text("SELECT * FROM agentdesk_run_control(:run, :action, :actor, :reason, :origin)")
DOING = {Action.PAUSE: "pausing a run", Action.RESUME: "resuming a run", Action.STOP: "stopping a run"}


class RunFinished(Conflict):
    """The run already ended: there is nothing to pause, resume or stop."""


class WrongState(Conflict):
    """The run's control state is not the one the action needs (pause a paused run, resume a running one)."""


def pause(store: Store, run_id: str, actor: str, reason: str | None = None) -> RunControl:
    return control(store, run_id, Action.PAUSE, actor, reason)


def resume(store: Store, run_id: str, actor: str, reason: str | None = None) -> RunControl:
    return control(store, run_id, Action.RESUME, actor, reason)


def stop(store: Store, run_id: str, actor: str, reason: str | None = None) -> RunControl:
    return control(store, run_id, Action.STOP, actor, reason)


def control(store: Store, run_id: str, action: Action, actor: str, reason: str | None = None) -> RunControl:
    """Apply `action` exactly once, or raise why not (who set the state the action ran into)."""
    actor = check_name("actor name", actor)
    reason = check_name("reason", reason, required=False) or None
    if store.is_postgres:
        require(store.login, "operator", DOING[action])
        with UnitOfWork(store) as uow:
            found = uow.session.execute(SERVER_CONTROL, {"run": run_id, "action": action.value, "actor": actor,
                                                         "reason": reason, "origin": store.origin}).one()
            if found.outcome != "ok":
                raise _refusal(run_id, action, found.outcome, found.state, found.set_by, found.set_at, found.why,
                               found.run_status, found.set_login)
            adopt_server_changes(uow, found.changes)
            return RunControl(run_id, ControlState(found.state), found.set_by, found.set_at, found.why,
                              set_login=found.set_login)
    with UnitOfWork(store) as uow:
        run = uow.session.get(sc.RunRow, run_id)
        if run is None:
            raise NotFound(f"There is no run with id {run_id}.")
        current = read_in(uow.session, run_id)
        new = next_state(current.state, action, run.status)
        if new is None:
            outcome = "finished" if _finished(run.status, current) else "lost"
            raise _refusal(run_id, action, outcome, current.state.value, current.set_by, current.set_at,
                           current.reason, run.status, current.set_login)
        row = uow.session.get(sc.RunControlRow, run_id)
        if row is None:
            row = sc.RunControlRow(run_id=run_id, revision=0)
            uow.session.add(row)
        row.state, row.set_by, row.set_at, row.reason, row.held_at = new.value, actor, uow.now, reason, None
        row.revision = (row.revision or 0) + 1
        uow.audit(actor, f"run.{action.value}", "run", run_id,
                  {"from": current.state.value, "reason": reason, "to": new.value})
        uow.record("run", "update", run_id, run_parents(run), run.revision)
    return RunControl(run_id, new, actor, uow.now, reason)


def _finished(run_status: str, current: RunControl) -> bool:
    return run_status in FINISHED_RUN or current.state is ControlState.STOPPED


def run_parents(run: Any) -> dict[str, str]:
    return {"project": run.project_id, "task": run.task_id, "session": run.session_id, "agent": run.agent_id}


def _refusal(run_id: str, action: Action, outcome: str, state: str | None, set_by: str | None,
             set_at: float | None, reason: str | None, run_status: str | None,
             set_login: str | None = None) -> StoreError:
    """One sentence saying why the action was not applied, naming who set the state it ran into."""
    if outcome == "not found":
        return NotFound(f"There is no run with id {run_id}.")
    if outcome == "finished":
        return RunFinished(f"Run {run_id} has already finished ({run_status}); there is nothing to {action.value}.")
    seen = RunControl(run_id, ControlState(state or "running"), set_by, set_at, reason, set_login=set_login)
    by = f" ({seen.describe()})" if set_by else ""
    if action is Action.RESUME:
        last = f"; {seen.describe()}" if set_by else ""
        return WrongState(f"Run {run_id} is not paused (it is {seen.state.value}{last}); there is nothing to resume.")
    if seen.state is ControlState.STOPPING:
        return WrongState(f"Run {run_id} is already being stopped{by}.")
    return WrongState(f"Run {run_id} is already {seen.state.value}{by}.")
